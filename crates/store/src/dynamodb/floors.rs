//! Which shards of the fired lane a claim must read: what the last due-time probe saw.
//!
//! A claim queries every shard strongly consistent: a read unit each, most of them finding
//! nothing when work is spread thinly. The planner probes the next due time (`next_due`, every
//! shard, eventually consistent: half a unit each) before nearly every claim, and that probe
//! sees each shard's first entry, whose sort key is a lower bound of every fire time in the shard
//! (`item::fire_of_entry_sk`). A claim soon after reads only the shards whose bound is within its
//! horizon.
//!
//! What may be missed, and why it may:
//! - Entries this store writes lower their shard's floor when their root is made, before the
//!   write is sent, and the lowering outlives a probe that may not have seen the write yet (an
//!   eventually consistent read): [`LOWERED_KEPT`].
//! - Entries other writers made since the probe (another node, the API function) are found by
//!   the next probe, which the store's poll starts every `poll_interval` (`StoreEvent::Resync`):
//!   the bound within which a node notices another's writes anyway, since its planner sleeps on
//!   what the probe saw. A probe older than twice that counts for nothing: every shard is read.
//! - Queue lanes are not floored: a worker's pull claims without a probe, and must see a message
//!   enqueued through any node at once.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a lowering by this store's own write is kept past any probe: longer than an
/// eventually consistent read lags behind a write (typically well under a second).
const LOWERED_KEPT: Duration = Duration::from_secs(10);

pub(super) struct Floors {
    shards: u32,
    /// How long a probe's floors are trusted.
    fresh_for: Duration,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// When the last complete probe started, and each shard's lowest sort-key bound it saw
    /// (`i64::MAX` for an empty shard).
    probed: Option<(Instant, Vec<i64>)>,
    /// Roots this store made lately: (when, shard, fire), oldest first.
    lowered: VecDeque<(Instant, u32, i64)>,
}

impl Floors {
    pub(super) fn new(shards: u32, poll_interval: Duration) -> Self {
        Self {
            shards,
            fresh_for: poll_interval.saturating_mul(2),
            state: Mutex::new(State::default()),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A probe that started at `started` read every shard: `firsts[shard]` is the bound of the
    /// shard's first entry, `i64::MAX` when it has none.
    pub(super) fn probed(&self, started: Instant, firsts: Vec<i64>) {
        debug_assert_eq!(firsts.len(), self.shards as usize);
        let mut state = self.state();
        if state.probed.as_ref().is_none_or(|(at, _)| *at <= started) {
            state.probed = Some((started, firsts));
        }
    }

    /// This store is about to write an entry due from `fire` into `shard`.
    pub(super) fn lower(&self, shard: u32, fire: i64) {
        let now = Instant::now();
        let mut state = self.state();
        while state
            .lowered
            .front()
            .is_some_and(|(at, ..)| now.duration_since(*at) > LOWERED_KEPT)
        {
            state.lowered.pop_front();
        }
        state.lowered.push_back((now, shard, fire));
    }

    /// The shards a claim of the fired lane with this horizon must read, in order.
    pub(super) fn to_read(&self, horizon: i64) -> Vec<u32> {
        let all = || (0..self.shards).collect();
        let now = Instant::now();
        let state = self.state();
        let Some((started, firsts)) = &state.probed else {
            return all();
        };
        if now.duration_since(*started) > self.fresh_for {
            return all();
        }
        let mut floors = firsts.clone();
        for (at, shard, fire) in &state.lowered {
            if now.duration_since(*at) <= LOWERED_KEPT
                && let Some(floor) = floors.get_mut(*shard as usize)
            {
                *floor = (*floor).min(*fire);
            }
        }
        (0..self.shards)
            .filter(|s| floors[*s as usize] <= horizon)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_fresh_probe_every_shard_is_read() {
        let floors = Floors::new(4, Duration::from_millis(50));
        assert_eq!(floors.to_read(0), vec![0, 1, 2, 3]);
        floors.probed(Instant::now(), vec![i64::MAX; 4]);
        assert!(
            floors.to_read(1_000).is_empty(),
            "a fresh probe saw nothing"
        );
        std::thread::sleep(Duration::from_millis(120));
        assert_eq!(floors.to_read(0), vec![0, 1, 2, 3], "the probe is stale");
    }

    #[test]
    fn a_probe_and_this_stores_writes_set_the_floors() {
        let floors = Floors::new(4, Duration::from_secs(60));
        floors.probed(Instant::now(), vec![500, i64::MAX, 2_000, i64::MAX]);
        assert_eq!(floors.to_read(1_000), vec![0]);
        assert_eq!(floors.to_read(2_000), vec![0, 2]);
        floors.lower(3, 900);
        assert_eq!(floors.to_read(1_000), vec![0, 3]);
        // A later probe that did not see the write yet keeps the lowering.
        floors.probed(Instant::now(), vec![i64::MAX; 4]);
        assert_eq!(floors.to_read(1_000), vec![3]);
        // An older probe answering late does not replace a newer one.
        let old = Instant::now() - Duration::from_secs(1);
        floors.probed(old, vec![0; 4]);
        assert_eq!(floors.to_read(1_000), vec![3]);
    }
}
