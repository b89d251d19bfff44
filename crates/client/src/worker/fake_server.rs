//! An in-memory stand-in for a node's queue endpoints, for the worker tests: lease (with long
//! poll and `types`), ack, nack and extend on one queue, recording every request so tests can
//! assert on what the worker sent. It can answer the next requests with 503 and refuse leases
//! with 401.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::Notify;

use crate::types::{Message, Receipt};

#[derive(Debug, Default)]
pub struct Recorded {
    /// Due messages not leased yet.
    pub available: VecDeque<Message>,
    /// Leased and not yet acked or nacked, by receipt.
    pub in_flight: HashMap<String, Message>,
    /// The most messages in flight at any moment.
    pub max_in_flight: usize,
    /// Every lease request body, failed ones included.
    pub leases: Vec<Value>,
    /// Ack requests received, failed ones included.
    pub ack_requests: usize,
    pub acked: Vec<String>,
    /// (receipt, delay_ms)
    pub nacked: Vec<(String, Option<u64>)>,
    /// (receipt, visibility_ms)
    pub extended: Vec<(String, u64)>,
    /// Answer this many of the next lease requests with 503.
    pub fail_leases: usize,
    /// Answer this many of the next ack requests with 503.
    pub fail_acks: usize,
    /// Refuse every lease with 401.
    pub refuse_leases: bool,
    next_receipt: u64,
}

#[derive(Clone)]
pub struct FakeServer {
    pub addr: SocketAddr,
    state: Arc<Mutex<Recorded>>,
    /// Woken on every change, for long polls and for tests waiting on an event.
    changed: Arc<Notify>,
}

type AppState = (Arc<Mutex<Recorded>>, Arc<Notify>);

impl FakeServer {
    pub async fn start() -> FakeServer {
        let state = Arc::new(Mutex::new(Recorded::default()));
        let changed = Arc::new(Notify::new());
        let app = Router::new()
            .route("/v1/queues/{name}/{verb}", post(queue_action))
            .with_state((state.clone(), changed.clone()));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        FakeServer {
            addr,
            state,
            changed,
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Makes a message available; returns its receipt (fixed per message in this fake).
    pub fn push(&self, job_type: Option<&str>, payload: Value) -> String {
        self.change(|s| {
            s.next_receipt += 1;
            let receipt = format!("r{}", s.next_receipt);
            let now = jiff::Timestamp::now();
            s.available.push_back(Message {
                job_id: uuid::Uuid::now_v7(),
                job_type: job_type.map(|t| t.to_owned().into()),
                payload: (!payload.is_null())
                    .then(|| hourglass_api::Payload::from_value(&payload).expect("JSON encodes")),
                delivery_id: format!("d{}", s.next_receipt).into(),
                attempt: 1,
                max_attempts: 10,
                due_at: now,
                visible_until: now,
                receipt: Receipt(receipt.clone()),
            });
            receipt
        })
    }

    pub fn change<R>(&self, f: impl FnOnce(&mut Recorded) -> R) -> R {
        let result = f(&mut self.state.lock().unwrap());
        self.changed.notify_waiters();
        result
    }

    pub fn read<R>(&self, f: impl FnOnce(&Recorded) -> R) -> R {
        f(&self.state.lock().unwrap())
    }

    /// Waits until `pred` holds over what was recorded; panics with the record after 10 s.
    pub async fn wait_for(&self, what: &str, pred: impl Fn(&Recorded) -> bool) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.read(&pred) {
                return;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                panic!(
                    "timed out waiting for {what}: {:#?}",
                    self.state.lock().unwrap()
                );
            }
        }
    }
}

#[derive(Deserialize)]
struct Body {
    max: Option<usize>,
    wait_ms: Option<u64>,
    types: Option<Vec<String>>,
    receipts: Option<Vec<String>>,
    delay_ms: Option<u64>,
    visibility_ms: Option<u64>,
}

fn unavailable() -> Response {
    (
        StatusCode::SERVICE_UNAVAILABLE,
        [("retry-after", "0")],
        Json(json!({"error": {"code": "store_unavailable", "message": "try later"}})),
    )
        .into_response()
}

async fn queue_action(
    State((state, changed)): State<AppState>,
    Path((_name, verb)): Path<(String, String)>,
    Json(raw): Json<Value>,
) -> Response {
    let body: Body = serde_json::from_value(raw.clone()).expect("a body the fake understands");
    let done = |_: &Arc<Mutex<Recorded>>| changed.notify_waiters();
    match verb.as_str() {
        "lease" => {
            {
                let mut s = state.lock().unwrap();
                s.leases.push(raw);
                if s.refuse_leases {
                    drop(s);
                    done(&state);
                    return (
                        StatusCode::UNAUTHORIZED,
                        Json(json!({"error": {"code": "unauthorized", "message": "no key"}})),
                    )
                        .into_response();
                }
                if s.fail_leases > 0 {
                    s.fail_leases -= 1;
                    drop(s);
                    done(&state);
                    return unavailable();
                }
            }
            done(&state);
            let deadline =
                tokio::time::Instant::now() + Duration::from_millis(body.wait_ms.unwrap_or(0));
            loop {
                let notified = changed.notified();
                tokio::pin!(notified);
                notified.as_mut().enable();
                let taken = {
                    let mut s = state.lock().unwrap();
                    let wanted = |m: &Message| match &body.types {
                        None => true,
                        Some(types) => m
                            .job_type
                            .as_ref()
                            .is_some_and(|t| types.iter().any(|w| w == t)),
                    };
                    let mut taken = Vec::new();
                    let mut kept = VecDeque::new();
                    while let Some(m) = s.available.pop_front() {
                        if taken.len() < body.max.unwrap_or(10) && wanted(&m) {
                            taken.push(m);
                        } else {
                            kept.push_back(m);
                        }
                    }
                    s.available = kept;
                    for m in &taken {
                        s.in_flight.insert(m.receipt.0.clone(), m.clone());
                    }
                    s.max_in_flight = s.max_in_flight.max(s.in_flight.len());
                    taken
                };
                if !taken.is_empty() {
                    done(&state);
                    return Json(json!({ "messages": taken })).into_response();
                }
                if tokio::time::timeout_at(deadline, notified).await.is_err() {
                    return Json(json!({ "messages": [] })).into_response();
                }
            }
        }
        "ack" | "nack" | "extend" => {
            let receipts = body.receipts.unwrap_or_default();
            let mut s = state.lock().unwrap();
            if verb == "ack" {
                s.ack_requests += 1;
                if s.fail_acks > 0 {
                    s.fail_acks -= 1;
                    drop(s);
                    done(&state);
                    return unavailable();
                }
            }
            let mut succeeded = Vec::new();
            let mut failed = Vec::new();
            for receipt in receipts {
                if !s.in_flight.contains_key(&receipt) {
                    failed.push(json!({"receipt": receipt, "code": "stale_receipt", "message": "not leased"}));
                    continue;
                }
                match verb.as_str() {
                    "ack" => {
                        s.in_flight.remove(&receipt);
                        s.acked.push(receipt.clone());
                    }
                    "nack" => {
                        s.in_flight.remove(&receipt);
                        s.nacked.push((receipt.clone(), body.delay_ms));
                    }
                    _ => s
                        .extended
                        .push((receipt.clone(), body.visibility_ms.unwrap_or(0))),
                }
                succeeded.push(receipt);
            }
            drop(s);
            done(&state);
            Json(json!({"succeeded": succeeded, "failed": failed})).into_response()
        }
        _ => StatusCode::NOT_FOUND.into_response(),
    }
}
