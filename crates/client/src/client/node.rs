//! The client's operations on the namespace's anchors, calendars, signing secret and audit log, the
//! caller's key, the node's and the cluster's state (breakers, connections, nodes, the summary),
//! the API document, health and metrics.

use std::time::Duration;

use reqwest::Method;

use hourglass_api::{
    Anchor, AnchorDeleteQuery, AnchorDeleted, AnchorIn, AnchorList, AuditList, AuditQuery, Breaker,
    BreakerList, Calendar, CalendarIn, CalendarList, Connection, ConnectionList, Identity,
    NodeList, RotateSecret, Status, Summary,
};

use super::{Client, Request};
use crate::error::Error;
use crate::types::{Node, SigningSecret, duration_text};

impl Client {
    /// `GET /v1/anchors`: the namespace's anchors, in name order.
    pub async fn list_anchors(&self) -> Result<Vec<Anchor>, Error> {
        let list: AnchorList = self.get(&["v1", "anchors"]).await?;
        Ok(list.anchors)
    }

    /// `GET /v1/anchors/{name}`: one anchor.
    pub async fn get_anchor(&self, name: &str) -> Result<Anchor, Error> {
        self.get(&["v1", "anchors", name]).await
    }

    /// `PUT /v1/anchors/{name}`: creates an anchor at `at` (RFC 3339), or moves it there with
    /// every active or paused job referring to it (the answer's `jobs_moved`).
    pub async fn put_anchor(&self, name: &str, at: &str) -> Result<Anchor, Error> {
        let body = AnchorIn { at: at.to_owned() };
        self.send(Request::new(Method::PUT, &["v1", "anchors", name]).json(&body)?)
            .await
    }

    /// `DELETE /v1/anchors/{name}`: deletes an anchor and cancels its active or paused jobs;
    /// with `if_unused`, refused (`409 anchor_in_use`) while any refers to it.
    pub async fn delete_anchor(&self, name: &str, if_unused: bool) -> Result<AnchorDeleted, Error> {
        let query = AnchorDeleteQuery {
            if_unused: if_unused.then_some(true),
        };
        self.send(Request::new(Method::DELETE, &["v1", "anchors", name]).query(&query))
            .await
    }

    /// `GET /v1/calendars`: the namespace's calendars, in name order.
    pub async fn list_calendars(&self) -> Result<Vec<Calendar>, Error> {
        let list: CalendarList = self.get(&["v1", "calendars"]).await?;
        Ok(list.calendars)
    }

    /// `GET /v1/calendars/{name}`: one calendar.
    pub async fn get_calendar(&self, name: &str) -> Result<Calendar, Error> {
        self.get(&["v1", "calendars", name]).await
    }

    /// `PUT /v1/calendars/{name}`: creates or replaces a calendar; the node re-plans the jobs
    /// that name it (the answer's `replanned`).
    pub async fn put_calendar(&self, name: &str, calendar: &CalendarIn) -> Result<Calendar, Error> {
        self.send(Request::new(Method::PUT, &["v1", "calendars", name]).json(calendar)?)
            .await
    }

    /// `DELETE /v1/calendars/{name}`: deletes a calendar no active or paused job names (else
    /// `409 calendar_in_use`).
    pub async fn delete_calendar(&self, name: &str) -> Result<(), Error> {
        self.exchange(Request::new(Method::DELETE, &["v1", "calendars", name]))
            .await
            .map(drop)
    }

    /// `GET /v1/audit`: one page of the namespace's audit log, newest first (who changed what;
    /// for writers and admins), only the entries about `job` when given. Pass the page's
    /// `next_cursor` as `cursor` for the next one.
    pub async fn list_audit(
        &self,
        limit: Option<usize>,
        cursor: Option<&str>,
        job: Option<&str>,
    ) -> Result<AuditList, Error> {
        let query = AuditQuery {
            limit,
            cursor: cursor.map(str::to_owned),
            job: job.map(str::to_owned),
        };
        self.send(Request::new(Method::GET, &["v1", "audit"]).query(&query))
            .await
    }

    /// `GET /v1/signing-secret`: the namespace's current webhook signing secret, read without
    /// rotating it (a namespace without one gets it now). Needs the namespace's own API key, or
    /// an admin key naming it.
    pub async fn signing_secret(&self) -> Result<SigningSecret, Error> {
        self.get(&["v1", "signing-secret"]).await
    }

    /// `POST /v1/signing-secret`: rotates the namespace's signing secret and answers the new
    /// one. The replaced secret keeps signing beside it for `overlap` (the node's default 24 h
    /// when `None`, at most 7 days; zero drops it at once).
    pub async fn rotate_signing_secret(
        &self,
        overlap: Option<Duration>,
    ) -> Result<SigningSecret, Error> {
        let request = Request::new(Method::POST, &["v1", "signing-secret"]);
        let request = match overlap {
            None => request,
            Some(overlap) => request.json(&RotateSecret {
                overlap: Some(duration_text(overlap)),
            })?,
        };
        self.send(request).await
    }

    /// `GET /v1/breakers`: the namespace's destinations whose circuit breaker is open on the
    /// node that answers.
    pub async fn list_breakers(&self) -> Result<Vec<Breaker>, Error> {
        let list: BreakerList = self.get(&["v1", "breakers"]).await?;
        Ok(list.breakers)
    }

    /// `GET /v1/connections`: the bus and cloud connections the namespace may use, with the
    /// node's publish counts for those it has to itself.
    pub async fn list_connections(&self) -> Result<Vec<Connection>, Error> {
        let list: ConnectionList = self.get(&["v1", "connections"]).await?;
        Ok(list.connections)
    }

    /// `GET /v1/whoami`: this client's API key as the node sees it: the namespace its requests
    /// act in, its role, and every route it may call.
    pub async fn whoami(&self) -> Result<Identity, Error> {
        self.get(&["v1", "whoami"]).await
    }

    /// `GET /v1/nodes`: the cluster's live nodes, by id, each as its latest heartbeat said.
    /// Cluster-wide: needs an admin API key when the node has keys.
    pub async fn list_nodes(&self) -> Result<Vec<Node>, Error> {
        let list: NodeList = self.get(&["v1", "nodes"]).await?;
        Ok(list.nodes)
    }

    /// `GET /v1/summary`: the node's and the store's figures, as the dashboard charts them:
    /// every namespace's, so an admin key's (a namespace key gets 403).
    pub async fn summary(&self) -> Result<Summary, Error> {
        self.get(&["v1", "summary"]).await
    }

    /// `GET /v1/openapi.json`: the API's OpenAPI document, as the node serves it.
    pub async fn openapi(&self) -> Result<serde_json::Value, Error> {
        self.get(&["v1", "openapi.json"]).await
    }

    /// `GET /healthz`: the process is up (`{"status": "ok"}`).
    pub async fn healthz(&self) -> Result<Status, Error> {
        self.get(&["healthz"]).await
    }

    /// `GET /readyz`: the node can reach its store and takes requests (`{"status": "ready"}`);
    /// an error answer (503) while it cannot.
    pub async fn readyz(&self) -> Result<Status, Error> {
        self.get(&["readyz"]).await
    }

    /// `GET /metrics`: the node's Prometheus metrics, in the OpenMetrics text format.
    pub async fn metrics(&self) -> Result<String, Error> {
        let (url, bytes) = self
            .exchange(Request::new(Method::GET, &["metrics"]))
            .await?;
        String::from_utf8(bytes).map_err(|e| Error::Decode {
            url: url.to_string(),
            source: serde::de::Error::custom(format!("the metrics are not UTF-8: {e}")),
        })
    }
}
