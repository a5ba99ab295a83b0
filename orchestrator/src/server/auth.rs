//! API keys: `cordon_<id>_<secret>`, where the id (8 random bytes, hex) finds the key's row
//! and the secret (32 random bytes, hex) proves it. Only the SHA-256 of the secret is
//! stored; a presented secret is hashed and compared with the stored hash in constant time,
//! so neither a database reader nor a timing observer learns a usable key.

use rand::RngCore;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::store::{KeyRow, Store, StoreError};

const PREFIX: &str = "cordon_";

/// A new key: its row for the store, and the whole key, shown to the operator once.
#[derive(Debug)]
pub struct NewKey {
    pub row: KeyRow,
    pub key: String,
}

/// Who is calling: the tenant and the key id (never the key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    pub tenant: String,
    pub key_id: String,
}

/// Makes a key for `tenant` from the operating system's random generator.
pub fn new_key(tenant: &str) -> NewKey {
    let mut id = [0u8; 8];
    let mut secret = [0u8; 32];
    rand::rng().fill_bytes(&mut id);
    rand::rng().fill_bytes(&mut secret);
    let (id, secret) = (hex::encode(id), hex::encode(secret));
    NewKey {
        row: KeyRow {
            id: id.clone(),
            tenant: tenant.to_string(),
            secret_sha256: digest(&secret),
            revoked: false,
        },
        key: format!("{PREFIX}{id}_{secret}"),
    }
}

fn digest(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

/// The caller a presented key belongs to, if it is valid and not revoked.
pub fn verify(store: &dyn Store, presented: &str) -> Result<Option<Caller>, StoreError> {
    let Some((id, secret)) = presented
        .strip_prefix(PREFIX)
        .and_then(|rest| rest.split_once('_'))
    else {
        return Ok(None);
    };
    let Some(row) = store.key(id)? else {
        return Ok(None);
    };
    // Security: the comparison takes the same time wherever the digests differ.
    let matches: bool = digest(secret)
        .as_bytes()
        .ct_eq(row.secret_sha256.as_bytes())
        .into();
    Ok((matches && !row.revoked).then_some(Caller {
        tenant: row.tenant,
        key_id: row.id,
    }))
}

/// The key in an `Authorization: Bearer KEY` header value.
pub fn bearer(header: &str) -> Option<&str> {
    let (scheme, key) = header.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| key.trim())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::store::SqliteStore;

    #[test]
    fn a_key_verifies_until_revoked_and_a_changed_one_never() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path()).unwrap();
        store
            .create_tenant("acme", &serde_json::json!({}), &serde_json::json!({}))
            .unwrap();
        let key = new_key("acme");
        store.add_key(&key.row).unwrap();
        let caller = verify(&store, &key.key).unwrap().unwrap();
        assert_eq!(caller.tenant, "acme");
        let mut wrong = key.key.clone();
        wrong.pop();
        wrong.push('x');
        assert_eq!(verify(&store, &wrong).unwrap(), None);
        assert_eq!(verify(&store, "cordon_nothing").unwrap(), None);
        store.revoke_key(&key.row.id).unwrap();
        assert_eq!(verify(&store, &key.key).unwrap(), None);
        assert!(
            !store
                .key(&key.row.id)
                .unwrap()
                .unwrap()
                .secret_sha256
                .contains(&key.key[20..])
        );
    }

    #[test]
    fn bearer_takes_the_scheme_in_any_case() {
        assert_eq!(bearer("Bearer abc"), Some("abc"));
        assert_eq!(bearer("bearer abc"), Some("abc"));
        assert_eq!(bearer("Basic abc"), None);
    }
}
