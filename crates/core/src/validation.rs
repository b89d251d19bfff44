//! Validation failures carry a stable machine code and the path of the offending field, so the API
//! can answer `{"error": {"code", "message", "field"}}` without knowing the rules themselves.

use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidationError {
    /// Stable machine-readable code, e.g. `invalid_cron`.
    pub code: &'static str,
    /// Dotted path of the offending field, e.g. `schedule.timezone`.
    pub field: String,
    /// Lowercase human explanation without trailing punctuation.
    pub message: String,
}

impl ValidationError {
    pub fn new(code: &'static str, field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            code,
            field: field.into(),
            message: message.into(),
        }
    }

    /// Prefixes the field path, used when a nested value is validated on its own.
    pub fn within(mut self, parent: &str) -> Self {
        self.field = if self.field.is_empty() {
            parent.to_string()
        } else if self.field.starts_with('[') {
            format!("{parent}{}", self.field)
        } else {
            format!("{parent}.{}", self.field)
        };
        self
    }
}

impl fmt::Display for ValidationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {} ({})", self.field, self.message, self.code)
    }
}

impl std::error::Error for ValidationError {}
