//! The one table of the node's routes: every route is registered here with the [`Need`] of its
//! caller (`Routes::add` takes no route without one), and the guard checks that need before the
//! handler runs. README's "Roles" table and the OpenAPI document's `x-roles` of each operation are
//! this table (a test compares the document's with it), and so is `GET /v1/whoami`'s answer of
//! what a key may call.

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::handler::Handler;
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodFilter, get, on};
use hourglass_api::{AllowedRoute, Identity};

use crate::api;
use crate::auth::Need;
use crate::dashboard;
use crate::error::{ApiError, ErrorCode};
use crate::extract::principal;
use crate::guard::RouteNeeds;
use crate::queues;
use crate::respond::{ApiResult, typed_response};
use crate::state::AppState;

/// The methods the API routes.
#[derive(Debug, Clone, Copy)]
enum Verb {
    Get,
    Post,
    Put,
    Patch,
    Delete,
}

impl Verb {
    fn filter(self) -> MethodFilter {
        match self {
            Verb::Get => MethodFilter::GET,
            Verb::Post => MethodFilter::POST,
            Verb::Put => MethodFilter::PUT,
            Verb::Patch => MethodFilter::PATCH,
            Verb::Delete => MethodFilter::DELETE,
        }
    }

    fn method(self) -> Method {
        match self {
            Verb::Get => Method::GET,
            Verb::Post => Method::POST,
            Verb::Put => Method::PUT,
            Verb::Patch => Method::PATCH,
            Verb::Delete => Method::DELETE,
        }
    }
}

/// The router being built and what each of its routes needs.
struct Routes {
    router: Router<AppState>,
    needs: RouteNeeds,
}

impl Routes {
    fn new() -> Self {
        Self {
            router: Router::new(),
            needs: RouteNeeds::default(),
        }
    }

    /// Routes `verb path` to `handler` for callers that meet `need`.
    fn add<H, T>(mut self, verb: Verb, path: &str, need: Need, handler: H) -> Self
    where
        H: Handler<T, AppState>,
        T: 'static,
    {
        self.needs.insert(verb.method(), path, need);
        self.router = self.router.route(path, on(verb.filter(), handler));
        self
    }
}

/// Every route and the need of its caller. See README, "Roles", for the same table in words.
fn table() -> Routes {
    use Need::*;
    use Verb::*;
    let mut routes = Routes::new()
        // Jobs: reads, then writes.
        .add(Get, "/v1/jobs", Read, api::list_jobs)
        .add(Get, "/v1/jobs/{id}", Read, api::get_job)
        .add(Get, "/v1/jobs/{id}/runs", Read, api::job_runs)
        .add(Post, "/v1/schedules/preview", Read, api::preview_schedule)
        .add(Post, "/v1/jobs", Write, api::create_job)
        .add(Post, "/v1/jobs/batch", Write, api::create_batch)
        .add(Patch, "/v1/jobs/{id}", Write, api::patch_job)
        .add(Delete, "/v1/jobs/{id}", Write, api::cancel_job)
        .add(Post, "/v1/jobs/{id}/pause", Write, api::pause_job)
        .add(Post, "/v1/jobs/{id}/resume", Write, api::resume_job)
        .add(Post, "/v1/jobs/{id}/trigger", Write, api::trigger_job)
        .add(Post, "/v1/jobs/{id}/backfill", Write, api::backfill_job)
        .add(Post, "/v1/jobs/bulk/{action}", Write, api::bulk_jobs)
        // Calendars: read by readers, written by writers.
        .add(Get, "/v1/calendars", Read, api::list_calendars)
        .add(Get, "/v1/calendars/{name}", Read, api::get_calendar)
        .add(Put, "/v1/calendars/{name}", Write, api::put_calendar)
        .add(Delete, "/v1/calendars/{name}", Write, api::delete_calendar)
        // Anchors: read by readers, written (moved, deleted) by writers.
        .add(Get, "/v1/anchors", Read, api::list_anchors)
        .add(Get, "/v1/anchors/{name}", Read, api::get_anchor)
        .add(Put, "/v1/anchors/{name}", Write, api::put_anchor)
        .add(Delete, "/v1/anchors/{name}", Write, api::delete_anchor)
        // Dead letters: read by readers, replayed and purged by admins.
        .add(Get, "/v1/dead-letters", Read, api::list_dead_letters)
        .add(Get, "/v1/dead-letters/{id}", Read, api::get_dead_letter)
        .add(
            Delete,
            "/v1/dead-letters/{id}",
            Admin,
            api::delete_dead_letter,
        )
        .add(
            Post,
            "/v1/dead-letters/{id}/replay",
            Admin,
            api::replay_dead_letter,
        )
        // The audit log: who changed what, for those who may change things.
        .add(Get, "/v1/audit", Write, api::list_audit)
        // Queues: a worker's calls, and the reads a worker needs.
        .add(Get, "/v1/queues", QueueRead, queues::list_queues)
        .add(Get, "/v1/queues/{name}", QueueRead, queues::get_queue)
        .add(
            Get,
            "/v1/queues/{name}/messages",
            QueueRead,
            queues::list_messages,
        )
        .add(Post, "/v1/queues/{name}/lease", Work, queues::lease)
        .add(Post, "/v1/queues/{name}/ack", Work, queues::ack)
        .add(Post, "/v1/queues/{name}/nack", Work, queues::nack)
        .add(Post, "/v1/queues/{name}/extend", Work, queues::extend)
        // The namespace's connections, breakers and signing secret (whoever reads the secret can
        // sign as the node, so reading it is an admin's too).
        .add(Get, "/v1/connections", Read, api::list_connections)
        .add(Get, "/v1/breakers", Admin, api::list_open_breakers)
        .add(Get, "/v1/signing-secret", Admin, api::read_signing_secret)
        .add(
            Post,
            "/v1/signing-secret",
            Admin,
            api::rotate_signing_secret,
        )
        // The caller's own key: any key may ask what it may do.
        .add(Get, "/v1/whoami", Key, whoami)
        // Node-wide views.
        .add(Get, "/v1/nodes", NodeAdmin, api::list_nodes)
        .add(Get, "/v1/summary", NodeAdmin, dashboard::summary)
        .add(Get, "/metrics", NodeAdmin, api::metrics)
        // Without a key.
        .add(Get, "/v1/openapi.json", Open, api::openapi)
        .add(Get, "/healthz", Open, api::healthz)
        .add(Get, "/readyz", Open, api::readyz)
        .add(Get, "/", Open, dashboard::index);
    for &(name, content_type, body) in dashboard::ASSETS {
        routes = routes.add(
            Get,
            &format!("/dashboard/{name}"),
            Open,
            move || async move { dashboard::asset(content_type, body) },
        );
    }
    routes
}

