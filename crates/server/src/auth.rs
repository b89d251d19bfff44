//! API keys. A key is stored only as its SHA-256 hash and is bound to one namespace, or is an admin
//! key that may act in any namespace (chosen with the `hourglass-namespace` header).

use std::collections::HashMap;

use axum::http::HeaderMap;
use sha2::{Digest, Sha256};

use crate::error::{ApiError, ErrorCode};

pub const DEFAULT_NAMESPACE: &str = "default";
pub const NAMESPACE_HEADER: &str = "hourglass-namespace";

#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApiKeyConfig {
    /// Hex SHA-256 of the key (see `hourglass key generate`).
    pub sha256: String,
    /// The namespace the key is bound to; absent for an admin key.
    pub namespace: Option<String>,
    #[serde(default)]
    pub admin: bool,
}

/// Who is calling, after authentication.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    pub namespace: String,
}

#[derive(Debug, Clone)]
enum Grant {
    Namespace(String),
    Admin,
}

#[derive(Debug, Clone, Default)]
pub struct Auth {
    keys: HashMap<String, Grant>,
}

impl Auth {
    pub fn new(keys: &[ApiKeyConfig]) -> Result<Self, String> {
        let mut map = HashMap::new();
        for (i, k) in keys.iter().enumerate() {
            let hash = k.sha256.trim().to_ascii_lowercase();
            if hash.len() != 64 || !hash.chars().all(|c| c.is_ascii_hexdigit()) {
                return Err(format!("api_keys[{i}].sha256 is not a hex SHA-256 digest"));
            }
            let grant = match (&k.namespace, k.admin) {
                (None, true) => Grant::Admin,
                (Some(ns), false) if valid_namespace(ns) => Grant::Namespace(ns.clone()),
                (Some(_), false) => {
                    return Err(format!("api_keys[{i}].{NAMESPACE_RULE}"));
                }
                _ => {
                    return Err(format!(
                        "api_keys[{i}] must have either a namespace or admin = true"
                    ));
                }
            };
            map.insert(hash, grant);
        }
        Ok(Self { keys: map })
    }

    /// Development mode: no keys configured, every caller is an admin.
    pub fn is_open(&self) -> bool {
        self.keys.is_empty()
    }

    pub fn authenticate(&self, headers: &HeaderMap) -> Result<Principal, ApiError> {
        let requested = headers
            .get(NAMESPACE_HEADER)
            .map(|v| v.to_str().unwrap_or_default().to_string());
        let admin_namespace = || -> Result<Principal, ApiError> {
            let ns = requested
                .clone()
                .unwrap_or_else(|| DEFAULT_NAMESPACE.into());
            if !valid_namespace(&ns) {
                return Err(ApiError::bad_request(
                    ErrorCode::InvalidNamespace,
                    NAMESPACE_HEADER,
                    NAMESPACE_RULE,
                ));
            }
            Ok(Principal { namespace: ns })
        };
        if self.is_open() {
            return admin_namespace();
        }
        match self.grant(headers)? {
            Grant::Admin => admin_namespace(),
            Grant::Namespace(ns) => match requested {
                Some(other) if other != *ns => Err(ApiError::new(
                    ErrorCode::Forbidden,
                    "this api key is bound to another namespace",
                )
                .field(NAMESPACE_HEADER)),
                _ => Ok(Principal {
                    namespace: ns.clone(),
                }),
            },
        }
    }

    /// For node-wide views (`/metrics` shows every namespace's counts): an admin key, or any
    /// caller in development mode. A namespace key is refused with 403.
    pub fn authenticate_admin(&self, headers: &HeaderMap) -> Result<(), ApiError> {
        if self.is_open() {
            return Ok(());
        }
        match self.grant(headers)? {
            Grant::Admin => Ok(()),
            Grant::Namespace(_) => Err(ApiError::new(
                ErrorCode::Forbidden,
                "this view covers every namespace: use an admin api key",
            )
            .field("authorization")),
        }
    }

    /// Who a request's body is charged to: its API key's hash when keys are configured (the key
    /// was checked already), `None` in development mode, where every caller is the same.
    pub fn budget_key(&self, headers: &HeaderMap) -> Option<String> {
        if self.is_open() {
            return None;
        }
        headers
            .get(axum::http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(bearer_token)
            .map(hash_key)
    }

    /// What the request's API key grants: 401 when it is missing, malformed or unknown.
    fn grant(&self, headers: &HeaderMap) -> Result<&Grant, ApiError> {
        let unauthorized =
            |msg: &str| ApiError::new(ErrorCode::Unauthorized, msg).field("authorization");
        let header = headers
            .get(axum::http::header::AUTHORIZATION)
            .ok_or_else(|| unauthorized("missing api key: send Authorization: Bearer <key>"))?;
        let key = header
            .to_str()
            .ok()
            .and_then(bearer_token)
            .ok_or_else(|| unauthorized("malformed authorization header: use Bearer <key>"))?;
        self.keys
            .get(&hash_key(key))
            .ok_or_else(|| unauthorized("unknown api key"))
    }
}

/// The token of `Bearer <token>` credentials. The scheme is case-insensitive (RFC 9110, 11.1),
/// so `bearer` and `BEARER` count too; the spaces and tabs around the token are not part of it.
fn bearer_token(value: &str) -> Option<&str> {
    let (scheme, token) = value.split_once([' ', '\t'])?;
    let token = token.trim_matches([' ', '\t']);
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// What a namespace may be, as error messages say it.
pub const NAMESPACE_RULE: &str =
    "namespace must be 1-64 letters, digits, '-', '_' or '.', and not \".\" or \"..\"";

/// Namespaces share the queue names' alphabet; `.` and `..` are refused for the same reason
/// (dot segments in paths and metrics labels read as directory references).
pub fn valid_namespace(ns: &str) -> bool {
    !ns.is_empty()
        && ns.len() <= 64
        && ns != "."
        && ns != ".."
        && ns
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

pub fn hash_key(key: &str) -> String {
    hex::encode(Sha256::digest(key.as_bytes()))
}

/// A new random API key: `hg_` and 48 hex characters (192 bits).
pub fn generate_key() -> String {
    use rand::RngCore;
    let mut bytes = [0u8; 24];
    rand::rng().fill_bytes(&mut bytes);
    format!("hg_{}", hex::encode(bytes))
}
