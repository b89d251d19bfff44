//! The heartbeat: every [`EngineConfig::heartbeat_interval`](crate::EngineConfig) the node
//! writes who it is and how many claims it holds (one small write), so that any node can list
//! the cluster's live nodes. At shutdown a last heartbeat ends the node's listing at once.

use std::sync::Arc;

use hourglass_core::add_saturating;
use hourglass_store::NodeBeat;

use super::{Context, Held, Stage};

pub(super) struct Heartbeat {
    /// The engine's configuration, store, clock, metrics and stop signal.
    pub ctx: Arc<Context>,
    /// The claims this node holds: their count goes into each heartbeat.
    pub held: Arc<Held>,
}

impl Stage for Heartbeat {
    const NAME: &'static str = "heartbeat";

    async fn run(self) {
        let Self { ctx, held } = self;
        let Some(every) = ctx.config.heartbeat_interval else {
            return;
        };
        let every = every.max(std::time::Duration::from_millis(10));
        // Three intervals, so one or two slow or failed writes do not drop a live node.
        let live_for = every.saturating_mul(3);
        let started_at = ctx.clock.now();
        let beat = |last: bool| {
            let now = ctx.clock.now();
            NodeBeat {
                id: ctx.config.node_id.clone(),
                version: env!("CARGO_PKG_VERSION").to_owned(),
                started_at,
                beat_at: now,
                claims_held: held.count(),
                live_until: if last {
                    now
                } else {
                    add_saturating(now, live_for)
                },
            }
        };
        loop {
            if let Err(e) = ctx.store.heartbeat(&beat(false)).await {
                // The next interval tries again; the node stays listed for three of them.
                ctx.metrics.store_errors.inc();
                tracing::warn!(error = %e, "could not write this node's heartbeat");
            }
            tokio::select! {
                _ = tokio::time::sleep(every) => {}
                _ = ctx.stop.cancelled() => break,
            }
        }
        // Stopping: a heartbeat that lapses now takes the node off the list of live nodes.
        if let Err(e) = ctx.store.heartbeat(&beat(true)).await {
            tracing::debug!(error = %e, "could not write this node's last heartbeat");
        }
        tracing::debug!("heartbeat stopped");
    }
}
