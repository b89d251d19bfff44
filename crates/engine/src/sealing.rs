//! Signing secrets sealed at rest. Given a secrets key (32 random bytes the operator keeps
//! outside the store), the node stores every signing secret as
//! `hgsealed1.<key id>.<base64 of nonce, AES-256-GCM ciphertext and tag>`, with the namespace as
//! associated data, so a sealed secret copied onto another namespace does not open. The key id
//! (the first 8 hex digits of a SHA-256 of the key) says which key sealed a secret: a node given
//! the key in use and the one before it opens both while it re-seals (`Secrets::open`). The
//! store, and so every backup of it, holds ciphertext only.

use std::fmt;
use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use ring::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use ring::rand::{SecureRandom, SystemRandom};
use sha2::{Digest, Sha256};

/// What a sealed secret starts with (the format's version is part of it).
pub const SEALED_PREFIX: &str = "hgsealed1.";

const KEY_BYTES: usize = 32;

/// One secrets key, with its id.
pub struct SecretsKey {
    key: LessSafeKey,
    id: String,
}

impl fmt::Debug for SecretsKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SecretsKey({})", self.id)
    }
}

impl SecretsKey {
    /// A key as the operator writes it: 64 hex digits, surrounding whitespace ignored. `None`
    /// for anything else.
    pub fn parse(text: &str) -> Option<Self> {
        Self::from_bytes(&hex::decode(text.trim()).ok()?)
    }

    /// A key of 32 bytes as they are (a data key AWS KMS unwrapped, say); `None` for any other
    /// length. The same bytes make the same key, with the same id, as their hex does.
    pub fn from_bytes(bytes: &[u8]) -> Option<Self> {
        if bytes.len() != KEY_BYTES {
            return None;
        }
        let mut id = hex::encode(
            Sha256::new_with_prefix(b"hourglass secrets key id\0")
                .chain_update(bytes)
                .finalize(),
        );
        id.truncate(8);
        let key = LessSafeKey::new(UnboundKey::new(&AES_256_GCM, bytes).ok()?);
        Some(Self { key, id })
    }

    /// A new random key, as [`SecretsKey::parse`] reads it.
    pub fn generate() -> String {
        let mut bytes = [0u8; KEY_BYTES];
        SystemRandom::new()
            .fill(&mut bytes)
            .expect("the system's random source");
        hex::encode(bytes)
    }

    /// Names the key without revealing anything of it.
    pub fn id(&self) -> &str {
        &self.id
    }
}

/// The keys a node seals and opens secrets with: the one in use, and while re-sealing the one
/// before it.
#[derive(Debug, Clone)]
pub struct Sealing {
    current: Arc<SecretsKey>,
    previous: Option<Arc<SecretsKey>>,
}

/// Why a stored secret did not open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unsealed {
    /// Sealed with a key this node was not given (its id).
    UnknownKey(String),
    /// Not in the sealed format, or altered, or sealed for another namespace.
    Damaged,
}

impl fmt::Display for Unsealed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unsealed::UnknownKey(id) => write!(
                f,
                "the signing secret is sealed with secrets key {id}, which this node was not given"
            ),
            Unsealed::Damaged => f.write_str("the sealed signing secret does not open"),
        }
    }
}

impl Sealing {
    pub fn new(current: SecretsKey, previous: Option<SecretsKey>) -> Self {
        Self {
            current: Arc::new(current),
            previous: previous.map(Arc::new),
        }
    }

    pub fn current_id(&self) -> &str {
        self.current.id()
    }

    pub fn previous_id(&self) -> Option<&str> {
        self.previous.as_deref().map(SecretsKey::id)
    }

    /// Whether `id` is one of this node's keys.
    pub fn knows(&self, id: &str) -> bool {
        self.key(id).is_some()
    }

    fn key(&self, id: &str) -> Option<&SecretsKey> {
        std::iter::once(&*self.current)
            .chain(self.previous.as_deref())
            .find(|k| k.id == id)
    }

    /// Whether `stored` is sealed with the key in use (nothing to re-seal).
    pub fn is_current(&self, stored: &str) -> bool {
        stored
            .strip_prefix(SEALED_PREFIX)
            .and_then(|rest| rest.split_once('.'))
            .is_some_and(|(id, _)| id == self.current.id)
    }

