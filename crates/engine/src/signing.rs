//! Standard Webhooks signatures: `webhook-signature: v1,<base64 HMAC-SHA256>` over
//! `"{webhook-id}.{webhook-timestamp}.{body}"`, keyed by a per-namespace `whsec_` secret. During a
//! rotation's overlap the header carries two signatures, space-separated, one per secret, so
//! receivers that still verify with the old secret keep working.
//!
//! That signature leaves out the `hourglass-*` headers (job id, due time, attempt, job type), so a
//! replayed request with an altered header would still verify. A single delivery therefore also
//! carries `hourglass-signature: v1,<base64 HMAC-SHA256>` over
//! `"{webhook-id}\n{webhook-timestamp}\n{job id}\n{due at}\n{attempt}\n{job type}\n{body}"`
//! (the header values as sent, an absent type as an empty line), under a key derived from the same
//! secret: `HMAC-SHA256(secret, "hourglass-signature")`. The body and the Standard Webhooks
//! signature stay exactly as the specification has them, so any Standard Webhooks library still
//! verifies a delivery and no receiver that reads the raw payload breaks; a receiver that acts on
//! the metadata checks the second header too (the SDKs and `hourglass listen` do). The derived key
//! keeps the two signatures apart: with the secret itself, a metadata signature would also be a
//! valid `webhook-signature` for a forged request whose body is the metadata text. A batch needs
//! no second signature: each item's facts are inside its signed body.

use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use hmac::{Hmac, Mac};
use rand::RngCore;
use sha2::Sha256;

const SECRET_PREFIX: &str = "whsec_";

/// What the metadata key is derived with, from the secret.
const METADATA_KEY_LABEL: &[u8] = b"hourglass-signature";

/// A decoded signing key, kept as HMAC-SHA256 already keyed: each signature starts from a copy
/// of it instead of hashing the padded key again (two of the compression rounds a small webhook's
/// signature takes). Beside it, the key of the `hourglass-signature` derived from it.
#[derive(Clone)]
pub struct SigningKey {
    webhook: Arc<Hmac<Sha256>>,
    metadata: Arc<Hmac<Sha256>>,
}

/// The `hourglass-*` header values of a single delivery, as sent (or as received, to verify):
/// what `hourglass-signature` covers beside the id, the timestamp and the body.
#[derive(Debug, Clone, Copy)]
pub struct Metadata<'a> {
    pub job_id: &'a str,
    pub due_at: &'a str,
    pub attempt: &'a str,
    /// `None` when the delivery has no `hourglass-job-type` header.
    pub job_type: Option<&'a str>,
}

impl Metadata<'_> {
    /// Whether every value can stand on its own line of the signed text: header values never
    /// hold a line break, so a value that does is not one that was sent.
    fn is_plain(&self) -> bool {
        [
            self.job_id,
            self.due_at,
            self.attempt,
            self.job_type.unwrap_or(""),
        ]
        .iter()
        .all(|v| !v.contains(['\n', '\r']))
    }
}

/// Feeds the text `hourglass-signature` covers to `mac`.
fn metadata_text(
    mac: &mut Hmac<Sha256>,
    msg_id: &str,
    timestamp: &str,
    meta: &Metadata<'_>,
    body: &[u8],
) {
    for part in [
        msg_id,
        timestamp,
        meta.job_id,
        meta.due_at,
        meta.attempt,
        meta.job_type.unwrap_or(""),
    ] {
        mac.update(part.as_bytes());
        mac.update(b"\n");
    }
    mac.update(body);
}

/// Whether any `v1,<base64>` of a space-separated signature header is `mac`'s, compared in
/// constant time.
fn any_matches(header: &str, mac: impl Fn() -> Hmac<Sha256>) -> bool {
    header.split_ascii_whitespace().any(|candidate| {
        let Some(sig) = candidate
            .strip_prefix("v1,")
            .and_then(|b64| BASE64.decode(b64).ok())
        else {
            return false;
        };
        mac().verify_slice(&sig).is_ok()
    })
}

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SigningKey(..)")
    }
}

