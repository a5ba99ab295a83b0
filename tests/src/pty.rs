//! A pseudo-terminal driving a real binary as a user at a terminal would: keys in, screen
//! text out. The text is kept with the terminal's control sequences removed, and waited
//! for with a generous deadline (a loaded machine is slow; nothing here measures time).

use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long to wait for text on the screen before the test fails.
pub const SCREEN_DEADLINE: Duration = Duration::from_secs(30);

/// Keys as a terminal sends them.
pub mod key {
    pub const ENTER: &str = "\r";
    pub const CTRL_C: &str = "\x03";
    pub const SHIFT_TAB: &str = "\x1b[Z";
    pub const UP: &str = "\x1b[A";
}

/// A process on a pseudo-terminal.
pub struct Pty {
    master: std::fs::File,
    child: Child,
    /// Everything the process wrote, control sequences removed.
    screen: Arc<Mutex<String>>,
    /// How far [`Pty::wait_for`] has read.
    seen: usize,
}

impl Pty {
    /// Starts `cmd` with a 120x40 terminal as its standard input, output and error, and as
    /// its controlling terminal.
    pub fn spawn(cmd: Command) -> Pty {
        Self::spawn_typed_ahead(cmd, "")
    }

    /// [`Pty::spawn`], with `typed` already on the terminal's input when the process
    /// starts: keys a user typed before anything was on the screen.
    pub fn spawn_typed_ahead(mut cmd: Command, typed: &str) -> Pty {
        let size = nix::pty::Winsize {
            ws_row: 40,
            ws_col: 120,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        let pty = nix::pty::openpty(Some(&size), None).expect("openpty");
        let mut master = std::fs::File::from(pty.master);
        master.write_all(typed.as_bytes()).expect("type ahead");
        let slave: OwnedFd = pty.slave;
        let stdio = |fd: &OwnedFd| Stdio::from(fd.try_clone().expect("dup pty"));
        cmd.stdin(stdio(&slave))
            .stdout(stdio(&slave))
            .stderr(stdio(&slave));
        // SAFETY: between fork and exec the child only makes two async-signal-safe
        // syscalls (setsid, ioctl) and allocates nothing.
        unsafe {
            cmd.pre_exec(|| {
                if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn().expect("spawn on the pty");
        drop(slave);
        let mut reader = master.try_clone().expect("dup master");
        let screen = Arc::new(Mutex::new(String::new()));
        let sink = screen.clone();
        std::thread::spawn(move || {
            let mut raw = Vec::new();
            let mut buf = [0u8; 4096];
            // EIO once the child and its descendants closed the terminal.
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 {
                    break;
                }
                raw.extend_from_slice(&buf[..n]);
                *sink.lock().unwrap() = strip_controls(&String::from_utf8_lossy(&raw));
            }
        });
        Pty {
            master,
            child,
            screen,
            seen: 0,
        }
    }

    /// Types `text` (keys from [`key`] included).
    pub fn send(&mut self, text: &str) {
        self.master
            .write_all(text.as_bytes())
            .expect("write to pty");
        self.master.flush().expect("flush pty");
    }

    /// Types a line and Enter.
    pub fn line(&mut self, text: &str) {
        self.send(text);
        self.send(key::ENTER);
    }

    /// The screen text so far.
    pub fn screen(&self) -> String {
        self.screen.lock().unwrap().clone()
    }

    /// Waits until `text` appears after what earlier waits matched; returns the screen
    /// text up to and including it. Panics with the screen after [`SCREEN_DEADLINE`].
    pub fn wait_for(&mut self, text: &str) -> String {
        let started = Instant::now();
        loop {
            let screen = self.screen();
            if let Some(at) = screen.get(self.seen..).and_then(|s| s.find(text)) {
                let end = self.seen + at + text.len();
                let upto = screen[self.seen..end].to_string();
                self.seen = end;
                return upto;
            }
            if started.elapsed() > SCREEN_DEADLINE {
                panic!(
                    "{text:?} did not appear on the screen; after the last match it shows:\n{}",
                    screen.get(self.seen..).unwrap_or_default()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits for the process to exit (after [`SCREEN_DEADLINE`] it is killed and the test
    /// fails).
    pub fn wait_exit(&mut self) -> ExitStatus {
        let started = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                return status;
            }
            if started.elapsed() > SCREEN_DEADLINE {
                let _ = self.child.kill();
                panic!("the process did not exit; screen:\n{}", self.screen());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// `cordon --workspace WS ARGS...` on a terminal, talking to `model`, with its state and
/// its user settings in `home`; returns once the first prompt is drawn.
pub fn cordon_on_terminal(
    model: &crate::scripted_model::ScriptedModel,
    home: &std::path::Path,
    ws: &std::path::Path,
    args: &[&str],
) -> Pty {
    let mut pty = Pty::spawn(cordon_command(model, home, ws, args));
    pty.wait_for("Ctrl-C interrupts");
    pty.wait_for("] > ");
    pty
}

/// The command [`cordon_on_terminal`] runs, for a test that watches the session start.
pub fn cordon_command(
    model: &crate::scripted_model::ScriptedModel,
    home: &std::path::Path,
    ws: &std::path::Path,
    args: &[&str],
) -> Command {
    let mut cmd = Command::new(crate::cordon_bin());
    cmd.arg("--workspace")
        .arg(ws)
        .args(args)
        .env("ANTHROPIC_BASE_URL", model.base_url())
        .env("ANTHROPIC_API_KEY", "test-key")
        .env_remove("ANTHROPIC_AUTH_TOKEN")
        .env("CORDON_HOME", home)
        .env("HOME", home)
        .env("TERM", "xterm-256color");
    cmd
}

impl Drop for Pty {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// `text` without terminal control sequences (CSI, OSC, two-byte escapes) or carriage
/// returns.
pub fn strip_controls(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\x1b' => match chars.next() {
                Some('[') => {
                    // Parameters and intermediates, then one final byte.
                    for c in chars.by_ref() {
                        if ('@'..='~').contains(&c) {
                            break;
                        }
                    }
                }
                Some(']') => {
                    // Until BEL or ST.
                    while let Some(c) = chars.next() {
                        if c == '\x07' || (c == '\x1b' && chars.next_if_eq(&'\\').is_some()) {
                            break;
                        }
                    }
                }
                _ => {}
            },
            '\r' => {}
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_are_stripped() {
        assert_eq!(
            strip_controls("\x1b[2K\x1b[1G\x1b[38;5;8m[default] > \x1b[0mhi\r\n\x1b]0;t\x07ok"),
            "[default] > hi\nok"
        );
    }
}
