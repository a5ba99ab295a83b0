//! A workspace's `.devcontainer/devcontainer.json` (or `.devcontainer.json`) as its Docker
//! sandbox image, so teams that already describe their environment need nothing new.
//!
//! Honoured only when the workspace is trusted: the file names an image and a recipe the
//! repository wrote, and building or running them is the user's decision, like its hooks.
//! Read: `image`, `build.dockerfile`, `build.context`, `containerEnv`. `remoteUser` and
//! `containerUser` are ignored (sessions run as their own unprivileged uid), as are
//! features, mounts, ports and lifecycle commands (said once, on stderr, by the caller).

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::user_image::{self, UserRecipe};
use crate::sandbox::SandboxError;

/// What a devcontainer file asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DevContainer {
    /// The file read (for messages).
    pub file: PathBuf,
    pub source: ImageSource,
    pub env: Vec<(String, String)>,
    /// Keys present that Cordon does not apply.
    pub ignored: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImageSource {
    Image(String),
    Dockerfile { file: PathBuf, context: PathBuf },
}

/// Keys Cordon applies or deliberately overrides; any other present key is reported.
const KNOWN: &[&str] = &[
    "name",
    "image",
    "build",
    "containerEnv",
    "remoteUser",
    "containerUser",
    "$schema",
    "customizations",
];

/// Where a devcontainer file may be, relative to the workspace, in the order looked for.
pub const FILES: [&str; 2] = [".devcontainer/devcontainer.json", ".devcontainer.json"];

/// The workspace's devcontainer file, if it has one: `Ok(None)` when absent.
pub fn find(workspace: &Path) -> Result<Option<DevContainer>, SandboxError> {
    for rel in FILES {
        if let Some(text) = read_beneath(workspace, Path::new(rel))? {
            return parse(workspace, &workspace.join(rel), &text).map(Some);
        }
    }
    Ok(None)
}

/// Reads a repository file beneath the workspace without following links: a link could
/// point the host at anything.
fn read_beneath(workspace: &Path, rel: &Path) -> Result<Option<String>, SandboxError> {
    const MAX: u64 = 1 << 20;
    sandbox_agent::beneath::WorkspaceReader::open(workspace)
        .and_then(|ws| ws.read_text(rel, MAX))
        .map_err(|e| SandboxError::Docker(e.to_string()))
}

fn bad(file: &Path, why: impl std::fmt::Display) -> SandboxError {
    SandboxError::Docker(format!("{}: {why}", file.display()))
}

/// Parses the file's JSON with comments; paths resolve beneath the workspace.
pub fn parse(workspace: &Path, file: &Path, text: &str) -> Result<DevContainer, SandboxError> {
    let value: Value = serde_json::from_str(&strip_jsonc(text)).map_err(|e| bad(file, e))?;
    let obj = value
        .as_object()
        .ok_or_else(|| bad(file, "expected an object"))?;
    let dir = file.parent().unwrap_or(workspace);
    let source = match (obj.get("image"), obj.get("build")) {
        (Some(Value::String(image)), _) => ImageSource::Image(image.clone()),
        (_, Some(build)) => {
            let rel = build
                .get("dockerfile")
                .and_then(Value::as_str)
                .ok_or_else(|| bad(file, "build.dockerfile must be a string"))?;
            let context = build.get("context").and_then(Value::as_str).unwrap_or(".");
            ImageSource::Dockerfile {
                file: beneath(workspace, &dir.join(rel)).ok_or_else(|| {
                    bad(
                        file,
                        format!("build.dockerfile {rel} is outside the workspace"),
                    )
                })?,
                context: beneath(workspace, &dir.join(context)).ok_or_else(|| {
                    bad(
                        file,
                        format!("build.context {context} is outside the workspace"),
                    )
                })?,
            }
        }
        _ => {
            return Err(bad(
                file,
                "needs `image` or `build.dockerfile` (docker compose files are not supported)",
            ));
        }
    };
    let env = match obj.get("containerEnv") {
        None => Vec::new(),
        Some(Value::Object(m)) => m
            .iter()
            .map(|(k, v)| match v {
                Value::String(s) => Ok((k.clone(), s.clone())),
                _ => Err(bad(file, format!("containerEnv.{k} must be a string"))),
            })
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(bad(file, "containerEnv must be an object")),
    };
    let ignored = obj
        .keys()
        .filter(|k| !KNOWN.contains(&k.as_str()))
        .cloned()
        .collect();
    Ok(DevContainer {
        file: file.to_path_buf(),
        source,
        env,
        ignored,
    })
}

