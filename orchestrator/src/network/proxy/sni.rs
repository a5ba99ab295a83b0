//! Reads the server name (SNI) from a TLS ClientHello, without a TLS library: the proxy
//! only needs to look at the first record a client sends through a tunnel, so it can
//! refuse a tunnel whose TLS names another host than the one it was opened for (domain
//! fronting). It also tells whether the hello is an encrypted one (ECH), whose real
//! server name is sealed for the server and hidden from the proxy.

/// What the first bytes of a tunnel are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FirstBytes {
    /// Too few bytes yet to tell; read more (at most [`MAX_RECORD`] in all).
    NeedMore,
    /// Not a TLS handshake record.
    NotTls,
    /// A ClientHello, with the server name it carries (none when it has no SNI), and
    /// whether it carries an `encrypted_client_hello` extension: its `server_name` is
    /// then only the outer one, and the name the server acts on is sealed inside.
    ClientHello {
        server_name: Option<String>,
        ech: bool,
    },
    /// A TLS handshake record that is not a well-formed ClientHello.
    Malformed(&'static str),
}

/// The largest TLS record (16 KiB of payload and its 5-byte header).
pub const MAX_RECORD: usize = 16384 + 5;

/// Classifies the bytes a client sent first.
pub fn inspect(buf: &[u8]) -> FirstBytes {
    match buf.first() {
        None => return FirstBytes::NeedMore,
        Some(0x16) => {}
        Some(_) => return FirstBytes::NotTls,
    }
    if buf.len() < 5 {
        return FirstBytes::NeedMore;
    }
    let len = usize::from(u16::from_be_bytes([buf[3], buf[4]]));
    if len > MAX_RECORD - 5 {
        return FirstBytes::Malformed("record longer than TLS allows");
    }
    if buf.len() < 5 + len {
        return FirstBytes::NeedMore;
    }
    match client_hello(&buf[5..5 + len]) {
        Ok((server_name, ech)) => FirstBytes::ClientHello { server_name, ech },
        Err(why) => FirstBytes::Malformed(why),
    }
}

/// The random of a TLS 1.3 HelloRetryRequest: a ServerHello carrying it asks the client
/// for a second ClientHello (RFC 8446, section 4.1.3).
const HELLO_RETRY_RANDOM: [u8; 32] = [
    0xCF, 0x21, 0xAD, 0x74, 0xE5, 0x9A, 0x61, 0x11, 0xBE, 0x1D, 0x8C, 0x02, 0x1E, 0x65, 0xB8, 0x91,
    0xC2, 0xA2, 0x11, 0x16, 0x7A, 0xBB, 0x8C, 0x5E, 0x07, 0x9E, 0x09, 0xE2, 0xC8, 0xA8, 0x33, 0x9C,
];

/// What a server's first bytes in a TLS tunnel say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerFirst {
    /// Too few bytes yet to tell.
    NeedMore,
    /// A HelloRetryRequest: the client's next flight holds a second ClientHello.
    HelloRetry,
    /// Anything else (a ServerHello, an alert, not TLS at all): the handshake goes on as
    /// the first ClientHello began it.
    Other,
}

/// Classifies a server's first bytes after the client's ClientHello: is it a
/// HelloRetryRequest? The ServerHello's first 38 bytes (type, length, version, random)
/// are gathered across handshake records, as a server may split it.
pub fn server_first(buf: &[u8]) -> ServerFirst {
    let mut handshake = Vec::new();
    let mut rest = buf;
    while handshake.len() < 38 {
        match rest.first() {
            None => return ServerFirst::NeedMore,
            Some(0x16) => {}
            Some(_) => return ServerFirst::Other,
        }
        if rest.len() < 5 {
            return ServerFirst::NeedMore;
        }
        let len = usize::from(u16::from_be_bytes([rest[3], rest[4]]));
        if rest.len() < 5 + len {
            // Enough of this record may be here already.
            handshake.extend_from_slice(&rest[5..]);
            return if handshake.len() >= 38 {
                decide(&handshake)
            } else {
                ServerFirst::NeedMore
            };
        }
        handshake.extend_from_slice(&rest[5..5 + len]);
        rest = &rest[5 + len..];
        if len == 0 {
            return ServerFirst::Other;
        }
    }
    decide(&handshake)
}

