//! One seeded run: three engines on one store, API clients creating, editing and cancelling jobs
//! through the nodes' schedulers while nodes crash and restart, stall past their leases, and the
//! store and receivers misbehave; then a quiet spell (no faults, every node up) in which every
//! job still owed a delivery must get it.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use hourglass_core::{
    JobSpec, MisfirePolicy, RetryPolicy, Schedule, ScheduleKind, Target, WebhookTarget,
};
use hourglass_engine::{Engine, EngineConfig, JobEdit, JobRef, Metrics, Scheduler};
use hourglass_store::{MemoryStore, NewJob, StoreError, Transition};
use jiff::{SignedDuration, Timestamp};
use rand::Rng;
use tokio::time::Instant;

use crate::receiver::Receivers;
use crate::store::FaultStore;
use crate::world::World;
use crate::{NAMESPACE, NODES};

/// How long clients and faults are active, then how long the quiet spell lasts.
const ACTIVE: Duration = Duration::from_secs(60);
const QUIET: Duration = Duration::from_secs(200);
const LEASE: Duration = Duration::from_secs(6);
/// Tries of one API call before the client gives up.
const CLIENT_TRIES: usize = 4;

/// The live nodes' schedulers (`None`: crashed).
type Doors = Arc<Mutex<Vec<Option<Scheduler>>>>;

fn config(node: usize) -> EngineConfig {
    EngineConfig {
        node_id: format!("node-{node}"),
        lease_ttl: LEASE,
        retention: None,
        heartbeat_interval: Some(Duration::from_secs(2)),
        breaker_failures: 3,
        breaker_open_for: Duration::from_secs(5),
        shutdown_grace: Duration::from_secs(1),
        ..EngineConfig::default()
    }
}

fn start(world: &Arc<World>, store: &Arc<MemoryStore>, node: usize) -> Engine {
    let incarnation = world.nodes.lock().unwrap()[node].incarnation;
    let clock = Arc::new(world.clock_of(node));
    let faults = FaultStore {
        inner: store.clone(),
        world: world.clone(),
        node,
        incarnation,
    };
    let receivers = Receivers {
        world: world.clone(),
        node,
        incarnation,
        clock: clock.clone(),
    };
    let metrics = Metrics::new(&mut prometheus_client::registry::Registry::default());
    Engine::start(
        config(node),
        Arc::new(faults),
        Arc::new(receivers),
        clock,
        metrics,
    )
}

/// Runs seed `seed`'s scenario; answers the world (what happened) and the store, to be checked.
pub async fn run(seed: u64) -> (Arc<World>, Arc<MemoryStore>) {
    let world = Arc::new(World::new(seed, NODES));
    let store = Arc::new(MemoryStore::new());
    let doors: Doors = Arc::new(Mutex::new(
        (0..NODES)
            .map(|n| Some(start(&world, &store, n).scheduler()))
            .collect(),
    ));
    let mut restart_at: Vec<Option<Instant>> = vec![None; NODES];
    let end = Instant::now() + ACTIVE;
    while Instant::now() < end {
        tokio::time::sleep(world.ms(20, 700)).await;
        for (node, at) in restart_at.iter_mut().enumerate() {
            if at.is_some_and(|at| at <= Instant::now()) {
                *at = None;
                restart(&world, &store, &doors, node);
            }
        }
        let roll = world.rand(|r| r.random_range(0..100u32));
        match roll {
            0..45 => {
                let jobs = world.rand(|r| r.random_range(1..=3usize));
                tokio::spawn(create(world.clone(), doors.clone(), jobs));
            }
            45..60 => {
                tokio::spawn(cancel(world.clone(), doors.clone()));
            }
            60..80 => {
                tokio::spawn(edit(world.clone(), doors.clone()));
            }
            80..84 => {
                if let Some(node) = pick_live(&world, &doors) {
                    crash(&world, &doors, node);
                    restart_at[node] = Some(Instant::now() + world.ms(1_000, 10_000));
                }
            }
            84..88 => {
                if let Some(node) = pick_live(&world, &doors) {
                    let stall = LEASE + world.ms(1_000, 8_000);
                    world.note(format!("node {node} stalls for {} ms", stall.as_millis()));
                    world.nodes.lock().unwrap()[node].paused_until = Some(Instant::now() + stall);
                }
            }
            _ => {}
        }
    }
    world.note("quiet: faults off, every node up".into());
    world.set_faults(false);
    for node in 0..NODES {
        if doors.lock().unwrap()[node].is_none() {
            restart(&world, &store, &doors, node);
        }
    }
    tokio::time::sleep(QUIET).await;
    (world, store)
}

