//! Heartbeats kept in the process: the memory store's, and the embedded store's, whose data
//! directory is locked by exactly one node (so no other node could read them from its file, and a
//! restarted node's old heartbeat is of a process that is gone). Writing them to the SQLite file
//! would cost an fsync every heartbeat for nothing.

use std::collections::BTreeMap;
use std::sync::Mutex;

use jiff::Timestamp;

use crate::{NodeBeat, Result, StoreError};

#[derive(Default)]
pub(crate) struct NodeTable {
    beats: Mutex<BTreeMap<String, NodeBeat>>,
}

impl NodeTable {
    pub(crate) fn beat(&self, beat: &NodeBeat) -> Result<()> {
        let mut beats = self.lock()?;
        beats.retain(|_, b| b.live_until >= beat.beat_at);
        beats.insert(beat.id.clone(), beat.clone());
        Ok(())
    }

    pub(crate) fn live(&self, now: Timestamp) -> Result<Vec<NodeBeat>> {
        Ok(self
            .lock()?
            .values()
            .filter(|b| b.live_until > now)
            .cloned()
            .collect())
    }

    fn lock(&self) -> Result<std::sync::MutexGuard<'_, BTreeMap<String, NodeBeat>>> {
        self.beats
            .lock()
            .map_err(|_| StoreError::Unavailable("node table lock poisoned".into()))
    }
}
