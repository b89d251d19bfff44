//! API metrics, registered beside the engine's in the node's one registry and served with them at
//! `/metrics`. They live here rather than in the engine because their labels are HTTP notions
//! (route templates, methods, status classes) that only this crate knows.

use axum::extract::{MatchedPath, Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::Response;
use hourglass_core::ScheduleKind;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

use crate::api::AppState;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    pub method: &'static str,
    /// The route template (`/v1/jobs/{id}`), never the raw path, so ids do not become series;
    /// `unmatched` for paths no route serves.
    pub route: String,
    /// `2xx`, `4xx`, `5xx`, ...: the class, not the code, keeps the series few.
    pub status: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CreatedLabels {
    /// `at` (including `after`, which is stored as the `at` it resolves to), `cron` or `every`.
    pub schedule: &'static str,
}

const SCHEDULE_KINDS: [&str; 3] = ["at", "cron", "every"];

#[derive(Clone)]
pub struct ApiMetrics {
    pub requests: Family<RequestLabels, Counter>,
    pub jobs_created: Family<CreatedLabels, Counter>,
}

impl ApiMetrics {
    pub fn new(registry: &mut Registry) -> Self {
        let m = Self {
            requests: Family::default(),
            jobs_created: Family::default(),
        };
        // Present at zero from the start (a family prints nothing until a series exists). The
        // request counter is not: its label combinations are only known as requests come.
        for schedule in SCHEDULE_KINDS {
            drop(m.jobs_created.get_or_create(&CreatedLabels { schedule }));
        }
        registry.register(
            "hourglass_api_requests",
            "API requests answered, by method, route template and status class",
            m.requests.clone(),
        );
        registry.register(
            "hourglass_jobs_created",
            "Jobs newly stored through the API (idempotent repeats excluded), by schedule kind",
            m.jobs_created.clone(),
        );
        m
    }

    pub fn job_created(&self, kind: &ScheduleKind) {
        let schedule = match kind {
            ScheduleKind::At(_) => SCHEDULE_KINDS[0],
            ScheduleKind::Cron(_) => SCHEDULE_KINDS[1],
            ScheduleKind::Every { .. } => SCHEDULE_KINDS[2],
        };
        self.jobs_created
            .get_or_create(&CreatedLabels { schedule })
            .inc();
    }
}

/// Middleware counting every answered request. Installed with `Router::layer`, which wraps each
/// route, so the matched route template is in the request's extensions here.
pub async fn count_requests(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    let method = method_label(request.method());
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or("unmatched", MatchedPath::as_str)
        .to_string();
    let response = next.run(request).await;
    let status = match response.status().as_u16() / 100 {
        1 => "1xx",
        2 => "2xx",
        3 => "3xx",
        4 => "4xx",
        _ => "5xx",
    };
    state
        .metrics
        .requests
        .get_or_create(&RequestLabels {
            method,
            route,
            status,
        })
        .inc();
    response
}

/// Standard methods by name; anything else is one `other` series, whatever a client invents.
fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PATCH => "PATCH",
        Method::DELETE => "DELETE",
        Method::PUT => "PUT",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        _ => "other",
    }
}
