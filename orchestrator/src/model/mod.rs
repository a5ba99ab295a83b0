//! The model client: Anthropic Messages API over streamed server-sent events.
//!
//! # Layout
//! - [`types`]: request and content-block types, serialised as the API expects.
//! - [`sse`]: an incremental, allocation-light SSE parser (bytes in, events out).
//! - [`stream`]: assembles one [`AssistantMessage`] from the events ([`StreamDecoder`]).
//! - [`client`]: [`ModelClient`] with [`ModelConfig`] from the environment.
//! - [`retry`]: backoff with full jitter and `retry-after`.
//! - [`error`]: [`ModelError`], which says whether a failure is retryable.
//! - [`observe`]: [`RequestObserver`], told of failed attempts, retries and finished calls.
//!
//! # Example
//! ```no_run
//! # async fn demo() -> Result<(), cordon::model::ModelError> {
//! use cordon::model::{Message, MessagesRequest, ModelClient, ModelConfig};
//! let config = ModelConfig::from_env()?;
//! let client = ModelClient::new(config.clone())?;
//! let request = MessagesRequest::new(config.model, 1024, vec![Message::user_text("hello")]);
//! let message = client.complete(&request).await?;
//! println!("{:?} {:?}", message.stop_reason, message.content);
//! # Ok(()) }
//! ```

pub mod client;
pub mod error;
pub mod observe;
pub mod retry;
pub mod sse;
pub mod stream;
pub mod types;
mod wire;

pub use client::{
    ANTHROPIC_VERSION, Credentials, DEFAULT_BASE_URL, DEFAULT_MODEL, ModelClient, ModelConfig,
    ModelStream,
};
pub use error::{ModelError, ToolInputError};
pub use observe::{Observer, RequestObserver};
pub use retry::RetryPolicy;
pub use sse::{SseError, SseEvent, SseParser};
pub use stream::{MessageAssembler, StreamDecoder, StreamEvent};
pub use types::{
    AssistantMessage, CacheControl, ContentBlock, Message, MessagesRequest, Metadata, OutputConfig,
    Role, StopReason, SystemBlock, TaskBudget, ThinkingConfig, ToolDefinition, ToolResultBlock,
    ToolResultContent, Usage,
};
