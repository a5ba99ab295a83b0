//! The egress proxy's cost, side by side with a direct connection in the same run, on the
//! benchmark's own private internet (a veth address in its own namespaces, no host
//! network): an HTTP server on 203.0.113.10 and the proxy on 127.0.0.1, both on one
//! multi-threaded runtime, as the orchestrator runs it.
//! - throughput of a 100 MB download through the proxy (CONNECT tunnel) vs direct;
//!   target ≥ 0.8× direct;
//! - connect latency p50: TCP connect + a tiny request/response, through the proxy
//!   (CONNECT, policy, resolution, dial) vs direct; target ≤ 1 ms added;
//! - the same 100 MB as a user's program fetches it: curl in a process of its own, the
//!   server on a thread of its own, direct vs through the proxy (tunnel and plain HTTP).
//!
//! Run as root: `cargo bench -p cordon-tests --bench network_proxy`.
#![allow(clippy::cast_possible_truncation, clippy::cast_precision_loss)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cordon::network::NetworkPolicy;
use cordon::network::policy::DomainRule;
use cordon::network::proxy::Proxy;
use cordon::network::proxy::dial::StaticResolver;
use cordon::network::proxy::record::MemoryLog;
use cordon_tests::net::{self, SERVER, read_head};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const SIZE: usize = 100 * 1000 * 1000;
/// Downloads each way, alternating; `CORDON_BENCH_DOWNLOADS` overrides (the direct pair's
/// own time varies by a third between downloads on two cores, so more give a steadier median).
const DOWNLOADS: usize = 15;
const CONNECTS: usize = 300;

fn main() {
    let server = SocketAddr::new(IpAddr::V4(SERVER), 80);
    let _resolv = net::enter(&[server.ip()], None);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        net::http_server(server, SIZE).await;
        let proxy = start_proxy().await;
        let downloads = std::env::var("CORDON_BENCH_DOWNLOADS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(DOWNLOADS);
        println!("network_proxy: {} MB downloads x{downloads}, {CONNECTS} connects, alternating", SIZE / 1_000_000);
        let (mut direct, mut proxied) = (Vec::new(), Vec::new());
        for _ in 0..downloads {
            direct.push(download(server, None).await);
            proxied.push(download(server, Some(proxy)).await);
        }
        let (d, p) = (median(&mut direct), median(&mut proxied));
        let mbps = |t: Duration| SIZE as f64 / t.as_secs_f64() / 1e6;
        println!(
            "download 100 MB median: direct {:.0} ms ({:.0} MB/s), proxy {:.0} ms ({:.0} MB/s); proxy/direct throughput {:.2}x (target >= 0.8x)",
            d.as_secs_f64() * 1e3,
            mbps(d),
            p.as_secs_f64() * 1e3,
            mbps(p),
            d.as_secs_f64() / p.as_secs_f64()
        );
        separate_processes(proxy, downloads).await;
        let (mut direct, mut proxied) = (Vec::new(), Vec::new());
        for _ in 0..CONNECTS {
            direct.push(small_request(server, None).await);
            proxied.push(small_request(server, Some(proxy)).await);
        }
        let (d50, p50) = (median(&mut direct), median(&mut proxied));
        println!(
            "connect + small request p50: direct {:.0} us, proxy {:.0} us; added {:.0} us (target <= 1000 us); p99 direct {:.0} us, proxy {:.0} us",
            d50.as_secs_f64() * 1e6,
            p50.as_secs_f64() * 1e6,
            (p50.as_secs_f64() - d50.as_secs_f64()) * 1e6,
            pct(&direct, 99).as_secs_f64() * 1e6,
            pct(&proxied, 99).as_secs_f64() * 1e6,
        );
    });
}

