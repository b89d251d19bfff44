//! Queue receipts: a worker's proof that it holds a leased message.
//!
//! A receipt names the job and the claim's token, and the token alone would be guessable (a
//! counter from 1, and job ids are in the message listing). So it also carries a MAC over both,
//! HMAC-SHA256 truncated to 128 bits, under a receipt key every node sharing the store uses: a
//! random secret kept in the store's signing-secret table under [`RECEIPT_KEY_NAME`], a name no
//! namespace can have, created by the first node that needs it (the store's "first one wins"
//! write) and never rotated by the API. It is read once per process and needs nothing but the
//! store, so it works across nodes on PostgreSQL and DynamoDB and in serverless functions. A
//! receipt whose MAC does not match is refused as a lease this node does not know.

use std::fmt;
use std::str::FromStr;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as BASE64URL;
use hmac::{Hmac, Mac};
use hourglass_core::{Claim, FencingToken, JobId};
use hourglass_store::{Result, Store};
use sha2::Sha256;

/// A worker's proof that it holds a message: the job, the claim's fencing token, and the MAC
/// that makes the pair unguessable (only [`crate::Queues`] makes one, and it checks the MAC of every
/// receipt it is given).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Receipt {
    pub claim: Claim,
    mac: [u8; RECEIPT_MAC_BYTES],
}

/// Bytes of HMAC-SHA256 a receipt keeps: 128 bits, past any guessing.
const RECEIPT_MAC_BYTES: usize = 16;

/// The name the receipt key is stored under, beside the namespaces' signing secrets. Namespace
/// names are letters, digits, `-`, `_` and `.`, so none can be this.
pub const RECEIPT_KEY_NAME: &str = "hourglass:receipts";

impl fmt::Display for Receipt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // `{job id, 32 hex digits}.{token}.{MAC, 22 base64url characters}`, written directly: a
        // lease answers one a message.
        f.write_str(
            self.claim
                .job_id
                .simple()
                .encode_lower(&mut uuid::Uuid::encode_buffer()),
        )?;
        f.write_str(".")?;
        f.write_str(itoa::Buffer::new().format(self.claim.token.as_i64()))?;
        f.write_str(".")?;
        let mut mac = [0u8; 22];
        let n = BASE64URL
            .encode_slice(self.mac, &mut mac)
            .map_err(|_| fmt::Error)?;
        f.write_str(std::str::from_utf8(&mac[..n]).map_err(|_| fmt::Error)?)
    }
}

impl FromStr for Receipt {
    type Err = ();

    /// Reads the form only; whether the MAC is genuine is for [`crate::Queues`] to say.
    fn from_str(s: &str) -> std::result::Result<Self, ()> {
        let (id, rest) = s.split_once('.').ok_or(())?;
        let (token, mac) = rest.split_once('.').ok_or(())?;
        if id.len() != 32 || mac.len() != 22 {
            return Err(());
        }
        let job_id = JobId::try_parse(id).map_err(|_| ())?;
        let parsed: i64 = token.parse().map_err(|_| ())?;
        // Only the canonical spelling (no `+`, no leading zeros): one receipt, one string.
        if parsed <= 0 || itoa::Buffer::new().format(parsed) != token {
            return Err(());
        }
        let mut bytes = [0u8; RECEIPT_MAC_BYTES];
        match BASE64URL.decode_slice(mac, &mut bytes) {
            Ok(RECEIPT_MAC_BYTES) => {}
            _ => return Err(()),
        }
        // 22 characters carry 132 bits: the last one's spare bits must be zero.
        if BASE64URL.encode(bytes) != mac {
            return Err(());
        }
        Ok(Self {
            claim: Claim::new(job_id, FencingToken::from_i64(parsed)),
            mac: bytes,
        })
    }
}

/// The keyed MAC of receipts, loaded from the store on first use.
#[derive(Default)]
pub(crate) struct ReceiptKey(tokio::sync::OnceCell<Hmac<Sha256>>);

