//! Standard Webhooks signatures: `webhook-signature: v1,<base64 HMAC-SHA256>` over
//! `"{webhook-id}.{webhook-timestamp}.{body}"`, keyed by a per-namespace `whsec_` secret. During a
//! rotation's overlap the header carries two signatures, space-separated, one per secret, so
//! receivers that still verify with the old secret keep working.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use tokio::time::Instant;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use hmac::{Hmac, Mac};
use hourglass_core::Clock;
use hourglass_store::{Store, StoreError};
use rand::RngCore;
use sha2::Sha256;

const SECRET_PREFIX: &str = "whsec_";

/// A decoded signing key, kept as HMAC-SHA256 already keyed: each signature starts from a copy
/// of it instead of hashing the padded key again (two of the compression rounds a small webhook's
/// signature takes).
#[derive(Clone)]
pub struct SigningKey(Arc<Hmac<Sha256>>);

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SigningKey(..)")
    }
}

impl SigningKey {
    pub fn parse(secret: &str) -> Option<Self> {
        let encoded = secret.strip_prefix(SECRET_PREFIX).unwrap_or(secret);
        BASE64
            .decode(encoded)
            .ok()
            .filter(|k| k.len() >= 16)
            .map(|k| {
                Self(Arc::new(
                    Hmac::<Sha256>::new_from_slice(&k).expect("hmac takes any key length"),
                ))
            })
    }

    /// The `webhook-signature` header value.
    pub fn sign(&self, msg_id: &str, timestamp: i64, body: &[u8]) -> String {
        let mut header = String::with_capacity(SIGNATURE_LEN);
        self.sign_into(msg_id, timestamp, body, &mut header);
        header
    }

    /// Appends `v1,<base64 signature>` to `header`.
    fn sign_into(&self, msg_id: &str, timestamp: i64, body: &[u8], header: &mut String) {
        let mut mac = (*self.0).clone();
        mac.update(msg_id.as_bytes());
        mac.update(b".");
        mac.update(itoa::Buffer::new().format(timestamp).as_bytes());
        mac.update(b".");
        mac.update(body);
        header.push_str("v1,");
        BASE64.encode_string(mac.finalize().into_bytes(), header);
    }

    /// Whether a `webhook-signature` header value carries a `v1` signature by this key of
    /// `msg_id.timestamp.body`: the receiving side, for `hourglass listen`. Any of the
    /// space-separated signatures may match (a rotation's overlap sends two); each is compared
    /// in constant time. The timestamp is passed as sent, so a re-encoded one does not verify.
    pub fn verify(&self, msg_id: &str, timestamp: &str, body: &[u8], header: &str) -> bool {
        header.split_ascii_whitespace().any(|candidate| {
            let Some(sig) = candidate
                .strip_prefix("v1,")
                .and_then(|b64| BASE64.decode(b64).ok())
            else {
                return false;
            };
            let mut mac = (*self.0).clone();
            mac.update(msg_id.as_bytes());
            mac.update(b".");
            mac.update(timestamp.as_bytes());
            mac.update(b".");
            mac.update(body);
            mac.verify_slice(&sig).is_ok()
        })
    }
}

/// A fresh random secret in the `whsec_` format.
pub fn generate_secret() -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    format!("{SECRET_PREFIX}{}", BASE64.encode(bytes))
}

/// The keys a delivery is signed with: the current one, and the replaced one during an overlap.
#[derive(Clone, Debug)]
pub struct SigningKeys(Vec<SigningKey>);

impl SigningKeys {
    /// The `webhook-signature` header value: one `v1,<sig>` per key, space-separated.
    pub fn sign(&self, msg_id: &str, timestamp: i64, body: &[u8]) -> String {
        let mut header = String::with_capacity(self.0.len() * (SIGNATURE_LEN + 1));
        for (i, key) in self.0.iter().enumerate() {
            if i > 0 {
                header.push(' ');
            }
            key.sign_into(msg_id, timestamp, body, &mut header);
        }
        header
    }
}

/// Length of one `v1,<base64 of 32 bytes>` signature.
const SIGNATURE_LEN: usize = 3 + 44;

/// How long a namespace's keys are cached. Another node's rotation reaches this one within it.
pub const SECRETS_TTL: Duration = Duration::from_secs(10);

#[derive(Clone)]
struct Cached {
    loaded: Instant,
    current: SigningKey,
    previous: Option<(SigningKey, jiff::Timestamp)>,
}

/// Per-namespace signing keys, read through from the store and cached for [`SECRETS_TTL`]. A
/// namespace without a secret gets one generated and stored on first use (the first node to
/// store one wins).
#[derive(Clone)]
pub struct Secrets {
    store: Arc<dyn Store>,
    /// Decides whether a replaced secret still signs.
    clock: Arc<dyn Clock>,
    cache: Arc<RwLock<HashMap<String, Cached>>>,
    /// One load at a time per namespace: the deliveries that find its keys missing or expired
    /// together (up to a destination's concurrency, at every expiry) wait for one store read,
    /// where each used to make its own, and a new namespace's first ones each generated and
    /// wrote a secret. Each turn keeps the last load's failure and when it happened.
    loads: Arc<Mutex<HashMap<String, LoadTurn>>>,
}

/// A namespace's turn to load its keys, with the failure of the last load, if it failed.
type LoadTurn = Arc<tokio::sync::Mutex<Option<(Instant, StoreError)>>>;

fn parse_stored(secret: &str) -> Result<SigningKey, StoreError> {
    SigningKey::parse(secret)
        .ok_or_else(|| StoreError::Corrupt("stored signing secret is malformed".into()))
}

