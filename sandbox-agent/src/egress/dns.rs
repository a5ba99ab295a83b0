//! The sandbox's DNS stub on 127.0.0.1:53 (UDP).
//!
//! A name the policy allows gets [`PLACEHOLDER_V4`] (an A query) or an empty answer (any
//! other type); every other name gets REFUSED. Nothing is ever forwarded, so a query is
//! never a channel out (DNS exfiltration), and no real address is needed: connections go
//! through the proxy, which resolves the name itself on the host. The placeholder lies in
//! a benchmarking range (198.18.0.0/15) that no route inside the sandbox reaches and that
//! the proxy refuses, so a tool that resolves and then connects directly fails closed,
//! and tools that check "does this name resolve" before using the proxy work.

use std::net::{Ipv4Addr, SocketAddr};

use tokio::net::UdpSocket;

use super::policy::NetworkPolicy;

/// The sandbox's /etc/resolv.conf when the stub serves.
pub const RESOLV_CONF: &str = "nameserver 127.0.0.1\noptions attempts:1\n";

/// The address allowed names resolve to inside the sandbox.
pub const PLACEHOLDER_V4: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);

const TYPE_A: u16 = 1;
const CLASS_IN: u16 = 1;
const RCODE_FORMERR: u8 = 1;
const RCODE_REFUSED: u8 = 5;
const RCODE_NOTIMP: u8 = 4;

/// Binds the stub's socket (call before confinement).
pub fn bind(addr: SocketAddr) -> std::io::Result<std::net::UdpSocket> {
    let socket = std::net::UdpSocket::bind(addr)?;
    socket.set_nonblocking(true)?;
    Ok(socket)
}

/// Answers queries until the task is dropped.
pub async fn serve(socket: UdpSocket, policy: NetworkPolicy) {
    let mut buf = [0u8; 512];
    loop {
        let Ok((n, peer)) = socket.recv_from(&mut buf).await else {
            continue;
        };
        if let Some(reply) = answer(&buf[..n], &policy) {
            let _ = socket.send_to(&reply, peer).await;
        }
    }
}

/// One parsed question.
#[derive(Debug, PartialEq, Eq)]
struct Question {
    name: String,
    qtype: u16,
    qclass: u16,
    /// Where the question ends in the query.
    end: usize,
}

fn question(q: &[u8]) -> Option<Question> {
    let mut labels = Vec::new();
    let mut i = 12;
    loop {
        let len = usize::from(*q.get(i)?);
        i += 1;
        if len == 0 {
            break;
        }
        // Compression pointers (and the reserved label types) never appear in a query.
        if len > 63 {
            return None;
        }
        let label = q.get(i..i + len)?;
        labels.push(std::str::from_utf8(label).ok()?.to_string());
        i += len;
    }
    let field = |at: usize| Some(u16::from_be_bytes([*q.get(at)?, *q.get(at + 1)?]));
    Some(Question {
        name: labels.join("."),
        qtype: field(i)?,
        qclass: field(i + 2)?,
        end: i + 4,
    })
}

/// The reply to one query, or `None` for what is not a query at all.
pub fn answer(q: &[u8], policy: &NetworkPolicy) -> Option<Vec<u8>> {
    if q.len() < 12 || q[2] & 0x80 != 0 {
        return None;
    }
    let opcode = (q[2] >> 3) & 0x0f;
    let qdcount = u16::from_be_bytes([q[4], q[5]]);
    let header = |rcode: u8, qd: u16, an: u16| {
        let mut h = vec![q[0], q[1], 0x80 | (q[2] & 0x79), 0x80 | rcode];
        h.extend(qd.to_be_bytes());
        h.extend(an.to_be_bytes());
        h.extend([0, 0, 0, 0]);
        h
    };
    if opcode != 0 {
        return Some(header(RCODE_NOTIMP, 0, 0));
    }
    let Some(question) = question(q).filter(|_| qdcount == 1) else {
        return Some(header(RCODE_FORMERR, 0, 0));
    };
    let echoed = &q[12..question.end];
    if question.qclass != CLASS_IN || !policy.name_may_resolve(&question.name) {
        let mut r = header(RCODE_REFUSED, 1, 0);
        r.extend_from_slice(echoed);
        return Some(r);
    }
    let a = question.qtype == TYPE_A;
    let mut r = header(0, 1, u16::from(a));
    r.extend_from_slice(echoed);
    if a {
        // A pointer to the question's name, IN A, a short TTL, the placeholder.
        r.extend([0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 30, 0, 4]);
        r.extend(PLACEHOLDER_V4.octets());
    }
    Some(r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::egress::policy::DomainRule;

    fn query(name: &str, qtype: u16) -> Vec<u8> {
        let mut q = vec![0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
        for label in name.split('.') {
            q.push(u8::try_from(label.len()).unwrap());
            q.extend(label.as_bytes());
        }
        q.push(0);
        q.extend(qtype.to_be_bytes());
        q.extend(CLASS_IN.to_be_bytes());
        q
    }

    fn policy() -> NetworkPolicy {
        NetworkPolicy {
            allowed: vec![DomainRule::parse("*.pypi.org", "t").unwrap()],
            denied: vec![],
            allow_local_binding: false,
            allow_encrypted_client_hello: false,
        }
    }

    #[test]
    fn allowed_names_get_the_placeholder() {
        let r = answer(&query("files.pypi.org", TYPE_A), &policy()).unwrap();
        assert_eq!(&r[..2], &[0x12, 0x34]);
        assert_eq!(r[3] & 0x0f, 0, "rcode");
        assert_eq!(u16::from_be_bytes([r[6], r[7]]), 1, "one answer");
        assert_eq!(&r[r.len() - 4..], &PLACEHOLDER_V4.octets());
        let r = answer(&query("files.pypi.org", 28), &policy()).unwrap();
        assert_eq!((r[3] & 0x0f, r[7]), (0, 0), "AAAA: no data");
    }

    #[test]
    fn other_names_are_refused_and_nothing_is_forwarded() {
        for name in ["evil.org", "c2VjcmV0.exfil.evil.org", "pypi.org"] {
            let r = answer(&query(name, TYPE_A), &policy()).unwrap();
            assert_eq!(r[3] & 0x0f, RCODE_REFUSED, "{name}");
            assert_eq!(r[7], 0, "{name}: no answer");
        }
    }

    #[test]
    fn malformed_queries_get_formerr_and_responses_nothing() {
        let mut q = query("files.pypi.org", TYPE_A);
        q.truncate(20);
        assert_eq!(answer(&q, &policy()).unwrap()[3] & 0x0f, RCODE_FORMERR);
        let mut q = query("files.pypi.org", TYPE_A);
        q[2] |= 0x80;
        assert_eq!(answer(&q, &policy()), None);
        assert_eq!(answer(&[0; 5], &policy()), None);
    }
}
