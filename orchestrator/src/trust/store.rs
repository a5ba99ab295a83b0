//! The record of trusted workspaces: `$CORDON_HOME/trusted-workspaces.json`, mode 0600,
//! owned by the user running Cordon. Updates hold an exclusive lock on a sibling lock file
//! and replace the record atomically (write a temporary file, fsync, rename), so two
//! `cordon trust` at once lose nothing and a crash leaves the old record or the new one.
//!
//! Security: a record that another user owns, or that the group or others can write, is
//! refused: whoever can write it decides what Cordon trusts.

use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use super::{Fingerprint, TrustError};

const FILE: &str = "trusted-workspaces.json";
const LOCK: &str = "trusted-workspaces.lock";
const VERSION: u32 = 1;

/// One trusted workspace: when, and the files it was trusted with.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrustRecord {
    /// Seconds since the Unix epoch.
    pub trusted_at: u64,
    pub files: Fingerprint,
}

#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct StoreFile {
    version: u32,
    /// Canonical workspace path to its record.
    workspaces: BTreeMap<String, TrustRecord>,
}

/// The trust record of one data directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrustStore {
    home: PathBuf,
}

impl TrustStore {
    /// The record kept in the data directory `home` (`$CORDON_HOME`).
    pub fn at(home: &Path) -> TrustStore {
        TrustStore {
            home: home.to_path_buf(),
        }
    }

    /// The record in `$CORDON_HOME` (default `~/.cordon`).
    pub fn from_env() -> Result<TrustStore, crate::paths::PathsError> {
        crate::paths::cordon_home().map(|h| TrustStore::at(&h))
    }

    pub fn path(&self) -> PathBuf {
        self.home.join(FILE)
    }

    /// The record of `workspace` (canonical), if it was ever trusted.
    pub fn recorded(&self, workspace: &Path) -> Result<Option<TrustRecord>, TrustError> {
        let key = workspace.to_string_lossy().into_owned();
        Ok(self.read()?.workspaces.remove(&key))
    }

    /// Records `workspace` (canonical) as trusted with `files`.
    pub fn record(&self, workspace: &Path, files: &Fingerprint) -> Result<(), TrustError> {
        let record = TrustRecord {
            trusted_at: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0),
            files: files.clone(),
        };
        self.update(|all| {
            all.insert(workspace.to_string_lossy().into_owned(), record);
        })
    }

    /// Forgets `workspace`; whether it was recorded.
    pub fn forget(&self, workspace: &Path) -> Result<bool, TrustError> {
        let mut found = false;
        self.update(|all| found = all.remove(&*workspace.to_string_lossy()).is_some())?;
        Ok(found)
    }

    fn read(&self) -> Result<StoreFile, TrustError> {
        let path = self.path();
        let file = match std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)
        {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(StoreFile {
                    version: VERSION,
                    ..StoreFile::default()
                });
            }
            Err(source) => return Err(TrustError::Read { path, source }),
        };
        let meta = file.metadata().map_err(|source| TrustError::Read {
            path: path.clone(),
            source,
        })?;
        if meta.uid() != nix::unistd::geteuid().as_raw() || meta.mode() & 0o022 != 0 {
            return Err(TrustError::Insecure {
                path,
                uid: meta.uid(),
                mode: meta.mode() & 0o7777,
            });
        }
        serde_json::from_reader(std::io::BufReader::new(file))
            .map_err(|source| TrustError::Parse { path, source })
    }

    /// Read, change and replace the record under the lock.
    fn update(
        &self,
        change: impl FnOnce(&mut BTreeMap<String, TrustRecord>),
    ) -> Result<(), TrustError> {
        let write_err = |path: &Path| {
            let path = path.to_path_buf();
            move |source| TrustError::Write { path, source }
        };
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.home)
            .map_err(write_err(&self.home))?;
        let lock_path = self.home.join(LOCK);
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&lock_path)
            .map_err(write_err(&lock_path))?;
        let _held = nix::fcntl::Flock::lock(lock, nix::fcntl::FlockArg::LockExclusive)
            .map_err(|(_, e)| write_err(&lock_path)(std::io::Error::from(e)))?;
        let mut all = self.read()?;
        all.version = VERSION;
        change(&mut all.workspaces);
        let text = serde_json::to_vec_pretty(&all).map_err(|source| TrustError::Parse {
            path: self.path(),
            source,
        })?;
        let tmp = self.home.join(format!("{FILE}.tmp"));
        let _ = std::fs::remove_file(&tmp);
        let mut out = std::fs::OpenOptions::new()
            .create_new(true)
            .write(true)
            .mode(0o600)
            .open(&tmp)
            .map_err(write_err(&tmp))?;
        out.write_all(&text).map_err(write_err(&tmp))?;
        out.sync_all().map_err(write_err(&tmp))?;
        std::fs::rename(&tmp, self.path()).map_err(write_err(&self.path()))
    }
}
