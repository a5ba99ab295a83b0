//! The hash chain's canonical encoding: what a record's hash covers, byte for byte.
//!
//! `hash = sha256("cordon-audit-v1" ‖ tenant ‖ seq ‖ at ‖ kind ‖ body ‖ prev_hash)` where
//! every field is written as its length (8 bytes, big-endian) then its UTF-8 bytes, and
//! `seq` as its decimal text. Length prefixes make the encoding injective (no two field
//! lists share one byte string), so moving text from one field into another changes the
//! hash. The body is hashed as the exact text stored, not re-serialised, so the check does
//! not depend on serde's output staying the same across versions.

use sha2::{Digest, Sha256};

/// The `prev_hash` of a tenant's first record.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";
const DOMAIN: &str = "cordon-audit-v1";

/// The fields one record's hash covers.
#[derive(Debug, Clone, Copy)]
pub struct Link<'a> {
    pub tenant: &'a str,
    pub seq: i64,
    pub at: &'a str,
    pub kind: &'a str,
    pub body: &'a str,
    pub prev_hash: &'a str,
}

impl Link<'_> {
    /// The record's hash, lowercase hex.
    pub fn hash(&self) -> String {
        let mut h = Sha256::new();
        let seq = self.seq.to_string();
        for field in [
            DOMAIN,
            self.tenant,
            &seq,
            self.at,
            self.kind,
            self.body,
            self.prev_hash,
        ] {
            h.update((field.len() as u64).to_be_bytes());
            h.update(field.as_bytes());
        }
        hex::encode(h.finalize())
    }
}

/// `sha256:<hex>` of some bytes: how inputs and outputs are referenced without being kept.
pub fn digest(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link<'a>(tenant: &'a str, body: &'a str) -> Link<'a> {
        Link {
            tenant,
            seq: 1,
            at: "t",
            kind: "k",
            body,
            prev_hash: GENESIS,
        }
    }

    #[test]
    fn moving_text_between_fields_changes_the_hash() {
        assert_ne!(link("ab", "c").hash(), link("a", "bc").hash());
    }

    #[test]
    fn the_hash_is_stable() {
        assert_eq!(link("a", "b").hash(), link("a", "b").hash());
        assert_eq!(link("a", "b").hash().len(), 64);
    }

    #[test]
    fn digest_names_its_algorithm() {
        assert_eq!(
            digest(b""),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }
}