fn decide(handshake: &[u8]) -> ServerFirst {
    if handshake[0] == 2 && handshake[6..38] == HELLO_RETRY_RANDOM {
        ServerFirst::HelloRetry
    } else {
        ServerFirst::Other
    }
}

/// Classifies a client's flight after a HelloRetryRequest: [`inspect`] of what follows the
/// ChangeCipherSpec records a TLS 1.3 client may send first (middlebox compatibility).
pub fn second_hello(buf: &[u8]) -> FirstBytes {
    let mut rest = buf;
    while rest.first() == Some(&0x14) {
        if rest.len() < 5 {
            return FirstBytes::NeedMore;
        }
        let len = usize::from(u16::from_be_bytes([rest[3], rest[4]]));
        if rest.len() < 5 + len {
            return FirstBytes::NeedMore;
        }
        rest = &rest[5 + len..];
    }
    inspect(rest)
}

/// A HelloRetryRequest record, for tests of the tunnel's second look.
pub fn sample_hello_retry() -> Vec<u8> {
    let mut body = vec![0x03, 0x03];
    body.extend(HELLO_RETRY_RANDOM);
    body.push(0);
    body.extend([0x13, 0x01, 0x00]);
    body.extend([0x00, 0x06, 0x00, 0x2b, 0x00, 0x02, 0x03, 0x04]);
    let mut msg = vec![2u8];
    msg.extend(&u32::try_from(body.len()).unwrap_or(0).to_be_bytes()[1..]);
    msg.extend(body);
    let mut rec = vec![0x16, 0x03, 0x03];
    rec.extend(u16::try_from(msg.len()).unwrap_or(0).to_be_bytes());
    rec.extend(msg);
    rec
}

/// A cursor that fails instead of panicking on short input.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], &'static str> {
        if self.0.len() < n {
            return Err("truncated ClientHello");
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }
    fn u8(&mut self) -> Result<usize, &'static str> {
        Ok(usize::from(self.take(1)?[0]))
    }
    fn u16(&mut self) -> Result<usize, &'static str> {
        let b = self.take(2)?;
        Ok(usize::from(u16::from_be_bytes([b[0], b[1]])))
    }
    fn u24(&mut self) -> Result<usize, &'static str> {
        let b = self.take(3)?;
        Ok((usize::from(b[0]) << 16) | (usize::from(b[1]) << 8) | usize::from(b[2]))
    }
    fn vec8(&mut self) -> Result<&'a [u8], &'static str> {
        let n = self.u8()?;
        self.take(n)
    }
    fn vec16(&mut self) -> Result<&'a [u8], &'static str> {
        let n = self.u16()?;
        self.take(n)
    }
}

/// The `encrypted_client_hello` extension's code point (RFC 9849; also what clients send
/// as "GREASE", an extension that looks the same and seals nothing).
pub const ECH_EXTENSION: u16 = 0xfe0d;

/// Code points that seal the server name, counted as ECH: the standard one, the drafts'
/// (0xfe08 to 0xfe0c) and the older encrypted SNI (0xffce).
fn seals_the_name(kind: usize) -> bool {
    (0xfe08..=usize::from(ECH_EXTENSION)).contains(&kind) || kind == 0xffce
}

