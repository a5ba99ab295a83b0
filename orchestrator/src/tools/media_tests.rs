use super::*;

fn png(width: u32, height: u32) -> Vec<u8> {
    let img = image::RgbImage::from_fn(width, height, |x, y| {
        image::Rgb([
            u8::try_from(x % 256).unwrap(),
            u8::try_from(y % 256).unwrap(),
            90,
        ])
    });
    let mut out = Cursor::new(Vec::new());
    DynamicImage::ImageRgb8(img)
        .write_to(&mut out, ImageFormat::Png)
        .unwrap();
    out.into_inner()
}

fn source(block: &ToolResultBlock) -> &serde_json::Value {
    match block {
        ToolResultBlock::Image { source } | ToolResultBlock::Document { source } => source,
        ToolResultBlock::Text { .. } => panic!("a text block"),
    }
}

fn decoded(media: &Media) -> Vec<u8> {
    let data = source(&media.block)["data"].as_str().unwrap();
    base64::engine::general_purpose::STANDARD
        .decode(data)
        .unwrap()
}

/// CRC-32 (IEEE), for patching a PNG chunk.
fn crc32(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

#[test]
fn names_pick_the_kind_and_content_picks_the_format() {
    assert_eq!(MediaKind::of(Path::new("/w/a.PNG")), Some(MediaKind::Image));
    assert_eq!(
        MediaKind::of(Path::new("/w/a.jpeg")),
        Some(MediaKind::Image)
    );
    assert_eq!(MediaKind::of(Path::new("/w/a.pdf")), Some(MediaKind::Pdf));
    assert_eq!(MediaKind::of(Path::new("/w/a.rs")), None);
    assert!(image(b"just some text").unwrap_err().contains("not a PNG"));
}

#[test]
fn a_small_image_is_sent_as_it_is() {
    let bytes = png(40, 30);
    let media = image(&bytes).unwrap();
    assert_eq!(source(&media.block)["media_type"], "image/png");
    assert_eq!(decoded(&media), bytes);
    assert!(media.note.contains("40x30"), "{}", media.note);
}

#[test]
fn a_large_image_is_scaled_down_to_fit() {
    let media = image(&png(3000, 1200)).unwrap();
    let sent = image::load_from_memory(&decoded(&media)).unwrap();
    assert_eq!((sent.width(), sent.height()), (2000, 800));
    assert!(
        media.note.contains("scaled down to 2000x800"),
        "{}",
        media.note
    );
}

#[test]
fn a_decompression_bomb_is_refused_before_its_pixels_are_allocated() {
    let mut bytes = png(1, 1);
    // IHDR's data starts at 16: width, height (big-endian); its CRC follows the 13 bytes.
    bytes[16..20].copy_from_slice(&19_000u32.to_be_bytes());
    bytes[20..24].copy_from_slice(&19_000u32.to_be_bytes());
    let crc = crc32(&bytes[12..29]);
    bytes[29..33].copy_from_slice(&crc.to_be_bytes());
    let err = image(&bytes).unwrap_err();
    assert!(err.contains("not a readable PNG"), "{err}");
}

#[test]
fn a_pdf_becomes_a_document_and_its_pages_are_counted() {
    let doc = b"%PDF-1.4\n1 0 obj << /Type /Pages /Count 2 >>\n2 0 obj << /Type /Page >>\n3 0 obj << /Type/Page >>\n";
    let media = pdf(doc).unwrap();
    assert_eq!(source(&media.block)["media_type"], "application/pdf");
    assert_eq!(decoded(&media), doc);
    assert!(media.note.contains("2 pages"), "{}", media.note);
    assert!(pdf(b"not a pdf").unwrap_err().contains("%PDF-"));
    let mut long = b"%PDF-1.4\n".to_vec();
    for _ in 0..101 {
        long.extend_from_slice(b"<< /Type /Page >>\n");
    }
    assert!(pdf(&long).unwrap_err().contains("101 pages"));
}
