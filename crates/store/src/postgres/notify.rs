//! Events between nodes: writes that make something due, or fence a claim, `NOTIFY` in their own
//! transaction (the earliest fire time per kind of target and per queue, and the fenced jobs);
//! one `LISTEN` connection per store turns notifications into [`StoreEvent`]s and reconnects with
//! backoff, announcing [`StoreEvent::Resync`] since notifications sent meanwhile are lost.

use std::collections::HashMap;
use std::time::Duration;

use deadpool_postgres::GenericClient;
use hourglass_core::{FencingToken, JobId, from_ms};
use serde_json::{Value, json};
use tokio::sync::{broadcast, oneshot};
use tokio_postgres::{AsyncMessage, Row};
use tokio_postgres_rustls::MakeRustlsConnect;

use super::PostgresStore;
use super::codec::{describe, job_from_row};
use crate::{DueEvent, JobRecord, Result, StoreEvent};

/// Events waiting for slow receivers; a receiver that falls further behind gets `Lagged` and
/// re-checks everything.
pub(super) const EVENT_BUFFER: usize = 1024;
/// PostgreSQL refuses NOTIFY payloads of 8000 bytes or more; events are split below that.
const NOTIFY_PAYLOAD_MAX: usize = 7000;
const LISTEN_BACKOFF_MAX: Duration = Duration::from_secs(5);

impl PostgresStore {
    /// Ends a transaction that changed one job's definition or state (`row` is the job as
    /// updated, `JOB_COLUMNS`): tells other nodes that its claims are fenced
    /// and when it fires next, commits, and answers the stored job.
    pub(super) async fn commit_job_change(
        &self,
        tx: deadpool_postgres::Transaction<'_>,
        id: JobId,
        row: &Row,
        fire: Option<i64>,
    ) -> Result<JobRecord> {
        let record = job_from_row(row)?;
        let mut due = Due {
            fenced: vec![(id, record.token)],
            ..Due::default()
        };
        if let Some(fire) = fire {
            due.add(&record.namespace, record.spec.target.queue(), fire);
        }
        self.notify(&tx, &due).await?;
        tx.commit().await?;
        Ok(record)
    }

    /// Sends `due`'s events inside the caller's transaction: delivered to listeners only if it
    /// commits.
    pub(super) async fn notify(&self, tx: &impl GenericClient, due: &Due) -> Result<()> {
        for payload in due.payloads() {
            let stmt = tx.prepare_cached("SELECT pg_notify($1, $2)").await?;
            tx.execute(&stmt, &[&self.channel, &payload]).await?;
        }
        Ok(())
    }
}