impl Secrets {
    pub fn new(store: Arc<dyn Store>, clock: Arc<dyn Clock>) -> Self {
        Self {
            store,
            clock,
            cache: Default::default(),
            loads: Default::default(),
        }
    }

    /// The keys to sign a delivery of `namespace` with, now.
    pub async fn keys_for(&self, namespace: &str) -> Result<SigningKeys, StoreError> {
        let cached = match self.fresh(namespace) {
            Some(cached) => cached,
            None => self.load(namespace).await?,
        };
        let mut keys = vec![cached.current];
        if let Some((previous, until)) = cached.previous
            && self.clock.now() < until
        {
            keys.push(previous);
        }
        Ok(SigningKeys(keys))
    }

    /// The namespace's cached keys, unless they are older than [`SECRETS_TTL`].
    fn fresh(&self, namespace: &str) -> Option<Cached> {
        self.cache
            .read()
            .expect("secrets lock")
            .get(namespace)
            .filter(|c| c.loaded.elapsed() < SECRETS_TTL)
            .cloned()
    }

    async fn load(&self, namespace: &str) -> Result<Cached, StoreError> {
        let gate = self
            .loads
            .lock()
            .expect("secret loads lock")
            .entry(namespace.to_string())
            .or_default()
            .clone();
        let asked = Instant::now();
        let mut turn = gate.lock().await;
        // Whoever held the turn before may have loaded them.
        if let Some(cached) = self.fresh(namespace) {
            return Ok(cached);
        }
        // Or failed to, while this one waited: then its failure is this one's too, so that the
        // deliveries waiting on a store that is down fail together (and retry later) instead of
        // each waiting its turn for the same failure.
        if let Some((failed_at, e)) = turn.as_ref()
            && *failed_at >= asked
        {
            return Err(e.clone());
        }
        let loaded = self.load_from_store(namespace).await;
        *turn = loaded.as_ref().err().map(|e| (Instant::now(), e.clone()));
        loaded
    }

    async fn load_from_store(&self, namespace: &str) -> Result<Cached, StoreError> {
        let cached = match self.store.signing_secrets(namespace).await? {
            Some(secrets) => Cached {
                loaded: Instant::now(),
                current: parse_stored(&secrets.current)?,
                previous: match secrets.previous {
                    Some((secret, until)) => Some((parse_stored(&secret)?, until)),
                    None => None,
                },
            },
            None => {
                let stored = self
                    .store
                    .init_signing_secret(namespace, &generate_secret())
                    .await?;
                Cached {
                    loaded: Instant::now(),
                    current: parse_stored(&stored)?,
                    previous: None,
                }
            }
        };
        self.cache
            .write()
            .expect("secrets lock")
            .insert(namespace.to_string(), cached.clone());
        Ok(cached)
    }

    /// Replaces a namespace's secret and returns it; the only moment it is shown. The replaced
    /// secret keeps signing (beside the new one) for `overlap`.
    pub async fn rotate(&self, namespace: &str, overlap: Duration) -> Result<String, StoreError> {
        let secret = generate_secret();
        let until =
            (!overlap.is_zero()).then(|| hourglass_core::add_saturating(self.clock.now(), overlap));
        self.store
            .rotate_signing_secret(namespace, &secret, until)
            .await?;
        self.cache.write().expect("secrets lock").remove(namespace);
        Ok(secret)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_standard_webhooks_reference_vector() {
        // The example published with the Standard Webhooks specification.
        let key = SigningKey::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let sig = key.sign(
            "msg_p5jXN8AQM9LWM0D4loKWxJek",
            1614265330,
            br#"{"test": 2432232314}"#,
        );
        assert_eq!(sig, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
    }

    #[test]
    fn verifies_what_it_signs_and_nothing_else() {
        let key = SigningKey::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let other = SigningKey::parse(&generate_secret()).unwrap();
        let body = br#"{"test": 2432232314}"#;
        let header = key.sign("msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body);
        let verify = |k: &SigningKey, id: &str, ts: &str, body: &[u8], header: &str| {
            k.verify(id, ts, body, header)
        };
        assert!(verify(
            &key,
            "msg_p5jXN8AQM9LWM0D4loKWxJek",
            "1614265330",
            body,
            &header
        ));
        // Either signature of an overlap verifies, in any position.
        let both = format!("{} {header}", other.sign("x", 1, b"y"));
        assert!(verify(
            &key,
            "msg_p5jXN8AQM9LWM0D4loKWxJek",
            "1614265330",
            body,
            &both
        ));
        assert!(!verify(
            &other,
            "msg_p5jXN8AQM9LWM0D4loKWxJek",
            "1614265330",
            body,
            &header
        ));
        assert!(!verify(&key, "msg_other", "1614265330", body, &header));
        assert!(!verify(
            &key,
            "msg_p5jXN8AQM9LWM0D4loKWxJek",
            "1614265331",
            body,
            &header
        ));
        assert!(!verify(
            &key,
            "msg_p5jXN8AQM9LWM0D4loKWxJek",
            "1614265330",
            b"{}",
            &header
        ));
        assert!(!verify(
            &key,
            "msg_p5jXN8AQM9LWM0D4loKWxJek",
            "1614265330",
            body,
            ""
        ));
        assert!(!verify(
            &key,
            "msg_p5jXN8AQM9LWM0D4loKWxJek",
            "1614265330",
            body,
            "v1,%%%"
        ));
    }

    #[test]
    fn generated_secrets_parse() {
        assert!(SigningKey::parse(&generate_secret()).is_some());
        assert!(SigningKey::parse("whsec_short").is_none());
    }
}