/// `path` with `.` and `..` folded, if it stays inside `workspace`. Links are not
/// resolved here: the build archives the context without following them.
fn beneath(workspace: &Path, path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            other => out.push(other),
        }
    }
    out.starts_with(workspace).then_some(out)
}

/// JSON with comments (`//`, `/* */`) and trailing commas, as VS Code writes it, to JSON.
fn strip_jsonc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    let mut in_string = false;
    while let Some(c) = chars.next() {
        if in_string {
            out.push(c);
            if c == '\\' {
                if let Some(n) = chars.next() {
                    out.push(n);
                }
            } else if c == '"' {
                in_string = false;
            }
            continue;
        }
        match (c, chars.peek()) {
            ('"', _) => {
                in_string = true;
                out.push(c);
            }
            ('/', Some('/')) => {
                for n in chars.by_ref() {
                    if n == '\n' {
                        out.push('\n');
                        break;
                    }
                }
            }
            ('/', Some('*')) => {
                chars.next();
                let mut prev = ' ';
                for n in chars.by_ref() {
                    if prev == '*' && n == '/' {
                        break;
                    }
                    prev = n;
                }
                out.push(' ');
            }
            _ => out.push(c),
        }
    }
    drop_trailing_commas(&out)
}

fn drop_trailing_commas(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_string = false;
    let mut escaped = false;
    let bytes: Vec<char> = text.chars().collect();
    for (i, &c) in bytes.iter().enumerate() {
        if in_string {
            out.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
            continue;
        }
        if c == '"' {
            in_string = true;
        }
        if c == ',' {
            let next = bytes[i + 1..].iter().find(|n| !n.is_whitespace());
            if matches!(next, Some('}') | Some(']')) {
                continue;
            }
        }
        out.push(c);
    }
    out
}

/// The image a Docker session of `workspace` uses when none was asked for: its
/// devcontainer's, built if needed, when the workspace is trusted. `note` receives what was
/// ignored and why (an untrusted workspace's file, keys Cordon does not apply).
pub async fn image_for_session(
    workspace: &Path,
    trusted: bool,
    note: &mut impl FnMut(String),
) -> Result<Option<String>, SandboxError> {
    // What reaches `note` is the repository's (its keys, its path) or its build's output
    // (a RUN step prints what it likes): made safe for the terminal it is shown on.
    let mut note = |line: String| note(crate::output::for_terminal(&line).into_owned());
    let note = &mut note;
    if !trusted {
        // Not parsed at all: an untrusted repository's file (malformed, or asking for what
        // Cordon does not support) must not stop its session from starting.
        if let Some(rel) = FILES
            .iter()
            .find(|rel| std::fs::symlink_metadata(workspace.join(rel)).is_ok())
        {
            note(format!(
                "{} ignored: the workspace is not trusted (`cordon trust` to use it)",
                workspace.join(rel).display()
            ));
        }
        return Ok(None);
    }
    let Some(dc) = find(workspace)? else {
        return Ok(None);
    };
    if !dc.ignored.is_empty() {
        note(format!(
            "{}: not applied: {}",
            dc.file.display(),
            dc.ignored.join(", ")
        ));
    }
    build(workspace, &dc, note).await.map(Some)
}

/// The devcontainer's Dockerfile relative to the workspace, when the file names one that
/// parses (for the trust record, which binds it wherever it lives).
pub fn dockerfile(workspace: &Path) -> Option<String> {
    match find(workspace).ok()??.source {
        ImageSource::Dockerfile { file, .. } => file
            .strip_prefix(workspace)
            .ok()
            .and_then(Path::to_str)
            .map(String::from),
        ImageSource::Image(_) => None,
    }
}

