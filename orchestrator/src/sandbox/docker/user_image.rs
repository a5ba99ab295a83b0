//! A project's own environment as a sandbox image: the user's Dockerfile built from its
//! context, then the static agent added on top and labelled like the built-in images
//! (`cordon images build NAME --dockerfile FILE`, and a trusted workspace's
//! `.devcontainer/devcontainer.json`, see [`super::devcontainer`]).
//!
//! Only local images can be bases (this engine reaches no registry), so every `FROM` is
//! checked before the build and a missing one is named. Sessions on a user image give
//! commands the image's `ENV` (its PATH finds the image's toolchains); the built-in images
//! keep the agent's minimal environment.

use std::collections::HashMap;
use std::path::Path;

use bollard::Docker;

use super::images::{self, Built};
use crate::sandbox::SandboxError;

/// Marks an image built here from a user's recipe; its value is the name asked for.
pub const LABEL_USER_IMAGE: &str = "cordon.user-image";

/// What to build: the recipe, its context, and variables the agent layer adds.
#[derive(Debug, Clone)]
pub struct UserRecipe<'a> {
    /// The Dockerfile's text.
    pub dockerfile: &'a str,
    /// The build context directory (`None`: an empty one).
    pub context: Option<&'a Path>,
    /// `ENV` lines of the agent layer (a devcontainer's `containerEnv`).
    pub env: &'a [(String, String)],
}

/// Refuses names Docker would reject and the built-in images' names.
pub fn check_name(name: &str) -> Result<(), SandboxError> {
    let ok = !name.is_empty()
        && name.len() <= 128
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-/:".contains(&b))
        && name.as_bytes()[0].is_ascii_alphanumeric();
    if !ok {
        return Err(SandboxError::Docker(format!(
            "image name {name:?}: use lowercase letters, digits and . _ - / :"
        )));
    }
    let repo = name.split(':').next().unwrap_or(name);
    if [images::MINIMAL, images::DEV, "cordon-dev-base"].contains(&repo) {
        return Err(SandboxError::Docker(format!(
            "{name} is a built-in image name: `cordon images build minimal|dev` builds it"
        )));
    }
    Ok(())
}

/// The base images a Dockerfile names (`FROM x [AS y]`), without `scratch` and without
/// earlier stages it refers to by name. Build arguments in a base (`FROM $BASE`) cannot be
/// checked before the build and are left to it.
pub fn bases(dockerfile: &str) -> Vec<String> {
    let mut stages: Vec<String> = Vec::new();
    let mut out = Vec::new();
    for line in dockerfile.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        if words
            .first()
            .is_none_or(|w| !w.eq_ignore_ascii_case("FROM"))
        {
            continue;
        }
        let mut rest = words[1..].iter().filter(|w| !w.starts_with("--"));
        let Some(base) = rest.next() else { continue };
        let lower = base.to_ascii_lowercase();
        let local = lower == "scratch" || base.contains('$') || stages.contains(&lower);
        if !local && !out.contains(&base.to_string()) {
            out.push(base.to_string());
        }
        if let (Some(as_), Some(stage)) = (rest.next(), rest.next())
            && as_.eq_ignore_ascii_case("AS")
        {
            stages.push(stage.to_ascii_lowercase());
        }
    }
    out
}

