//! Counts: a namespace's queues by visibility, and the gauges every node exports (jobs by
//! state, the due backlog, queue messages).

use std::collections::BTreeMap;

use hourglass_core::{JobState, from_ms};
use jiff::Timestamp;

use super::state::{Lane, State};
use crate::rules::Visibility;
use crate::{QueueStats, Result, StoreGauges};

pub(super) fn queue_stats(
    state: &State,
    namespace: &str,
    queue: Option<&str>,
    now: Timestamp,
) -> Result<Vec<QueueStats>> {
    let now = now.as_millisecond();
    // Queue names in byte order, as the SQL backends sort them.
    let mut by_name: BTreeMap<&str, Visibility> = BTreeMap::new();
    for (lane, fire, _, id) in state.queue_entries(Some(namespace)) {
        let Lane::Queue { queue: name, .. } = lane else {
            continue;
        };
        if queue.is_some_and(|wanted| wanted != name) {
            continue;
        }
        let leased = state.jobs.get(id).is_some_and(|job| job.lease.is_some());
        by_name.entry(name).or_default().count(*fire, leased, now);
    }
    let mut out: Vec<QueueStats> = by_name
        .into_iter()
        .map(|(name, v)| QueueStats {
            name: name.to_owned(),
            available: v.available,
            in_flight: v.in_flight,
            scheduled: v.scheduled,
            oldest_available: v.oldest_available.map(from_ms),
        })
        .collect();
    if out.is_empty()
        && let Some(name) = queue
    {
        out.push(QueueStats {
            name: name.to_owned(),
            available: 0,
            in_flight: 0,
            scheduled: 0,
            oldest_available: None,
        });
    }
    Ok(out)
}

pub(super) fn gauges(state: &State, now: Timestamp) -> Result<StoreGauges> {
    let now = now.as_millisecond();
    let mut gauges = StoreGauges {
        jobs_by_state: JobState::ALL.iter().map(|s| (*s, 0)).collect(),
        ..Default::default()
    };
    for job in state.jobs.values() {
        if let Some(slot) = gauges
            .jobs_by_state
            .iter_mut()
            .find(|(s, _)| *s == job.state)
        {
            slot.1 += 1;
        }
    }
    // Fire times passed: unclaimed occurrences, and claims whose lease lapsed (backlog again).
    for (_, fire, ..) in state.due_in(Lane::Fired, now) {
        gauges.due_backlog += 1;
        gauges.oldest_backlog = gauges.oldest_backlog.or(Some(from_ms(*fire)));
    }
    let mut queues = Visibility::default();
    for (_, fire, _, id) in state.queue_entries(None) {
        let leased = state.jobs.get(id).is_some_and(|job| job.lease.is_some());
        queues.count(*fire, leased, now);
    }
    gauges.queue_available = queues.available;
    gauges.queue_in_flight = queues.in_flight;
    gauges.queue_scheduled = queues.scheduled;
    gauges.oldest_queue_available = queues.oldest_available.map(from_ms);
    Ok(gauges)
}
