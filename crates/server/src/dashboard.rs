//! The web dashboard served at `/`: a static page, a stylesheet and its native ES modules,
//! embedded in the binary, and `GET /v1/summary`, the figures its overview charts (read from the
//! node's metrics, as JSON, so the page scrapes no metric names). The page talks to the node only
//! through the public HTTP API (`/v1/...`), with the caller's API key, so it can see and do nothing
//! the API would refuse.

use axum::Json;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::respond::ApiResult;
use crate::state::AppState;

const INDEX_HTML: &str = include_str!("../dashboard/index.html");

/// The assets under `/dashboard/`: (file name, content type, body). Every module the page imports
/// must be listed here, or the browser gets the API's 404 for it.
pub(crate) const ASSETS: &[(&str, &str, &str)] = &[
    ("app.css", CSS, include_str!("../dashboard/app.css")),
    ("app.js", JS, include_str!("../dashboard/app.js")),
    ("api.js", JS, include_str!("../dashboard/api.js")),
    ("dom.js", JS, include_str!("../dashboard/dom.js")),
    ("format.js", JS, include_str!("../dashboard/format.js")),
    ("router.js", JS, include_str!("../dashboard/router.js")),
    ("figures.js", JS, include_str!("../dashboard/figures.js")),
    ("overview.js", JS, include_str!("../dashboard/overview.js")),
    ("nodes.js", JS, include_str!("../dashboard/nodes.js")),
    ("jobs.js", JS, include_str!("../dashboard/jobs.js")),
    ("job.js", JS, include_str!("../dashboard/job.js")),
    (
        "dead-letters.js",
        JS,
        include_str!("../dashboard/dead-letters.js"),
    ),
    ("queues.js", JS, include_str!("../dashboard/queues.js")),
    ("audit.js", JS, include_str!("../dashboard/audit.js")),
];

/// What a browser needs to run a file as a module script (it refuses other types).
const JS: &str = "text/javascript; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";

pub(crate) fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "no-cache"),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        body,
    )
        .into_response()
}

pub(crate) async fn index() -> Response {
    let mut response = asset("text/html; charset=utf-8", INDEX_HTML);
    // Everything the page loads comes from this node; no inline script, no third parties. Module
    // scripts and their imports are scripts too: 'self' covers them.
    response.headers_mut().insert(
        header::CONTENT_SECURITY_POLICY,
        header::HeaderValue::from_static(
            "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; \
             connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
        ),
    );
    response
}

/// The dashboard's figures: this node's delivery counters and gauges, and the whole store's
/// counts. They cover every namespace, like `/metrics`, so an admin key of every namespace when
/// the node has keys (the route table's `NodeAdmin`).
pub(crate) async fn summary(State(state): State<AppState>) -> ApiResult {
    let figures = state.metrics.summary(&state.scheduler).await;
    Ok((StatusCode::OK, Json(figures)).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_loads_its_assets_from_this_node() {
        assert!(INDEX_HTML.contains("<script type=\"module\" src=\"/dashboard/app.js\">"));
        assert!(INDEX_HTML.contains("href=\"/dashboard/app.css\""));
        assert!(!INDEX_HTML.contains("http://") && !INDEX_HTML.contains("https://"));
        for (name, _, body) in ASSETS.iter().filter(|a| a.1 == JS) {
            assert!(
                !body.contains("innerHTML"),
                "{name}: insert data with textContent"
            );
            assert!(
                body.starts_with("// "),
                "{name} opens with a comment saying what it holds"
            );
            assert!(body.lines().count() <= 400, "{name} is over 400 lines");
            assert!(
                !body.contains("hourglass_"),
                "{name} names a metric: read figures from /v1/summary"
            );
        }
    }

    /// Every module imported by another (`from "./x.js"`) is served.
    #[test]
    fn every_imported_module_is_served() {
        for (name, _, body) in ASSETS.iter().filter(|a| a.1 == JS) {
            for line in body.lines() {
                let Some(rest) = line.split("from \"./").nth(1) else {
                    continue;
                };
                let imported = rest.split('"').next().unwrap_or_default();
                assert!(
                    ASSETS.iter().any(|a| a.0 == imported),
                    "{name} imports {imported}, which is not served"
                );
            }
        }
    }
}