/// The SNI of a ClientHello handshake message (the record's payload), and whether it
/// carries the ECH extension. The message must fit in this first record: a client
/// splitting it is refused as malformed (fails closed).
fn client_hello(payload: &[u8]) -> Result<(Option<String>, bool), &'static str> {
    let mut r = Reader(payload);
    if r.u8()? != 1 {
        return Err("first handshake message is not a ClientHello");
    }
    let len = r.u24()?;
    let message = r.take(len)?;
    // Security: nothing may ride behind the hello in its record (a second hello there
    // would reach a server that asks again, unread).
    if !r.0.is_empty() {
        return Err("more than a ClientHello in its record");
    }
    let mut r = Reader(message);
    r.take(2 + 32)?; // legacy version, random
    r.vec8()?; // session id
    r.vec16()?; // cipher suites
    r.vec8()?; // compression methods
    if r.0.is_empty() {
        return Ok((None, false));
    }
    let mut exts = Reader(r.vec16()?);
    if !r.0.is_empty() {
        return Err("bytes after a ClientHello's extensions");
    }
    let (mut found, mut ech) = (None, false);
    while !exts.0.is_empty() {
        let kind = exts.u16()?;
        let data = exts.vec16()?;
        if kind == 0 {
            if found.is_some() {
                return Err("two server_name extensions");
            }
            found = Some(server_name(data)?);
        } else if seals_the_name(kind) {
            ech = true;
        }
    }
    Ok((found, ech))
}

fn server_name(data: &[u8]) -> Result<String, &'static str> {
    let mut list = Reader(Reader(data).vec16()?);
    let mut name = None;
    while !list.0.is_empty() {
        let kind = list.u8()?;
        let value = list.vec16()?;
        if kind == 0 {
            if name.is_some() {
                return Err("two host names in server_name");
            }
            let text = std::str::from_utf8(value).map_err(|_| "server name is not text")?;
            name = Some(text.to_string());
        }
    }
    name.ok_or("server_name without a host name")
}

/// A minimal, well-formed ClientHello record naming `sni` (or no name): for tests and
/// benchmarks that need a client's first bytes without a TLS stack.
pub fn sample_client_hello(sni: Option<&str>) -> Vec<u8> {
    sample_client_hello_with(sni, &[])
}

/// [`sample_client_hello`] with an `encrypted_client_hello` extension (an outer one, its
/// sealed payload random-looking bytes) after the outer `sni`.
pub fn sample_ech_client_hello(sni: Option<&str>) -> Vec<u8> {
    // type outer (0), HPKE KDF and AEAD ids, config id, enc (32 bytes), payload (64).
    let mut ech = vec![0x00, 0x00, 0x01, 0x00, 0x01, 0x2a, 0x00, 0x20];
    ech.extend([0x5au8; 32]);
    ech.extend([0x00, 0x40]);
    ech.extend([0xa5u8; 64]);
    sample_client_hello_with(sni, &[(ECH_EXTENSION, ech)])
}

