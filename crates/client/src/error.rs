//! The client's one error type: what went wrong talking to a node, in variants a caller acts on
//! (retry later, fix the request, the lease was lost).

use std::time::Duration;

/// The code the server gives a receipt whose lease expired and was taken by another consumer.
pub use hourglass_api::STALE_RECEIPT;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The node answered with an error body `{"error": {"code", "message", "field"}}`.
    #[error("http {status} {code}: {message}{}", in_field(.field.as_deref()))]
    Api {
        status: u16,
        /// Stable, machine-readable: `not_found`, `invalid_field`, `store_unavailable`, ...
        code: String,
        message: String,
        /// JSON path of the offending request field, e.g. `receipts[3]`.
        field: Option<String>,
        /// The `Retry-After` header, when the node sent one (503 does).
        retry_after: Option<Duration>,
    },
    /// A failed answer without the API's error body, e.g. from a proxy in front of the node.
    #[error("http {status} from {url}")]
    Http {
        status: u16,
        url: String,
        retry_after: Option<Duration>,
    },
    /// The request never got an answer: connection refused or reset, timeout, TLS failure.
    #[error("cannot reach {url}: {source}")]
    Transport {
        url: String,
        #[source]
        source: reqwest::Error,
    },
    /// A successful answer whose body is not the shape this client expects.
    #[error("unexpected answer from {url}: {source}")]
    Decode {
        url: String,
        #[source]
        source: serde_json::Error,
    },
    /// The client was configured with something that cannot become a request (a bad base URL,
    /// an API key that is not a valid header value).
    #[error("invalid configuration: {0}")]
    Config(String),
}

impl Error {
    /// The HTTP status of an error answer.
    pub fn status(&self) -> Option<u16> {
        match self {
            Error::Api { status, .. } | Error::Http { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// The server's error code (`None` when there was no API error body).
    pub fn code(&self) -> Option<&str> {
        match self {
            Error::Api { code, .. } => Some(code),
            _ => None,
        }
    }

    /// The JSON path of the request field the server blamed, e.g. `receipts[3]`.
    pub fn field(&self) -> Option<&str> {
        match self {
            Error::Api { field, .. } => field.as_deref(),
            _ => None,
        }
    }

    /// How long the server asked us to wait before retrying.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Error::Api { retry_after, .. } | Error::Http { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    /// Whether the receipt's lease was lost: it expired and another consumer leased the message.
    pub fn is_stale_receipt(&self) -> bool {
        self.code() == Some(STALE_RECEIPT)
    }

    pub fn is_not_found(&self) -> bool {
        self.status() == Some(404)
    }

    /// Whether the same request may succeed later unchanged: the node is unavailable or
    /// overloaded (408, 429, 502, 503, 504), or it could not be reached at all. Every other
    /// answer means the request itself must change.
    pub fn is_retryable(&self) -> bool {
        match self {
            Error::Transport { .. } => true,
            Error::Api { status, .. } | Error::Http { status, .. } => {
                matches!(status, 408 | 429 | 502 | 503 | 504)
            }
            Error::Decode { .. } | Error::Config(_) => false,
        }
    }
}

fn in_field(field: Option<&str>) -> String {
    field.map(|f| format!(" (at {f})")).unwrap_or_default()
}

/// Reads `Retry-After` as delay-seconds. The HTTP-date form is not used by Hourglass and is
/// ignored rather than guessed at.
pub(crate) fn parse_retry_after(value: Option<&reqwest::header::HeaderValue>) -> Option<Duration> {
    let seconds: u64 = value?.to_str().ok()?.trim().parse().ok()?;
    Some(Duration::from_secs(seconds))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(status: u16, code: &str) -> Error {
        Error::Api {
            status,
            code: code.into(),
            message: String::new(),
            field: None,
            retry_after: None,
        }
    }

    #[test]
    fn classifies_errors() {
        assert!(api(409, STALE_RECEIPT).is_stale_receipt());
        assert!(!api(409, "key_conflict").is_stale_receipt());
        assert!(api(503, "store_unavailable").is_retryable());
        assert!(api(429, "too_many_requests").is_retryable());
        assert!(!api(422, "invalid_field").is_retryable());
        assert!(api(404, "not_found").is_not_found());
    }

    #[test]
    fn reads_retry_after_seconds_only() {
        use reqwest::header::HeaderValue;
        let secs = HeaderValue::from_static("3");
        assert_eq!(parse_retry_after(Some(&secs)), Some(Duration::from_secs(3)));
        let date = HeaderValue::from_static("Wed, 21 Oct 2015 07:28:00 GMT");
        assert_eq!(parse_retry_after(Some(&date)), None);
        assert_eq!(parse_retry_after(None), None);
    }
}
