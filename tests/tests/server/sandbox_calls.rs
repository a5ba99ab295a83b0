//! The sandbox without the model: exec streams output and the exit status under the
//! session's rules; files are read and written beneath the workspace, never through a link.

use cordon_tests::scripted_model::ScriptedModel;
use reqwest::StatusCode;
use serde_json::json;

use super::fixture::Server;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_and_files_stay_inside_the_workspace_and_the_rules() {
    let model = ScriptedModel::start(vec![]).await.unwrap();
    let settings = json!({"permissions": {"deny": ["Read(secret.txt)", "Bash(rm *)"]}});
    let server = Server::start_with(&model, settings, json!({})).await;
    let alpha = server.api("alpha");
    let id = alpha.create(json!({})).await;
    let files = format!("/v1/sessions/{id}/files");

    let (status, body) = alpha
        .put_bytes(&format!("{files}/src/data.txt"), b"hello\n")
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (output, exit) = alpha
        .exec(&id, json!({"command": "cat src/data.txt; echo \"$GREETING\" >&2; echo made > out.txt; exit 3", "env": {"GREETING": "hi there"}}))
        .await;
    assert_eq!(exit["code"], 3, "{output}");
    assert!(
        output.contains("hello") && output.contains("hi there"),
        "{output}"
    );
    let (status, bytes) = alpha.get_bytes(&format!("{files}/out.txt")).await;
    assert_eq!((status, bytes), (StatusCode::OK, b"made\n".to_vec()));

    // The sandbox holds: no network, no writes outside the workspace.
    let (output, exit) = alpha
        .exec(
            &id,
            json!({"command": "touch /etc/cordon-server-test; cat /etc/shadow"}),
        )
        .await;
    assert_ne!(exit["code"], 0, "{output}");
    assert!(!std::path::Path::new("/etc/cordon-server-test").exists());

    // The tenant's deny rules hold for exec and files alike.
    let (status, body) = alpha
        .post(
            &format!("/v1/sessions/{id}/exec"),
            json!({"command": "rm -rf src"}),
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    let ws = server.tenant_root("alpha").join(&id);
    std::fs::write(ws.join("secret.txt"), "s3cret").unwrap();
    let (status, _) = alpha.get_bytes(&format!("{files}/secret.txt")).await;
    assert_eq!(status, StatusCode::FORBIDDEN);

    // No way out: dot-dot, links on the way or at the end.
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("host.txt"), "host").unwrap();
    std::os::unix::fs::symlink(outside.path(), ws.join("out")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("host.txt"), ws.join("link.txt")).unwrap();
    for path in [
        "out/host.txt",
        "link.txt",
        "..%2F..%2Fetc%2Fpasswd",
        "src/..%2F..%2Fx",
    ] {
        let (status, body) = alpha.get_bytes(&format!("{files}/{path}")).await;
        assert!(
            status.is_client_error(),
            "{path}: {status} {}",
            String::from_utf8_lossy(&body)
        );
        assert_ne!(body, b"host".to_vec(), "{path}");
    }
    let (status, _) = alpha
        .put_bytes(&format!("{files}/out/planted.txt"), b"x")
        .await;
    assert!(status.is_client_error(), "{status}");
    assert!(!outside.path().join("planted.txt").exists());
    let (status, _) = alpha.get_bytes(&format!("{files}/nothing.txt")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_workspace_goes_up_and_down_as_a_tarball_without_links_followed() {
    let model = ScriptedModel::start(vec![]).await.unwrap();
    let server = Server::start(&model).await;
    let alpha = server.api("alpha");
    let id = alpha.create(json!({})).await;
    let mut builder = tar::Builder::new(Vec::new());
    let mut header = tar::Header::new_gnu();
    header.set_size(6);
    header.set_mode(0o644);
    builder
        .append_data(&mut header, "pkg/mod.py", &b"x = 1\n"[..])
        .unwrap();
    let mut link = tar::Header::new_gnu();
    link.set_entry_type(tar::EntryType::Symlink);
    link.set_size(0);
    builder.append_link(&mut link, "pkg/etc", "/etc").unwrap();
    let upload = builder.into_inner().unwrap();
    let (status, body) = alpha
        .put_bytes(&format!("/v1/sessions/{id}/archive"), &upload)
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body, json!({"files": 1, "directories": 0, "skipped": 1}));
    let ws = server.tenant_root("alpha").join(&id);
    assert!(!ws.join("pkg/etc").exists());

    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("host.txt"), "host secret").unwrap();
    std::os::unix::fs::symlink(outside.path(), ws.join("out")).unwrap();
    let (status, tarball) = alpha.get_bytes(&format!("/v1/sessions/{id}/archive")).await;
    assert_eq!(status, StatusCode::OK);
    let mut names = Vec::new();
    let mut archive = tar::Archive::new(&tarball[..]);
    for entry in archive.entries().unwrap() {
        let mut entry = entry.unwrap();
        let name = entry.path().unwrap().display().to_string();
        let mut content = String::new();
        std::io::Read::read_to_string(&mut entry, &mut content).unwrap();
        assert!(!content.contains("host secret"), "{name}");
        names.push(name);
    }
    names.sort();
    assert_eq!(names, ["out", "pkg", "pkg/mod.py"]);
}
