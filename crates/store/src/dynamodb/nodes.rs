//! Node heartbeats: one item per node in one partition, replaced by each heartbeat (a single
//! put of well under 1 KB: one write unit). The items carry `ttl`, their `live_until`, so
//! DynamoDB's time to live deletes the heartbeats of nodes that stopped, for free; since it does
//! so some time after that instant, listing skips the lapsed ones itself.
//!
//! | item | `pk` | `sk` |
//! |---|---|---|
//! | node heartbeat | `nodes` | `<node id>` |

use hourglass_core::from_ms;
use jiff::Timestamp;

use super::Inner;
use super::item::{Attrs, key, n, s};
use super::table::{Query, TTL};
use crate::{NodeBeat, Result};

const NODES_PK: &str = "nodes";

pub(super) async fn heartbeat(inner: &Inner, beat: &NodeBeat) -> Result<()> {
    let mut item = key(NODES_PK.into(), &beat.id);
    item.insert("ver".into(), s(beat.version.as_str()));
    item.insert("started".into(), n(beat.started_at.as_millisecond()));
    item.insert("at".into(), n(beat.beat_at.as_millisecond()));
    item.insert(
        "claims".into(),
        n(i64::try_from(beat.claims_held).unwrap_or(i64::MAX)),
    );
    let until = beat.live_until.as_millisecond();
    item.insert("until".into(), n(until));
    // Seconds, rounded up, so the item never expires before its heartbeat lapses.
    item.insert(TTL.into(), n(until.div_euclid(1000) + 1));
    inner.put(item).await
}

pub(super) async fn nodes(inner: &Inner, now: Timestamp) -> Result<Vec<NodeBeat>> {
    let now = now.as_millisecond();
    let mut live = Vec::new();
    for item in inner.query(&Query::new(NODES_PK.into())).await? {
        let until = item.num("until")?;
        if until <= now {
            continue;
        }
        live.push(NodeBeat {
            id: item.str("sk")?.to_owned(),
            version: item.str("ver")?.to_owned(),
            started_at: from_ms(item.num("started")?),
            beat_at: from_ms(item.num("at")?),
            claims_held: item.num("claims")?.max(0) as u64,
            live_until: from_ms(until),
        });
    }
    Ok(live)
}
