//! The API's closed set of errors and the one table that maps them to HTTP statuses and codes.
//! Every error body is `{"error": {"code": "...", "message": "...", "field": "..."}}`.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use hourglass_core::ValidationError;
use hourglass_store::StoreError;
use serde_json::json;

#[derive(Debug, Clone)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    pub field: Option<String>,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
            field: None,
        }
    }

    pub fn field(mut self, field: impl Into<String>) -> Self {
        self.field = Some(field.into());
        self
    }

    pub fn not_found(what: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("{what} not found"),
        )
    }

    pub fn bad_request(code: &'static str, field: &str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, code, message).field(field)
    }
}

impl From<ValidationError> for ApiError {
    fn from(e: ValidationError) -> Self {
        let status = match e.code {
            "payload_too_large" => StatusCode::PAYLOAD_TOO_LARGE,
            _ => StatusCode::UNPROCESSABLE_ENTITY,
        };
        Self {
            status,
            code: e.code,
            message: e.message,
            field: (!e.field.is_empty()).then_some(e.field),
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::KeyConflict { .. } => {
                Self::new(StatusCode::CONFLICT, "key_conflict", e.to_string()).field("key")
            }
            StoreError::NotFound => Self::not_found("job"),
            StoreError::InvalidState { .. } => {
                Self::new(StatusCode::CONFLICT, "invalid_state", e.to_string())
            }
            StoreError::Unavailable(_) => {
                tracing::error!(error = %e, "store unavailable");
                Self::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "store_unavailable",
                    "the store is unavailable; nothing was changed, retry later",
                )
            }
            StoreError::Corrupt(_) => {
                tracing::error!(error = %e, "corrupt data in store");
                Self::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "internal",
                    "internal error",
                )
            }
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut body = json!({ "code": self.code, "message": self.message });
        if let Some(field) = self.field {
            body["field"] = json!(field);
        }
        let mut response = (self.status, axum::Json(json!({ "error": body }))).into_response();
        if self.status == StatusCode::SERVICE_UNAVAILABLE {
            response.headers_mut().insert(
                axum::http::header::RETRY_AFTER,
                axum::http::HeaderValue::from_static("1"),
            );
        }
        response
    }
}
