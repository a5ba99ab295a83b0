//! Every size limit and default of the protocol. The agent enforces them; the client uses
//! the same numbers so that an oversized request fails before it is sent.

/// Protocol version spoken by this build. See the handshake rules in agent.proto.
pub const PROTOCOL_VERSION: u32 = 1;

/// Largest encoded message either side accepts; the transport refuses larger ones before
/// decoding.
pub const MAX_MESSAGE_BYTES: usize = 20 * 1024 * 1024;

/// Longest path accepted in any request.
pub const MAX_PATH_BYTES: usize = 4096;
/// Largest file content a Write carries.
pub const MAX_WRITE_BYTES: usize = 16 * 1024 * 1024;
/// Largest old_string / new_string of an Edit.
pub const MAX_EDIT_STRING_BYTES: usize = 1024 * 1024;
/// Largest file Edit will load.
pub const MAX_EDIT_FILE_BYTES: u64 = 64 * 1024 * 1024;
/// Largest stdin an Exec carries.
pub const MAX_STDIN_BYTES: usize = 1024 * 1024;
/// Largest command string an Exec carries.
pub const MAX_COMMAND_BYTES: usize = 256 * 1024;
/// Most environment entries an Exec carries.
pub const MAX_ENV_ENTRIES: usize = 256;
/// Longest exec id.
pub const MAX_EXEC_ID_BYTES: usize = 128;
/// Longest grep pattern.
pub const MAX_PATTERN_BYTES: usize = 64 * 1024;
/// Longest controller name in the handshake.
pub const MAX_CONTROLLER_NAME_BYTES: usize = 256;
/// Longest error message the agent sends.
pub const MAX_ERROR_MESSAGE_BYTES: usize = 4096;

/// Read: lines returned when no limit is given.
pub const DEFAULT_READ_LINES: u64 = 2000;
/// Read: each line is cut at this many characters.
pub const MAX_READ_LINE_CHARS: usize = 2000;
/// Read: the most content bytes one response carries.
pub const MAX_READ_RESPONSE_BYTES: usize = 256 * 1024;
/// Read with `raw`: the largest file returned whole (under the message limit, with room
/// for the rest of the response).
pub const MAX_READ_RAW_BYTES: u64 = 16 * 1024 * 1024;

/// Exec: timeout when none is given (2 minutes).
pub const DEFAULT_EXEC_TIMEOUT_MS: u64 = 120_000;
/// Exec: the longest timeout allowed (10 minutes).
pub const MAX_EXEC_TIMEOUT_MS: u64 = 600_000;
/// ExecInteractive: the longest a long-lived command (an MCP server) may run, and its
/// default (a day: a session's servers live as long as the session, and a dead one is
/// restarted by the controller).
pub const MAX_INTERACTIVE_TIMEOUT_MS: u64 = 24 * 60 * 60 * 1000;
/// Exec: characters of output kept in the result before it is cut.
pub const DEFAULT_OUTPUT_LIMIT_CHARS: u64 = 30_000;
/// Exec: the most bytes in one streamed chunk.
pub const MAX_CHUNK_BYTES: usize = 64 * 1024;

/// Glob: paths returned when no limit is given.
pub const DEFAULT_GLOB_LIMIT: u32 = 1000;
/// Grep: the most bytes of output text.
pub const MAX_GREP_OUTPUT_BYTES: usize = 256 * 1024;