/// The image name a workspace's devcontainer builds to: stable per workspace path.
pub fn image_name(workspace: &Path) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(workspace.as_os_str().as_encoded_bytes());
    format!("cordon-devcontainer-{}", &hex::encode(digest)[..16])
}

/// Builds (or finds current) the sandbox image for `dc`: its image or Dockerfile with the
/// agent on top and `containerEnv` as the image's environment. Returns the image name.
pub async fn build(
    workspace: &Path,
    dc: &DevContainer,
    progress: &mut impl FnMut(String),
) -> Result<String, SandboxError> {
    let docker = super::connect().await?;
    let name = image_name(workspace);
    let (text, context) = match &dc.source {
        ImageSource::Image(image) => (format!("FROM {image}\n"), None),
        ImageSource::Dockerfile { file, context } => {
            let rel = file.strip_prefix(workspace).unwrap_or(file);
            let text = read_beneath(workspace, rel)?
                .ok_or_else(|| bad(file, "no such Dockerfile in the workspace"))?;
            // The context is archived into an image the sandbox reads: it must be the
            // workspace's own directory, not a link out of it (links inside are archived
            // as links, never followed). Nothing runs in the workspace while this builds.
            let real = std::fs::canonicalize(context).map_err(|e| bad(context, e))?;
            if &real != context {
                return Err(bad(context, "the build context passes through a link"));
            }
            (text, Some(context.clone()))
        }
    };
    let recipe = UserRecipe {
        dockerfile: &text,
        context: context.as_deref(),
        env: &dc.env,
    };
    user_image::build(&docker, &name, &recipe, progress).await?;
    Ok(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments_trailing_commas_and_fields_are_read() {
        let ws = Path::new("/w");
        let text = r#"{
            // the team's environment
            "name": "proj", /* a block
            comment */ "build": {"dockerfile": "Dockerfile", "context": "..",},
            "containerEnv": {"A": "1 // not a comment", "B": "x"},
            "remoteUser": "root",
            "forwardPorts": [3000,],
        }"#;
        let dc = parse(ws, Path::new("/w/.devcontainer/devcontainer.json"), text).unwrap();
        assert_eq!(
            dc.source,
            ImageSource::Dockerfile {
                file: "/w/.devcontainer/Dockerfile".into(),
                context: "/w".into()
            }
        );
        assert_eq!(
            dc.env,
            [
                ("A".into(), "1 // not a comment".into()),
                ("B".into(), "x".into())
            ]
        );
        assert_eq!(dc.ignored, ["forwardPorts"]);
    }

    #[test]
    fn an_untrusted_workspaces_file_is_not_read_and_stops_nothing() {
        let ws = tempfile::tempdir().unwrap();
        // Malformed, and a compose file Cordon refuses: neither may fail the session.
        for text in ["{not json", r#"{"dockerComposeFile": "c.yml"}"#] {
            std::fs::write(ws.path().join(".devcontainer.json"), text).unwrap();
            let mut notes = Vec::new();
            let rt = tokio::runtime::Builder::new_current_thread()
                .build()
                .unwrap();
            let image = rt
                .block_on(image_for_session(ws.path(), false, &mut |n| notes.push(n)))
                .unwrap();
            assert_eq!(image, None);
            assert!(notes[0].contains("not trusted"), "{notes:?}");
        }
    }

    #[test]
    fn recipes_outside_the_workspace_and_compose_files_are_refused() {
        let f = Path::new("/w/.devcontainer/devcontainer.json");
        for text in [
            r#"{"build": {"dockerfile": "../../etc/Dockerfile"}}"#,
            r#"{"build": {"dockerfile": "Dockerfile", "context": "../.."}}"#,
            r#"{"dockerComposeFile": "compose.yml", "service": "app"}"#,
            r#"{"image": "x", "containerEnv": {"A": 1}}"#,
        ] {
            assert!(parse(Path::new("/w"), f, text).is_err(), "{text}");
        }
        let dc = parse(Path::new("/w"), f, r#"{"image": "debian:12"}"#).unwrap();
        assert_eq!(dc.source, ImageSource::Image("debian:12".into()));
    }
}
