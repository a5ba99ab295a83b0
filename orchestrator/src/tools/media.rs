//! Read of images and PDFs: the file's bytes (read whole inside the sandbox by the agent)
//! become an `image` or `document` block of the tool result, as Claude Code sends them.
//!
//! Which files: those named `.png`, `.jpg`/`.jpeg`, `.gif`, `.webp` and `.pdf`; what they
//! are is then told by their content (a `.png` holding text is refused, a `.png` holding a
//! JPEG is sent as the JPEG it is).
//!
//! Images are sent as they are when they fit the API's limits (at most
//! [`MAX_IMAGE_BYTES`], neither side over [`MAX_EDGE`] pixels); larger ones are decoded,
//! scaled down to fit and encoded again (PNG, or JPEG when the PNG is still too large).
//! An animated GIF that needs scaling keeps its first frame.
//!
//! Security: the bytes are the repository's, so hostile. They are decoded here, on the
//! host, by the `image` crate's pure-Rust decoders (no C parser), under
//! [`decode_limits`] (dimensions and memory: a decompression bomb is refused before its
//! pixels are allocated), on the blocking pool, where a decoder's panic becomes this
//! call's error, never the service's crash.

use std::io::Cursor;
use std::path::Path;

use base64::Engine as _;
use image::{DynamicImage, ImageFormat, ImageReader, Limits};
use serde_json::json;

use crate::model::ToolResultBlock;

/// The largest image sent: its base64 form then stays within the API's 5 MB per image.
pub const MAX_IMAGE_BYTES: usize = 3_750_000;
/// The longest side sent, in pixels (Claude Code's; the API refuses over 8000).
pub const MAX_EDGE: u32 = 2000;
/// The largest PDF sent: its base64 form leaves most of the API's 32 MB request to the
/// rest of the conversation.
pub const MAX_PDF_BYTES: usize = 10 * 1024 * 1024;
/// The API's page limit of one PDF.
pub const MAX_PDF_PAGES: usize = 100;
/// Pixels per side a decoder may face at all.
const DECODE_MAX_EDGE: u32 = 20_000;
/// Memory a decode may allocate.
const DECODE_MAX_ALLOC: u64 = 256 * 1024 * 1024;

/// What a Read of `path` sends, by its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MediaKind {
    Image,
    Pdf,
}

impl MediaKind {
    /// By the file name's extension (any case); `None`: read it as text.
    pub fn of(path: &Path) -> Option<Self> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        match ext.as_str() {
            "png" | "jpg" | "jpeg" | "gif" | "webp" => Some(Self::Image),
            "pdf" => Some(Self::Pdf),
            _ => None,
        }
    }
}

/// A block for the model and a line saying what was sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Media {
    pub block: ToolResultBlock,
    pub note: String,
}

/// The image in `bytes` as an `image` block, scaled down when too large; the error is for
/// the model.
pub fn image(bytes: &[u8]) -> Result<Media, String> {
    let format = sniff_image(bytes)
        .ok_or("its content is not a PNG, JPEG, GIF or WebP image (the formats the model reads)")?;
    let (width, height) = reader(bytes, format)
        .into_dimensions()
        .map_err(|e| format!("it is not a readable {} image: {e}", name(format)))?;
    let described = format!(
        "{} image, {width}x{height}, {} bytes",
        name(format),
        bytes.len()
    );
    if bytes.len() <= MAX_IMAGE_BYTES && width <= MAX_EDGE && height <= MAX_EDGE {
        return Ok(Media {
            block: image_block(format, bytes),
            note: described,
        });
    }
    let decoded = reader(bytes, format)
        .decode()
        .map_err(|e| format!("it is not a readable {} image: {e}", name(format)))?;
    let (out_format, encoded, w, h) = shrink(decoded)?;
    Ok(Media {
        block: image_block(out_format, &encoded),
        note: format!(
            "{described}; sent scaled down to {w}x{h} ({}, {} bytes) to fit the model's \
             limits ({MAX_EDGE} pixels a side, {MAX_IMAGE_BYTES} bytes)",
            name(out_format),
            encoded.len()
        ),
    })
}

