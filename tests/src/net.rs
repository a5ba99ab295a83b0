//! A private internet for the network tests: a thread moved into fresh network and mount
//! namespaces, with `lo` up, an interface (one end of a veth pair) holding the test's addresses, a
//! resolv.conf of the test's own bound over /etc/resolv.conf (in that mount namespace
//! only), and small HTTP and DNS servers bound to those addresses. Processes started
//! from that thread (`cordon`, the sandbox launcher) inherit all of it; the host's
//! network and resolver are never touched. Needs root, as the project's tests run.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UdpSocket};

/// The test internet's web server address.
pub const SERVER: Ipv4Addr = Ipv4Addr::new(203, 0, 113, 10);
/// The test internet's DNS server address.
pub const DNS: Ipv4Addr = Ipv4Addr::new(203, 0, 113, 53);

/// Runs `body` on a thread in fresh network and mount namespaces where `addrs` are local
/// addresses and /etc/resolv.conf names `resolver` (when given).
pub fn run<F, Fut>(addrs: &[IpAddr], resolver: Option<IpAddr>, body: F)
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = ()>,
{
    let addrs = addrs.to_vec();
    let joined = std::thread::spawn(move || {
        let _resolv_conf = enter(&addrs, resolver);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(body());
    })
    .join();
    if let Err(panic) = joined {
        std::panic::resume_unwind(panic);
    }
}

/// Moves the calling thread into new namespaces and sets them up. unshare(2) acts on the
/// calling thread only, so the rest of the test process keeps the host's; threads and
/// processes started from this thread afterwards inherit its namespaces (a benchmark
/// builds its multi-threaded runtime after this). Keep the returned file while the
/// namespace is used. A mount namespace only with a `resolver` (for its resolv.conf):
/// without one the thread keeps the host's mounts, and so sees mounts made after it
/// started (a Docker container's root, which the warm pool's claim writes into).
pub fn enter(addrs: &[IpAddr], resolver: Option<IpAddr>) -> Option<tempfile::NamedTempFile> {
    use nix::mount::{MsFlags, mount};
    use nix::sched::{CloneFlags, unshare};
    let mut flags = CloneFlags::CLONE_NEWNET;
    if resolver.is_some() {
        flags |= CloneFlags::CLONE_NEWNS | CloneFlags::CLONE_FS;
    }
    unshare(flags).expect("unshare: the network tests need root");
    if resolver.is_some() {
        mount(
            None::<&str>,
            "/",
            None::<&str>,
            MsFlags::MS_REC | MsFlags::MS_PRIVATE,
            None::<&str>,
        )
        .expect("making / private in the test's mount namespace");
    }
    ip(&["link", "set", "lo", "up"]);
    // A veth pair stands for the outside link (this kernel has no dummy driver); the
    // addresses sit on one end, and being local they are reached without any route.
    ip(&[
        "link", "add", "cordon0", "type", "veth", "peer", "name", "cordon1",
    ]);
    ip(&["link", "set", "cordon0", "up"]);
    ip(&["link", "set", "cordon1", "up"]);
    for a in addrs {
        let cidr = match a {
            IpAddr::V4(_) => format!("{a}/32"),
            IpAddr::V6(_) => format!("{a}/128"),
        };
        ip(&["addr", "add", &cidr, "dev", "cordon0"]);
    }
    let ns = resolver?;
    // Kept (not unlinked) while the namespace lives: the kernel refuses to mount over an
    // unlinked file, which the sandbox's own resolv.conf mount would be.
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        file.path(),
        format!("nameserver {ns}\noptions attempts:1\n"),
    )
    .unwrap();
    mount(
        Some(file.path()),
        "/etc/resolv.conf",
        None::<&str>,
        MsFlags::MS_BIND,
        None::<&str>,
    )
    .expect("binding the test's resolv.conf");
    Some(file)
}

fn ip(args: &[&str]) {
    let status = Command::new("ip").args(args).status().expect("running ip");
    assert!(status.success(), "ip {args:?} failed");
}

