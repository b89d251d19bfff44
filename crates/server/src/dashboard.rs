//! The web dashboard served at `/`: a static page, a stylesheet and a script, embedded in the
//! binary, and `GET /v1/summary`, the figures its overview charts (read from the node's metrics,
//! as JSON). The page talks to the node only through the public HTTP API (`/v1/...` and
//! `/metrics`), with the caller's API key, so it can see and do nothing the API would refuse.

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};

use crate::api::{ApiResult, AppState};

const INDEX_HTML: &str = include_str!("../dashboard/index.html");
const APP_JS: &str = include_str!("../dashboard/app.js");
const APP_CSS: &str = include_str!("../dashboard/app.css");

/// The dashboard's routes: its assets, outside `/v1` (they are not API operations), and the
/// summary it reads its figures from.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/", get(index))
        .route("/v1/summary", get(summary))
        .route("/dashboard/app.js", get(app_js))
        .route("/dashboard/app.css", get(app_css))
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
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

async fn index() -> Response {
    let mut response = asset("text/html; charset=utf-8", INDEX_HTML);
    // Everything the page loads comes from this node; no inline script, no third parties.
    response.headers_mut().insert(
        header::CONTENT_SECURITY_POLICY,
        header::HeaderValue::from_static(
            "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; \
             connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
        ),
    );
    response
}

async fn app_js() -> Response {
    asset("text/javascript; charset=utf-8", APP_JS)
}

async fn app_css() -> Response {
    asset("text/css; charset=utf-8", APP_CSS)
}

/// The dashboard's figures: this node's delivery counters and gauges, and the whole store's
/// counts. They cover every namespace, like `/metrics`, so an admin key when the node has keys (a
/// namespace key gets 403).
async fn summary(State(state): State<AppState>, headers: HeaderMap) -> ApiResult {
    state.auth.authenticate_admin(&headers)?;
    let figures = state.metrics.summary(&state.scheduler).await;
    Ok((StatusCode::OK, Json(figures)).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_loads_its_assets_from_this_node() {
        assert!(INDEX_HTML.contains("src=\"/dashboard/app.js\""));
        assert!(INDEX_HTML.contains("href=\"/dashboard/app.css\""));
        assert!(!INDEX_HTML.contains("http://") && !INDEX_HTML.contains("https://"));
        assert!(
            !APP_JS.contains("innerHTML"),
            "insert data with textContent"
        );
    }
}