/// The PDF in `bytes` as a `document` block; the error is for the model.
pub fn pdf(bytes: &[u8]) -> Result<Media, String> {
    if !bytes.starts_with(b"%PDF-") {
        return Err("its content is not a PDF (no %PDF- header)".into());
    }
    if bytes.len() > MAX_PDF_BYTES {
        return Err(format!(
            "it is {} bytes, over the {MAX_PDF_BYTES} bytes sent to the model; extract the \
             part you need (e.g. with pdftotext in Bash) and read that",
            bytes.len()
        ));
    }
    let pages = count_pages(bytes);
    if pages > MAX_PDF_PAGES {
        return Err(format!(
            "it has {pages} pages, over the {MAX_PDF_PAGES} the model reads in one document; \
             split it (e.g. with qpdf in Bash) and read a part"
        ));
    }
    let counted = if pages == 0 {
        String::new()
    } else {
        format!(", {pages} pages")
    };
    Ok(Media {
        block: ToolResultBlock::Document {
            source: json!({
                "type": "base64",
                "media_type": "application/pdf",
                "data": base64::engine::general_purpose::STANDARD.encode(bytes),
            }),
        },
        note: format!("PDF document, {} bytes{counted}", bytes.len()),
    })
}

/// The page objects a PDF shows in the clear (`/Type /Page`, not `/Pages`); 0 when they
/// are all inside compressed object streams, where the API's own check still applies.
fn count_pages(bytes: &[u8]) -> usize {
    let mut count = 0;
    let mut rest = bytes;
    while let Some(i) = find(rest, b"/Type") {
        rest = &rest[i + 5..];
        let after: &[u8] = {
            let skip = rest.iter().take_while(|b| b.is_ascii_whitespace()).count();
            &rest[skip..]
        };
        if after.starts_with(b"/Page") && !after[5..].first().is_some_and(u8::is_ascii_alphabetic) {
            count += 1;
        }
    }
    count
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// The format by the file's first bytes.
fn sniff_image(bytes: &[u8]) -> Option<ImageFormat> {
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some(ImageFormat::Png)
    } else if bytes.starts_with(b"\xff\xd8\xff") {
        Some(ImageFormat::Jpeg)
    } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        Some(ImageFormat::Gif)
    } else if bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
        Some(ImageFormat::WebP)
    } else {
        None
    }
}

fn decode_limits() -> Limits {
    let mut limits = Limits::default();
    limits.max_image_width = Some(DECODE_MAX_EDGE);
    limits.max_image_height = Some(DECODE_MAX_EDGE);
    limits.max_alloc = Some(DECODE_MAX_ALLOC);
    limits
}

fn reader(bytes: &[u8], format: ImageFormat) -> ImageReader<Cursor<&[u8]>> {
    let mut reader = ImageReader::with_format(Cursor::new(bytes), format);
    reader.limits(decode_limits());
    reader
}

/// Scales `img` to fit [`MAX_EDGE`], then encodes it small enough: PNG, else JPEG, else
/// smaller again.
fn shrink(img: DynamicImage) -> Result<(ImageFormat, Vec<u8>, u32, u32), String> {
    let mut img = if img.width() > MAX_EDGE || img.height() > MAX_EDGE {
        img.resize(MAX_EDGE, MAX_EDGE, image::imageops::FilterType::Triangle)
    } else {
        img
    };
    loop {
        for format in [ImageFormat::Png, ImageFormat::Jpeg] {
            let encoded = encode(&img, format)?;
            if encoded.len() <= MAX_IMAGE_BYTES {
                return Ok((format, encoded, img.width(), img.height()));
            }
        }
        if img.width().max(img.height()) < 64 {
            return Err("it could not be made small enough for the model".into());
        }
        let (w, h) = (img.width() * 3 / 4, img.height() * 3 / 4);
        img = img.resize(w.max(1), h.max(1), image::imageops::FilterType::Triangle);
    }
}

fn encode(img: &DynamicImage, format: ImageFormat) -> Result<Vec<u8>, String> {
    let mut out = Cursor::new(Vec::new());
    let written = if format == ImageFormat::Jpeg {
        // JPEG has no alpha channel.
        DynamicImage::ImageRgb8(img.to_rgb8()).write_to(&mut out, format)
    } else {
        img.write_to(&mut out, format)
    };
    written.map_err(|e| format!("re-encoding it failed: {e}"))?;
    Ok(out.into_inner())
}

fn image_block(format: ImageFormat, bytes: &[u8]) -> ToolResultBlock {
    ToolResultBlock::Image {
        source: json!({
            "type": "base64",
            "media_type": format.to_mime_type(),
            "data": base64::engine::general_purpose::STANDARD.encode(bytes),
        }),
    }
}

fn name(format: ImageFormat) -> &'static str {
    match format {
        ImageFormat::Png => "PNG",
        ImageFormat::Jpeg => "JPEG",
        ImageFormat::Gif => "GIF",
        ImageFormat::WebP => "WebP",
        _ => "image",
    }
}

#[cfg(test)]
#[path = "media_tests.rs"]
mod tests;
