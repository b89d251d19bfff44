//! The audit log in memory: entries by (namespace, time, order of appending), read newest first
//! and purged oldest first.

use std::collections::BTreeMap;
use std::ops::Bound;

use jiff::Timestamp;

use crate::{AuditCursor, AuditEntry, AuditQuery, AuditRecord, Result};

/// Every namespace's log; `appended` numbers the entries (the cursor's `seq`).
#[derive(Debug, Default)]
pub(super) struct AuditLog {
    entries: BTreeMap<(String, AuditCursor), AuditRecord>,
    appended: i64,
}

impl AuditLog {
    pub(super) fn append(&mut self, record: AuditRecord) -> Result<()> {
        self.appended += 1;
        let cursor = AuditCursor {
            at_ms: record.at.as_millisecond(),
            seq: self.appended,
        };
        self.entries
            .insert((record.namespace.clone(), cursor), record);
        Ok(())
    }

    pub(super) fn read(&self, query: AuditQuery) -> Result<Vec<AuditEntry>> {
        let before = query.before.unwrap_or(AuditCursor::NEWEST);
        let start = (
            query.namespace.clone(),
            AuditCursor {
                at_ms: i64::MIN,
                seq: i64::MIN,
            },
        );
        let end = (query.namespace, before);
        Ok(self
            .entries
            .range((Bound::Included(start), Bound::Excluded(end)))
            .rev()
            .filter(|(_, record)| query.job.is_none_or(|job| record.concerns(job)))
            .take(query.limit)
            .map(|((_, cursor), record)| AuditEntry {
                cursor: *cursor,
                record: record.clone(),
            })
            .collect())
    }

    pub(super) fn purge(&mut self, before: Timestamp, limit: usize) -> Result<u64> {
        let before = before.as_millisecond();
        let mut old: Vec<(i64, (String, AuditCursor))> = self
            .entries
            .keys()
            .filter(|(_, cursor)| cursor.at_ms < before)
            .map(|key| (key.1.seq, key.clone()))
            .collect();
        old.sort_unstable();
        let mut purged = 0;
        for (_, key) in old.into_iter().take(limit) {
            self.entries.remove(&key);
            purged += 1;
        }
        Ok(purged)
    }
}
