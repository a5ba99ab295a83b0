//! The checkpoint store's size, measured for the store's budget. Its files are private to
//! the user (directories 0700, files 0600, since they hold copies of workspace files such
//! as `.env`), made through `crate::paths::{private_dir, write_private}`.

use std::path::Path;

/// Bytes held by the files under `dir` (symlinks not followed).
pub fn size(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => size(&e.path()),
            Ok(t) if t.is_file() => e.metadata().map_or(0, |m| m.len()),
            _ => 0,
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::paths::{private_dir, write_private};
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    #[test]
    fn private_files_and_dirs_have_no_group_or_other_bits() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("a/b");
        private_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        private_dir(&dir).unwrap();
        assert_eq!(std::fs::metadata(&dir).unwrap().mode() & 0o777, 0o700);
        let f = dir.join("f");
        std::fs::write(&f, "x").unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
        write_private(&f, b"hello").unwrap();
        assert_eq!(std::fs::metadata(&f).unwrap().mode() & 0o777, 0o600);
        assert_eq!(size(root.path()), 5);
    }
}
