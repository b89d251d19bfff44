//! Node heartbeats: the live nodes, each as its latest heartbeat said.

use std::sync::Arc;

use super::{T0, ms, t};
use crate::{NodeBeat, Store};

fn beat(id: &str, at: jiff::Timestamp, claims: u64) -> NodeBeat {
    NodeBeat {
        id: id.into(),
        version: "0.1.0".into(),
        started_at: t(T0),
        beat_at: at,
        claims_held: claims,
        live_until: at + ms(15_000),
    }
}

pub async fn nodes_are_listed_while_their_heartbeat_is_live(store: Arc<dyn Store>) {
    let t0 = t(T0);
    assert_eq!(store.nodes(t0).await.expect("nodes"), vec![]);
    store.heartbeat(&beat("node-b", t0, 3)).await.expect("beat");
    store.heartbeat(&beat("node-a", t0, 0)).await.expect("beat");
    assert_eq!(
        store.nodes(t0).await.expect("nodes"),
        vec![beat("node-a", t0, 0), beat("node-b", t0, 3)],
        "every live node, by id"
    );

    // A later heartbeat replaces the node's earlier one.
    let later = t0 + ms(5_000);
    let mut restarted = beat("node-b", later, 7);
    restarted.version = "0.2.0".into();
    restarted.started_at = later;
    store.heartbeat(&restarted).await.expect("beat");
    assert_eq!(
        store.nodes(later).await.expect("nodes"),
        vec![beat("node-a", t0, 0), restarted.clone()]
    );

    // node-a's heartbeat lapses at t0 + 15 s: from then on it is not listed.
    let lapsed = t0 + ms(15_000);
    assert_eq!(
        store.nodes(lapsed).await.expect("nodes"),
        vec![restarted.clone()],
        "a node whose heartbeat lapsed is not live"
    );
    // Nor after another node's heartbeat, which may drop it for good.
    let next = beat("node-b", t0 + ms(16_000), 1);
    store.heartbeat(&next).await.expect("beat");
    assert_eq!(store.nodes(next.beat_at).await.expect("nodes"), vec![next]);
    // A node that beats again is back.
    let back = beat("node-a", t0 + ms(17_000), 2);
    store.heartbeat(&back).await.expect("beat");
    assert_eq!(
        store
            .nodes(back.beat_at)
            .await
            .expect("nodes")
            .iter()
            .map(|b| b.id.as_str())
            .collect::<Vec<_>>(),
        vec!["node-a", "node-b"]
    );
}
