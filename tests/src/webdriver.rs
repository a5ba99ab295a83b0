//! A small WebDriver client over raw HTTP (W3C protocol) for the web page test: Debian's
//! `chromedriver` started on a free loopback port, driving `chromium` headless with a
//! throwaway profile. Only what the tests use: navigate, find, type, click, read text.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// The W3C key for an element reference in JSON.
const ELEMENT_KEY: &str = "element-6066-11e4-a52e-4f735466cecf";
/// How long a wait for something on the page lasts before the test fails with what it
/// waited for (generous: the machine is shared and may be busy).
pub const WAIT: Duration = Duration::from_secs(90);

/// Where the browser and its driver are, or why the test cannot run.
pub fn available() -> Result<(PathBuf, PathBuf), String> {
    let find = |names: &[&str]| {
        names
            .iter()
            .map(|n| PathBuf::from("/usr/bin").join(n))
            .find(|p| p.exists())
    };
    let driver = find(&["chromedriver"])
        .ok_or("chromedriver not installed (apt-get install chromium-driver)")?;
    let browser = find(&["chromium", "chromium-browser"])
        .ok_or("chromium not installed (apt-get install chromium)")?;
    Ok((driver, browser))
}

/// A running chromedriver with one browser session; both end on drop.
pub struct Browser {
    driver: Child,
    base: String,
    http: reqwest::Client,
    _profile: tempfile::TempDir,
}

impl Browser {
    pub async fn start() -> Self {
        let (driver_bin, browser_bin) = available().expect("browser");
        let mut driver = Command::new(driver_bin)
            .arg("--port=0")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromedriver");
        let port = read_port(&mut driver);
        let base = format!("http://127.0.0.1:{port}");
        let profile = tempfile::tempdir().expect("profile dir");
        let http = reqwest::Client::new();
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": browser_bin,
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                         "--disable-dev-shm-usage", "--no-first-run",
                         format!("--user-data-dir={}", profile.path().display())]
            }
        }}});
        let mut browser = Self {
            driver,
            base,
            http,
            _profile: profile,
        };
        let res = browser.call("POST", "/session", caps).await;
        let id = res["sessionId"].as_str().expect("session id").to_string();
        browser.base = format!("{}/session/{id}", browser.base);
        browser
    }

    async fn call(&self, method: &str, path: &str, body: Value) -> Value {
        let url = format!("{}{path}", self.base);
        let req = match method {
            "GET" => self.http.get(&url),
            "DELETE" => self.http.delete(&url),
            _ => self.http.post(&url).json(&body),
        };
        let res = req.send().await.expect("webdriver request");
        let json: Value = res.json().await.expect("webdriver json");
        json["value"].clone()
    }

    pub async fn goto(&self, url: &str) {
        self.call("POST", "/url", json!({"url": url})).await;
    }

    /// The first element matching `css`, if any now.
    pub async fn find(&self, css: &str) -> Option<String> {
        let v = self
            .call(
                "POST",
                "/element",
                json!({"using": "css selector", "value": css}),
            )
            .await;
        v[ELEMENT_KEY].as_str().map(str::to_string)
    }

    /// Waits for an element matching `css`.
    pub async fn wait_for(&self, css: &str) -> String {
        let start = Instant::now();
        loop {
            if let Some(el) = self.find(css).await {
                return el;
            }
            if start.elapsed() >= WAIT {
                let source = self.call("GET", "/source", Value::Null).await;
                let url = self.call("GET", "/url", Value::Null).await;
                panic!("no element {css} on the page {url}:\n{source}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits until the text of `css` contains `needle`; returns that text.
    pub async fn wait_for_text(&self, css: &str, needle: &str) -> String {
        let start = Instant::now();
        loop {
            if let Some(el) = self.find(css).await {
                let text = self.text(&el).await;
                if text.contains(needle) {
                    return text;
                }
                assert!(
                    start.elapsed() < WAIT,
                    "{css} never showed {needle:?}; it shows {text:?}"
                );
            } else {
                assert!(start.elapsed() < WAIT, "no element {css}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub async fn text(&self, el: &str) -> String {
        let v = self
            .call("GET", &format!("/element/{el}/text"), Value::Null)
            .await;
        v.as_str().unwrap_or_default().to_string()
    }

    pub async fn type_into(&self, el: &str, text: &str) {
        self.call(
            "POST",
            &format!("/element/{el}/value"),
            json!({"text": text}),
        )
        .await;
    }

    pub async fn click(&self, el: &str) {
        self.call("POST", &format!("/element/{el}/click"), json!({}))
            .await;
    }

    /// Runs `script` in the page and returns its value.
    pub async fn eval(&self, script: &str) -> Value {
        self.call(
            "POST",
            "/execute/sync",
            json!({"script": script, "args": []}),
        )
        .await
    }

    pub async fn quit(mut self) {
        self.call("DELETE", "", Value::Null).await;
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// The port from chromedriver's "was started successfully on port N." line.
fn read_port(driver: &mut Child) -> u16 {
    let out = driver.stdout.take().expect("stdout");
    let mut lines = BufReader::new(out).lines();
    let port = loop {
        let line = lines
            .next()
            .expect("chromedriver exited before it listened")
            .expect("read chromedriver");
        if let Some(rest) = line.split("started successfully on port ").nth(1) {
            break rest.trim_end_matches('.').trim().parse().expect("port");
        }
    };
    // Keep draining its output so it never blocks on a full pipe.
    std::thread::spawn(move || lines.for_each(drop));
    port
}
