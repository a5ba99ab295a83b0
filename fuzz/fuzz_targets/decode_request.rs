//! Feeds arbitrary bytes to the agent's request decoders, as a hostile controller or a
//! corrupted stream would. Decoding must never panic, hang or allocate without bound;
//! whatever decodes must survive the agent's own request checks and error mapping.
#![no_main]

use libfuzzer_sys::fuzz_target;
use prost::Message;
use sandbox_agent::proto::*;

fuzz_target!(|data: &[u8]| {
    let _ = HandshakeRequest::decode(data);
    let _ = ReadRequest::decode(data);
    let _ = WriteRequest::decode(data);
    let _ = EditRequest::decode(data);
    let _ = GlobRequest::decode(data);
    let _ = GrepRequest::decode(data);
    let _ = CancelRequest::decode(data);
    if let Ok(req) = ExecRequest::decode(data) {
        let _ = sandbox_agent::exec::validate(&req);
    }
    if let Ok(err) = AgentError::decode(data) {
        let status = tonic_status(&err);
        let _ = sandbox_agent::AgentError::from_status(&status);
    }
});

fn tonic_status(err: &AgentError) -> tonic::Status {
    tonic::Status::with_details(tonic::Code::Internal, err.message.clone(), err.encode_to_vec().into())
}
