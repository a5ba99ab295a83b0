//! Read: a file as numbered lines (the agent formats them), paged with offset/limit, with
//! a notice when the view is partial; an image or PDF as the block the model reads it
//! from ([`super::media`]), its bytes read whole by the agent inside the sandbox. Records
//! what the file held, for Edit and Write.

use sandbox_agent::proto::ReadResponse;
use serde_json::{Value, json};

use std::path::Path;

use super::context::FileStamp;
use super::{
    Tool, ToolContext, ToolOutput, absolute_path, agent_error_output, media, str_field, u64_field,
};

pub struct ReadTool;

const DESCRIPTION: &str = "Reads a file from the sandbox's filesystem and returns its lines \
numbered from 1 (`N<tab>line`). `file_path` must be absolute. By default the first 2000 \
lines are returned; pass `offset` (first line, 1-based) and `limit` (number of lines) to \
page through longer files. Lines longer than 2000 characters are cut. When the view is not \
the whole file, the result ends with a note saying which lines are shown. Binary files are \
described instead of shown, except images (PNG, JPEG, GIF, WebP), which are shown to you \
as images (scaled down when large), and PDFs, which are given to you as documents (at \
most 10 MB and 100 pages). A file must be read before Edit can change it or Write can \
replace it. Reading directories is not supported: use Glob or Bash `ls`.";

#[tonic::async_trait]
impl Tool for ReadTool {
    fn name(&self) -> &'static str {
        "Read"
    }

    fn description(&self) -> &'static str {
        DESCRIPTION
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "file_path": {"type": "string", "minLength": 1,
                    "description": "Absolute path of the file to read"},
                "offset": {"type": "integer", "minimum": 1,
                    "description": "First line to return, 1-based (default 1)"},
                "limit": {"type": "integer", "minimum": 1,
                    "description": "Number of lines to return (default 2000)"}
            },
            "required": ["file_path"],
            "additionalProperties": false
        })
    }

    fn is_read_only(&self) -> bool {
        true
    }

    fn kind(&self) -> super::ToolKind {
        super::ToolKind::Read
    }

    async fn call(&self, ctx: &ToolContext, input: Value) -> ToolOutput {
        let path = match absolute_path(
            "Read",
            "file_path",
            str_field(&input, "file_path"),
            ctx.workspace(),
        ) {
            Ok(p) => p,
            Err(out) => return out,
        };
        let offset = u64_field(&input, "offset").unwrap_or(0);
        let limit = u64_field(&input, "limit").unwrap_or(0);
        let shown = path.display().to_string();
        if let Some(kind) = media::MediaKind::of(&path) {
            return read_media(ctx, &path, kind).await;
        }
        match ctx.client().read(&shown, offset, limit).await {
            Ok(resp) => {
                ctx.read_state().record(
                    &path,
                    FileStamp {
                        sha256: resp.sha256.clone(),
                        mtime_ns: resp.mtime_ns,
                    },
                );
                ToolOutput::ok(render(&shown, offset, &resp))
            }
            Err(err) => agent_error_output("Read", &err),
        }
    }
}

/// An image or PDF: its bytes from the agent, turned into the block the model reads (on
/// the blocking pool: decoding and scaling take a while, and a decoder's panic stays
/// this call's error).
async fn read_media(ctx: &ToolContext, path: &Path, kind: media::MediaKind) -> ToolOutput {
    let shown = path.display().to_string();
    let resp = match ctx.client().read_raw(&shown).await {
        Ok(resp) => resp,
        Err(err) => return agent_error_output("Read", &err),
    };
    if resp.raw_content.is_empty() && resp.size_bytes > 0 {
        // An agent from before whole-file reads answers with lines or a description.
        return ToolOutput::error(format!(
            "Read: {shown}: this sandbox's agent cannot return a file's bytes (it predates \
             image and PDF reads); its image needs rebuilding"
        ));
    }
    let stamp = FileStamp {
        sha256: resp.sha256.clone(),
        mtime_ns: resp.mtime_ns,
    };
    let bytes = resp.raw_content;
    let made = tokio::task::spawn_blocking(move || match kind {
        media::MediaKind::Image => media::image(&bytes),
        media::MediaKind::Pdf => media::pdf(&bytes),
    })
    .await
    .unwrap_or_else(|e| Err(format!("decoding it failed ({e})")));
    match made {
        Ok(m) => {
            ctx.read_state().record(path, stamp);
            ToolOutput::ok(format!("{shown}: {}", m.note)).with_attachment(m.block)
        }
        Err(why) => ToolOutput::error(format!("Read: {shown}: {why}")),
    }
}

/// The text the model sees for a successful read.
pub fn render(path: &str, offset: u64, resp: &ReadResponse) -> String {
    if !resp.binary_description.is_empty() {
        return format!(
            "{path}: {}; its content is not shown as text",
            resp.binary_description
        );
    }
    if resp.size_bytes == 0 || resp.total_lines == 0 {
        return format!("{path} exists but is empty (0 lines).");
    }
    if resp.lines_returned == 0 {
        return format!(
            "{path} has {} lines; offset {} is past the end. Use an offset from 1 to {}.",
            resp.total_lines,
            offset.max(1),
            resp.total_lines
        );
    }
    let mut out = resp.content.clone();
    if resp.partial {
        if !out.ends_with('\n') {
            out.push('\n');
        }
        let last = resp.first_line + resp.lines_returned - 1;
        out.push_str(&format!(
            "[showing lines {}-{last} of {}; use offset/limit to see more]",
            resp.first_line, resp.total_lines
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resp(content: &str, first: u64, returned: u64, total: u64, partial: bool) -> ReadResponse {
        ReadResponse {
            content: content.into(),
            first_line: first,
            lines_returned: returned,
            total_lines: total,
            partial,
            size_bytes: 10,
            ..Default::default()
        }
    }

    #[test]
    fn whole_file_is_returned_as_the_agent_numbered_it() {
        let r = resp("     1\ta\n     2\tb\n", 1, 2, 2, false);
        assert_eq!(render("/w/f", 0, &r), "     1\ta\n     2\tb\n");
    }

    #[test]
    fn partial_view_says_which_lines_and_how_many() {
        let r = resp("    10\tj\n    11\tk", 10, 2, 40, true);
        assert_eq!(
            render("/w/f", 10, &r),
            "    10\tj\n    11\tk\n[showing lines 10-11 of 40; use offset/limit to see more]"
        );
    }

    #[test]
    fn empty_binary_and_past_the_end_are_explained() {
        let mut r = resp("", 1, 0, 0, false);
        r.size_bytes = 0;
        assert!(render("/w/e", 0, &r).contains("empty"));
        let r = resp("", 50, 0, 3, true);
        assert!(render("/w/f", 50, &r).contains("offset 50 is past the end"));
        let mut r = resp("", 1, 0, 0, false);
        r.binary_description = "binary file, 3 bytes (PNG image)".into();
        assert_eq!(
            render("/w/p", 0, &r),
            "/w/p: binary file, 3 bytes (PNG image); its content is not shown as text"
        );
    }
}
