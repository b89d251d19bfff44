//! Each namespace's signing secrets as the node uses them: read through from the store,
//! cached, generated on a namespace's first use, rotated with an overlap, and sealed at rest
//! when the node has a secrets key (`sealing.rs`; the store then keeps a mark naming the key,
//! and a node without it does not start).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use hourglass_core::Clock;
use hourglass_store::{SigningSecrets, Store, StoreError};
use tokio::time::Instant;

use crate::sealing::{SEALED_PREFIX, Sealing};
use crate::signing::{SigningKey, SigningKeys, generate_secret};

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
    /// Seals secrets before they are stored and opens them after, when the node has a secrets
    /// key.
    sealing: Option<Sealing>,
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

/// Where a store whose secrets are sealed keeps the id of the key that seals them: a signing
/// secret under a name no namespace can have (namespaces hold no `#`).
const SEALING_MARKER: &str = "#secrets-key";

/// Why a node may not use the store's signing secrets with the keys it was given.
#[derive(Debug)]
pub enum SealingError {
    /// The store's secrets are sealed (with the key of this id) and the node has no key.
    KeyRequired {
        sealed_with: String,
    },
    /// The store's secrets are sealed with a key the node was not given.
    WrongKey {
        sealed_with: String,
        given: String,
    },
    Store(StoreError),
}

impl std::fmt::Display for SealingError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SealingError::KeyRequired { sealed_with } => write!(
                f,
                "the store's signing secrets are encrypted with secrets key {sealed_with}: give \
                 the key with secrets_key_file in the config file or HOURGLASS_SECRETS_KEY, or \
                 wrapped by AWS KMS with secrets_key_kms or HOURGLASS_SECRETS_KEY_KMS"
            ),
            SealingError::WrongKey { sealed_with, given } => write!(
                f,
                "the store's signing secrets are encrypted with secrets key {sealed_with}, not \
                 with the given key {given}: give that key (to change keys, give the new one \
                 and the old one as secrets_previous_key_file or secrets_previous_key_kms)"
            ),
            SealingError::Store(e) => write!(f, "reading the signing secrets: {e}"),
        }
    }
}

impl std::error::Error for SealingError {}

impl From<StoreError> for SealingError {
    fn from(e: StoreError) -> Self {
        SealingError::Store(e)
    }
}

impl Secrets {
    /// Secrets stored as they are (no secrets key). [`Secrets::open`] checks the store first.
    pub fn new(store: Arc<dyn Store>, clock: Arc<dyn Clock>) -> Self {
        Self {
            store,
            clock,
            cache: Default::default(),
            sealing: None,
            loads: Default::default(),
        }
    }

    /// Secrets for a node given `sealing` (or none), checked against the store: a store whose
    /// secrets are sealed refuses a node without the key that seals them. With a key, the store
    /// is marked as sealed first (from then on a node without the key does not start), then
    /// every secret not sealed with the key in use is re-sealed, when the store was not sealed
    /// with it yet or a previous key is given; then the mark names the key in use. Answers how
    /// many namespaces' secrets it re-sealed.
    pub async fn open(
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        sealing: Option<Sealing>,
    ) -> Result<(Self, usize), SealingError> {
        let marker = store
            .signing_secrets(SEALING_MARKER)
            .await?
            .map(|m| m.current);
        let Some(sealing) = sealing else {
            return match marker {
                Some(sealed_with) => Err(SealingError::KeyRequired { sealed_with }),
                None => Ok((Self::new(store, clock), 0)),
            };
        };
        let wrong = |sealed_with: String| SealingError::WrongKey {
            sealed_with,
            given: sealing.current_id().to_owned(),
        };
        let marker = match marker {
            Some(id) if !sealing.knows(&id) => return Err(wrong(id)),
            Some(id) => id,
            None => {
                // Another node may mark it at the same moment, with its own key.
                let id = store
                    .init_signing_secret(SEALING_MARKER, sealing.current_id())
                    .await?;
                if !sealing.knows(&id) {
                    return Err(wrong(id));
                }
                // Secrets stored before now are plain text: re-seal them.
                String::new()
            }
        };
        let mut resealed = 0;
        if marker != sealing.current_id() || sealing.previous_id().is_some() {
            for namespace in store.signing_namespaces().await? {
                if namespace != SEALING_MARKER && reseal(&*store, &sealing, &namespace).await? {
                    resealed += 1;
                }
            }
            let read = store.signing_secrets(SEALING_MARKER).await?;
            if let Some(read) = read
                && read.current != sealing.current_id()
            {
                let mark = SigningSecrets {
                    current: sealing.current_id().to_owned(),
                    previous: None,
                };
                if !store
                    .replace_signing_secrets(SEALING_MARKER, &read, &mark)
                    .await?
                {
                    return Err(SealingError::Store(StoreError::Unavailable(
                        "the secrets key mark changed while re-sealing: another node is \
                         changing keys; start again"
                            .into(),
                    )));
                }
            }
        }
        let mut secrets = Self::new(store, clock);
        secrets.sealing = Some(sealing);
        Ok((secrets, resealed))
    }

