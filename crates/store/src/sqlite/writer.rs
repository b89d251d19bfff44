//! The writer thread: every write goes through it, and it group-commits. It takes every request
//! waiting in its queue, runs each inside its own savepoint, commits once, and only then answers
//! them all, so a thousand concurrent creates cost one fsync.

use std::sync::atomic::{AtomicI64, Ordering};

use rusqlite::Connection;
use tokio::sync::{mpsc, oneshot};

use super::SqliteStore;
use super::codec::unavailable;
use crate::failpoint::{self, Failpoints};
use crate::{Result, StoreError};

/// How many queued requests one transaction may take. Bounds the latency one commit adds.
const MAX_GROUP: usize = 512;
/// Requests waiting for the writer. When full, callers wait: this is the store's backpressure.
pub(super) const WRITE_QUEUE: usize = 4096;

type Reply = Box<dyn FnOnce(Option<StoreError>) + Send>;
/// A unit of work for the writer. It gets no connection when the transaction could not begin.
pub(super) type WriteJob = Box<dyn FnOnce(Option<&Connection>) -> (bool, Reply) + Send>;

/// Whether the group commit about to run must fail, as a full disk would make it. `faults` at
/// n ≥ 0 lets n more commits through and fails the one after; -1 is off. Only the unit tests
/// (`tests.rs`) set it: a failed commit is otherwise hard to bring about at a chosen moment.
fn commit_fault(faults: &AtomicI64) -> bool {
    faults
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
            (n >= 0).then(|| n - 1)
        })
        .is_ok_and(|n| n == 0)
}

impl SqliteStore {
    /// Runs `f` inside the next group commit; answers only after the commit is durable.
    pub(super) async fn write<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T> + Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        let job: WriteJob = Box::new(move |conn| {
            let result = match conn {
                Some(conn) => f(conn),
                None => Err(StoreError::Unavailable("cannot begin a transaction".into())),
            };
            let ok = result.is_ok();
            let reply: Reply = Box::new(move |commit_error| {
                let _ = tx.send(match commit_error {
                    Some(e) => Err(e),
                    None => result,
                });
            });
            (ok, reply)
        });
        self.writer
            .send(job)
            .await
            .map_err(|_| StoreError::Unavailable("store is closed".into()))?;
        rx.await
            .map_err(|_| StoreError::Unavailable("store writer stopped".into()))?
    }
}

pub(super) fn writer_loop(
    conn: Connection,
    mut rx: mpsc::Receiver<WriteJob>,
    faults: &AtomicI64,
    failpoints: &Failpoints,
) {
    let mut group: Vec<WriteJob> = Vec::with_capacity(MAX_GROUP);
    while let Some(first) = rx.blocking_recv() {
        group.push(first);
        while group.len() < MAX_GROUP {
            match rx.try_recv() {
                Ok(job) => group.push(job),
                Err(_) => break,
            }
        }
        let began = conn.execute_batch("BEGIN IMMEDIATE").is_ok();
        let mut replies = Vec::with_capacity(group.len());
        for job in group.drain(..) {
            if !began {
                replies.push(job(None).1);
                continue;
            }
            if conn.execute_batch("SAVEPOINT op").is_err() {
                replies.push(job(None).1);
                continue;
            }
            let (ok, reply) = job(Some(&conn));
            let end = if ok {
                "RELEASE op"
            } else {
                "ROLLBACK TO op; RELEASE op"
            };
            if let Err(e) = conn.execute_batch(end) {
                tracing::error!(error = %e, "savepoint cleanup failed");
            }
            replies.push(reply);
        }
        // A crash here: the open transaction dies with the connection (closed before the
        // replies are dropped, so no caller sees the end before it), and no one is answered.
        if began && failpoints.hit(failpoint::SQLITE_BEFORE_COMMIT) {
            drop(conn);
            return;
        }
        let commit_error = if began {
            let committed = if commit_fault(faults) {
                Err(rusqlite::Error::SqliteFailure(
                    rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_FULL),
                    Some("injected by a test".into()),
                ))
            } else {
                conn.execute_batch("COMMIT")
            };
            committed.err().map(|e| {
                tracing::error!(error = %e, "group commit failed; answering every request with the error");
                let _ = conn.execute_batch("ROLLBACK");
                unavailable(e)
            })
        } else {
            None
        };
        // A crash here: the group is durable, and still no one is answered.
        if began && failpoints.hit(failpoint::SQLITE_AFTER_COMMIT) {
            drop(conn);
            return;
        }
        for reply in replies {
            reply(commit_error.clone());
        }
    }
}
