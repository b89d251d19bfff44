//! The one source of "now". Production uses the system clock; tests inject a manual one so they
//! can control time instead of sleeping.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use jiff::Timestamp;

/// A wall clock with millisecond resolution.
pub trait Clock: Send + Sync + 'static {
    /// The current instant, truncated to whole milliseconds. Truncation (never rounding up) is what
    /// lets the timer promise that nothing fires before its due millisecond.
    fn now(&self) -> Timestamp;
}

/// The operating system's real-time clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    #[allow(
        clippy::disallowed_methods,
        reason = "the one place that reads the system clock for the rest of the node"
    )]
    fn now(&self) -> Timestamp {
        crate::from_ms(Timestamp::now().as_millisecond())
    }
}

/// A clock that only moves when told to. Clones share the same time.
#[derive(Debug, Clone)]
pub struct ManualClock {
    ms: Arc<AtomicI64>,
}

impl ManualClock {
    pub fn new(start: Timestamp) -> Self {
        Self {
            ms: Arc::new(AtomicI64::new(start.as_millisecond())),
        }
    }

    pub fn set(&self, to: Timestamp) {
        self.ms.store(to.as_millisecond(), Ordering::SeqCst);
    }

    pub fn advance(&self, by: std::time::Duration) {
        self.ms.fetch_add(by.as_millis() as i64, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        crate::from_ms(self.ms.load(Ordering::SeqCst))
    }
}
