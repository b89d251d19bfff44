//! Anchors: a namespace's named instants (`PUT /v1/anchors/{name}`), which a job's
//! `schedule.anchor` names with an `offset`. Moving one re-times its jobs.

use serde::{Deserialize, Serialize};

/// An anchor as written: its instant.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct AnchorIn {
    /// The instant (RFC 3339 with an offset), e.g. a flight's departure.
    pub at: String,
}

/// A stored anchor.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Anchor {
    pub name: String,
    /// Its instant (RFC 3339).
    pub at: String,
    /// When it was last written (RFC 3339).
    pub updated_at: String,
    /// In the answer to a `PUT`: how many active or paused jobs referring to the anchor were
    /// re-timed (their pending occurrence moved, older claims fenced).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jobs_moved: Option<u64>,
}

/// A namespace's anchors, in name order.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AnchorList {
    pub anchors: Vec<Anchor>,
}

/// The answer to `DELETE /v1/anchors/{name}`: how many of its jobs were cancelled.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AnchorDeleted {
    pub name: String,
    pub jobs_cancelled: u64,
}

/// `DELETE /v1/anchors/{name}`'s query.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct AnchorDeleteQuery {
    /// `true` refuses the delete (`409 anchor_in_use`) while an active or paused job refers to
    /// the anchor, instead of cancelling those jobs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub if_unused: Option<bool>,
}
