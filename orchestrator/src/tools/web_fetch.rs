//! `WebFetch{url, prompt}` (Claude Code's names): fetches a page in the orchestrator under
//! the session's egress policy ([`get`]), turns HTML into markdown, and answers `prompt`
//! over it with one model call (no tools) through the session's model client.
//!
//! - Pages are cached for 15 minutes by URL; a cached page is answered again without a
//!   download.
//! - A redirect to another host comes back as text naming the new URL: the model fetches
//!   it itself if it wants to, and that call is checked like any other.
//! - The model is the settings' `webFetchModel`, else the session's own.

pub mod get;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{Tool, ToolContext, ToolKind, ToolOutput, str_field};
use crate::model::{ContentBlock, Message, MessagesRequest, ModelClient};
use crate::network::proxy::dial::Dialer;
use get::{Fetched, Limits, Page};

/// How long a fetched page is answered from the cache.
pub const CACHE_TTL: Duration = Duration::from_secs(15 * 60);
/// Characters of page text the prompt's model call sees at most.
const PAGE_CHARS: usize = 100_000;
/// Characters of the answer returned at most.
const ANSWER_CHARS: usize = 20_000;
/// Tokens the prompt's model call may write.
const ANSWER_TOKENS: u32 = 4096;

/// A model call made on a tool's behalf: the session's client and the model to name.
#[derive(Debug, Clone)]
pub struct SideModel {
    pub client: ModelClient,
    pub model: String,
}

impl SideModel {
    /// The text of the reply to a single user message `text`, with no tools.
    pub async fn answer(&self, text: String) -> Result<String, crate::model::ModelError> {
        let req = MessagesRequest::new(
            self.model.clone(),
            ANSWER_TOKENS,
            vec![Message::user_text(text)],
        );
        let reply = self.client.complete(&req).await?;
        Ok(reply_text(&reply.content))
    }
}

/// The text blocks of a reply, joined.
pub fn reply_text(blocks: &[ContentBlock]) -> String {
    blocks
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Text { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The WebFetch tool of one session.
pub struct WebFetchTool {
    egress: get::Egress,
    model: SideModel,
    limits: Limits,
    cache: Mutex<HashMap<String, (Instant, Page)>>,
}

impl WebFetchTool {
    pub fn new(egress: get::Egress, model: SideModel) -> Self {
        Self {
            egress,
            model,
            limits: Limits::default(),
            cache: Mutex::new(HashMap::new()),
        }
    }

    fn cached(&self, url: &str) -> Option<(Duration, Page)> {
        let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        cache.retain(|_, (at, _)| at.elapsed() < CACHE_TTL);
        cache
            .get(url)
            .map(|(at, page)| (at.elapsed(), page.clone()))
    }

    fn remember(&self, url: &str, page: &Page) {
        let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        cache.insert(url.to_string(), (Instant::now(), page.clone()));
    }

    /// The page at `url`, from the cache or the network; `Err` is the tool's output.
    async fn page(&self, url: &str) -> Result<(Page, Option<Duration>), ToolOutput> {
        if let Some((age, page)) = self.cached(url) {
            return Ok((page, Some(age)));
        }
        let parsed =
            get::parse_url(url).map_err(|e| ToolOutput::error(format!("WebFetch: {e}")))?;
        match get::fetch(&self.egress, parsed, self.limits).await {
            Ok(Fetched::Page(page)) => {
                self.remember(url, &page);
                Ok((page, None))
            }
            Ok(Fetched::Redirect { from, to, status }) => Err(ToolOutput::ok(format!(
                "{from} redirects (HTTP {status}) to {to}\n\
                 WebFetch does not follow redirects to another host (or from https to \
                 http). To read it, call WebFetch again with url {to}."
            ))),
            Err(e) => Err(ToolOutput::error(format!("WebFetch: {e}"))),
        }
    }
}

#[tonic::async_trait]
impl Tool for WebFetchTool {
    fn name(&self) -> &str {
        "WebFetch"
    }

    fn description(&self) -> &str {
        "Fetches an http(s) URL and answers a prompt about its content. HTML is converted \
         to markdown; the prompt is answered by a separate model call that sees only the \
         page. The host must be allowed by the session's network policy; private, loopback \
         and metadata addresses are refused. Pages over 10 MB are cut off; results are \
         cached for 15 minutes. A redirect to another host is reported, not followed: \
         fetch the new URL to continue."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "url": {"type": "string", "description": "The http or https URL to fetch"},
                "prompt": {"type": "string", "description": "What to find out from the page"}
            },
            "required": ["url", "prompt"],
            "additionalProperties": false
        })
    }

    fn is_read_only(&self) -> bool {
        true
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Network
    }

    fn uses_sandbox(&self) -> bool {
        false
    }

    async fn call(&self, _ctx: &ToolContext, input: Value) -> ToolOutput {
        let (url, prompt) = (str_field(&input, "url"), str_field(&input, "prompt"));
        let (page, age) = match self.page(url).await {
            Ok(found) => found,
            Err(out) => return out,
        };
        match self.model.answer(prompt_text(&page, prompt)).await {
            Ok(answer) => ToolOutput::ok(result_text(&page, age, &answer)),
            Err(e) => ToolOutput::error(format!(
                "WebFetch: fetched {} but the model call answering the prompt failed: {e}",
                page.url
            )),
        }
    }
}