#[allow(clippy::cast_possible_truncation)] // every length here is far below u16::MAX
fn sample_client_hello_with(sni: Option<&str>, extra: &[(u16, Vec<u8>)]) -> Vec<u8> {
    let mut exts = Vec::new();
    if let Some(name) = sni {
        let n = name.as_bytes();
        let mut list = vec![0u8];
        list.extend((n.len() as u16).to_be_bytes());
        list.extend(n);
        let mut data = (list.len() as u16).to_be_bytes().to_vec();
        data.extend(list);
        exts.extend(0u16.to_be_bytes());
        exts.extend((data.len() as u16).to_be_bytes());
        exts.extend(data);
    }
    exts.extend([0x00, 0x2b, 0x00, 0x03, 0x02, 0x03, 0x04]); // supported_versions
    for (kind, data) in extra {
        exts.extend(kind.to_be_bytes());
        exts.extend((data.len() as u16).to_be_bytes());
        exts.extend(data);
    }
    let mut body = vec![0x03, 0x03];
    body.extend([7u8; 32]);
    body.push(0);
    body.extend([0x00, 0x02, 0x13, 0x01]);
    body.extend([0x01, 0x00]);
    body.extend((exts.len() as u16).to_be_bytes());
    body.extend(exts);
    let mut msg = vec![1u8];
    msg.extend(&(body.len() as u32).to_be_bytes()[1..]);
    msg.extend(body);
    let mut rec = vec![0x16, 0x03, 0x01];
    rec.extend((msg.len() as u16).to_be_bytes());
    rec.extend(msg);
    rec
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hello(sni: Option<&str>) -> Vec<u8> {
        sample_client_hello(sni)
    }

    #[test]
    fn reads_the_server_name() {
        let h = hello(Some("pypi.org"));
        assert_eq!(
            inspect(&h),
            FirstBytes::ClientHello {
                server_name: Some("pypi.org".into()),
                ech: false,
            }
        );
        assert_eq!(
            inspect(&hello(None)),
            FirstBytes::ClientHello {
                server_name: None,
                ech: false,
            }
        );
    }

    #[test]
    fn earlier_code_points_that_seal_the_name_count_as_ech() {
        for kind in [0xfe08u16, 0xfe0c, 0xffce] {
            let h = sample_client_hello_with(Some("pypi.org"), &[(kind, vec![0; 8])]);
            assert!(
                matches!(inspect(&h), FirstBytes::ClientHello { ech: true, .. }),
                "{kind:#x}"
            );
        }
        let h = sample_client_hello_with(Some("pypi.org"), &[(0xfe07, vec![0; 8])]);
        assert!(matches!(
            inspect(&h),
            FirstBytes::ClientHello { ech: false, .. }
        ));
    }

    #[test]
    fn nothing_may_follow_the_hello_in_its_record() {
        // A second (encrypted) hello behind a plain one, in the same record.
        let first = hello(Some("pypi.org"));
        let second = sample_ech_client_hello(Some("pypi.org"));
        let mut rec = first.clone();
        rec.extend(&second[5..]);
        let len = u16::try_from(rec.len() - 5).unwrap();
        rec[3..5].copy_from_slice(&len.to_be_bytes());
        assert_eq!(
            inspect(&rec),
            FirstBytes::Malformed("more than a ClientHello in its record")
        );
        // Bytes after the extensions, inside the message.
        let mut rec = first;
        rec.extend([0u8; 3]);
        let len = u16::try_from(rec.len() - 5).unwrap();
        rec[3..5].copy_from_slice(&len.to_be_bytes());
        let msg = u32::try_from(rec.len() - 9).unwrap().to_be_bytes();
        rec[6..9].copy_from_slice(&msg[1..]);
        assert_eq!(
            inspect(&rec),
            FirstBytes::Malformed("bytes after a ClientHello's extensions")
        );
    }

    #[test]
    fn an_encrypted_hello_is_told_with_its_outer_name() {
        assert_eq!(
            inspect(&sample_ech_client_hello(Some("pypi.org"))),
            FirstBytes::ClientHello {
                server_name: Some("pypi.org".into()),
                ech: true,
            }
        );
        assert_eq!(
            inspect(&sample_ech_client_hello(None)),
            FirstBytes::ClientHello {
                server_name: None,
                ech: true,
            }
        );
    }

    #[test]
    fn partial_records_ask_for_more() {
        let h = hello(Some("pypi.org"));
        for cut in [0, 1, 4, 5, h.len() - 1] {
            assert_eq!(inspect(&h[..cut]), FirstBytes::NeedMore, "{cut}");
        }
    }

    #[test]
    fn other_protocols_and_garbage_are_told_apart() {
        assert_eq!(inspect(b"GET / HTTP/1.1\r\n"), FirstBytes::NotTls);
        let mut h = hello(Some("pypi.org"));
        h[5] = 2; // a ServerHello
        assert!(matches!(inspect(&h), FirstBytes::Malformed(_)));
        let mut h = hello(Some("pypi.org"));
        let last = h.len() - 9;
        h.truncate(last);
        let len = u16::try_from(h.len() - 5).unwrap();
        h[3..5].copy_from_slice(&len.to_be_bytes());
        assert!(matches!(inspect(&h), FirstBytes::Malformed(_)));
    }
}