fn pick_live(world: &World, doors: &Doors) -> Option<usize> {
    let live: Vec<usize> = (0..NODES)
        .filter(|&n| doors.lock().unwrap()[n].is_some())
        .collect();
    (!live.is_empty()).then(|| live[world.rand(|r| r.random_range(0..live.len()))])
}

/// Kills a node: its calls in flight never answer, nothing it holds is sent or written, and the
/// engine is never heard from again (its tasks stay parked until the run's runtime is dropped).
fn crash(world: &World, doors: &Doors, node: usize) {
    world.note(format!("node {node} crashes"));
    world.nodes.lock().unwrap()[node].crashed = true;
    doors.lock().unwrap()[node] = None;
}

fn restart(world: &Arc<World>, store: &Arc<MemoryStore>, doors: &Doors, node: usize) {
    world.note(format!("node {node} restarts"));
    {
        let mut nodes = world.nodes.lock().unwrap();
        nodes[node].crashed = false;
        nodes[node].incarnation += 1;
        nodes[node].paused_until = None;
    }
    doors.lock().unwrap()[node] = Some(start(world, store, node).scheduler());
}

/// A live node's scheduler, as a client's request lands on some node behind a balancer.
fn door(world: &World, doors: &Doors) -> Option<Scheduler> {
    let node = pick_live(world, doors)?;
    doors.lock().unwrap()[node].clone()
}

fn new_job(world: &World, now: Timestamp) -> (NewJob, bool) {
    let (bits, due_ms, recurring, interval, allow) = world.rand(|r| {
        (
            r.random::<u128>(),
            r.random_range(200..20_000i64),
            r.random_bool(0.2),
            r.random_range(3_000..10_000u64),
            // A third of the recurring jobs hand each occurrence to a job of its own.
            r.random_bool(0.33),
        )
    });
    let id = uuid::Builder::from_unix_timestamp_millis(
        world.true_ms() as u64,
        &bits.to_le_bytes()[..10].try_into().unwrap(),
    )
    .into_uuid();
    let due = now + SignedDuration::from_millis(due_ms);
    let schedule = if recurring {
        // A few runs each: enough to race edits and cancels, and a run ends in the quiet spell.
        Schedule {
            max_runs: Some(world.rand(|r| r.random_range(2..=8))),
            ..Schedule::unbounded(ScheduleKind::Every {
                interval: Duration::from_millis(interval),
                anchor: due,
            })
        }
    } else {
        Schedule::at(due)
    };
    let job = NewJob {
        id,
        namespace: NAMESPACE.into(),
        key: Some(format!("k-{id}")),
        spec: JobSpec {
            job_type: Some("sim".into()),
            schedule,
            target: Target::Webhook(WebhookTarget {
                url: "https://receiver.example/".parse().unwrap(),
                headers: Default::default(),
                rate_limit: None,
                batch: None,
            }),
            retry: RetryPolicy {
                max_attempts: 3,
                initial_backoff: Duration::from_secs(1),
                max_backoff: Duration::from_secs(4),
            },
            misfire: MisfirePolicy::Once,
            overlap: if recurring && allow {
                hourglass_core::OverlapPolicy::Allow
            } else {
                Default::default()
            },
            backfill: None,
            labels: Default::default(),
            on_failure: None,
            on_success: None,
            callback_of: None,
            callback_key: None,
            occurrence_of: None,
        },
        payload: Some("v0".into()),
        fingerprint: bits as i64,
        first_due: due,
        now,
    };
    (job, recurring)
}

/// Whether a failed call is worth repeating (the store was unavailable, or its answer lost).
fn transient(error: &StoreError) -> bool {
    matches!(error, StoreError::Unavailable(_))
}

async fn pause_between_tries(world: &World) {
    tokio::time::sleep(world.ms(50, 500)).await;
}

