//! [`AgentError`]: the one error type of every agent operation, and the one place that
//! maps it to and from what travels on the wire (a gRPC status whose details carry an
//! encoded `proto::AgentError`).

use prost::Message;

use crate::limits::MAX_ERROR_MESSAGE_BYTES;
use crate::proto;

pub use crate::proto::ErrorCode;

/// A failed agent operation: a stable code, a message a model can act on, and the path
/// involved when there is one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.render())]
pub struct AgentError {
    pub code: ErrorCode,
    pub message: String,
    pub path: Option<String>,
}

impl AgentError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            path: None,
        }
    }

    pub fn with_path(mut self, path: impl Into<String>) -> Self {
        self.path = Some(path.into());
        self
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidRequest, message)
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Internal, message)
    }

    /// Maps an I/O error on `path` to the code a model can act on.
    pub fn from_io(err: &std::io::Error, path: &str) -> Self {
        use std::io::ErrorKind as K;
        let code = match err.raw_os_error() {
            Some(libc::EXDEV) => ErrorCode::OutsideSandbox,
            Some(libc::ELOOP) => ErrorCode::OutsideSandbox,
            Some(libc::EISDIR) => ErrorCode::IsADirectory,
            Some(libc::EROFS) | Some(libc::EACCES) | Some(libc::EPERM) => {
                ErrorCode::PermissionDenied
            }
            Some(libc::ENXIO) => ErrorCode::NotARegularFile,
            _ => match err.kind() {
                K::NotFound => ErrorCode::NotFound,
                K::PermissionDenied => ErrorCode::PermissionDenied,
                _ => ErrorCode::Io,
            },
        };
        let what = match code {
            ErrorCode::OutsideSandbox => {
                "the path leads outside the sandbox's allowed directories (through a symlink, \
                 `..` or a /proc link)"
                    .to_string()
            }
            ErrorCode::NotFound => "no such file or directory".to_string(),
            ErrorCode::PermissionDenied => {
                format!("permission denied by the sandbox ({err})")
            }
            _ => err.to_string(),
        };
        Self::new(code, format!("{path}: {what}")).with_path(path)
    }

    /// True when the same call may succeed if tried again unchanged.
    pub fn is_retryable(&self) -> bool {
        matches!(self.code, ErrorCode::Io | ErrorCode::TimedOut)
    }

    fn render(&self) -> String {
        self.message.clone()
    }

    /// The gRPC status this error travels as.
    pub fn to_status(&self) -> tonic::Status {
        use tonic::Code;
        let code = match self.code {
            ErrorCode::HandshakeRequired | ErrorCode::UnsupportedProtocol => {
                Code::FailedPrecondition
            }
            ErrorCode::InvalidRequest
            | ErrorCode::DeadlineRequired
            | ErrorCode::BadPattern
            | ErrorCode::EditNoMatch
            | ErrorCode::EditAmbiguous
            | ErrorCode::EditNoChange
            | ErrorCode::IsADirectory
            | ErrorCode::NotARegularFile => Code::InvalidArgument,
            ErrorCode::TooLarge => Code::ResourceExhausted,
            ErrorCode::NotFound | ErrorCode::NoSuchExec => Code::NotFound,
            ErrorCode::OutsideSandbox | ErrorCode::PermissionDenied => Code::PermissionDenied,
            ErrorCode::TimedOut => Code::DeadlineExceeded,
            ErrorCode::Cancelled => Code::Cancelled,
            ErrorCode::ShuttingDown => Code::Unavailable,
            ErrorCode::Io => Code::Unavailable,
            ErrorCode::Internal | ErrorCode::Unspecified => Code::Internal,
        };
        let mut message = self.message.clone();
        truncate_utf8(&mut message, MAX_ERROR_MESSAGE_BYTES);
        let wire = proto::AgentError {
            code: self.code as i32,
            message: message.clone(),
            path: self.path.clone().unwrap_or_default(),
        };
        tonic::Status::with_details(code, message, wire.encode_to_vec().into())
    }

    /// Recovers the typed error from a status; statuses that did not come from the agent
    /// (transport failures, deadlines hit in flight) get a code derived from the status.
    pub fn from_status(status: &tonic::Status) -> Self {
        if let Ok(wire) = proto::AgentError::decode(status.details())
            && let Ok(code) = ErrorCode::try_from(wire.code)
            && code != ErrorCode::Unspecified
        {
            let path = (!wire.path.is_empty()).then_some(wire.path);
            return Self {
                code,
                message: wire.message,
                path,
            };
        }
        use tonic::Code;
        let code = match status.code() {
            Code::DeadlineExceeded => ErrorCode::TimedOut,
            // A Cancelled status without the agent's details is the transport saying the
            // connection went away mid-call (hyper reports a reset stream as "operation was
            // canceled"); the agent's own cancellations always carry details. Calling it
            // Cancelled would tell the caller it had asked for this.
            Code::Cancelled | Code::Unavailable | Code::Unknown => ErrorCode::Io,
            Code::ResourceExhausted => ErrorCode::TooLarge,
            Code::InvalidArgument => ErrorCode::InvalidRequest,
            _ => ErrorCode::Internal,
        };
        Self::new(
            code,
            format!("sandbox agent unreachable or failed: {}", status.message()),
        )
    }
}

impl From<AgentError> for tonic::Status {
    fn from(err: AgentError) -> Self {
        err.to_status()
    }
}

/// Cuts `s` to at most `max` bytes on a character boundary.
pub fn truncate_utf8(s: &mut String, max: usize) {
    if s.len() > max {
        let mut end = max;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_round_trip_keeps_code_message_and_path() {
        let err = AgentError::new(ErrorCode::EditAmbiguous, "old_string matches 3 times")
            .with_path("/w/a.rs");
        let back = AgentError::from_status(&err.to_status());
        assert_eq!(back, err);
        assert_eq!(err.to_status().code(), tonic::Code::InvalidArgument);
    }

    #[test]
    fn foreign_status_maps_to_a_sensible_code() {
        let back = AgentError::from_status(&tonic::Status::unavailable("broken pipe"));
        assert_eq!(back.code, ErrorCode::Io);
        assert!(back.message.contains("broken pipe"));
    }

    #[test]
    fn a_transport_cancel_is_an_io_failure_but_the_agents_own_cancel_is_kept() {
        let transport =
            AgentError::from_status(&tonic::Status::cancelled("operation was canceled"));
        assert_eq!(transport.code, ErrorCode::Io);
        let own = AgentError::new(ErrorCode::Cancelled, "cancelled by the controller");
        assert_eq!(
            AgentError::from_status(&own.to_status()).code,
            ErrorCode::Cancelled
        );
    }

    #[test]
    fn long_messages_are_cut_on_a_char_boundary() {
        let err = AgentError::internal("é".repeat(5000));
        let status = err.to_status();
        assert!(status.message().len() <= MAX_ERROR_MESSAGE_BYTES);
    }
}
