//! TLS with a certificate and key, and a graceful shutdown: SIGTERM ends open event
//! streams, pauses running sessions and exits 0; the next server lists them again.

use cordon_tests::scripted_model::{ScriptedModel, Turn};
use reqwest::StatusCode;
use serde_json::json;

use super::fixture::{HANG, Server};

/// A self-signed certificate for 127.0.0.1 (openssl), as (cert.pem, key.pem) paths.
fn self_signed(dir: &std::path::Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    let status = std::process::Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-days",
            "1",
        ])
        .args([
            "-subj",
            "/CN=cordon-test",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-addext",
            "basicConstraints=critical,CA:FALSE",
            "-addext",
            "extendedKeyUsage=serverAuth",
        ])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .stderr(std::process::Stdio::null())
        .status()
        .expect("openssl (Debian package openssl) is needed for the TLS test");
    assert!(status.success());
    (cert, key)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_serves_the_api_and_sigterm_shuts_down_gracefully() {
    let certs = tempfile::tempdir().unwrap();
    let (cert, key) = self_signed(certs.path());
    let model = ScriptedModel::start(vec![Turn::text("hello over TLS")])
        .await
        .unwrap();
    let extra = vec![
        "--tls-cert".to_string(),
        cert.display().to_string(),
        "--tls-key".to_string(),
        key.display().to_string(),
    ];
    let ca = std::fs::read(&cert).unwrap();
    let mut server = Server::start_full(&model, json!({}), json!({}), extra, Some(ca)).await;
    assert!(server.url.starts_with("https://"), "{}", server.url);
    let alpha = server.api("alpha");
    let id = alpha.create(json!({})).await;
    alpha
        .post(
            &format!("/v1/sessions/{id}/messages"),
            json!({"content": "hi"}),
        )
        .await;
    let events = alpha.events_until(&id, None, |e| e.kind == "result").await;
    assert_eq!(events.last().unwrap().data["text"], "hello over TLS");
    // Plain HTTP to the TLS port gets no answer.
    let plain = server.url.replace("https://", "http://");
    assert!(reqwest::get(format!("{plain}/healthz")).await.is_err());

    // An open event stream does not hold the shutdown up.
    let follower = alpha.clone();
    let last = events.last().unwrap().id;
    let watch = tokio::spawn(async move {
        let resp = follower
            .request(reqwest::Method::GET, &format!("/v1/sessions/{id}/events"))
            .header("Last-Event-ID", last.to_string())
            .send()
            .await
            .unwrap();
        tokio::time::timeout(HANG, resp.bytes())
            .await
            .expect("the stream stayed open")
    });
    let id = alpha.create(json!({})).await;
    alpha.wait_state(&id, "idle").await;
    let status = server.terminate().await;
    assert!(status.success(), "{status}");
    let _ = watch.await.unwrap();

    server.relaunch().await;
    let alpha = server.api("alpha");
    let (status, view) = alpha.get(&format!("/v1/sessions/{id}")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(view["state"], "paused", "{view}");
    let (_, exit) = alpha.exec(&id, json!({"command": "true"})).await;
    assert_eq!(exit["code"], 0);
}
