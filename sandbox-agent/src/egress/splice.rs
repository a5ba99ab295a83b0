//! Relaying between two sockets with splice(2): each direction moves its bytes from one
//! socket into a pipe and from the pipe into the other socket inside the kernel, so a
//! tunnel's payload never crosses into the relay's memory (a read and a write each way
//! would copy every byte twice more). Used by the egress proxy (sandbox's end to the
//! upstream server) and by the agent's loopback bridge (a command's TCP connection to the
//! proxy's Unix socket), both TCP and Unix stream sockets.
//!
//! Each direction ends at its source's end of file by shutting down the other socket's
//! writing half (as `tokio::io::copy_bidirectional` does); the relay ends when both have,
//! or at the first error either way.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use tokio::io::{Interest, Ready};

/// Bytes one splice call moves at most, and the pipe capacity asked for (the kernel
/// keeps its default, 64 KiB, when it refuses: `fs.pipe-max-size`, or a pipe-buffer quota).
const CHUNK: usize = 1 << 20;

/// A socket the relay can wait on and splice to or from.
pub trait SpliceSocket: AsRawFd {
    fn ready(&self, interest: Interest) -> impl Future<Output = io::Result<Ready>> + Send;
    fn try_io<R>(&self, interest: Interest, f: impl FnOnce() -> io::Result<R>) -> io::Result<R>;
}

macro_rules! splice_socket {
    ($t:ty) => {
        impl SpliceSocket for $t {
            fn ready(&self, interest: Interest) -> impl Future<Output = io::Result<Ready>> + Send {
                <$t>::ready(self, interest)
            }
            fn try_io<R>(
                &self,
                interest: Interest,
                f: impl FnOnce() -> io::Result<R>,
            ) -> io::Result<R> {
                <$t>::try_io(self, interest, f)
            }
        }
    };
}

splice_socket!(tokio::net::TcpStream);
splice_socket!(tokio::net::UnixStream);

/// Relays both ways between `a` and `b` until each side has ended; returns the bytes
/// moved from `a` to `b` and from `b` to `a`.
pub async fn relay<A: SpliceSocket + Sync, B: SpliceSocket + Sync>(
    a: &A,
    b: &B,
) -> io::Result<(u64, u64)> {
    let (ab, ba) = (Pipe::new()?, Pipe::new()?);
    futures::future::try_join(pump(a, b, &ab), pump(b, a, &ba)).await
}

/// Relays `from` to `to` only, until `from` ends (then ends `to`'s writing half); the
/// bytes moved. What `to` sends meanwhile stays unread.
pub async fn one_way<A: SpliceSocket, B: SpliceSocket>(from: &A, to: &B) -> io::Result<u64> {
    pump(from, to, &Pipe::new()?).await
}

/// A pipe's two ends, non-blocking.
struct Pipe {
    read: OwnedFd,
    write: OwnedFd,
}

impl Pipe {
    fn new() -> io::Result<Pipe> {
        let mut fds = [0 as RawFd; 2];
        // SAFETY: pipe2 writes two descriptors into the two-element array it is given.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: both descriptors were just created by pipe2 and are owned by nobody else.
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        // A larger pipe moves more per call; refused, the default size still works.
        #[allow(clippy::cast_possible_wrap, clippy::cast_possible_truncation)]
        // SAFETY: F_SETPIPE_SZ on a pipe we own takes an integer and touches no memory.
        unsafe {
            libc::fcntl(write.as_raw_fd(), libc::F_SETPIPE_SZ, CHUNK as libc::c_int);
        }
        Ok(Pipe { read, write })
    }
}

/// One splice call, non-blocking on the pipe (the sockets are non-blocking already).
fn splice(from: RawFd, to: RawFd, len: usize) -> io::Result<usize> {
    // SAFETY: splice takes two descriptors we hold open for the call and null offsets
    // (sockets and pipes have none); it reads and writes no memory of ours.
    let n = unsafe {
        libc::splice(
            from,
            std::ptr::null_mut(),
            to,
            std::ptr::null_mut(),
            len,
            libc::SPLICE_F_MOVE | libc::SPLICE_F_NONBLOCK,
        )
    };
    usize::try_from(n).map_err(|_| io::Error::last_os_error())
}

/// Moves `from`'s bytes to `to` until `from` ends, then ends `to`'s writing half.
async fn pump<F: SpliceSocket, T: SpliceSocket>(from: &F, to: &T, pipe: &Pipe) -> io::Result<u64> {
    let mut total = 0u64;
    loop {
        // `ready` on a ready socket returns at once and counts against no task budget: a
        // relay whose two sides stay ready would never yield, and hold a one-worker
        // runtime (the agent's, a `cordon run`'s) from every other task until it ends.
        tokio::task::consume_budget().await;
        // The pipe is empty here: the socket's bytes go in, as many as are queued.
        let n = loop {
            from.ready(Interest::READABLE).await?;
            match from.try_io(Interest::READABLE, || {
                splice(from.as_raw_fd(), pipe.write.as_raw_fd(), CHUNK)
            }) {
                Ok(n) => break n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
        };
        if n == 0 {
            // SAFETY: shutdown(2) on a socket we hold; a peer already gone is no matter.
            unsafe { libc::shutdown(to.as_raw_fd(), libc::SHUT_WR) };
            return Ok(total);
        }
        let mut left = n;
        while left > 0 {
            to.ready(Interest::WRITABLE).await?;
            match to.try_io(Interest::WRITABLE, || {
                splice(pipe.read.as_raw_fd(), to.as_raw_fd(), left)
            }) {
                Ok(m) => left -= m,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
        }
        total += n as u64;
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream, UnixStream};

    use super::*;

    /// A TCP pair on loopback and a Unix pair, relayed: every byte arrives in order both
    /// ways, each end of file is passed on, and the counts are the bytes sent.
    #[tokio::test]
    async fn relays_both_ways_and_passes_each_end_of_file_on() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (mut tcp_far, tcp_near) =
            tokio::join!(async { TcpStream::connect(addr).await.unwrap() }, async {
                listener.accept().await.unwrap().0
            });
        let (unix_near, mut unix_far) = UnixStream::pair().unwrap();
        let relayed = tokio::spawn(async move { relay(&tcp_near, &unix_near).await });
        let big: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
        let sent = big.clone();
        let up = tokio::spawn(async move {
            tcp_far.write_all(&sent).await.unwrap();
            tcp_far.shutdown().await.unwrap();
            let mut back = Vec::new();
            tcp_far.read_to_end(&mut back).await.unwrap();
            back
        });
        let mut got = Vec::new();
        unix_far.read_to_end(&mut got).await.unwrap();
        assert_eq!(got.len(), big.len());
        assert!(got == big, "bytes arrive in order");
        unix_far.write_all(b"reply").await.unwrap();
        unix_far.shutdown().await.unwrap();
        assert_eq!(up.await.unwrap(), b"reply");
        let (ab, ba) = relayed.await.unwrap().unwrap();
        assert_eq!((ab, ba), (big.len() as u64, 5));
    }
}