impl SigningKey {
    pub fn parse(secret: &str) -> Option<Self> {
        secret_bytes(secret).map(|k| {
            let webhook = Hmac::<Sha256>::new_from_slice(&k).expect("hmac takes any key length");
            let mut derive = webhook.clone();
            derive.update(METADATA_KEY_LABEL);
            let metadata = Hmac::<Sha256>::new_from_slice(&derive.finalize().into_bytes())
                .expect("hmac takes any key length");
            Self {
                webhook: Arc::new(webhook),
                metadata: Arc::new(metadata),
            }
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
        let mut mac = (*self.webhook).clone();
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
        any_matches(header, || {
            let mut mac = (*self.webhook).clone();
            mac.update(msg_id.as_bytes());
            mac.update(b".");
            mac.update(timestamp.as_bytes());
            mac.update(b".");
            mac.update(body);
            mac
        })
    }

    /// The `hourglass-signature` header value by this key alone.
    pub fn sign_metadata(
        &self,
        msg_id: &str,
        timestamp: i64,
        meta: &Metadata<'_>,
        body: &[u8],
    ) -> String {
        let mut header = String::with_capacity(SIGNATURE_LEN);
        self.sign_metadata_into(msg_id, timestamp, meta, body, &mut header);
        header
    }

    /// Appends `v1,<base64 signature>` of the delivery's metadata to `header`.
    fn sign_metadata_into(
        &self,
        msg_id: &str,
        timestamp: i64,
        meta: &Metadata<'_>,
        body: &[u8],
        header: &mut String,
    ) {
        let mut mac = (*self.metadata).clone();
        metadata_text(
            &mut mac,
            msg_id,
            itoa::Buffer::new().format(timestamp),
            meta,
            body,
        );
        header.push_str("v1,");
        BASE64.encode_string(mac.finalize().into_bytes(), header);
    }

    /// Whether an `hourglass-signature` header value carries a `v1` signature by this key of the
    /// delivery's id, timestamp, metadata and body, all as received.
    pub fn verify_metadata(
        &self,
        msg_id: &str,
        timestamp: &str,
        meta: &Metadata<'_>,
        body: &[u8],
        header: &str,
    ) -> bool {
        if !meta.is_plain() || msg_id.contains(['\n', '\r']) || timestamp.contains(['\n', '\r']) {
            return false;
        }
        any_matches(header, || {
            let mut mac = (*self.metadata).clone();
            metadata_text(&mut mac, msg_id, timestamp, meta, body);
            mac
        })
    }
}

/// The key bytes of a `whsec_` secret (at least 16), or `None` when it is not one.
pub fn secret_bytes(secret: &str) -> Option<Vec<u8>> {
    let encoded = secret.strip_prefix(SECRET_PREFIX).unwrap_or(secret);
    BASE64.decode(encoded).ok().filter(|k| k.len() >= 16)
}

/// A fresh random secret in the `whsec_` format.
pub fn generate_secret() -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    format!("{SECRET_PREFIX}{}", BASE64.encode(bytes))
}

/// The keys a delivery is signed with: the current one, and the replaced one during an overlap.
#[derive(Clone, Debug)]
pub struct SigningKeys(pub(crate) Vec<SigningKey>);

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

    /// The `hourglass-signature` header value: one `v1,<sig>` per key, space-separated.
    pub fn sign_metadata(
        &self,
        msg_id: &str,
        timestamp: i64,
        meta: &Metadata<'_>,
        body: &[u8],
    ) -> String {
        let mut header = String::with_capacity(self.0.len() * (SIGNATURE_LEN + 1));
        for (i, key) in self.0.iter().enumerate() {
            if i > 0 {
                header.push(' ');
            }
            key.sign_metadata_into(msg_id, timestamp, meta, body, &mut header);
        }
        header
    }
}

/// Length of one `v1,<base64 of 32 bytes>` signature.
const SIGNATURE_LEN: usize = 3 + 44;

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

    /// The same vector is checked by the Python and TypeScript SDKs' verifiers (computed
    /// independently with Python's hmac module), so the three agree on the signed text.
    const META: Metadata<'static> = Metadata {
        job_id: "01a1fee1-265e-739b-9809-3d3692d507c6",
        due_at: "2026-11-22T12:12:10.719Z",
        attempt: "2",
        job_type: Some("reminder.flight"),
    };
    const META_ID: &str = "01a1fee1265e739b98093d3692d507c6_1795277530719";

    #[test]
    fn metadata_signature_matches_its_vector_and_covers_every_field() {
        let key = SigningKey::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let keys = SigningKeys(vec![key.clone()]);
        let body = br#"{"flight":"LH 400"}"#;
        let header = keys.sign_metadata(META_ID, 1795277530, &META, body);
        assert_eq!(header, "v1,8a/2M9ECOVVnij/pxrlAKLdK5QXhX8JStkWIqk/KuGk=");
        let untyped = Metadata {
            attempt: "1",
            job_type: None,
            ..META
        };
        assert_eq!(
            keys.sign_metadata(META_ID, 1795277530, &untyped, b"null"),
            "v1,2NwlIhSapUL0k/FNTmGjpgjoymAOfgYF5Du+poxQc7s="
        );
        let verify = |id: &str, ts: &str, meta: &Metadata<'_>, body: &[u8]| {
            key.verify_metadata(id, ts, meta, body, &header)
        };
        assert!(verify(META_ID, "1795277530", &META, body));
        // Each field altered alone fails: the replayed request with a forged header.
        for forged in [
            Metadata {
                job_type: Some("account.delete"),
                ..META
            },
            Metadata {
                job_type: None,
                ..META
            },
            Metadata {
                job_id: "00000000-0000-0000-0000-000000000000",
                ..META
            },
            Metadata {
                due_at: "2026-11-22T12:12:10.720Z",
                ..META
            },
            Metadata {
                attempt: "1",
                ..META
            },
            // Text moved between two fields.
            Metadata {
                attempt: "2\nreminder.flight",
                job_type: Some(""),
                ..META
            },
        ] {
            assert!(!verify(META_ID, "1795277530", &forged, body), "{forged:?}");
        }
        assert!(!verify("other_1", "1795277530", &META, body));
        assert!(!verify(META_ID, "1795277531", &META, body));
        assert!(!verify(META_ID, "1795277530", &META, b"{}"));
        // The webhook signature of the same request is not a metadata signature, and the
        // metadata signature is not a webhook signature of the metadata text.
        let webhook = key.sign(META_ID, 1795277530, body);
        assert!(!key.verify_metadata(META_ID, "1795277530", &META, body, &webhook));
        // Split at its dots, the metadata text reads as `id.timestamp.body` to a Standard
        // Webhooks verifier: under the secret itself this would verify.
        let id = format!(
            "{META_ID}\n1795277530\n{}\n2026-11-22T12:12:10",
            META.job_id
        );
        let body_after = [&b"flight\n"[..], body].concat();
        assert!(!key.verify(&id, "719Z\n2\nreminder", &body_after, &header));
    }

    #[test]
    fn generated_secrets_parse() {
        assert!(SigningKey::parse(&generate_secret()).is_some());
        assert!(SigningKey::parse("whsec_short").is_none());
    }
}
