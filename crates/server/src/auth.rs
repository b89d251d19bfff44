//! API keys and what they may do. A key is stored only as its SHA-256 hash. Its **scope** is one
//! namespace, or every namespace (`all_namespaces = true`, once spelled `admin = true`: the
//! namespace is then chosen per request with the `hourglass-namespace` header). Its **role** says
//! what it may do there: `reader`, `worker`, `writer` or `admin` (the default, every call). The
//! role each route needs is [`Need`], given to each route where it is registered (`routes.rs`).

use std::collections::HashMap;

use axum::http::HeaderMap;
use sha2::{Digest, Sha256};

use crate::error::{ApiError, ErrorCode};

pub const DEFAULT_NAMESPACE: &str = "default";
pub const NAMESPACE_HEADER: &str = "hourglass-namespace";

#[derive(Debug, Clone, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApiKeyConfig {
    /// Hex SHA-256 of the key (see `hourglass key generate`).
    pub sha256: String,
    /// The namespace the key is bound to; absent for a key of every namespace.
    pub namespace: Option<String>,
    /// A key for every namespace, named per request by the `hourglass-namespace` header. Its
    /// first name, `admin`, is still read: it never meant the `admin` role, which is `role`'s.
    #[serde(default, alias = "admin")]
    pub all_namespaces: bool,
    /// What the key may do in its namespace (or namespaces); `admin` when absent.
    #[serde(default)]
    pub role: Role,
}

/// What a key may do, from least to most: `reader` reads; `worker` leases, acks, nacks and
/// extends queue messages and reads queues; `writer` also creates, changes and triggers jobs (and
/// may do what a worker does); `admin` also rotates and reads the signing secret, replays and
/// purges dead letters, and reads breakers and (with a key of every namespace) the node-wide
/// views: `/metrics`, `/v1/summary`, `/v1/nodes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Role {
    Reader,
    Worker,
    Writer,
    #[default]
    Admin,
}

impl Role {
    pub const ALL: [Role; 4] = [Role::Reader, Role::Worker, Role::Writer, Role::Admin];

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Reader => "reader",
            Role::Worker => "worker",
            Role::Writer => "writer",
            Role::Admin => "admin",
        }
    }

    pub fn parse(name: &str) -> Option<Role> {
        Role::ALL.into_iter().find(|r| r.as_str() == name)
    }
}

/// Read by name, and an unknown name is refused naming the field and the roles there are.
impl<'de> serde::Deserialize<'de> for Role {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        Role::parse(&name).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "role must be one of reader, worker, writer or admin, not {name:?}"
            ))
        })
    }
}