/// Keeps one LISTEN connection open for the store's lifetime, reconnecting with capped backoff,
/// and turns notifications into events. After a reconnect it sends [`StoreEvent::Resync`]:
/// notifications sent while it was away are lost.
pub(super) async fn listen(
    config: tokio_postgres::Config,
    connector: MakeRustlsConnect,
    channel: String,
    events: broadcast::Sender<StoreEvent>,
    listening: oneshot::Sender<std::result::Result<(), String>>,
) {
    let mut listening = Some(listening);
    let mut backoff = Duration::from_millis(100);
    loop {
        match config.connect(connector.clone()).await {
            Err(e) => {
                if let Some(tx) = listening.take() {
                    let _ = tx.send(Err(describe(&e)));
                    return;
                }
                tracing::warn!(error = %describe(&e), retry_in_ms = backoff.as_millis() as u64, "listen connection failed");
            }
            Ok((client, mut connection)) => {
                let listen_sql = format!("LISTEN \"{channel}\"");
                // The connection does the I/O for the LISTEN request too, so drive both. The
                // client stays alive while listening: dropping it would end the connection.
                let subscribed = {
                    let subscribe = client.batch_execute(&listen_sql);
                    tokio::pin!(subscribe);
                    loop {
                        tokio::select! {
                            result = &mut subscribe => break result.map_err(|e| describe(&e)),
                            message = std::future::poll_fn(|cx| connection.poll_message(cx)) => {
                                match message {
                                    Some(Ok(_)) => {}
                                    Some(Err(e)) => break Err(describe(&e)),
                                    None => break Err("connection closed".into()),
                                }
                            }
                        }
                    }
                };
                match subscribed {
                    Ok(()) => {
                        backoff = Duration::from_millis(100);
                        match listening.take() {
                            Some(tx) => {
                                let _ = tx.send(Ok(()));
                            }
                            None => {
                                tracing::info!("listen connection restored");
                                let _ = events.send(StoreEvent::Resync);
                            }
                        }
                        loop {
                            match std::future::poll_fn(|cx| connection.poll_message(cx)).await {
                                Some(Ok(AsyncMessage::Notification(n))) => {
                                    for event in parse_events(n.payload()) {
                                        // No receivers is fine: nobody is waiting.
                                        let _ = events.send(event);
                                    }
                                }
                                Some(Ok(_)) => {}
                                Some(Err(e)) => {
                                    tracing::warn!(error = %describe(&e), "listen connection lost");
                                    break;
                                }
                                None => {
                                    tracing::warn!("listen connection closed");
                                    break;
                                }
                            }
                        }
                    }
                    Err(e) => {
                        if let Some(tx) = listening.take() {
                            let _ = tx.send(Err(e));
                            return;
                        }
                        tracing::warn!(error = %e, "listen failed");
                    }
                }
                drop(client);
            }
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(LISTEN_BACKOFF_MAX);
    }
}

/// The earliest due time per kind of target in one transaction, and the jobs whose claims it made
/// stale: what that transaction NOTIFYs.
#[derive(Default)]
pub(super) struct Due {
    fired: Option<(String, i64)>,
    queues: HashMap<(String, String), i64>,
    /// Jobs whose claims became stale, with their new token.
    pub(super) fenced: Vec<(JobId, FencingToken)>,
}

impl Due {
    pub(super) fn add(&mut self, namespace: &str, queue: Option<&str>, at_ms: i64) {
        match queue {
            None => {
                if self.fired.as_ref().is_none_or(|(_, at)| at_ms < *at) {
                    self.fired = Some((namespace.to_owned(), at_ms));
                }
            }
            Some(queue) => {
                let at = self
                    .queues
                    .entry((namespace.to_owned(), queue.to_owned()))
                    .or_insert(at_ms);
                *at = (*at).min(at_ms);
            }
        }
    }

    /// JSON arrays of `{"n": namespace, "q": queue|null, "at": ms}` and `{"fence": id, "token":
    /// t}`, each
    /// under PostgreSQL's payload limit.
    pub(super) fn payloads(&self) -> Vec<String> {
        let mut items: Vec<String> = Vec::new();
        if let Some((namespace, at)) = &self.fired {
            items.push(json!({"n": namespace, "q": null, "at": at}).to_string());
        }
        for ((namespace, queue), at) in &self.queues {
            items.push(json!({"n": namespace, "q": queue, "at": at}).to_string());
        }
        for (id, token) in &self.fenced {
            items.push(json!({ "fence": id, "token": token.as_i64() }).to_string());
        }
        let mut out = Vec::new();
        let mut current = String::new();
        for item in items {
            if !current.is_empty() && current.len() + item.len() + 2 > NOTIFY_PAYLOAD_MAX {
                current.push(']');
                out.push(std::mem::take(&mut current));
            }
            current.push(if current.is_empty() { '[' } else { ',' });
            current.push_str(&item);
        }
        if !current.is_empty() {
            current.push(']');
            out.push(current);
        }
        out
    }
}

/// A notification from another store of the same version; anything unreadable becomes a
/// [`StoreEvent::Resync`] (a hint lost is a re-check, never a miss).
pub(super) fn parse_events(payload: &str) -> Vec<StoreEvent> {
    let Ok(Value::Array(items)) = serde_json::from_str::<Value>(payload) else {
        return vec![StoreEvent::Resync];
    };
    items
        .iter()
        .map(|item| {
            if let Some(id) = item.get("fence").and_then(Value::as_str) {
                return match (id.parse(), item.get("token").and_then(Value::as_i64)) {
                    (Ok(job_id), Some(token)) => StoreEvent::Fenced {
                        job_id,
                        token: FencingToken::from_i64(token),
                    },
                    _ => StoreEvent::Resync,
                };
            }
            match (
                item.get("n").and_then(Value::as_str),
                item.get("at").and_then(Value::as_i64),
            ) {
                (Some(namespace), Some(at)) => StoreEvent::Due(DueEvent {
                    namespace: namespace.to_owned(),
                    queue: item.get("q").and_then(Value::as_str).map(str::to_owned),
                    at: from_ms(at),
                }),
                _ => StoreEvent::Resync,
            }
        })
        .collect()
}
