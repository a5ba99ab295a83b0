//! What a dynamically linked binary needs beside it to run in a `FROM scratch` image: its
//! program interpreter and the shared libraries the interpreter resolves for it on this
//! host (`ld.so --list BIN`, what `ldd` runs). With these copied to the same paths in the
//! image, an agent installed by `cargo install` (dynamic, glibc) runs in `cordon-minimal`
//! without a separate static build.

use std::path::{Path, PathBuf};

use crate::sandbox::SandboxError;

/// The program interpreter (`PT_INTERP`) of an x86-64 ELF, `None` for a static binary or
/// anything that is not such an ELF.
pub fn interpreter(elf: &[u8]) -> Option<PathBuf> {
    const PT_INTERP: u32 = 3;
    let u16_at = |o: usize| elf.get(o..o + 2).map(|b| u16::from_le_bytes([b[0], b[1]]));
    let u32_at = |o: usize| {
        elf.get(o..o + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    };
    let u64_at = |o: usize| {
        elf.get(o..o + 8)
            .and_then(|b| <[u8; 8]>::try_from(b).ok())
            .map(u64::from_le_bytes)
    };
    if elf.get(..6) != Some(&[0x7f, b'E', b'L', b'F', 2, 1][..]) {
        return None;
    }
    let phoff = usize::try_from(u64_at(0x20)?).ok()?;
    let (phentsize, phnum) = (usize::from(u16_at(0x36)?), usize::from(u16_at(0x38)?));
    (0..phnum).find_map(|i| {
        let at = phoff + i * phentsize;
        if u32_at(at)? != PT_INTERP {
            return None;
        }
        let off = usize::try_from(u64_at(at + 8)?).ok()?;
        let len = usize::try_from(u64_at(at + 32)?).ok()?;
        let raw = elf.get(off..off.checked_add(len)?)?;
        let raw = raw.split(|b| *b == 0).next()?;
        Some(PathBuf::from(std::str::from_utf8(raw).ok()?))
    })
}

/// The absolute paths `ld.so --list` prints for `bin`: every library it loads and the
/// interpreter itself. Empty for a static binary.
pub fn runtime_files(bin: &Path, elf: &[u8]) -> Result<Vec<PathBuf>, SandboxError> {
    let Some(interp) = interpreter(elf) else {
        return Ok(Vec::new());
    };
    // The host's own loader, run on a binary this user chose to install: it resolves
    // libraries without running any of the binary's code.
    let out = std::process::Command::new(&interp)
        .arg("--list")
        .arg(bin)
        .env_clear()
        .output()
        .map_err(|source| SandboxError::Setup {
            step: "list the agent's shared libraries (ld.so --list)",
            source,
        })?;
    if !out.status.success() {
        return Err(SandboxError::Setup {
            step: "list the agent's shared libraries (ld.so --list)",
            source: std::io::Error::other(String::from_utf8_lossy(&out.stderr).into_owned()),
        });
    }
    let mut files = parse_list(&String::from_utf8_lossy(&out.stdout));
    if !files.contains(&interp) {
        files.push(interp);
    }
    Ok(files)
}

/// The absolute paths in `ld.so --list` output (`name => /path (0x...)` or `/path (0x...)`);
/// the vDSO and unresolved names are left out.
pub fn parse_list(text: &str) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        let target = line.split_once("=>").map_or(line, |(_, t)| t.trim());
        let path = target.split(" (").next().unwrap_or("").trim();
        if path.starts_with('/') && !files.iter().any(|f: &PathBuf| f == Path::new(path)) {
            files.push(PathBuf::from(path));
        }
    }
    files
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_what_ld_so_prints() {
        let text = "\tlinux-vdso.so.1 (0x00007ffc)\n\
                    \tlibgcc_s.so.1 => /lib/x86_64-linux-gnu/libgcc_s.so.1 (0x00007f1)\n\
                    \tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f2)\n\
                    \tlibmissing.so => not found\n\
                    \t/lib64/ld-linux-x86-64.so.2 (0x00007f3)\n";
        assert_eq!(
            parse_list(text),
            [
                PathBuf::from("/lib/x86_64-linux-gnu/libgcc_s.so.1"),
                PathBuf::from("/lib/x86_64-linux-gnu/libc.so.6"),
                PathBuf::from("/lib64/ld-linux-x86-64.so.2"),
            ]
        );
    }

    #[test]
    fn finds_the_interpreter_of_a_dynamic_binary_and_its_libraries() {
        let exe = std::env::current_exe().expect("exe");
        let elf = std::fs::read(&exe).expect("read");
        let Some(interp) = interpreter(&elf) else {
            // A static test binary has nothing to find.
            return;
        };
        assert!(interp.is_absolute(), "{}", interp.display());
        let files = runtime_files(&exe, &elf).expect("ld.so --list");
        assert!(files.contains(&interp));
        assert!(
            files
                .iter()
                .any(|f| f.to_string_lossy().contains("libc.so"))
        );
    }

    #[test]
    fn a_non_elf_has_no_interpreter() {
        assert_eq!(interpreter(b"#!/bin/sh\n"), None);
    }
}