/// The single user message the prompt's model call gets.
fn prompt_text(page: &Page, prompt: &str) -> String {
    let body = clip(&page.text, PAGE_CHARS);
    format!(
        "Web page content from {} (HTTP {}, {}):\n---\n{body}\n---\n\n{prompt}\n\n\
         Answer from the content above only, concisely. Quote sparingly.",
        page.url, page.status, page.content_type
    )
}

fn result_text(page: &Page, age: Option<Duration>, answer: &str) -> String {
    let mut head = format!("{} (HTTP {})", page.url, page.status);
    if let Some(age) = age {
        head.push_str(&format!(
            ", from the cache (fetched {} s ago)",
            age.as_secs()
        ));
    }
    if page.truncated {
        head.push_str(", cut off at 10 MB");
    }
    format!("{head}\n\n{}", clip(answer, ANSWER_CHARS))
}

/// `text` cut to at most `max` characters, saying so.
fn clip(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}\n[… cut off after {max} characters]", &text[..at]),
        None => text.to_string(),
    }
}

/// A WebFetch tool for `session`, whose policy is `policy`; each of its requests is
/// recorded in `log` (the session's egress log, beside the proxy's records).
pub fn for_session(
    session: &str,
    policy: crate::network::NetworkPolicy,
    resolver: Arc<dyn crate::network::proxy::dial::Resolve>,
    log: Arc<dyn crate::network::proxy::record::ConnectionLog>,
    model: SideModel,
) -> WebFetchTool {
    WebFetchTool::new(
        get::Egress {
            dialer: Dialer {
                policy: Arc::new(policy),
                resolver,
            },
            session: session.to_string(),
            log,
        },
        model,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clip_counts_characters_and_says_so() {
        assert_eq!(clip("héllo", 10), "héllo");
        assert!(clip("héllo wörld", 5).starts_with("héllo\n[… cut off after 5"));
    }

    #[test]
    fn result_names_the_cache_and_the_cut() {
        let page = Page {
            url: "https://x.test/".into(),
            status: 200,
            content_type: "text/html".into(),
            text: String::new(),
            truncated: true,
        };
        let text = result_text(&page, Some(Duration::from_secs(3)), "yes");
        assert!(text.contains("from the cache"), "{text}");
        assert!(text.contains("cut off at 10 MB"), "{text}");
        assert!(text.ends_with("yes"));
    }
}