    /// The secret `stored` holds.
    fn unseal(&self, namespace: &str, stored: &str) -> Result<String, StoreError> {
        match &self.sealing {
            Some(sealing) => sealing
                .open(namespace, stored)
                .map_err(|e| StoreError::Corrupt(format!("namespace {namespace}: {e}"))),
            None if stored.starts_with(SEALED_PREFIX) => Err(StoreError::Corrupt(format!(
                "namespace {namespace}: the signing secret is sealed and this node has no \
                 secrets key"
            ))),
            None => Ok(stored.to_owned()),
        }
    }

    /// `secret` as it is to be stored.
    fn seal(&self, namespace: &str, secret: &str) -> String {
        match &self.sealing {
            Some(sealing) => sealing.seal(namespace, secret),
            None => secret.to_owned(),
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
                current: parse_stored(&self.unseal(namespace, &secrets.current)?)?,
                previous: match secrets.previous {
                    Some((secret, until)) => {
                        Some((parse_stored(&self.unseal(namespace, &secret)?)?, until))
                    }
                    None => None,
                },
            },
            None => {
                let stored = self
                    .store
                    .init_signing_secret(namespace, &self.seal(namespace, &generate_secret()))
                    .await?;
                Cached {
                    loaded: Instant::now(),
                    current: parse_stored(&self.unseal(namespace, &stored)?)?,
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

    /// The namespace's current secret as stored (`whsec_...`), read from the store, not the
    /// cache, and generated and stored first when the namespace has none yet (as its first
    /// delivery would); with the instant until which the replaced one still signs, while it does.
    pub async fn current(
        &self,
        namespace: &str,
    ) -> Result<(String, Option<jiff::Timestamp>), StoreError> {
        match self.store.signing_secrets(namespace).await? {
            Some(secrets) => {
                let current = self.unseal(namespace, &secrets.current)?;
                parse_stored(&current)?;
                let now = self.clock.now();
                let until = secrets
                    .previous
                    .map(|(_, until)| until)
                    .filter(|until| now < *until);
                Ok((current, until))
            }
            None => {
                let stored = self
                    .store
                    .init_signing_secret(namespace, &self.seal(namespace, &generate_secret()))
                    .await?;
                let current = self.unseal(namespace, &stored)?;
                parse_stored(&current)?;
                Ok((current, None))
            }
        }
    }

    /// Replaces a namespace's secret and returns the new one ([`Secrets::current`] reads it
    /// again). The replaced secret keeps signing (beside the new one) for `overlap`. The audit
    /// entry saying that `by` rotated it is written in the rotation's transaction.
    pub async fn rotate(
        &self,
        namespace: &str,
        overlap: Duration,
        by: &crate::Actor,
    ) -> Result<String, StoreError> {
        let secret = generate_secret();
        let now = self.clock.now();
        let until = (!overlap.is_zero()).then(|| hourglass_core::add_saturating(now, overlap));
        let entry = by.entry(
            namespace,
            hourglass_store::AuditAction::RotateSecret,
            &[],
            now,
        );
        self.store
            .rotate_signing_secret(
                namespace,
                &self.seal(namespace, &secret),
                until,
                Some(entry),
            )
            .await?;
        self.cache.write().expect("secrets lock").remove(namespace);
        Ok(secret)
    }
}

/// Re-seals one namespace's secrets with the key in use, unless they are already: read, seal,
/// replace over what was read (a rotation in between wins: read again). True when it re-sealed.
async fn reseal(store: &dyn Store, sealing: &Sealing, namespace: &str) -> Result<bool, StoreError> {
    for _ in 0..5 {
        let Some(read) = store.signing_secrets(namespace).await? else {
            return Ok(false);
        };
        let current_ok = sealing.is_current(&read.current);
        let previous_ok = read
            .previous
            .as_ref()
            .is_none_or(|(secret, _)| sealing.is_current(secret));
        if current_ok && previous_ok {
            return Ok(false);
        }
        let again = |stored: &str| -> Result<String, StoreError> {
            let secret = sealing
                .open(namespace, stored)
                .map_err(|e| StoreError::Corrupt(format!("namespace {namespace}: {e}")))?;
            Ok(sealing.seal(namespace, &secret))
        };
        let replacement = SigningSecrets {
            current: again(&read.current)?,
            previous: match &read.previous {
                Some((secret, until)) => Some((again(secret)?, *until)),
                None => None,
            },
        };
        if store
            .replace_signing_secrets(namespace, &read, &replacement)
            .await?
        {
            return Ok(true);
        }
    }
    Err(StoreError::Unavailable(format!(
        "namespace {namespace}: its signing secrets kept changing while being re-sealed"
    )))
}

#[cfg(test)]
mod tests {
    use hourglass_core::SystemClock;
    use hourglass_store::MemoryStore;

    use super::*;
    use crate::sealing::SecretsKey;

    fn sealing(current: &str, previous: Option<&str>) -> Option<Sealing> {
        Some(Sealing::new(
            SecretsKey::parse(current).unwrap(),
            previous.map(|p| SecretsKey::parse(p).unwrap()),
        ))
    }

    async fn open(
        store: &Arc<MemoryStore>,
        with: Option<Sealing>,
    ) -> Result<(Secrets, usize), SealingError> {
        Secrets::open(store.clone(), Arc::new(SystemClock), with).await
    }

    /// Every stored text of `namespaces`, current and previous.
    async fn stored(store: &MemoryStore, namespaces: &[&str]) -> Vec<String> {
        let mut texts = Vec::new();
        for ns in namespaces {
            let s = store.signing_secrets(ns).await.unwrap().unwrap();
            texts.push(s.current);
            texts.extend(s.previous.map(|(p, _)| p));
        }
        texts
    }

    #[tokio::test]
    async fn a_key_seals_what_was_plain_and_then_a_node_needs_it() {
        let store = Arc::new(MemoryStore::new());
        let (plain, resealed) = open(&store, None).await.unwrap();
        assert_eq!(resealed, 0);
        let (a, _) = plain.current("a").await.unwrap();
        plain.current("b").await.unwrap();
        plain
            .rotate("b", Duration::from_secs(3600), &crate::Actor::new("test"))
            .await
            .unwrap();
        let (b, _) = plain.current("b").await.unwrap();
        assert!(
            stored(&store, &["a", "b"])
                .await
                .iter()
                .all(|t| t.starts_with("whsec_"))
        );

        let key = SecretsKey::generate();
        let (sealed, resealed) = open(&store, sealing(&key, None)).await.unwrap();
        assert_eq!(resealed, 2);
        let texts = stored(&store, &["a", "b"]).await;
        assert_eq!(texts.len(), 3, "b keeps its previous secret");
        assert!(texts.iter().all(|t| !t.contains("whsec_")), "{texts:?}");
        // The secrets themselves did not change: receivers verify as before.
        assert_eq!(sealed.current("a").await.unwrap().0, a);
        assert_eq!(sealed.current("b").await.unwrap().0, b);
        assert_eq!(sealed.keys_for("b").await.unwrap().0.len(), 2);
        // New namespaces' secrets are sealed from the start.
        sealed.current("c").await.unwrap();
        assert!(!stored(&store, &["c"]).await[0].contains("whsec_"));

        // From now on a node without the key, or with another, does not start.
        let id = SecretsKey::parse(&key).unwrap().id().to_owned();
        match open(&store, None).await {
            Err(SealingError::KeyRequired { sealed_with }) => assert_eq!(sealed_with, id),
            other => panic!("expected KeyRequired, got {:?}", other.map(|(_, n)| n)),
        }
        match open(&store, sealing(&SecretsKey::generate(), None)).await {
            Err(e @ SealingError::WrongKey { .. }) => assert!(e.to_string().contains(&id), "{e}"),
            other => panic!("expected WrongKey, got {:?}", other.map(|(_, n)| n)),
        }
        // The same key again: nothing to re-seal.
        assert_eq!(open(&store, sealing(&key, None)).await.unwrap().1, 0);
    }

    #[tokio::test]
    async fn changing_keys_reseals_every_secret_and_retires_the_old_key() {
        let store = Arc::new(MemoryStore::new());
        let old = SecretsKey::generate();
        let (first, _) = open(&store, sealing(&old, None)).await.unwrap();
        let (a, _) = first.current("a").await.unwrap();
        first.current("b").await.unwrap();
        let before = stored(&store, &["a", "b"]).await;

        let new = SecretsKey::generate();
        let (changed, resealed) = open(&store, sealing(&new, Some(&old))).await.unwrap();
        assert_eq!(resealed, 2);
        let after = stored(&store, &["a", "b"]).await;
        assert!(
            before.iter().all(|t| !after.contains(t)),
            "every text was sealed again"
        );
        assert_eq!(changed.current("a").await.unwrap().0, a);

        // The new key alone opens them; the old one alone is refused, naming the new.
        let (alone, resealed) = open(&store, sealing(&new, None)).await.unwrap();
        assert_eq!(resealed, 0);
        assert_eq!(alone.current("a").await.unwrap().0, a);
        let new_id = SecretsKey::parse(&new).unwrap().id().to_owned();
        match open(&store, sealing(&old, None)).await {
            Err(SealingError::WrongKey { sealed_with, .. }) => assert_eq!(sealed_with, new_id),
            other => panic!("expected WrongKey, got {:?}", other.map(|(_, n)| n)),
        }
    }
}
