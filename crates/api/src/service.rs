//! The node's and namespace's other answers: the cluster's nodes, open circuit breakers, the
//! connections a namespace may use, its webhook signing secret, and the health checks.

use std::borrow::Cow;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::instant;

/// A live node of the cluster, as its latest heartbeat said. Keys sorted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Node {
    /// Occurrences the node held claimed at its latest heartbeat, by its own count.
    pub claims_held: u64,
    /// The node's id, its name in leases.
    pub id: String,
    #[serde(with = "instant")]
    pub last_heartbeat: Timestamp,
    #[serde(with = "instant")]
    pub started_at: Timestamp,
    pub version: String,
}

/// `GET /v1/nodes`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(description = "The cluster's live nodes."))]
pub struct NodeList {
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<crate::openapi::Node>))]
    pub nodes: Vec<Node>,
}

/// A destination whose circuit breaker is open on the node that answered. Keys sorted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(
    feature = "openapi",
    schema(
        description = "A destination whose circuit breaker is open on this node, and since \
        when."
    )
)]
pub struct Breaker {
    /// Scheme, host and port, e.g. `https://api.example.com:443`.
    #[cfg_attr(feature = "openapi", schema(example = "https://api.example.com:443"))]
    pub destination: String,
    #[serde(with = "instant")]
    #[cfg_attr(feature = "openapi", schema(value_type = crate::openapi::InstantOut))]
    pub open_since: Timestamp,
}

/// `GET /v1/breakers`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(
    feature = "openapi",
    schema(
        description = "The namespace's destinations whose circuit breaker is open on this node."
    )
)]
pub struct BreakerList {
    #[cfg_attr(feature = "openapi", schema(inline))]
    pub breakers: Vec<Breaker>,
}

/// A bus or cloud connection the namespace may use. Keys sorted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Connection {
    pub kind: String,
    pub name: String,
    /// This node's publish counts, for a connection the namespace has to itself only.
    pub published: Option<Published>,
}

/// Publishes through a connection since the node started. Keys sorted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Published {
    pub delivered: u64,
    pub rejected: u64,
    pub retry: u64,
}

/// `GET /v1/connections`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConnectionList {
    pub connections: Vec<Connection>,
}

/// `POST /v1/signing-secret`'s optional body.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RotateSecret {
    /// `"24h"` (default), up to 7 days; `"0s"` drops the old secret at once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub overlap: Option<String>,
}

/// A namespace's current webhook signing secret (read or just rotated). Keys sorted. Its
/// `Debug` leaves the secret out.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SigningSecret {
    pub namespace: String,
    /// A rotation's answer only: what the rotation means for deliveries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Until when deliveries also carry a signature by the secret the last rotation replaced.
    #[serde(with = "instant::option")]
    pub previous_valid_until: Option<Timestamp>,
    /// `whsec_` and the base64 of the key: what a receiver verifies deliveries with.
    pub signing_secret: String,
}

impl std::fmt::Debug for SigningSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SigningSecret")
            .field("namespace", &self.namespace)
            .field("signing_secret", &"<redacted>")
            .field("previous_valid_until", &self.previous_valid_until)
            .finish()
    }
}

/// `GET /healthz` and `GET /readyz`: `{"status": "ok"}`, `{"status": "ready"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Status {
    pub status: Cow<'static, str>,
}

/// What an API key may do, from least to most (`[[api_keys]]`'s `role`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(
    feature = "openapi",
    schema(
        description = "`reader` reads; `worker` leases, acks, nacks and extends queue messages \
        and reads queues; `writer` also creates, changes and triggers jobs; `admin` also reads \
        and rotates the signing secret, replays and purges dead letters and reads breakers."
    )
)]
#[serde(rename_all = "snake_case")]
pub enum KeyRole {
    Reader,
    Worker,
    Writer,
    Admin,
}

/// A route of the API: its method and path template.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AllowedRoute {
    #[cfg_attr(feature = "openapi", schema(example = "GET"))]
    pub method: String,
    #[cfg_attr(feature = "openapi", schema(example = "/v1/jobs/{id}"))]
    pub path: String,
}

/// `GET /v1/whoami`: the caller's API key as the node sees it, and what it may do. Keys sorted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(
    feature = "openapi",
    schema(description = "The caller's API key: its namespace, role and the routes it may call.")
)]
pub struct Identity {
    /// Whether the key names its namespace per request (`all_namespaces = true`): it may then
    /// act in any namespace the `hourglass-namespace` header names.
    pub all_namespaces: bool,
    /// Whether the node runs without API keys (development): every caller is an admin of every
    /// namespace.
    pub development: bool,
    /// The key's id, as the audit log records it: the first 12 hex digits of its SHA-256 (`open`
    /// in development mode). Never the key.
    pub key_id: String,
    /// The namespace this request acts in.
    pub namespace: String,
    pub role: KeyRole,
    /// Every route that needs a key and that this key may call, sorted by path then method.
    pub routes: Vec<AllowedRoute>,
}
