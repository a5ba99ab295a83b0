//! Compiles the RPC contract with protox (pure Rust, so no `protoc` is needed on the
//! machine) and hands the descriptor set to tonic's code generator.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto = "proto/cordon/agent/v1/agent.proto";
    println!("cargo:rerun-if-changed={proto}");
    let fds = protox::compile([proto], ["proto"])?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_fds(fds)?;
    Ok(())
}