/// The same download as a user's program makes it: curl, a process of its own, against a
/// server on a thread and runtime of its own (a remote server shares nothing with the
/// proxy), through the proxy on this runtime as cordon runs it: in a CONNECT tunnel
/// (`--proxytunnel`, curl's way for HTTPS) and forwarded as plain HTTP. Curl's own
/// start-up is left out: its `time_total` is from its connect to the last byte.
async fn separate_processes(proxy: SocketAddr, downloads: usize) {
    if which("curl").is_none() {
        println!("curl is not installed: the separate-process figures are skipped");
        return;
    }
    let server = SocketAddr::new(IpAddr::V4(SERVER), 8080);
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            net::http_server(server, SIZE).await;
            ready_tx.send(()).unwrap();
            std::future::pending::<()>().await;
        });
    });
    ready_rx.recv().unwrap();
    let direct_url = format!("http://{server}/big");
    let proxied_url = "http://bench.test:8080/big".to_string();
    let via = format!("http://{proxy}");
    let (mut direct, mut tunnel, mut forward) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..downloads {
        direct.push(curl(&direct_url, &[]).await);
        tunnel.push(curl(&proxied_url, &["--proxytunnel", "-x", &via]).await);
        forward.push(curl(&proxied_url, &["-x", &via]).await);
    }
    let (d, t, f) = (
        median(&mut direct),
        median(&mut tunnel),
        median(&mut forward),
    );
    let mbps = |t: Duration| SIZE as f64 / t.as_secs_f64() / 1e6;
    println!(
        "separate processes (curl; server on its own thread): direct {:.0} MB/s, CONNECT tunnel {:.0} MB/s ({:.2}x), plain-HTTP forward {:.0} MB/s ({:.2}x) (target >= 0.8x)",
        mbps(d),
        mbps(t),
        d.as_secs_f64() / t.as_secs_f64(),
        mbps(f),
        d.as_secs_f64() / f.as_secs_f64(),
    );
}

/// curl's transfer time for `url` (to /dev/null), `extra` its further flags.
async fn curl(url: &str, extra: &[&str]) -> Duration {
    let out = tokio::process::Command::new("curl")
        .args(["-sS", "-o", "/dev/null", "-w", "%{time_total}"])
        .args(extra)
        .arg(url)
        .output()
        .await
        .unwrap();
    assert!(out.status.success(), "curl {url} {extra:?}: {out:?}");
    let secs: f64 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    Duration::from_secs_f64(secs)
}

fn which(program: &str) -> Option<std::path::PathBuf> {
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

async fn start_proxy() -> SocketAddr {
    let policy = NetworkPolicy {
        allowed: vec![DomainRule::parse("bench.test", "bench").unwrap()],
        denied: Vec::new(),
        allow_local_binding: false,
        allow_encrypted_client_hello: false,
    };
    let names = StaticResolver(HashMap::from([(
        "bench.test".to_string(),
        vec![IpAddr::V4(SERVER)],
    )]));
    let proxy = Proxy::new(
        "bench",
        policy,
        Arc::new(names),
        Arc::new(MemoryLog::default()),
    );
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(proxy.serve_tcp(listener, std::future::pending()));
    addr
}

/// A connection to the server, direct or through a CONNECT tunnel.
async fn open(server: SocketAddr, proxy: Option<SocketAddr>) -> TcpStream {
    let Some(proxy) = proxy else {
        let s = TcpStream::connect(server).await.unwrap();
        s.set_nodelay(true).unwrap();
        return s;
    };
    let mut s = TcpStream::connect(proxy).await.unwrap();
    s.set_nodelay(true).unwrap();
    s.write_all(b"CONNECT bench.test:80 HTTP/1.1\r\nHost: bench.test:80\r\n\r\n")
        .await
        .unwrap();
    let head = read_head(&mut s).await;
    assert!(
        head.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&head)
    );
    s
}

async fn download(server: SocketAddr, proxy: Option<SocketAddr>) -> Duration {
    let start = Instant::now();
    let mut s = open(server, proxy).await;
    s.write_all(b"GET /big HTTP/1.1\r\nHost: bench.test\r\n\r\n")
        .await
        .unwrap();
    let mut buf = vec![0u8; 1 << 18];
    let mut total = 0usize;
    loop {
        let n = s.read(&mut buf).await.unwrap();
        if n == 0 {
            break;
        }
        total += n;
    }
    let elapsed = start.elapsed();
    assert!(total > SIZE, "short download: {total}");
    elapsed
}

async fn small_request(server: SocketAddr, proxy: Option<SocketAddr>) -> Duration {
    let start = Instant::now();
    let mut s = open(server, proxy).await;
    s.write_all(b"GET /s HTTP/1.1\r\nHost: bench.test\r\n\r\n")
        .await
        .unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).await.unwrap();
    let elapsed = start.elapsed();
    assert!(out.starts_with(b"HTTP/1.1 200"));
    elapsed
}

fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn pct(v: &[Duration], p: usize) -> Duration {
    let mut v = v.to_vec();
    v.sort();
    v[(v.len() * p / 100).min(v.len() - 1)]
}