/// The role as the API's `whoami` answer names it.
impl From<Role> for hourglass_api::KeyRole {
    fn from(role: Role) -> Self {
        match role {
            Role::Reader => Self::Reader,
            Role::Worker => Self::Worker,
            Role::Writer => Self::Writer,
            Role::Admin => Self::Admin,
        }
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a route needs of its caller. Every route is registered with one (`routes.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Need {
    /// No key: health, readiness, the OpenAPI document, the dashboard's page and assets.
    Open,
    /// Any known key, whatever its role: `/v1/whoami`, and a request under `/v1/` that no route
    /// took (its 404 or 405 is told only to a caller with a key).
    Key,
    /// Reads of jobs, runs, dead letters and connections, and schedule previews.
    Read,
    /// Reads of queues: their list, counts and messages.
    QueueRead,
    /// A worker's calls: lease, ack, nack, extend.
    Work,
    /// Creating, changing, pausing, resuming, cancelling and triggering jobs.
    Write,
    /// The namespace's signing secret, dead-letter replays and purges, breakers.
    Admin,
    /// Node-wide views covering every namespace: the `admin` role on a key of every namespace.
    NodeAdmin,
}

impl Need {
    /// Every need, for tables and tests.
    pub const ALL: [Need; 8] = [
        Need::Open,
        Need::Key,
        Need::Read,
        Need::QueueRead,
        Need::Work,
        Need::Write,
        Need::Admin,
        Need::NodeAdmin,
    ];

    /// The roles that meet this need (every role for [`Need::Open`]), least first: the
    /// OpenAPI document's `x-roles` of each operation.
    pub fn roles(self) -> &'static [Role] {
        match self {
            Need::Open | Need::Key | Need::QueueRead => &Role::ALL,
            Need::Read => &[Role::Reader, Role::Writer, Role::Admin],
            Need::Work => &[Role::Worker, Role::Writer, Role::Admin],
            Need::Write => &[Role::Writer, Role::Admin],
            Need::Admin | Need::NodeAdmin => &[Role::Admin],
        }
    }

    pub fn allows(self, role: Role) -> bool {
        self.roles().contains(&role)
    }

    /// The 403 for a key whose role does not meet this need: it names the roles that do.
    fn refusal(self, role: Role) -> ApiError {
        let roles: Vec<&str> = self.roles().iter().map(|r| r.as_str()).collect();
        let needed = match roles.as_slice() {
            [one] => (*one).to_string(),
            [init @ .., last] => format!("{} or {last}", init.join(", ")),
            [] => String::new(),
        };
        ApiError::new(
            ErrorCode::InsufficientRole,
            format!("this call needs an api key with the role {needed}; this key's role is {role}"),
        )
        .field("authorization")
    }
}

/// Who is calling, after authentication.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    pub namespace: String,
    pub role: Role,
    /// The key names its namespace per request (or the node runs without keys).
    pub all_namespaces: bool,
    /// The key's id, what the audit log records: [`key_id`] of its hash (`open` in development
    /// mode, where no key is needed).
    pub key_id: String,
}

impl Principal {
    /// The caller as the engine records it in the audit log.
    pub fn actor(&self) -> hourglass_engine::Actor {
        hourglass_engine::Actor::new(self.key_id.clone())
    }
}

/// The id of the key whose SHA-256 is `sha256` (hex): its first 12 hex digits, which name the
/// key (the operator finds it in the `sha256` of its `[[api_keys]]` entry) without being it.
pub fn key_id(sha256: &str) -> String {
    sha256.chars().take(12).collect()
}

/// The key id recorded for callers of a node without keys (development mode).
pub const OPEN_KEY_ID: &str = "open";

#[derive(Debug, Clone)]
enum Scope {
    Namespace(String),
    AllNamespaces,
}

#[derive(Debug, Clone)]
struct Grant {
    scope: Scope,
    role: Role,
    key_id: String,
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
            let scope = match (&k.namespace, k.all_namespaces) {
                (None, true) => Scope::AllNamespaces,
                (Some(ns), false) if valid_namespace(ns) => Scope::Namespace(ns.clone()),
                (Some(_), false) => {
                    return Err(format!("api_keys[{i}].{NAMESPACE_RULE}"));
                }
                _ => {
                    return Err(format!(
                        "api_keys[{i}] must have either a namespace or all_namespaces = true"
                    ));
                }
            };
            let key_id = key_id(&hash);
            map.insert(
                hash,
                Grant {
                    scope,
                    role: k.role,
                    key_id,
                },
            );
        }
        Ok(Self { keys: map })
    }

    /// Development mode: no keys configured, every caller is an admin of every namespace.
    pub fn is_open(&self) -> bool {
        self.keys.is_empty()
    }

    pub fn authenticate(&self, headers: &HeaderMap) -> Result<Principal, ApiError> {
        let requested = headers
            .get(NAMESPACE_HEADER)
            .map(|v| v.to_str().unwrap_or_default().to_string());
        let any_namespace = |role: Role, key_id: &str| -> Result<Principal, ApiError> {
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
            Ok(Principal {
                namespace: ns,
                role,
                all_namespaces: true,
                key_id: key_id.to_owned(),
            })
        };
        if self.is_open() {
            return any_namespace(Role::Admin, OPEN_KEY_ID);
        }
        let grant = self.grant(headers)?;
        match &grant.scope {
            Scope::AllNamespaces => any_namespace(grant.role, &grant.key_id),
            Scope::Namespace(ns) => match requested {
                Some(other) if other != *ns => Err(ApiError::new(
                    ErrorCode::Forbidden,
                    "this api key is bound to another namespace",
                )
                .field(NAMESPACE_HEADER)),
                _ => Ok(Principal {
                    namespace: ns.clone(),
                    role: grant.role,
                    all_namespaces: false,
                    key_id: grant.key_id.clone(),
                }),
            },
        }
    }

    /// Whether the request may take a route that needs `need`: 401 without a known key, 403
    /// `forbidden` for another namespace (or a namespace key on a node-wide view), 403
    /// `insufficient_role` for a role that does not meet the need. In development mode every
    /// caller is an admin of every namespace (the handlers still check the namespace header).
    pub fn authorize(&self, headers: &HeaderMap, need: Need) -> Result<(), ApiError> {
        if need == Need::Open || self.is_open() {
            return Ok(());
        }
        if need == Need::NodeAdmin {
            let grant = self.grant(headers)?;
            if let Scope::Namespace(_) = grant.scope {
                return Err(ApiError::new(
                    ErrorCode::Forbidden,
                    "this view covers every namespace: use an api key of every namespace \
                     (all_namespaces = true) with the admin role",
                )
                .field("authorization"));
            }
            return match need.allows(grant.role) {
                true => Ok(()),
                false => Err(need.refusal(grant.role)),
            };
        }
        let principal = self.authenticate(headers)?;
        match need.allows(principal.role) {
            true => Ok(()),
            false => Err(need.refusal(principal.role)),
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