    /// `secret` sealed with the key in use, for `namespace`.
    pub fn seal(&self, namespace: &str, secret: &str) -> String {
        let mut nonce = [0u8; NONCE_LEN];
        SystemRandom::new()
            .fill(&mut nonce)
            .expect("the system's random source");
        let mut sealed = secret.as_bytes().to_vec();
        self.current
            .key
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(namespace.as_bytes()),
                &mut sealed,
            )
            .expect("AES-GCM seals any secret of a sane size");
        let mut blob = nonce.to_vec();
        blob.extend_from_slice(&sealed);
        format!("{SEALED_PREFIX}{}.{}", self.current.id, BASE64.encode(blob))
    }

    /// The secret `stored` holds for `namespace`. A secret stored before sealing began (plain
    /// text) is answered as it is: re-sealing it is the caller's.
    pub fn open(&self, namespace: &str, stored: &str) -> Result<String, Unsealed> {
        let Some(rest) = stored.strip_prefix(SEALED_PREFIX) else {
            return Ok(stored.to_owned());
        };
        let (id, blob) = rest.split_once('.').ok_or(Unsealed::Damaged)?;
        let key = self
            .key(id)
            .ok_or_else(|| Unsealed::UnknownKey(id.to_owned()))?;
        let mut blob = BASE64.decode(blob).map_err(|_| Unsealed::Damaged)?;
        if blob.len() < NONCE_LEN {
            return Err(Unsealed::Damaged);
        }
        let mut sealed = blob.split_off(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(&blob).map_err(|_| Unsealed::Damaged)?;
        let plain = key
            .key
            .open_in_place(nonce, Aad::from(namespace.as_bytes()), &mut sealed)
            .map_err(|_| Unsealed::Damaged)?;
        String::from_utf8(plain.to_vec()).map_err(|_| Unsealed::Damaged)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> SecretsKey {
        SecretsKey::parse(&SecretsKey::generate()).unwrap()
    }

    #[test]
    fn a_sealed_secret_opens_for_its_namespace_only_and_never_shows_the_secret() {
        let sealing = Sealing::new(key(), None);
        let sealed = sealing.seal("acme", "whsec_c2VjcmV0");
        assert!(sealed.starts_with(SEALED_PREFIX), "{sealed}");
        assert!(!sealed.contains("whsec_"), "{sealed}");
        assert!(sealing.is_current(&sealed));
        assert_eq!(sealing.open("acme", &sealed).unwrap(), "whsec_c2VjcmV0");
        assert_eq!(sealing.open("other", &sealed), Err(Unsealed::Damaged));
        // Two seals of one secret differ (a fresh nonce each time).
        assert_ne!(sealing.seal("acme", "whsec_c2VjcmV0"), sealed);
        // Plain text from before sealing began passes through.
        assert_eq!(sealing.open("acme", "whsec_old").unwrap(), "whsec_old");
        assert!(!sealing.is_current("whsec_old"));
    }

    #[test]
    fn the_previous_key_opens_what_it_sealed_and_an_unknown_key_is_named() {
        let (old, new) = (SecretsKey::generate(), SecretsKey::generate());
        let before = Sealing::new(SecretsKey::parse(&old).unwrap(), None);
        let sealed = before.seal("acme", "whsec_x");
        let during = Sealing::new(
            SecretsKey::parse(&new).unwrap(),
            Some(SecretsKey::parse(&old).unwrap()),
        );
        assert!(!during.is_current(&sealed));
        assert_eq!(during.open("acme", &sealed).unwrap(), "whsec_x");
        let after = Sealing::new(SecretsKey::parse(&new).unwrap(), None);
        assert_eq!(
            after.open("acme", &sealed),
            Err(Unsealed::UnknownKey(before.current_id().to_owned()))
        );
    }

    #[test]
    fn damaged_text_is_refused_without_a_panic() {
        let sealing = Sealing::new(key(), None);
        let sealed = sealing.seal("acme", "whsec_x");
        let id = sealing.current_id().to_owned();
        let mut flipped = sealed.clone().into_bytes();
        let last = flipped.len() - 3;
        flipped[last] = if flipped[last] == b'A' { b'B' } else { b'A' };
        for text in [
            String::from_utf8(flipped).unwrap(),
            format!("{SEALED_PREFIX}{id}"),
            format!("{SEALED_PREFIX}{id}."),
            format!("{SEALED_PREFIX}{id}.AAAA"),
            format!("{SEALED_PREFIX}{id}.!!!"),
            sealed[..sealed.len() - 4].to_owned(),
        ] {
            assert!(sealing.open("acme", &text).is_err(), "{text}");
        }
    }

    #[test]
    fn keys_parse_from_64_hex_digits_only() {
        let text = SecretsKey::generate();
        assert_eq!(text.len(), 64);
        assert!(SecretsKey::parse(&format!(" {text}\n")).is_some());
        assert_eq!(
            SecretsKey::parse(&text).unwrap().id(),
            SecretsKey::parse(&text).unwrap().id()
        );
        for bad in ["", "zz", &text[..62], &format!("{text}00")] {
            assert!(SecretsKey::parse(bad).is_none(), "{bad}");
        }
        // Raw bytes (a data key from KMS) make the key their hex makes.
        let bytes = hex::decode(&text).unwrap();
        assert_eq!(
            SecretsKey::from_bytes(&bytes).unwrap().id(),
            SecretsKey::parse(&text).unwrap().id()
        );
        assert!(SecretsKey::from_bytes(&bytes[..31]).is_none());
        assert!(SecretsKey::from_bytes(&[bytes.clone(), vec![0]].concat()).is_none());
    }
}