/// Serves DNS on `addr:53`: A records from `names`, NXDOMAIN for the rest. Keeps the
/// names it was asked.
pub async fn dns_server(addr: IpAddr, names: HashMap<String, Ipv4Addr>) -> Arc<Mutex<Vec<String>>> {
    let socket = UdpSocket::bind(SocketAddr::new(addr, 53)).await.unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let asked = seen.clone();
    tokio::spawn(async move {
        let mut buf = [0u8; 512];
        while let Ok((n, peer)) = socket.recv_from(&mut buf).await {
            if let Some((name, reply)) = dns_reply(&buf[..n], &names) {
                asked.lock().unwrap().push(name);
                let _ = socket.send_to(&reply, peer).await;
            }
        }
    });
    seen
}

fn dns_reply(q: &[u8], names: &HashMap<String, Ipv4Addr>) -> Option<(String, Vec<u8>)> {
    let mut labels = Vec::new();
    let mut i = 12;
    loop {
        let len = usize::from(*q.get(i)?);
        i += 1;
        if len == 0 {
            break;
        }
        labels.push(String::from_utf8_lossy(q.get(i..i + len)?).to_lowercase());
        i += len;
    }
    let qtype = u16::from_be_bytes([*q.get(i)?, *q.get(i + 1)?]);
    let end = i + 4;
    let name = labels.join(".");
    let found = names.get(&name);
    let rcode = if found.is_some() { 0 } else { 3 };
    let answer = found.filter(|_| qtype == 1);
    let mut r = vec![q[0], q[1], 0x84 | (q[2] & 0x01), 0x80 | rcode, 0, 1, 0];
    r.push(u8::from(answer.is_some()));
    r.extend([0, 0, 0, 0]);
    r.extend_from_slice(q.get(12..end)?);
    if let Some(ip) = answer {
        r.extend([0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 5, 0, 4]);
        r.extend(ip.octets());
    }
    Some((name, r))
}

/// Answers every HTTP request on `addr` with its Host header and path (and a body of
/// `size` bytes of `x` when the path is `/big`).
pub async fn http_server(addr: SocketAddr, size: usize) {
    let listener = TcpListener::bind(addr).await.unwrap();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            tokio::spawn(async move {
                let head = read_head(&mut s).await;
                let text = String::from_utf8_lossy(&head).to_string();
                let path = text.split(' ').nth(1).unwrap_or("").to_string();
                let host = text
                    .lines()
                    .find_map(|l| l.strip_prefix("Host: "))
                    .unwrap_or("")
                    .to_string();
                if path == "/big" {
                    let head = format!(
                        "HTTP/1.1 200 OK\r\nContent-Length: {size}\r\nConnection: close\r\n\r\n"
                    );
                    let _ = s.write_all(head.as_bytes()).await;
                    let chunk = vec![b'x'; 1 << 16];
                    let mut left = size;
                    while left > 0 {
                        let n = left.min(chunk.len());
                        if s.write_all(&chunk[..n]).await.is_err() {
                            return;
                        }
                        left -= n;
                    }
                    return;
                }
                let body = format!("host={host} path={path}");
                let resp = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = s.write_all(resp.as_bytes()).await;
            });
        }
    });
}

/// Echoes every byte back on `addr`, counting what it received.
pub async fn echo_server(addr: SocketAddr) -> Arc<AtomicU64> {
    let seen = Arc::new(AtomicU64::new(0));
    let listener = TcpListener::bind(addr).await.unwrap();
    let counter = seen.clone();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let counter = counter.clone();
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                while let Ok(n) = s.read(&mut buf).await {
                    if n == 0 || s.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                    counter.fetch_add(n as u64, Ordering::SeqCst);
                }
            });
        }
    });
    seen
}

/// Serves `files` (path → body) on `addr`, over TLS when `tls` is given: one request per
/// connection, the query string ignored, 404 for any other path; directories (a path
/// ending in `/`) are HTML, other UTF-8 bodies text. Keeps every request's
/// head (method, path, headers) as text, in order.
pub async fn file_server(
    addr: SocketAddr,
    files: HashMap<String, Vec<u8>>,
    tls: Option<tokio_rustls::TlsAcceptor>,
) -> Arc<Mutex<Vec<String>>> {
    let listener = TcpListener::bind(addr).await.unwrap();
    let files = Arc::new(files);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let heads = seen.clone();
    tokio::spawn(async move {
        while let Ok((s, _)) = listener.accept().await {
            let (files, heads, tls) = (files.clone(), heads.clone(), tls.clone());
            tokio::spawn(async move {
                match tls {
                    Some(tls) => {
                        if let Ok(s) = tls.accept(s).await {
                            serve_file(s, &files, &heads).await;
                        }
                    }
                    None => serve_file(s, &files, &heads).await,
                }
            });
        }
    });
    seen
}

