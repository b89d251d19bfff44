//! Each namespace's webhook signing secrets: the current one, and a replaced one while it stays
//! valid after a rotation.

use jiff::Timestamp;

use hourglass_core::from_ms;

use super::state::{Secrets, State};
use crate::{Result, SigningSecrets};

pub(super) fn signing_secrets(state: &State, namespace: &str) -> Result<Option<SigningSecrets>> {
    Ok(state.secrets.get(namespace).map(|s| SigningSecrets {
        current: s.current.clone(),
        previous: s.previous.clone().zip(s.previous_until.map(from_ms)),
    }))
}

pub(super) fn init_signing_secret(
    state: &mut State,
    namespace: &str,
    secret: &str,
) -> Result<String> {
    let secrets = state
        .secrets
        .entry(namespace.to_owned())
        .or_insert_with(|| Secrets {
            current: secret.to_owned(),
            ..Secrets::default()
        });
    Ok(secrets.current.clone())
}

pub(super) fn rotate_signing_secret(
    state: &mut State,
    namespace: &str,
    secret: &str,
    previous_until: Option<Timestamp>,
) -> Result<()> {
    let until = previous_until.map(|t| t.as_millisecond());
    let rotated = match state.secrets.remove(namespace) {
        // The replaced secret stays valid until `until`; without one it stops at once.
        Some(old) => Secrets {
            current: secret.to_owned(),
            previous: until.map(|_| old.current),
            previous_until: until,
        },
        // Nothing to keep.
        None => Secrets {
            current: secret.to_owned(),
            ..Secrets::default()
        },
    };
    state.secrets.insert(namespace.to_owned(), rotated);
    Ok(())
}

pub(super) fn signing_namespaces(state: &State) -> Vec<String> {
    let mut names: Vec<String> = state.secrets.keys().cloned().collect();
    names.sort();
    names
}

pub(super) fn replace_signing_secrets(
    state: &mut State,
    namespace: &str,
    expected: &SigningSecrets,
    replacement: &SigningSecrets,
) -> Result<bool> {
    if signing_secrets(state, namespace)?.as_ref() != Some(expected) {
        return Ok(false);
    }
    let (previous, previous_until) = match &replacement.previous {
        Some((secret, until)) => (Some(secret.clone()), Some(until.as_millisecond())),
        None => (None, None),
    };
    state.secrets.insert(
        namespace.to_owned(),
        Secrets {
            current: replacement.current.clone(),
            previous,
            previous_until,
        },
    );
    Ok(true)
}
