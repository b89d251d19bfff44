//! The listener: turns the store's events into planner wake-ups and timer fences.

use std::sync::Arc;

use hourglass_store::{DueEvent, StoreEvent};
use tokio::sync::broadcast;
use tokio::sync::broadcast::error::RecvError;

use super::{Context, Stage};

/// Turns the store's events (other nodes' writes, and this node's own) into planner wake-ups and
/// timer fences. Queue events are for queue consumers, not the engine.
pub(super) struct Listener {
    /// The engine's configuration, store, clock, metrics and wake-ups.
    pub ctx: Arc<Context>,
    /// The store's events.
    pub events: broadcast::Receiver<StoreEvent>,
}

impl Stage for Listener {
    const NAME: &'static str = "listener";

    async fn run(self) {
        let Self { ctx, mut events } = self;
        loop {
            let event = tokio::select! {
                event = events.recv() => event,
                _ = ctx.stop.cancelled() => break,
            };
            match event {
                Ok(StoreEvent::Due(DueEvent {
                    queue: None, at, ..
                })) => ctx.shared.wake_for(at),
                Ok(StoreEvent::Due(_)) => {}
                Ok(StoreEvent::Fenced { job_id, token }) => ctx.shared.fence(job_id, token),
                // Events were missed: anything may be due now. The planner looks at the next
                // due time before it claims.
                Ok(StoreEvent::Resync) | Err(RecvError::Lagged(_)) => {
                    ctx.shared
                        .probe_first
                        .store(true, std::sync::atomic::Ordering::Release);
                    ctx.shared.planner_wake.notify_one()
                }
                Err(RecvError::Closed) => break,
            }
        }
        tracing::debug!("event listener stopped");
    }
}
