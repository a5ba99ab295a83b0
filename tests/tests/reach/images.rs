//! Read of images and PDFs end to end: the request sent to the model carries image blocks
//! (PNG, JPEG, GIF, WebP; a large one scaled down) and a document block (PDF), the bytes
//! read by the agent inside the sandbox (a file only the sandbox's private /tmp holds is
//! read too), and a file named like an image that is not one is a clear error.

use std::io::Cursor;

use base64::Engine as _;
use cordon_tests::Workspace;
use cordon_tests::agent::last_tool_results;
use cordon_tests::scripted_model::{ScriptedModel, Turn};
use image::{DynamicImage, ImageFormat, RgbaImage};
use serde_json::{Value, json};

use super::run;

fn encoded(width: u32, height: u32, format: ImageFormat) -> Vec<u8> {
    let img = RgbaImage::from_fn(width, height, |x, y| {
        image::Rgba([
            u8::try_from(x % 251).unwrap(),
            u8::try_from(y % 241).unwrap(),
            120,
            255,
        ])
    });
    let img = if format == ImageFormat::Jpeg {
        DynamicImage::ImageRgb8(DynamicImage::ImageRgba8(img).to_rgb8())
    } else {
        DynamicImage::ImageRgba8(img)
    };
    let mut out = Cursor::new(Vec::new());
    img.write_to(&mut out, format).unwrap();
    out.into_inner()
}

/// The content blocks of the one tool result in `body`'s last message.
fn result_blocks(body: &Value) -> (Vec<Value>, bool) {
    let result = last_tool_results(body).remove(0);
    let is_error = result["is_error"].as_bool().unwrap_or(false);
    match &result["content"] {
        Value::Array(blocks) => (blocks.clone(), is_error),
        text => (vec![json!({"type": "text", "text": text})], is_error),
    }
}

fn data(block: &Value) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(block["source"]["data"].as_str().unwrap())
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_sends_images_and_pdfs_as_blocks_the_model_reads() {
    let ws = Workspace::new();
    let small = encoded(64, 48, ImageFormat::Png);
    std::fs::write(ws.join("small.png"), &small).unwrap();
    std::fs::write(ws.join("big.png"), encoded(3000, 1200, ImageFormat::Png)).unwrap();
    std::fs::write(ws.join("photo.jpg"), encoded(80, 60, ImageFormat::Jpeg)).unwrap();
    std::fs::write(ws.join("anim.gif"), encoded(30, 20, ImageFormat::Gif)).unwrap();
    std::fs::write(ws.join("pic.webp"), encoded(50, 40, ImageFormat::WebP)).unwrap();
    let pdf = b"%PDF-1.4\n1 0 obj << /Type /Pages /Count 1 >> endobj\n2 0 obj << /Type /Page >> endobj\n%%EOF\n";
    std::fs::write(ws.join("doc.pdf"), pdf).unwrap();
    std::fs::write(ws.join("fake.png"), "not an image at all\n").unwrap();
    // Only the sandbox's private /tmp holds this one: the host cannot read it by path.
    let private = format!("/tmp/cordon-sandbox-only-{}.png", std::process::id());
    let read = |id: &str, path: String| Turn::tool_use(id, "Read", json!({"file_path": path}));
    let at = |name: &str| ws.join(name).display().to_string();
    let model = ScriptedModel::start(vec![
        read("small", at("small.png")),
        read("big", at("big.png")),
        read("jpg", at("photo.jpg")),
        read("gif", at("anim.gif")),
        read("webp", at("pic.webp")),
        read("pdf", at("doc.pdf")),
        read("fake", at("fake.png")),
        Turn::tool_use(
            "copy",
            "Bash",
            json!({"command": format!("cp {} {private}", at("small.png"))}),
        ),
        read("private", private.clone()),
        Turn::text("done"),
    ])
    .await
    .unwrap();
    let out = run(&model, &ws, &["--allowedTools", "Bash"], &[]).await;
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let requests = model.requests();
    let image_of = |i: usize, media_type: &str| -> Vec<u8> {
        let (blocks, is_error) = result_blocks(&requests[i].body);
        assert!(!is_error, "{blocks:?}");
        assert_eq!(blocks.len(), 2, "{blocks:?}");
        assert_eq!(blocks[0]["type"], "text");
        assert_eq!(blocks[1]["type"], "image", "{:?}", blocks[1]);
        assert_eq!(blocks[1]["source"]["type"], "base64");
        assert_eq!(blocks[1]["source"]["media_type"], media_type);
        data(&blocks[1])
    };
    assert_eq!(
        image_of(1, "image/png"),
        small,
        "a small image goes as it is"
    );
    let big = image::load_from_memory(&image_of(2, "image/png")).unwrap();
    assert_eq!((big.width(), big.height()), (2000, 800), "scaled to fit");
    let (blocks, _) = result_blocks(&requests[2].body);
    assert!(
        blocks[0]["text"].as_str().unwrap().contains("3000x1200"),
        "{blocks:?}"
    );
    for (i, media_type, format) in [
        (3, "image/jpeg", ImageFormat::Jpeg),
        (4, "image/gif", ImageFormat::Gif),
        (5, "image/webp", ImageFormat::WebP),
    ] {
        let bytes = image_of(i, media_type);
        assert_eq!(image::guess_format(&bytes).unwrap(), format);
    }
    let (blocks, is_error) = result_blocks(&requests[6].body);
    assert!(!is_error, "{blocks:?}");
    assert_eq!(blocks[1]["type"], "document", "{blocks:?}");
    assert_eq!(blocks[1]["source"]["media_type"], "application/pdf");
    assert_eq!(data(&blocks[1]), pdf);
    let (blocks, is_error) = result_blocks(&requests[7].body);
    assert!(is_error, "{blocks:?}");
    assert!(
        blocks[0]["text"].as_str().unwrap().contains("not a PNG"),
        "{blocks:?}"
    );
    assert!(
        !std::path::Path::new(&private).exists(),
        "the copy lives in the sandbox's /tmp only"
    );
    assert_eq!(image_of(9, "image/png"), small, "read inside the sandbox");
}
