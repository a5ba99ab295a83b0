//! Turning a turn into an HTTP response: SSE bodies written in small flushed pieces, and
//! the faults.

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};

use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, StatusCode};
use axum::response::Response;
use futures::Stream;

use super::encode::{error_frame, reply_frames, transport_pieces};
use super::script::{Fault, Turn};
use super::{Options, error_response};

/// The response for one turn.
pub(super) fn play(turn: Turn, id: &str, model: &str, options: &Options) -> Response {
    let chunking = &options.chunking;
    match turn {
        Turn::Reply(reply) => {
            let model = reply.model.as_deref().unwrap_or(model);
            let id = reply.id.as_deref().unwrap_or(id);
            let body = reply_frames(&reply, id, model, chunking).all();
            sse_response(body, options, false)
        }
        Turn::Fault(Fault::RateLimited {
            retry_after,
            retry_after_ms,
        }) => {
            let mut response = error_response(
                StatusCode::TOO_MANY_REQUESTS,
                "rate_limit_error",
                "Rate limited",
            );
            let headers = response.headers_mut();
            for (name, value) in [
                ("retry-after", retry_after),
                ("retry-after-ms", retry_after_ms),
            ] {
                if let Some(value) = value.and_then(|v| HeaderValue::from_str(&v).ok()) {
                    headers.insert(name, value);
                }
            }
            response
        }
        Turn::Fault(Fault::Overloaded) => {
            let status = StatusCode::from_u16(529).unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
            error_response(status, "overloaded_error", "Overloaded")
        }
        Turn::Fault(Fault::ServerError) => error_response(
            StatusCode::INTERNAL_SERVER_ERROR,
            "api_error",
            "Internal server error",
        ),
        Turn::Fault(Fault::Status {
            status,
            error_type,
            message,
        }) => {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            error_response(status, &error_type, &message)
        }
        Turn::Fault(Fault::ErrorEvent {
            reply,
            after_blocks,
            error_type,
            message,
        }) => {
            let frames = reply_frames(&reply, id, model, chunking);
            // message_start and the ping after it, then the requested blocks.
            let upto = match after_blocks {
                0 => 2,
                n => frames
                    .block_ends
                    .get(n - 1)
                    .copied()
                    .unwrap_or(frames.frames.len()),
            };
            let mut body = frames.concat(upto);
            body.extend_from_slice(&error_frame(&error_type, &message));
            sse_response(body, options, false)
        }
        Turn::Fault(Fault::CutInToolInput { reply }) => {
            let frames = reply_frames(&reply, id, model, chunking);
            let deltas = &frames.first_tool_deltas;
            let cut_frame = deltas
                .get(deltas.len() / 2)
                .copied()
                .unwrap_or(frames.frames.len() / 2);
            let mut body = frames.concat(cut_frame);
            if let Some(frame) = frames.frames.get(cut_frame) {
                body.extend_from_slice(&frame[..frame.len() / 2]);
            }
            sse_response(body, options, true)
        }
    }
}

fn sse_response(body: Vec<u8>, options: &Options, cut: bool) -> Response {
    let max = if options.zero_latency {
        0
    } else {
        options.chunking.transport_bytes
    };
    let pieces = Pieces {
        pieces: transport_pieces(&body, max).into(),
        flush_between: !options.zero_latency,
        paused: false,
        cut,
    };
    let mut response = Response::new(Body::from_stream(pieces));
    let headers = response.headers_mut();
    headers.insert(
        "content-type",
        HeaderValue::from_static("text/event-stream; charset=utf-8"),
    );
    headers.insert("cache-control", HeaderValue::from_static("no-cache"));
    response
}

/// The body writer. Between pieces it returns `Pending` once (waking itself at once):
/// hyper flushes what it has whenever the body is not ready, so every piece goes out as
/// its own write. With `cut`, it ends with an error, which makes hyper drop the
/// connection without the final chunk: the client sees a truncated body.
struct Pieces {
    pieces: VecDeque<Bytes>,
    flush_between: bool,
    paused: bool,
    cut: bool,
}

impl Stream for Pieces {
    type Item = Result<Bytes, std::io::Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.flush_between && !self.paused && !self.pieces.is_empty() {
            self.paused = true;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        self.paused = false;
        if let Some(piece) = self.pieces.pop_front() {
            return Poll::Ready(Some(Ok(piece)));
        }
        if std::mem::take(&mut self.cut) {
            let err = std::io::Error::new(std::io::ErrorKind::ConnectionReset, "scripted cut");
            return Poll::Ready(Some(Err(err)));
        }
        Poll::Ready(None)
    }
}
