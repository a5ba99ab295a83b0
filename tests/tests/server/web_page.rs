//! The web page in a real headless browser (Debian's chromium through chromedriver): the
//! key typed in, the session picked from the list, a permission request appears and a
//! click on Allow resolves it, and the transcript follows the turn live to its end.

use cordon_tests::scripted_model::{ScriptedModel, Turn};
use cordon_tests::webdriver::{self, Browser};
use serde_json::json;

use super::fixture::Server;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_permission_request_appears_and_a_click_resolves_it() {
    if let Err(why) = webdriver::available() {
        eprintln!("SKIPPED: {why}");
        return;
    }
    let model = ScriptedModel::start(vec![]).await.unwrap();
    let server = Server::start(&model).await;
    let alpha = server.api("alpha");
    let ws = server.tenant_root("alpha").join("page");
    std::fs::create_dir_all(&ws).unwrap();
    model.push_turns([
        Turn::tool_use(
            "w1",
            "Write",
            json!({"file_path": ws.join("approved.txt"), "content": "clicked\n"}),
        ),
        Turn::text("Wrote approved.txt after the click."),
    ]);
    let id = alpha
        .create(json!({"workspace": "page", "permission_mode": "default"}))
        .await;

    let browser = Browser::start().await;
    browser.goto(&format!("{}/ui/", server.url)).await;
    let key_input = browser.wait_for("#key").await;
    browser.type_into(&key_input, &server.keys[0].1).await;
    let submit = browser.wait_for("#login button[type=submit]").await;
    browser.click(&submit).await;
    let row = browser
        .wait_for(&format!("#sessions tbody tr[data-id=\"{id}\"]"))
        .await;
    browser.click(&row).await;
    browser.wait_for_text("#status", "live").await;

    // The message is sent after the page follows the session: everything that follows
    // reaches it live.
    alpha
        .post(
            &format!("/v1/sessions/{id}/messages"),
            json!({"content": "write approved.txt"}),
        )
        .await;
    let request = browser.wait_for("#permissions li[data-request-id]").await;
    let shown = browser.text(&request).await;
    assert!(shown.contains("Write"), "{shown}");
    assert!(shown.contains("approved.txt"), "{shown}");
    assert!(!ws.join("approved.txt").exists());
    let allow = browser
        .wait_for("#permissions li[data-request-id] button.allow")
        .await;
    browser.click(&allow).await;

    let transcript = browser
        .wait_for_text("#transcript", "Wrote approved.txt after the click.")
        .await;
    assert!(transcript.contains("write approved.txt"), "{transcript}");
    assert!(transcript.contains("Write"), "{transcript}");
    assert!(transcript.contains("permission allow"), "{transcript}");
    browser.wait_for_text("#permissions", "none").await;
    assert_eq!(
        std::fs::read_to_string(ws.join("approved.txt")).unwrap(),
        "clicked\n"
    );
    // The key stayed in the tab's sessionStorage, nowhere else.
    let stored = browser
        .eval("return [sessionStorage.getItem('cordon.key') !== null, localStorage.length, document.cookie]")
        .await;
    assert_eq!(stored, json!([true, 0, ""]));
    browser.quit().await;
}
