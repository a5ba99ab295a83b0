//! SSE parse throughput: a realistic ~8 MB Messages-API stream (text deltas and tool input
//! deltas, pings) fed in 1-, 64- and 4096-byte chunks. Prints MB/s (median of several
//! runs) for the SSE layer alone, for the full decoder (SSE + typed JSON + assembly) as
//! `stream()` runs it, and as `complete()` runs it (no per-delta events).
//!
//! Run: `cargo bench -p cordon-tests --bench sse_parse`
#![allow(clippy::unwrap_used, clippy::expect_used)] // a failed test step panics with its message

use std::hint::black_box;
use std::process::ExitCode;
use std::time::Instant;

use cordon::model::{SseError, SseParser, StreamDecoder, StreamEvent};
use cordon_tests::scripted_model::Reply;
use cordon_tests::scripted_model::encode::{Chunking, encode_reply};
use serde_json::json;

const TARGET_BYTES: usize = 8 * 1024 * 1024;
const RUNS: usize = 7;
const CHUNK_SIZES: [usize; 3] = [1, 64, 4096];

fn prose(words: usize, seed: usize) -> String {
    const WORDS: [&str; 12] = [
        "the",
        "sandbox",
        "confines",
        "every",
        "process;",
        "résumé",
        "naïve",
        "日本語",
        "\"quoted\"",
        "path/to/file.rs",
        "🦀",
        "tool\tcall\n",
    ];
    (0..words)
        .map(|i| WORDS[(i * 7 + seed) % WORDS.len()])
        .collect::<Vec<_>>()
        .join(" ")
}

/// Alternating text and tool-call blocks until the stream is about 8 MB.
fn stream() -> (Vec<u8>, usize) {
    let chunking = Chunking {
        text_chars: 14,
        json_bytes: 24,
        ping_every: 50,
        transport_bytes: 0,
    };
    let mut reply = Reply::default();
    let mut blocks = 0;
    loop {
        let body = encode_reply(&reply, "msg_bench", "claude-bench", &chunking);
        if body.len() >= TARGET_BYTES {
            return (body, blocks);
        }
        reply = reply.with_text(prose(3000, blocks)).with_tool_use(
            format!("toolu_{blocks}"),
            "Write",
            json!({"file_path": format!("/work/src/file_{blocks}.rs"), "content": prose(2000, blocks + 1)}),
        );
        blocks += 2;
    }
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// CPU time of this thread: the machine running the benchmark is often busy compiling,
/// and wall time would measure the neighbours as much as the parser.
fn thread_cpu_secs() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec and CLOCK_THREAD_CPUTIME_ID is supported
    // on every Linux this project runs on; the call writes nothing else.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return f64::NAN;
    }
    ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
}

/// Median MB/s over the runs: (by CPU time, by wall time).
fn measure(
    bytes: &[u8],
    chunk: usize,
    mut run: impl FnMut(&[u8], usize) -> bool,
) -> Option<(f64, f64)> {
    let (mut cpu_rates, mut wall_rates) = (Vec::with_capacity(RUNS), Vec::with_capacity(RUNS));
    let mb = bytes.len() as f64 / 1e6;
    for _ in 0..RUNS {
        let (wall, cpu) = (Instant::now(), thread_cpu_secs());
        if !run(bytes, chunk) {
            return None;
        }
        cpu_rates.push(mb / (thread_cpu_secs() - cpu));
        wall_rates.push(mb / wall.elapsed().as_secs_f64());
    }
    Some((median(cpu_rates), median(wall_rates)))
}

fn sse_only(bytes: &[u8], chunk: usize) -> bool {
    let mut parser = SseParser::new();
    let (mut events, mut data) = (0usize, 0usize);
    for piece in bytes.chunks(chunk) {
        let fed = parser.feed::<SseError, _>(piece, |e| {
            events += 1;
            data += e.data.len();
            Ok(())
        });
        if fed.is_err() {
            return false;
        }
    }
    black_box((events, data));
    events > 0
}

fn decode(bytes: &[u8], chunk: usize, emit_deltas: bool, blocks: usize) -> bool {
    let mut decoder = StreamDecoder::new(emit_deltas);
    let mut out = Vec::new();
    let mut message = None;
    for piece in bytes.chunks(chunk) {
        if decoder.feed(piece, &mut out).is_err() {
            return false;
        }
        for event in out.drain(..) {
            if let StreamEvent::Message(m) = event {
                message = Some(m);
            }
        }
    }
    matches!(message, Some(m) if m.content.len() == blocks && m.tool_input_errors.is_empty())
}

fn main() -> ExitCode {
    let (bytes, blocks) = stream();
    println!(
        "sse_parse: {:.1} MB stream, {} blocks, median of {} runs per cell",
        bytes.len() as f64 / 1e6,
        blocks,
        RUNS
    );
    println!("MB/s by thread CPU time (by wall time in brackets; the gap is machine load)");
    let head = ("chunk", "sse only", "stream() decode", "complete() decode");
    println!("{:>6} {:>20} {:>20} {:>20}", head.0, head.1, head.2, head.3);
    for chunk in CHUNK_SIZES {
        let cells = (
            measure(&bytes, chunk, sse_only),
            measure(&bytes, chunk, |b, c| decode(b, c, true, blocks)),
            measure(&bytes, chunk, |b, c| decode(b, c, false, blocks)),
        );
        let (Some(sse), Some(full), Some(quiet)) = cells else {
            eprintln!("sse_parse: decoding failed at chunk size {chunk}");
            return ExitCode::FAILURE;
        };
        let cell = |(cpu, wall): (f64, f64)| format!("{cpu:.0} ({wall:.0})");
        println!(
            "{chunk:>6} {:>20} {:>20} {:>20}",
            cell(sse),
            cell(full),
            cell(quiet)
        );
    }
    ExitCode::SUCCESS
}
