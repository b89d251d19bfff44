//! What every node of one simulated run shares: the seeded random choices, the true clock (tokio's
//! paused one) and each node's skewed reading of it, which nodes are crashed or paused, the
//! store's event bus, and the log of what clients were told and what receivers saw, which the
//! invariants are checked against.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use hourglass_core::{Clock, JobId};
use hourglass_store::StoreEvent;
use jiff::Timestamp;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::sync::broadcast;
use tokio::time::Instant;

/// The wall-clock instant the simulation starts at (true time).
pub const BASE_MS: i64 = 1_906_545_600_000; // 2030-06-01T12:00:00Z

/// A node's liveness as the harness controls it.
#[derive(Debug, Clone)]
pub struct NodeState {
    /// Bumped at every restart: a crashed incarnation's calls never return.
    pub incarnation: u64,
    pub crashed: bool,
    /// While set and in the future, the node's store calls and sends wait (a stopped process).
    pub paused_until: Option<Instant>,
    /// How far the node's clock is ahead of true time (negative: behind).
    pub skew_ms: i64,
}

/// What a receiver answered to one send.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Answer {
    Ok,
    /// A 500: tried again until the attempts run out.
    Fail,
    /// A 410: dead-lettered at once.
    Gone,
}

/// One message a receiver saw.
#[derive(Debug, Clone)]
pub struct Send {
    pub node: usize,
    pub job_id: JobId,
    pub due_ms: i64,
    /// Sent by the job an `allow` job handed the occurrence to (`job_id` and `due_ms` are
    /// the `allow` job's and the occurrence's).
    pub handed_off: bool,
    pub attempt: u32,
    /// The job's payload version (`v<n>`) the occurrence carried.
    pub version: u32,
    /// True time of the send, and the sending node's clock reading.
    pub true_ms: i64,
    pub node_ms: i64,
    pub answer: Answer,
}

/// What the clients were told about one job (true times).
#[derive(Debug, Clone, Default)]
pub struct JobFacts {
    pub create_acked_ms: Option<i64>,
    pub cancel_tried: bool,
    pub cancel_acked_ms: Option<i64>,
    /// Acknowledged edits: the payload version each set, and when.
    pub edits_acked: Vec<(u32, i64)>,
    /// The last version an edit tried to set (acknowledged or not).
    pub version: u32,
    /// An API call on the job is under way (one at a time per job, so that versions only grow).
    pub busy: bool,
    /// An `every` schedule (edits then change only its payload).
    pub recurring: bool,
}

/// What a store write did to claims, logged at its commit in commit order, in true time: what
/// the exclusive-lease invariant is checked against.
#[derive(Debug, Clone, Copy)]
pub enum LeaseEvent {
    /// A claim of `job` granted to `node` under `token`, its lease running to `until`.
    Granted {
        node: usize,
        job: JobId,
        token: i64,
        at: i64,
        until: i64,
    },
    /// A claim's lease renewed to `until`.
    Renewed { job: JobId, token: i64, until: i64 },
    /// A claim settled by its completion, or handed back.
    Ended { job: JobId, token: i64 },
    /// An edit or a transition of `job`: every claim of it made before is stale.
    Fenced { job: JobId },
}

#[derive(Default)]
pub struct Log {
    pub sends: Vec<Send>,
    pub leases: Vec<LeaseEvent>,
    pub jobs: BTreeMap<JobId, JobFacts>,
    /// What the harness did, for a verbose rerun.
    pub timeline: Vec<String>,
}

pub struct World {
    rng: Mutex<StdRng>,
    start: Instant,
    pub nodes: Mutex<Vec<NodeState>>,
    pub events: broadcast::Sender<StoreEvent>,
    /// Store faults (failed writes, lost answers, latency) are injected while set.
    faults: AtomicBool,
    pub log: Mutex<Log>,
}

impl World {
    pub fn new(seed: u64, nodes: usize) -> Self {
        let mut rng = StdRng::seed_from_u64(seed);
        let nodes = (0..nodes)
            .map(|_| NodeState {
                incarnation: 0,
                crashed: false,
                paused_until: None,
                skew_ms: rng.random_range(-crate::MAX_SKEW_MS..=crate::MAX_SKEW_MS),
            })
            .collect();
        Self {
            rng: Mutex::new(rng),
            start: Instant::now(),
            nodes: Mutex::new(nodes),
            events: broadcast::channel(4096).0,
            faults: AtomicBool::new(true),
            log: Mutex::default(),
        }
    }

    /// A seeded random choice.
    pub fn rand<T>(&self, f: impl FnOnce(&mut StdRng) -> T) -> T {
        f(&mut self.rng.lock().unwrap())
    }

    /// Whether a seeded coin with probability `p` comes up.
    pub fn chance(&self, p: f64) -> bool {
        self.rand(|r| r.random_bool(p))
    }

    pub fn true_ms(&self) -> i64 {
        BASE_MS + self.start.elapsed().as_millis() as i64
    }

    pub fn faults(&self) -> bool {
        self.faults.load(Ordering::SeqCst)
    }

    pub fn set_faults(&self, on: bool) {
        self.faults.store(on, Ordering::SeqCst)
    }

    pub fn note(&self, what: String) {
        let line = format!("t+{:>6} ms {what}", self.true_ms() - BASE_MS);
        self.log.lock().unwrap().timeline.push(line);
    }

    /// Waits while node `node` is paused; never returns once incarnation `inc` has crashed (a
    /// dead process answers nothing and sends nothing).
    pub async fn gate(&self, node: usize, inc: u64) {
        loop {
            let (dead, paused) = {
                let nodes = self.nodes.lock().unwrap();
                let n = &nodes[node];
                (n.crashed || n.incarnation != inc, n.paused_until)
            };
            if dead {
                std::future::pending::<()>().await;
            }
            match paused {
                Some(until) if until > Instant::now() => tokio::time::sleep_until(until).await,
                _ => return,
            }
        }
    }

    /// Announces a store event to every node, as PostgreSQL's `NOTIFY` does at commit.
    pub fn announce(&self, event: StoreEvent) {
        let _ = self.events.send(event);
    }

    /// Logs what a write did to claims, at its commit.
    pub fn lease(&self, events: impl IntoIterator<Item = LeaseEvent>) {
        self.log.lock().unwrap().leases.extend(events);
    }

    /// A time on `node`'s clock as true time.
    pub fn true_of(&self, node: usize, node_ms: i64) -> i64 {
        node_ms - self.nodes.lock().unwrap()[node].skew_ms
    }

    pub fn facts(&self, job_id: JobId, f: impl FnOnce(&mut JobFacts)) {
        f(self.log.lock().unwrap().jobs.entry(job_id).or_default())
    }
}

/// A node's clock: true time plus its skew.
pub struct SkewedClock {
    pub start: Instant,
    pub skew_ms: i64,
}

impl Clock for SkewedClock {
    fn now(&self) -> Timestamp {
        let ms = BASE_MS + self.start.elapsed().as_millis() as i64 + self.skew_ms;
        hourglass_core::from_ms(ms)
    }
}

impl World {
    pub fn clock_of(&self, node: usize) -> SkewedClock {
        SkewedClock {
            start: self.start,
            skew_ms: self.nodes.lock().unwrap()[node].skew_ms,
        }
    }

    /// A random duration between `lo` and `hi` milliseconds.
    pub fn ms(&self, lo: u64, hi: u64) -> Duration {
        Duration::from_millis(self.rand(|r| r.random_range(lo..=hi)))
    }
}