/// Builds `name` from `recipe` with the agent on top, unless an image with the same
/// recipe, context and agent exists already.
pub async fn build(
    docker: &Docker,
    name: &str,
    recipe: &UserRecipe<'_>,
    progress: &mut impl FnMut(String),
) -> Result<Built, SandboxError> {
    check_name(name)?;
    for base in bases(recipe.dockerfile) {
        if images::image_labels(docker, &base).await.is_none() {
            return Err(SandboxError::Docker(format!(
                "base image {base} is not on this machine and there is no registry to pull \
                 it from: build or load it first (`cordon images build minimal` makes \
                 cordon-minimal)"
            )));
        }
    }
    let (_, agent) = images::static_agent()?;
    let context = context_tar(recipe)?;
    let env_text: String = recipe
        .env
        .iter()
        .map(|(k, v)| format!("{k}={v}\n"))
        .collect();
    let mut want = images::wanted_labels(
        &agent,
        &[recipe.dockerfile.as_bytes(), &context, env_text.as_bytes()],
    );
    want.insert(LABEL_USER_IMAGE.into(), name.into());
    if let Some(have) = images::image_labels(docker, name).await
        && want.iter().all(|(k, v)| have.get(k) == Some(v))
    {
        progress(format!("{name}: up to date"));
        return Ok(Built {
            image: name.into(),
            rebuilt: false,
        });
    }
    progress(format!("{name}: building the project's image"));
    let base = images::build(docker, None, context, &HashMap::new(), progress)
        .await?
        .ok_or_else(|| SandboxError::Docker(format!("build {name}: the builder gave no id")))?;
    progress(format!("{name}: adding the agent"));
    let mut layer = format!("FROM {base}\nCOPY sandbox-agent /sandbox-agent\n");
    for (k, v) in recipe.env {
        check_env_name(k)?;
        layer.push_str(&format!(
            "ENV {k}={}\n",
            serde_json::Value::from(v.as_str())
        ));
    }
    // Sessions run as their own uid whatever the image says (`remoteUser` and `USER` are
    // ignored); this only makes a plain `docker run` of the image unprivileged too.
    layer.push_str("USER 65534:65534\n");
    let mut tar = tar::Builder::new(Vec::new());
    let agent_context = (|| {
        images::add_file(&mut tar, "Dockerfile", layer.as_bytes(), 0o644)?;
        images::add_file(&mut tar, "sandbox-agent", &agent, 0o755)?;
        tar.into_inner()
    })()
    .map_err(|source| SandboxError::Setup {
        step: "assemble the agent layer",
        source,
    })?;
    images::build(docker, Some(name), agent_context, &want, progress).await?;
    Ok(Built {
        image: name.into(),
        rebuilt: true,
    })
}

fn check_env_name(k: &str) -> Result<(), SandboxError> {
    let ok = !k.is_empty()
        && k.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        && !k.as_bytes()[0].is_ascii_digit();
    if ok {
        Ok(())
    } else {
        Err(SandboxError::Docker(format!(
            "environment variable name {k:?} is not valid"
        )))
    }
}

/// The context directory as a tar with the Dockerfile at `Dockerfile` (replacing one of
/// that name in the context). Symlinks are archived as links, never followed, so a
/// context cannot pull in files from outside itself.
fn context_tar(recipe: &UserRecipe<'_>) -> Result<Vec<u8>, SandboxError> {
    let err = |source| SandboxError::Setup {
        step: "archive the build context",
        source,
    };
    let mut tar = tar::Builder::new(Vec::new());
    tar.follow_symlinks(false);
    if let Some(dir) = recipe.context {
        for entry in std::fs::read_dir(dir).map_err(err)? {
            let entry = entry.map_err(err)?;
            let name = entry.file_name();
            if name == "Dockerfile" {
                continue;
            }
            let path = entry.path();
            if entry.file_type().map_err(err)?.is_dir() {
                tar.append_dir_all(&name, &path).map_err(err)?;
            } else {
                tar.append_path_with_name(&path, &name).map_err(err)?;
            }
        }
    }
    images::add_file(&mut tar, "Dockerfile", recipe.dockerfile.as_bytes(), 0o644).map_err(err)?;
    tar.into_inner().map_err(err)
}

/// The `ENV` of a user image (its labels say so), for its sessions' commands; empty for
/// the built-in images and on any error (the agent's own environment applies then).
pub async fn command_env(docker: &Docker, image: &str) -> Vec<(String, String)> {
    let Ok(info) = docker.inspect_image(image).await else {
        return Vec::new();
    };
    let Some(config) = info.config else {
        return Vec::new();
    };
    let user = config
        .labels
        .as_ref()
        .is_some_and(|l| l.contains_key(LABEL_USER_IMAGE));
    if !user {
        return Vec::new();
    }
    config
        .env
        .unwrap_or_default()
        .iter()
        .filter_map(|kv| kv.split_once('='))
        // HOME stays the sandbox's private one: the image's may not be writable.
        .filter(|(k, _)| *k != "HOME")
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bases_skip_scratch_stages_and_build_args() {
        let df = "ARG V=1\nFROM cordon-minimal AS tools\nRUN x\nFROM --platform=linux/amd64 \
                  debian:12 as build\nFROM tools\nFROM scratch\nFROM $BASE\nFROM build\n";
        assert_eq!(bases(df), ["cordon-minimal", "debian:12"]);
    }

    #[test]
    fn names_are_checked_and_built_in_names_refused() {
        check_name("proj/env:1.2").unwrap();
        for bad in [
            "",
            "Upper",
            "-x",
            "a b",
            "cordon-minimal",
            "cordon-dev:latest",
        ] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }
}
