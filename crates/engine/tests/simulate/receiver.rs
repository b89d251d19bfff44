//! The simulated receivers: one node's `Deliverer`. Each send is recorded as the receiver saw it,
//! with a seeded answer: delivered, a 500 (retried), a 410 (dead-lettered), sometimes after
//! hanging for seconds (past a lease renewal or several), sometimes seen twice (the network
//! repeated it). A paused node sends nothing until it resumes; a crashed one never again.
//!
//! As the `Deliverer` contract asks, the claim is checked immediately before the send, after any
//! wait: a pause lands before that check, never between it and the send.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use hourglass_core::{Clock, Occurrence};
use hourglass_engine::{ClaimCheck, Deliverer, DeliveryResult, Verdict};

use crate::world::{Answer, Send, World};

pub struct Receivers {
    pub world: Arc<World>,
    pub node: usize,
    pub incarnation: u64,
    pub clock: Arc<dyn Clock>,
}

#[async_trait]
impl Deliverer for Receivers {
    async fn deliver(&self, occ: &Occurrence, claim: &ClaimCheck) -> DeliveryResult {
        self.world.gate(self.node, self.incarnation).await;
        if !claim.still_held() {
            return DeliveryResult::withdrawn();
        }
        let world = &self.world;
        let roll = world.rand(|r| rand::Rng::random_range(r, 0..100u32));
        let answer = match roll {
            0..12 => Answer::Fail,
            12..17 => Answer::Gone,
            _ => Answer::Ok,
        };
        let hang = world.chance(0.08).then(|| world.ms(1_000, 20_000));
        let twice = world.chance(0.04);
        // As the receiver sees it: a handed-off `allow` occurrence is its job's.
        let (job_id, due) = occ.origin();
        let send = Send {
            node: self.node,
            job_id,
            due_ms: due.as_millisecond(),
            handed_off: occ.spec.occurrence_of.is_some(),
            attempt: occ.attempt,
            version: crate::version_of(occ.payload.as_deref()),
            true_ms: world.true_ms(),
            node_ms: self.clock.now().as_millisecond(),
            answer,
        };
        {
            let mut log = world.log.lock().unwrap();
            if twice {
                log.sends.push(send.clone());
            }
            log.sends.push(send);
        }
        if let Some(hang) = hang {
            tokio::time::sleep(hang).await;
            // A node that crashed while the receiver hung never hears its answer.
            world.gate(self.node, self.incarnation).await;
        }
        let (status, verdict) = match answer {
            Answer::Ok => (200, Verdict::Delivered),
            Answer::Fail => (
                500,
                Verdict::Retry {
                    after: None,
                    reason: "http 500".into(),
                },
            ),
            Answer::Gone => (
                410,
                Verdict::GiveUp {
                    reason: "http 410".into(),
                },
            ),
        };
        DeliveryResult {
            status: Some(status),
            latency: hang.unwrap_or(Duration::from_millis(1)),
            verdict,
            response: None,
            shared: false,
        }
    }
}