async fn serve_file<S: AsyncReadExt + AsyncWriteExt + Unpin>(
    mut s: S,
    files: &HashMap<String, Vec<u8>>,
    heads: &Mutex<Vec<String>>,
) {
    let head = String::from_utf8_lossy(&read_head(&mut s).await).into_owned();
    let target = head.split(' ').nth(1).unwrap_or("").to_string();
    let path = target.split('?').next().unwrap_or("").to_string();
    heads.lock().unwrap().push(head);
    let (status, body) = match files.get(&path) {
        Some(body) => ("200 OK", body.as_slice()),
        None => ("404 Not Found", &b""[..]),
    };
    let kind = if path.ends_with('/') {
        "text/html"
    } else if std::str::from_utf8(body).is_ok() {
        "text/plain"
    } else {
        "application/octet-stream"
    };
    let reply = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    if s.write_all(reply.as_bytes()).await.is_ok() && s.write_all(body).await.is_ok() {
        let _ = s.shutdown().await;
    }
}

/// Reads one request or response head (through the blank line), byte by byte so nothing
/// after it is consumed.
pub async fn read_head<S: AsyncReadExt + Unpin>(s: &mut S) -> Vec<u8> {
    let mut buf = Vec::new();
    while !buf.ends_with(b"\r\n\r\n") {
        let mut b = [0u8; 1];
        if s.read(&mut b).await.unwrap_or(0) == 0 {
            break;
        }
        buf.push(b[0]);
    }
    buf
}

/// Everything until the peer closes, as text.
pub async fn read_all(mut s: TcpStream) -> String {
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out).await;
    String::from_utf8_lossy(&out).to_string()
}

/// A policy allowing `allowed` and denying `denied` (each entry its own source name), no
/// local binding: what the network tests hand the proxy.
pub fn policy(allowed: &[&str], denied: &[&str]) -> cordon::network::NetworkPolicy {
    let rules = |l: &[&str]| {
        l.iter()
            .map(|d| cordon::network::policy::DomainRule::parse(d, *d).expect("a domain rule"))
            .collect()
    };
    cordon::network::NetworkPolicy {
        allowed: rules(allowed),
        denied: rules(denied),
        allow_local_binding: false,
        allow_encrypted_client_hello: false,
    }
}

/// The shell functions a sandboxed check script starts with: `check NAME CMD...` prints
/// one `CHECK NAME rc=N out=...` line, `code URL` prints curl's HTTP status.
pub const CHECK_PRELUDE: &str = r#"
check() { name=$1; shift; out=$("$@" 2>&1); rc=$?; echo "CHECK $name rc=$rc out=$(echo "$out" | tr '\n' ' ')"; }
code() { curl -sS -o /dev/null -w '%{http_code}' "$@"; }
"#;

/// The `CHECK` lines of a script's output: each check's exit code and output, by name.
pub fn parse_checks(stdout: &str) -> HashMap<String, (i32, String)> {
    stdout
        .lines()
        .filter_map(|l| l.strip_prefix("CHECK "))
        .filter_map(|l| {
            let (name, rest) = l.split_once(" rc=")?;
            let (rc, out) = rest.split_once(" out=")?;
            Some((name.to_string(), (rc.parse().ok()?, out.trim().to_string())))
        })
        .collect()
}

/// Every file beneath `dir` (links not followed).
pub fn files_under(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            match e.file_type() {
                Ok(t) if t.is_dir() => stack.push(e.path()),
                Ok(_) => out.push(e.path()),
                Err(_) => {}
            }
        }
    }
    out
}

/// The egress records of every session under `home` (`*.egress.jsonl`, beside each
/// transcript), one JSON value per connection.
pub fn egress_records(home: &std::path::Path) -> Vec<serde_json::Value> {
    files_under(home)
        .into_iter()
        .filter(|p| p.to_string_lossy().ends_with(".egress.jsonl"))
        .flat_map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            text.lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect::<Vec<_>>()
        })
        .collect()
}