impl ReceiptKey {
    pub(crate) async fn get(&self, store: &dyn Store) -> Result<&Hmac<Sha256>> {
        self.0
            .get_or_try_init(|| async {
                let secret = match store.signing_secrets(RECEIPT_KEY_NAME).await? {
                    Some(secrets) => secrets.current,
                    None => {
                        store
                            .init_signing_secret(
                                RECEIPT_KEY_NAME,
                                &crate::signing::generate_secret(),
                            )
                            .await?
                    }
                };
                let key = crate::signing::secret_bytes(&secret).ok_or_else(|| {
                    hourglass_store::StoreError::Corrupt("stored receipt key is malformed".into())
                })?;
                Ok(Hmac::<Sha256>::new_from_slice(&key).expect("hmac takes any key length"))
            })
            .await
    }
}

fn receipt_mac(key: &Hmac<Sha256>, claim: Claim) -> Hmac<Sha256> {
    let mut mac = key.clone();
    mac.update(claim.job_id.as_bytes());
    mac.update(&claim.token.as_i64().to_be_bytes());
    mac
}

pub(crate) fn seal(key: &Hmac<Sha256>, claim: Claim) -> Receipt {
    let full = receipt_mac(key, claim).finalize().into_bytes();
    let mut mac = [0u8; RECEIPT_MAC_BYTES];
    mac.copy_from_slice(&full[..RECEIPT_MAC_BYTES]);
    Receipt { claim, mac }
}

/// Whether `r`'s MAC is the key's for its job and token, compared in constant time.
pub(crate) fn genuine(key: &Hmac<Sha256>, r: &Receipt) -> bool {
    receipt_mac(key, r.claim)
        .verify_truncated_left(&r.mac)
        .is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(job_id: JobId, token: i64) -> Claim {
        Claim::new(job_id, FencingToken::from_i64(token))
    }

    #[test]
    fn receipts_round_trip_and_only_the_canonical_spelling_parses() {
        let key = Hmac::<Sha256>::new_from_slice(b"a receipt key of sixteen bytes+").unwrap();
        let r = seal(&key, claim(uuid::Uuid::now_v7(), 42));
        let text = r.to_string();
        assert_eq!(text.parse::<Receipt>(), Ok(r));
        let id = r.claim.job_id.simple().to_string();
        let (head, mac) = text.rsplit_once('.').unwrap();
        assert_eq!(head, format!("{id}.42"));
        assert_eq!(mac.len(), 22);
        assert!(genuine(&key, &r));
        for bad in [
            String::new(),
            id.clone(),
            format!("{id}."),
            format!("{id}.42"),
            format!("{id}.42."),
            format!("{id}.0.{mac}"),
            format!("{id}.-1.{mac}"),
            format!("{id}.+42.{mac}"),
            format!("{id}.042.{mac}"),
            format!("{id}.42x.{mac}"),
            format!("{id}.42.{mac}A"),
            format!("{id}.42.{}", &mac[..21]),
            format!("{id}.42.{}=", &mac[..21]),
            format!("{}.42.{mac}", r.claim.job_id.hyphenated()),
            format!("{}.42.{mac}", &id[..31]),
            "x".repeat(32) + ".1." + mac,
        ] {
            assert!(bad.parse::<Receipt>().is_err(), "{bad:?} must not parse");
        }
    }

    /// Issue 39, defect 9: receipts were `<job id>.<counter from 1>`, so from the message listing
    /// one extend with 1,000 guesses forged another worker's receipt. The right job id and token
    /// under another MAC is now refused, whatever the token.
    #[test]
    fn a_receipt_is_genuine_only_under_its_own_mac() {
        let key = Hmac::<Sha256>::new_from_slice(b"a receipt key of sixteen bytes+").unwrap();
        let other = Hmac::<Sha256>::new_from_slice(b"another key, as long as that one").unwrap();
        let job = uuid::Uuid::now_v7();
        let real = seal(&key, claim(job, 7));
        assert!(genuine(&key, &real));
        assert!(!genuine(&other, &real));
        for token in 1..=1000 {
            let guess = Receipt {
                claim: claim(job, token),
                mac: [0; RECEIPT_MAC_BYTES],
            };
            assert!(!genuine(&key, &guess), "token {token}");
        }
        // A MAC moved to another token or job does not carry over.
        let later = Receipt {
            claim: claim(job, 8),
            ..real
        };
        assert!(!genuine(&key, &later));
        let moved = Receipt {
            claim: claim(uuid::Uuid::now_v7(), 7),
            ..real
        };
        assert!(!genuine(&key, &moved));
    }
}
