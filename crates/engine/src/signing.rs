//! Standard Webhooks signatures: `webhook-signature: v1,<base64 HMAC-SHA256>` over
//! `"{webhook-id}.{webhook-timestamp}.{body}"`, keyed by a per-namespace `whsec_` secret.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use hmac::{Hmac, Mac};
use hourglass_store::{Store, StoreError};
use rand::RngCore;
use sha2::Sha256;

const SECRET_PREFIX: &str = "whsec_";

/// A decoded signing key.
#[derive(Clone)]
pub struct SigningKey(Arc<Vec<u8>>);

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
            .map(|k| Self(Arc::new(k)))
    }

    /// The `webhook-signature` header value.
    pub fn sign(&self, msg_id: &str, timestamp: i64, body: &[u8]) -> String {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.0).expect("hmac takes any key length");
        mac.update(msg_id.as_bytes());
        mac.update(b".");
        mac.update(timestamp.to_string().as_bytes());
        mac.update(b".");
        mac.update(body);
        format!("v1,{}", BASE64.encode(mac.finalize().into_bytes()))
    }
}

/// A fresh random secret in the `whsec_` format.
pub fn generate_secret() -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    format!("{SECRET_PREFIX}{}", BASE64.encode(bytes))
}

/// Per-namespace signing keys, read through from the store and cached. A namespace without a
/// secret gets one generated and stored on first use.
#[derive(Clone)]
pub struct Secrets {
    store: Arc<dyn Store>,
    cache: Arc<RwLock<HashMap<String, SigningKey>>>,
}

impl Secrets {
    pub fn new(store: Arc<dyn Store>) -> Self {
        Self {
            store,
            cache: Default::default(),
        }
    }

    pub async fn key_for(&self, namespace: &str) -> Result<SigningKey, StoreError> {
        if let Some(key) = self.cache.read().expect("secrets lock").get(namespace) {
            return Ok(key.clone());
        }
        let secret = match self.store.signing_secret(namespace).await? {
            Some(secret) => secret,
            None => {
                let secret = generate_secret();
                self.store.set_signing_secret(namespace, &secret).await?;
                secret
            }
        };
        let key = SigningKey::parse(&secret)
            .ok_or_else(|| StoreError::Corrupt("stored signing secret is malformed".into()))?;
        self.cache
            .write()
            .expect("secrets lock")
            .insert(namespace.to_string(), key.clone());
        Ok(key)
    }

    /// Replaces a namespace's secret and returns it; the only moment it is shown.
    pub async fn rotate(&self, namespace: &str) -> Result<String, StoreError> {
        let secret = generate_secret();
        self.store.set_signing_secret(namespace, &secret).await?;
        let key = SigningKey::parse(&secret).expect("generated secrets parse");
        self.cache
            .write()
            .expect("secrets lock")
            .insert(namespace.to_string(), key);
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
    fn generated_secrets_parse() {
        assert!(SigningKey::parse(&generate_secret()).is_some());
        assert!(SigningKey::parse("whsec_short").is_none());
    }
}