/// Creates `count` jobs in one request, repeated (same keys) until acknowledged.
async fn create(world: Arc<World>, doors: Doors, count: usize) {
    let Some(first) = door(&world, &doors) else {
        return;
    };
    let now = first.now();
    let jobs: Vec<NewJob> = (0..count)
        .map(|_| {
            let (job, recurring) = new_job(&world, now);
            world.facts(job.id, |f| {
                f.busy = true;
                f.recurring = recurring;
            });
            job
        })
        .collect();
    for _ in 0..CLIENT_TRIES {
        let Some(scheduler) = door(&world, &doors) else {
            pause_between_tries(&world).await;
            continue;
        };
        match scheduler.create(jobs.clone(), &actor()).await {
            Ok(created) => {
                let at = world.true_ms();
                for c in created {
                    world.facts(c.record().id, |f| {
                        f.create_acked_ms = Some(at);
                        f.busy = false;
                    });
                }
                return;
            }
            Err(e) if transient(&e) => pause_between_tries(&world).await,
            Err(_) => return,
        }
    }
}

/// A job whose create was acknowledged and that no call is changing, not cancelled; marked busy.
fn pick_job(
    world: &World,
    want: impl Fn(&crate::world::JobFacts) -> bool,
) -> Option<(hourglass_core::JobId, crate::world::JobFacts)> {
    let mut log = world.log.lock().unwrap();
    let ids: Vec<_> = log
        .jobs
        .iter()
        .filter(|(_, f)| f.create_acked_ms.is_some() && !f.busy && !f.cancel_tried && want(f))
        .map(|(id, _)| *id)
        .collect();
    if ids.is_empty() {
        return None;
    }
    let id = ids[world.rand(|r| r.random_range(0..ids.len()))];
    let facts = log.jobs.get_mut(&id).unwrap();
    facts.busy = true;
    Some((id, facts.clone()))
}

async fn cancel(world: Arc<World>, doors: Doors) {
    let Some((id, _)) = pick_job(&world, |_| true) else {
        return;
    };
    world.facts(id, |f| f.cancel_tried = true);
    for _ in 0..CLIENT_TRIES {
        let Some(scheduler) = door(&world, &doors) else {
            pause_between_tries(&world).await;
            continue;
        };
        let answer = scheduler
            .transition(
                NAMESPACE,
                &JobRef::Id(id),
                |now| Transition::Cancel { now },
                &actor(),
            )
            .await;
        match answer {
            Ok(_) => {
                let at = world.true_ms();
                world.facts(id, |f| f.cancel_acked_ms = Some(at));
                break;
            }
            Err(e) if transient(&e) => pause_between_tries(&world).await,
            Err(_) => break,
        }
    }
    world.facts(id, |f| f.busy = false);
}

/// Edits a job's payload to its next version, and moves a one-off's due time.
async fn edit(world: Arc<World>, doors: Doors) {
    let Some((id, facts)) = pick_job(&world, |_| true) else {
        return;
    };
    let version = facts.version + 1;
    world.facts(id, |f| f.version = version);
    let moved_by = (!facts.recurring && world.chance(0.5)).then(|| world.ms(200, 10_000));
    for _ in 0..CLIENT_TRIES {
        let Some(scheduler) = door(&world, &doors) else {
            pause_between_tries(&world).await;
            continue;
        };
        let schedule = moved_by.map(|by| {
            let due = scheduler.now() + SignedDuration::try_from(by).unwrap();
            (Schedule::at(due), due)
        });
        let change = JobEdit {
            payload: Some(Some(format!("v{version}"))),
            schedule,
            ..JobEdit::default()
        };
        match scheduler
            .edit(NAMESPACE, &JobRef::Id(id), change, &actor())
            .await
        {
            Ok(Some(_)) => {
                let at = world.true_ms();
                world.facts(id, |f| f.edits_acked.push((version, at)));
                break;
            }
            Ok(None) => break,
            Err(e) if transient(&e) => pause_between_tries(&world).await,
            Err(_) => break,
        }
    }
    world.facts(id, |f| f.busy = false);
}

/// Who the simulated clients are, as the audit log records them.
fn actor() -> hourglass_engine::Actor {
    hourglass_engine::Actor::new("simulation")
}
