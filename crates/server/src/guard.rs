//! Checks every request passes before its route sees it, against a web page driving the API from
//! a browser. A page may send a cross-origin `POST` without a preflight when its `Content-Type`
//! is `text/plain`, a form type, or absent (`fetch(..., {mode: "no-cors"})`): requiring JSON on
//! every request that may carry a body (empty ones too) puts all of them behind a preflight the
//! node never grants. In development mode, where no key is needed, a page could also reach the
//! node through DNS rebinding (its own name resolving to 127.0.0.1), so there the `Host` header
//! must name this machine: `localhost` or a loopback address.
//!
//! Who may call a route is checked here too, before anything else about the request: the guard
//! runs after routing, looks up the [`Need`] the matched route was registered with (`routes.rs`,
//! the one table) and asks [`Auth::authorize`](crate::auth::Auth::authorize).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;

use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderMap, Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::auth::Need;
use crate::error::{ApiError, ErrorCode};
use crate::extract::is_json;
use crate::state::AppState;

/// What each route needs, by (method, path template): the route table's, built with the router.
#[derive(Debug, Default)]
pub struct RouteNeeds(HashMap<(Method, String), Need>);

impl RouteNeeds {
    pub fn insert(&mut self, method: Method, path: &str, need: Need) {
        self.0.insert((method, path.to_owned()), need);
    }

    /// The need of a request's route. `HEAD` is answered by `GET`'s handler, so it needs what
    /// `GET` does. A request no route took (404, or 405 on a known path) needs a key under
    /// `/v1/`, as every operation there does, and nothing elsewhere.
    fn of(&self, method: &Method, matched: Option<&MatchedPath>, path: &str) -> Need {
        let method = if method == Method::HEAD {
            &Method::GET
        } else {
            method
        };
        matched
            .and_then(|m| self.0.get(&(method.clone(), m.as_str().to_owned())))
            .copied()
            .unwrap_or(if path.starts_with("/v1/") {
                Need::Key
            } else {
                Need::Open
            })
    }

    /// Every (method, path template, need), sorted: the table as tests and documents read it.
    pub fn rows(&self) -> Vec<(String, String, Need)> {
        let mut rows: Vec<_> = self
            .0
            .iter()
            .map(|((m, p), n)| (m.as_str().to_owned(), p.clone(), *n))
            .collect();
        rows.sort_by(|a, b| (&a.1, &a.0).cmp(&(&b.1, &b.0)));
        rows
    }
}

pub async fn check(
    State((state, needs)): State<(AppState, Arc<RouteNeeds>)>,
    request: Request,
    next: Next,
) -> Response {
    if state.auth.is_open()
        && let Err(e) = local_host(request.headers())
    {
        return e.into_response();
    }
    let need = needs.of(
        request.method(),
        request.extensions().get::<MatchedPath>(),
        request.uri().path(),
    );
    // With keys, who is calling and what their key may do is told before what is wrong with the
    // request, as the handlers do.
    if let Err(e) = state.auth.authorize(request.headers(), need) {
        return e.into_response();
    }
    if may_carry_body(request.method(), request.headers())
        && !request
            .headers()
            .get(header::CONTENT_TYPE)
            .is_some_and(|ct| is_json(ct.as_bytes()))
    {
        return ApiError::new(
            ErrorCode::UnsupportedMediaType,
            "send Content-Type: application/json, also with an empty body",
        )
        .field("content-type")
        .into_response();
    }
    next.run(request).await
}

/// The development mode's check alone, for the metrics listener (which serves only `GET`).
pub async fn check_host(State(state): State<AppState>, request: Request, next: Next) -> Response {
    if state.auth.is_open()
        && let Err(e) = local_host(request.headers())
    {
        return e.into_response();
    }
    next.run(request).await
}

/// `POST`, `PUT` and `PATCH` always; any other method when it declares a body.
fn may_carry_body(method: &Method, headers: &HeaderMap) -> bool {
    if matches!(*method, Method::POST | Method::PUT | Method::PATCH) {
        return true;
    }
    headers.contains_key(header::TRANSFER_ENCODING)
        || headers
            .get(header::CONTENT_LENGTH)
            .is_some_and(|v| v.as_bytes() != b"0")
}

/// A `Host` naming this machine: `localhost` (or a name under it, which browsers resolve to
/// loopback themselves) or a loopback address, with any port. A request without one is let
/// through: every browser sends it, so its absence is no page's doing.
fn local_host(headers: &HeaderMap) -> Result<(), ApiError> {
    let Some(value) = headers.get(header::HOST) else {
        return Ok(());
    };
    let refused = || {
        ApiError::new(
            ErrorCode::InvalidHost,
            "in development mode the Host header must be localhost or a loopback address \
             (configure api_keys to serve other names)",
        )
        .field("host")
    };
    let authority = value
        .to_str()
        .ok()
        .and_then(|v| v.parse::<axum::http::uri::Authority>().ok())
        .ok_or_else(refused)?;
    let host = authority.host();
    let name = host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase();
    let literal = host.trim_start_matches('[').trim_end_matches(']');
    let local = name == "localhost"
        || name.ends_with(".localhost")
        || literal.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback());
    if local { Ok(()) } else { Err(refused()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(value: &str) -> Result<(), ApiError> {
        let mut headers = HeaderMap::new();
        headers.insert(header::HOST, value.parse().unwrap());
        local_host(&headers)
    }

    #[test]
    fn only_names_of_this_machine_pass() {
        for ok in [
            "localhost",
            "localhost:7070",
            "LocalHost.:7070",
            "app.localhost:1",
            "127.0.0.1:7070",
            "127.8.9.10",
            "[::1]:7070",
        ] {
            assert!(host(ok).is_ok(), "{ok}");
        }
        for bad in [
            "evil.example:7070",
            "localhost.evil.example",
            "10.0.0.1:7070",
            "0.0.0.0:7070",
            "[::]:7070",
            "",
            "a b",
        ] {
            let e = host(bad).expect_err(bad);
            assert_eq!(e.code, ErrorCode::InvalidHost);
        }
        assert!(local_host(&HeaderMap::new()).is_ok());
    }
}