/// Every route as (method, path template, need), sorted by path: for tests and documents.
pub fn route_needs() -> Vec<(String, String, Need)> {
    table().needs.rows()
}

/// `GET /v1/whoami`: the caller's key, the namespace the request acts in, its role, and the
/// routes of this table that need a key and that it may call, sorted by path then method (the
/// table is read once). Never the key or its hash.
async fn whoami(State(state): State<AppState>, headers: HeaderMap) -> ApiResult {
    static ROWS: std::sync::OnceLock<Vec<(String, String, Need)>> = std::sync::OnceLock::new();
    let principal = principal(&state, &headers)?;
    let routes = ROWS
        .get_or_init(route_needs)
        .iter()
        .filter(|(_, _, need)| match need {
            Need::Open => false,
            Need::NodeAdmin => principal.all_namespaces && need.allows(principal.role),
            _ => need.allows(principal.role),
        })
        .map(|(method, path, _)| AllowedRoute {
            method: method.clone(),
            path: path.clone(),
        })
        .collect();
    Ok(typed_response(
        StatusCode::OK,
        &Identity {
            all_namespaces: principal.all_namespaces,
            development: state.auth.is_open(),
            key_id: principal.key_id,
            namespace: principal.namespace,
            role: principal.role.into(),
            routes,
        },
    ))
}

pub fn router(state: AppState) -> Router {
    let Routes { router, needs } = table();
    router
        .fallback(|| async { ApiError::not_found("route") })
        .method_not_allowed_fallback(|| async {
            ApiError::new(
                ErrorCode::MethodNotAllowed,
                "this route does not support that method",
            )
        })
        // Before anything else a request must pass (and still counted below).
        .layer(axum::middleware::from_fn_with_state(
            (state.clone(), Arc::new(needs)),
            crate::guard::check,
        ))
        // A layer on the router wraps every route (and the fallbacks), after routing, so the
        // counter sees the matched route template.
        .layer(axum::middleware::from_fn_with_state(
            state.metrics.clone(),
            crate::metrics::count_requests,
        ))
        // Outermost: a handler that panics (a bug: validation bounds every input) answers 500
        // with the documented error body and changes nothing it had not committed, instead of
        // dropping the client's connection without an answer.
        .layer(tower_http::catch_panic::CatchPanicLayer::custom(
            handler_panicked,
        ))
        .with_state(state)
}

fn handler_panicked(panic: Box<dyn std::any::Any + Send + 'static>) -> Response {
    let message = hourglass_engine::panic_message(&*panic);
    tracing::error!(panic = %message, "a request handler panicked");
    ApiError::new(
        ErrorCode::Internal,
        "the request failed because of a bug in hourglass; it is logged",
    )
    .into_response()
}

/// The routes of the `metrics_listen` address: `/metrics` without authentication, nothing else.
pub fn metrics_router(state: AppState) -> Router {
    Router::new()
        .route("/metrics", get(api::metrics))
        .fallback(|| async { ApiError::not_found("route") })
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            crate::guard::check_host,
        ))
        .with_state(state)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table covers every need's meaning at least once and names each route once.
    #[test]
    fn every_route_has_one_need() {
        let rows = route_needs();
        let mut seen = std::collections::BTreeSet::new();
        for (method, path, _) in &rows {
            assert!(seen.insert((method, path)), "{method} {path} twice");
        }
        for need in Need::ALL {
            assert!(
                rows.iter().any(|r| r.2 == need),
                "{need:?} is used by no route"
            );
        }
    }
}
