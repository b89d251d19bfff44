//! What a handler sees ([`Job`]) and returns ([`HandlerError`]), and the type-erased form the
//! runtime keeps: one boxed function per job type that decodes the payload and starts the work.

use std::borrow::Cow;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use serde::de::DeserializeOwned;
use uuid::Uuid;

use crate::types::Message;

/// A leased message with its payload decoded into `T`. The receipt stays with the runtime: it
/// acks or nacks according to what the handler returns.
#[derive(Debug, Clone)]
pub struct Job<T> {
    pub payload: T,
    pub id: Uuid,
    pub job_type: Option<String>,
    /// The same on every redelivery of this occurrence: deduplicate on it when acting twice
    /// would hurt (delivery is at least once).
    pub delivery_id: String,
    /// 1-based attempt number.
    pub attempt: u32,
    pub max_attempts: u32,
    /// The occurrence's nominal due instant.
    pub due_at: Timestamp,
}

impl<T> Job<T> {
    /// Whether a failure now would dead-letter the occurrence instead of retrying it.
    pub fn is_last_attempt(&self) -> bool {
        self.attempt >= self.max_attempts
    }
}

/// A handler's failure: the message is nacked, and retried after `retry_after` or, without it,
/// after the job's own retry backoff. Any `std::error::Error` converts into it, so `?` works in
/// handlers.
pub struct HandlerError {
    message: String,
    retry_after: Option<Duration>,
}

impl HandlerError {
    pub fn new(message: impl fmt::Display) -> Self {
        Self {
            message: message.to_string(),
            retry_after: None,
        }
    }

    /// Retry after this delay instead of the job's backoff (zero: at once).
    pub fn retry_after(mut self, delay: Duration) -> Self {
        self.retry_after = Some(delay);
        self
    }

    pub fn delay(&self) -> Option<Duration> {
        self.retry_after
    }

    pub fn message(&self) -> &str {
        &self.message
    }
}

// Not `std::error::Error` itself, on purpose: that is what lets this blanket conversion exist
// without overlapping `From<T> for T` (the same trade `anyhow::Error` makes).
impl<E: std::error::Error + Send + Sync + 'static> From<E> for HandlerError {
    fn from(e: E) -> Self {
        // The source chain, joined, so a wrapped cause is not lost from the log line.
        let mut message = e.to_string();
        let mut source = e.source();
        while let Some(cause) = source {
            message.push_str(": ");
            message.push_str(&cause.to_string());
            source = cause.source();
        }
        HandlerError::new(message)
    }
}

impl fmt::Display for HandlerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl fmt::Debug for HandlerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HandlerError")
            .field("message", &self.message)
            .field("retry_after", &self.retry_after)
            .finish()
    }
}

pub type HandlerResult = Result<(), HandlerError>;

pub(crate) type HandlerFuture = Pin<Box<dyn Future<Output = HandlerResult> + Send>>;

/// A registered handler with its payload type erased: decoding happens inside, so a payload that
/// does not fit `T` is an ordinary handler failure.
pub(crate) type ErasedHandler =
    Arc<dyn Fn(Message) -> Result<HandlerFuture, HandlerError> + Send + Sync>;

pub(crate) fn erase<T, F, Fut>(handler: F) -> ErasedHandler
where
    T: DeserializeOwned + Send + 'static,
    F: Fn(Job<T>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = HandlerResult> + Send + 'static,
{
    Arc::new(move |message: Message| {
        // A message without a payload decodes as JSON `null` (into an `Option`, a unit, ...).
        let text = message.payload.as_ref().map_or("null", |p| p.get());
        let payload: T = serde_json::from_str(text)
            .map_err(|e| HandlerError::new(format!("payload does not decode: {e}")))?;
        let job = Job {
            payload,
            id: message.job_id,
            job_type: message.job_type.map(Cow::into_owned),
            delivery_id: message.delivery_id.into_owned(),
            attempt: message.attempt,
            max_attempts: message.max_attempts,
            due_at: message.due_at,
        };
        Ok(Box::pin(handler(job)) as HandlerFuture)
    })
}
