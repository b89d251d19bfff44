//! Jitter: how far past its due time an occurrence of a jittered schedule fires.
//!
//! The offset is a keyed hash of the job's id and the occurrence's due (nominal) millisecond,
//! reduced to the occurrence's window, so every node, every retry and every preview compute the
//! same one without storing it, and a thousand jobs due at the same instant spread evenly over
//! the window. The hash (splitmix64's finalizer, chained over the id's halves and the due time)
//! is part of the stored behaviour: changing it would move pending occurrences, so it never
//! changes. The window is the schedule's jitter, cut to the time until its next due time
//! ([`crate::Schedule::fire_time`]), so an occurrence never fires at or after its successor's
//! due time.

use std::time::Duration;

/// The offset in `[0, window_ms)` of the occurrence of `job` due at `due_ms`; 0 for a window of
/// a millisecond or less.
pub fn offset_ms(job: uuid::Uuid, due_ms: i64, window_ms: i64) -> i64 {
    if window_ms <= 1 {
        return 0;
    }
    let (high, low) = job.as_u64_pair();
    let hash = mix(mix(mix(high ^ KEY) ^ low) ^ due_ms as u64);
    // The window fits an i64, so the remainder does too. Its bias (a window of at most a day in
    // a 64-bit hash) is below one part in 10^11.
    (hash % window_ms as u64) as i64
}

/// An arbitrary odd constant (the golden ratio's bits), so that a nil id does not hash to 0.
const KEY: u64 = 0x9e37_79b9_7f4a_7c15;

/// splitmix64's finalizer: every input bit moves about half the output bits.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The storage encoding of an optional jitter: whole milliseconds.
pub(crate) mod optional_ms {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.serialize_u64(d.as_millis() as u64),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        Ok(Option::<u64>::deserialize(d)?.map(Duration::from_millis))
    }
}

/// A jitter's window in milliseconds, saturating.
pub(crate) fn window_ms(jitter: Duration) -> i64 {
    crate::duration_ms(jitter)
}
