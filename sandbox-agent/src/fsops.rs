//! File operations beneath the allowed roots. (Being implemented.)

use std::path::{Path, PathBuf};

use crate::error::{AgentError, ErrorCode};
use crate::proto::*;

/// Resolves request paths beneath the writable roots, never following a link out.
#[derive(Debug)]
pub struct Resolver {
    roots: Vec<PathBuf>,
}

impl Resolver {
    pub fn new(roots: &[PathBuf]) -> Result<Self, AgentError> {
        Ok(Self {
            roots: roots.to_vec(),
        })
    }

    pub fn roots(&self) -> &[PathBuf] {
        &self.roots
    }
}

fn todo(path: &Path) -> AgentError {
    AgentError::new(ErrorCode::Internal, "not implemented yet")
        .with_path(path.display().to_string())
}

pub fn read(_r: &Resolver, req: &ReadRequest) -> Result<ReadResponse, AgentError> {
    Err(todo(Path::new(&req.path)))
}

pub fn write(_r: &Resolver, req: &WriteRequest) -> Result<WriteResponse, AgentError> {
    Err(todo(Path::new(&req.path)))
}

pub fn edit(_r: &Resolver, req: &EditRequest) -> Result<EditResponse, AgentError> {
    Err(todo(Path::new(&req.path)))
}
