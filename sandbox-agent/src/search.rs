//! Glob and grep in-process with ripgrep's libraries. (Being implemented.)

use std::path::Path;

use crate::error::AgentError;
use crate::fsops::Resolver;
use crate::proto::*;

pub fn glob(_r: &Resolver, _cwd: &Path, _req: &GlobRequest) -> Result<GlobResponse, AgentError> {
    Err(AgentError::internal("not implemented yet"))
}

pub fn grep(_r: &Resolver, _cwd: &Path, _req: &GrepRequest) -> Result<GrepResponse, AgentError> {
    Err(AgentError::internal("not implemented yet"))
}
