//! The engine with time under the test's control: tokio's clock is paused and the engine's wall
//! clock is derived from it, so hours pass in milliseconds and no test sleeps for real.
//!
//! The engine runs on the in-memory store, which answers every call at once and reads no clock of
//! its own: virtual time moves only when every task waits on a timer, so each run sees the same
//! order of events, and a lease renewal can never be overtaken by a jump in time while it waits
//! for a store. One test runs the whole pipeline over the embedded SQLite store as well, whose
//! writer thread lets paused time jump while it works (see `run_until`).

#![allow(
    clippy::disallowed_methods,
    reason = "real-time deadlines bound the waits (a paused tokio clock cannot), so a broken engine fails the test instead of hanging it"
)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use hourglass_core::{
    Clock, JobId, JobSpec, MisfirePolicy, Occurrence, OverlapPolicy, RetryPolicy, Schedule,
    ScheduleKind, Target, WebhookTarget,
};
use hourglass_engine::{
    ClaimCheck, Deliverer, DeliveryResult, Engine, EngineConfig, Metrics, Verdict,
};
use hourglass_store::{ClaimScope, DueEvent, MemoryStore, NewJob, SqliteStore, Store, StoreEvent};
use jiff::{SignedDuration, Timestamp};

/// Wall time that moves exactly with tokio's (paused) clock.
struct TokioClock {
    base: Timestamp,
    start: tokio::time::Instant,
    /// Once set, every reading panics: a stand-in for a bug that kills a pipeline stage.
    broken: std::sync::atomic::AtomicBool,
}

impl TokioClock {
    fn new(base: Timestamp) -> Self {
        Self {
            base,
            start: tokio::time::Instant::now(),
            broken: std::sync::atomic::AtomicBool::new(false),
        }
    }
}

impl Clock for TokioClock {
    fn now(&self) -> Timestamp {
        if self.broken.load(std::sync::atomic::Ordering::SeqCst) {
            panic!("test clock broken on purpose");
        }
        let elapsed = self.start.elapsed().as_millis() as i64;
        hourglass_core::from_ms(self.base.as_millisecond() + elapsed)
    }
}

#[derive(Debug, Clone)]
struct Seen {
    job_id: JobId,
    due: Timestamp,
    delivery_id: String,
    attempt: u32,
    at: Timestamp,
    payload: Option<Arc<str>>,
}

/// Records every delivery; answers by the job type: "fail" always retries, "gone" gives up,
/// "slow" takes two seconds to succeed, "hang" takes an hour (a receiver that never answers),
/// "flaky" answers 503 while `down` is set,
/// "panic" panics (a bug in a target).
struct FakeDeliverer {
    clock: Arc<dyn Clock>,
    seen: Mutex<Vec<Seen>>,
    /// While set, "flaky" jobs' receiver is down: it answers 503.
    down: std::sync::atomic::AtomicBool,
}

#[async_trait]
impl Deliverer for FakeDeliverer {
    async fn deliver(&self, occ: &Occurrence, _claim: &ClaimCheck) -> DeliveryResult {
        // The occurrence as its job knows it (a handed-off `allow` occurrence is its parent's),
        // as a receiver sees it in the delivery's id and headers.
        let (job_id, due) = occ.origin();
        self.seen.lock().unwrap().push(Seen {
            job_id,
            due,
            delivery_id: occ.delivery_id().to_string(),
            attempt: occ.attempt,
            at: self.clock.now(),
            payload: occ.payload.clone(),
        });
        // A callback receiver that is down: every attempt fails.
        if let Target::Webhook(w) = &occ.spec.target
            && w.url.host_str() == Some("down.example")
        {
            return DeliveryResult {
                status: Some(500),
                latency: Duration::from_millis(1),
                verdict: Verdict::Retry {
                    after: None,
                    reason: "http 500".into(),
                },
                response: None,
                shared: false,
            };
        }
        if occ.spec.job_type.as_deref() == Some("slow") {
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
        if occ.spec.job_type.as_deref() == Some("hang") {
            tokio::time::sleep(Duration::from_secs(3600)).await;
        }
        if occ.spec.job_type.as_deref() == Some("panic") {
            panic!("deliverer bug on purpose");
        }
        if occ.spec.job_type.as_deref() == Some("flaky")
            && self.down.load(std::sync::atomic::Ordering::SeqCst)
        {
            return DeliveryResult {
                status: Some(503),
                latency: Duration::from_millis(1),
                verdict: Verdict::Retry {
                    after: None,
                    reason: "http 503".into(),
                },
                response: None,
                shared: false,
            };
        }
        let verdict = match occ.spec.job_type.as_deref() {
            Some("fail") => Verdict::Retry {
                after: None,
                reason: "http 500".into(),
            },
            Some("gone") => Verdict::GiveUp {
                reason: "http 410".into(),
            },
            _ => Verdict::Delivered,
        };
        DeliveryResult {
            status: Some(200),
            latency: Duration::from_millis(1),
            verdict,
            response: None,
            shared: false,
        }
    }
}

struct Rig {
    store: Arc<dyn Store>,
    clock: Arc<TokioClock>,
    deliverer: Arc<FakeDeliverer>,
    engine: Engine,
    metrics: Metrics,
    /// The SQLite store's directory, for a rig on SQLite.
    _dir: Option<tempfile::TempDir>,
}

const BASE: &str = "2030-06-01T12:00:00Z";

fn rig() -> Rig {
    rig_with(quiet())
}

/// The default config without the retention sweep, whose store calls these tests do not look at
/// (the sweep has its own tests). On SQLite its pending one-minute timer would also be where
/// paused time jumps to whenever every task waits on the store's real writer thread, making
/// occurrences due early in virtual time.
fn quiet() -> EngineConfig {
    EngineConfig {
        retention: None,
        ..EngineConfig::default()
    }
}

/// An engine on the in-memory store.
fn rig_with(config: EngineConfig) -> Rig {
    rig_on(Arc::new(MemoryStore::new()), None, config)
}

/// An engine on the embedded SQLite store, in a directory of its own.
fn sqlite_rig(config: EngineConfig) -> Rig {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(SqliteStore::open(dir.path()).unwrap());
    rig_on(store, Some(dir), config)
}

fn rig_on(store: Arc<dyn Store>, dir: Option<tempfile::TempDir>, config: EngineConfig) -> Rig {
    let clock = Arc::new(TokioClock::new(BASE.parse().unwrap()));
    let deliverer = Arc::new(FakeDeliverer {
        clock: clock.clone(),
        seen: Mutex::new(Vec::new()),
        down: Default::default(),
    });
    let mut registry = prometheus_client::registry::Registry::default();
    let metrics = Metrics::new(&mut registry);
    let engine = Engine::start(
        config,
        store.clone(),
        deliverer.clone(),
        clock.clone(),
        metrics.clone(),
    );
    Rig {
        store,
        clock,
        deliverer,
        engine,
        metrics,
        _dir: dir,
    }
}

fn job(job_type: &str, schedule: Schedule, first_due: Timestamp, now: Timestamp) -> NewJob {
    NewJob {
        id: uuid::Uuid::now_v7(),
        namespace: "t".into(),
        key: None,
        spec: JobSpec {
            job_type: Some(job_type.into()),
            schedule,
            target: Target::Webhook(WebhookTarget {
                url: "https://example.com/".parse().unwrap(),
                headers: Default::default(),
                rate_limit: None,
                batch: None,
            }),
            retry: RetryPolicy {
                max_attempts: 3,
                initial_backoff: Duration::from_secs(10),
                max_backoff: Duration::from_secs(60),
            },
            misfire: MisfirePolicy::Once,
            overlap: Default::default(),
            backfill: None,
            labels: Default::default(),
            on_failure: None,
            on_success: None,
            callback_of: None,
            callback_key: None,
            occurrence_of: None,
        },
        payload: None,
        fingerprint: 0,
        first_due,
        now,
    }
}

impl Rig {
    fn now(&self) -> Timestamp {
        self.clock.now()
    }

    async fn add(&self, jobs: Vec<NewJob>) {
        self.engine
            .scheduler()
            .create(jobs, &hourglass_engine::Actor::new("test"))
            .await
            .unwrap();
    }

    /// Pauses, resumes or cancels one of namespace `t`'s jobs through the scheduler, as the API
    /// does.
    async fn transition(
        &self,
        id: JobId,
        make: impl FnOnce(Timestamp) -> hourglass_store::Transition,
    ) {
        self.engine
            .scheduler()
            .transition(
                "t",
                &hourglass_engine::JobRef::Id(id),
                make,
                &hourglass_engine::Actor::new("test"),
            )
            .await
            .unwrap();
    }

    fn seen(&self) -> Vec<Seen> {
        self.deliverer.seen.lock().unwrap().clone()
    }

    /// Lets time pass until `pred` holds. The deadline is real time, a guard against a hang: on
    /// SQLite, while the store's writer thread works, the paused runtime is idle and tokio
    /// advances virtual time freely, so a virtual deadline would measure store speed rather than
    /// engine behaviour.
    async fn run_until(&self, pred: impl Fn(&[Seen]) -> bool) {
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        // The deliveries are looked at under their lock, not copied: a run over ten minutes of
        // virtual time looks a hundred thousand times.
        while !pred(&self.deliverer.seen.lock().unwrap()) {
            assert!(
                std::time::Instant::now() < deadline,
                "condition not reached; seen {} deliveries",
                self.seen().len()
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

#[tokio::test(start_paused = true)]
async fn fires_every_one_off_once_and_never_early() {
    fires_every_one_off_once_and_never_early_on(rig()).await;
}

/// The same over the embedded store: its group commits, and its writer thread during which
/// paused time jumps ahead, must not make anything fire early or twice either.
#[tokio::test(start_paused = true)]
async fn fires_every_one_off_once_and_never_early_on_sqlite() {
    fires_every_one_off_once_and_never_early_on(sqlite_rig(quiet())).await;
}

async fn fires_every_one_off_once_and_never_early_on(rig: Rig) {
    let now = rig.now();
    // 300 jobs spread irregularly over ten minutes, some sharing a due millisecond.
    let jobs: Vec<NewJob> = (0..300i64)
        .map(|i| {
            let due = now + SignedDuration::from_millis((i * 7919) % 600_000 + 50);
            job("ok", Schedule::at(due), due, now)
        })
        .collect();
    let ids: std::collections::HashSet<_> = jobs.iter().map(|j| j.id).collect();
    rig.add(jobs).await;
    rig.run_until(|s| s.len() >= 300).await;
    // Let a little more time pass: nothing may fire twice.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let seen = rig.seen();
    assert_eq!(seen.len(), 300);
    let fired: std::collections::HashSet<_> = seen.iter().map(|s| s.job_id).collect();
    assert_eq!(fired, ids);
    for s in &seen {
        assert!(s.at >= s.due, "fired early: {s:?}");
        assert_eq!(s.attempt, 1);
    }
    rig.engine.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_job_created_inside_the_lookahead_still_fires_on_time() {
    let rig = rig();
    // Let the planner go idle first, with nothing to do.
    tokio::time::sleep(Duration::from_secs(30)).await;
    let now = rig.now();
    let due = now + SignedDuration::from_millis(200);
    rig.add(vec![job("ok", Schedule::at(due), due, now)]).await;
    rig.run_until(|s| !s.is_empty()).await;
    let seen = rig.seen();
    assert!(seen[0].at >= due);
    rig.engine.shutdown().await;
}

/// With room for only three claims at a time, the planner keeps running out of permits and must
/// be told each time the completer returns some: every one of 60 occurrences due within a second
/// fires, once, never early, and none waits for a lease or a later wake-up (a lost notice would
/// leave the rest unclaimed until something else woke the planner).
#[tokio::test(start_paused = true)]
async fn a_planner_out_of_permits_resumes_as_completions_return_them() {
    let rig = rig_with(EngineConfig {
        max_in_flight: 3,
        ..quiet()
    });
    let now = rig.now();
    let jobs: Vec<NewJob> = (0..60i64)
        .map(|i| {
            let due = now + SignedDuration::from_millis(3_000 + i * 16);
            job("ok", Schedule::at(due), due, now)
        })
        .collect();
    rig.add(jobs).await;
    rig.run_until(|s| s.len() >= 60).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let seen = rig.seen();
    assert_eq!(seen.len(), 60, "each fired once");
    for s in &seen {
        assert!(s.at >= s.due, "fired early: {s:?}");
        let late = s.at.as_millisecond() - s.due.as_millisecond();
        assert!(late < 1_000, "waited {late} ms for a permit: {s:?}");
    }
    rig.engine.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn failed_deliveries_back_off_then_dead_letter() {
    let rig = rig();
    let now = rig.now();
    let due = now + SignedDuration::from_secs(1);
    rig.add(vec![
        job("fail", Schedule::at(due), due, now),
        job("gone", Schedule::at(due), due, now),
    ])
    .await;
    rig.run_until(|s| s.len() >= 4).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while rig.store.dead_letters(None, None, 10).await.unwrap().len() < 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "dead letters not written"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // More time passes: nothing is attempted again.
    tokio::time::sleep(Duration::from_secs(600)).await;
    let seen = rig.seen();
    let failing: Vec<&Seen> = seen
        .iter()
        .filter(|s| s.attempt > 1 || seen.iter().filter(|o| o.job_id == s.job_id).count() > 1)
        .collect();
    assert_eq!(
        failing.len(),
        3,
        "three attempts of the failing job: {seen:?}"
    );
    for pair in failing.windows(2) {
        let gap = pair[1].at.as_millisecond() - pair[0].at.as_millisecond();
        // Equal jitter: at least half of the nominal 10s/20s step.
        assert!(gap >= 5_000, "retry came after only {gap} ms");
        assert_eq!(pair[1].due, pair[0].due, "same occurrence");
    }
    assert_eq!(seen.len(), 4, "the 410 job is tried once");
    let letters = rig.store.dead_letters(None, None, 10).await.unwrap();
    assert_eq!(letters.len(), 2);
    rig.engine.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn recurring_jobs_advance_and_skip_missed_occurrences_by_policy() {
    let rig = rig();
    let now = rig.now();
    // An every-10s job anchored an hour ago: its first pending occurrence is long missed.
    let anchor = now - SignedDuration::from_secs(3600);
    let mut skipping = job(
        "ok",
        Schedule::unbounded(ScheduleKind::Every {
            interval: Duration::from_secs(10),
            anchor,
        }),
        anchor,
        now,
    );
    skipping.spec.misfire = MisfirePolicy::Skip;
    let skip_id = skipping.id;
    let mut once = skipping.clone();
    once.id = uuid::Uuid::now_v7();
    once.spec.misfire = MisfirePolicy::Once;
    let once_id = once.id;
    rig.add(vec![skipping, once]).await;
    rig.run_until(|s| s.iter().filter(|x| x.job_id == skip_id).count() >= 3)
        .await;
    let seen = rig.seen();
    let skip_dues: Vec<_> = seen
        .iter()
        .filter(|s| s.job_id == skip_id)
        .map(|s| s.due)
        .collect();
    assert!(
        skip_dues.iter().all(|d| *d >= now),
        "skip never fires a missed occurrence: {skip_dues:?}"
    );
    let once_dues: Vec<_> = seen
        .iter()
        .filter(|s| s.job_id == once_id)
        .map(|s| s.due)
        .collect();
    assert_eq!(
        once_dues[0], anchor,
        "once fires the missed occurrence one time"
    );
    assert!(
        once_dues[1..].iter().all(|d| *d > now),
        "then resumes after now: {once_dues:?}"
    );
    for pair in skip_dues.windows(2) {
        assert_eq!(pair[1].as_millisecond() - pair[0].as_millisecond(), 10_000);
    }
    let skip_job = rig.store.get_job(None, skip_id).await.unwrap().unwrap();
    assert_eq!(
        skip_job.skipped, 361,
        "360 missed plus the one due exactly at now"
    );
    rig.engine.shutdown().await;
}

/// Counts the store calls the engine makes (while it should be idle), and the occurrences its
/// claims handed out.
struct CountingStore {
    inner: Arc<dyn Store>,
    /// Events the test sends as if other nodes had written (`None`: a store without events).
    events: Option<tokio::sync::broadcast::Sender<hourglass_store::StoreEvent>>,
    claims: std::sync::atomic::AtomicUsize,
    probes: std::sync::atomic::AtomicUsize,
    claimed: std::sync::atomic::AtomicUsize,
    /// Reads of signing secrets, and secrets stored for a namespace's first delivery.
    secret_reads: std::sync::atomic::AtomicUsize,
    secret_inits: std::sync::atomic::AtomicUsize,
    /// Reads of signing secrets fail, as with a store that is down.
    secrets_down: std::sync::atomic::AtomicBool,
    /// What `completion_linger` answers (the store's own answer when `None`).
    linger: Option<Duration>,
    /// The size of each completion call.
    completions: Mutex<Vec<usize>>,
    /// A job that another request cancels just before a transition carrying an audit entry
    /// reaches it (so that transition is refused, or changes nothing).
    cancel_under_audited: Mutex<Option<JobId>>,
    /// Audit entries appended on their own (`append_audit`), not with a change.
    appended: std::sync::atomic::AtomicUsize,
}

impl CountingStore {
    fn new(inner: Arc<dyn Store>) -> Self {
        Self {
            inner,
            events: None,
            claims: Default::default(),
            probes: Default::default(),
            claimed: Default::default(),
            secret_reads: Default::default(),
            secret_inits: Default::default(),
            secrets_down: Default::default(),
            linger: None,
            completions: Default::default(),
            cancel_under_audited: Default::default(),
            appended: Default::default(),
        }
    }
}

#[async_trait]
impl Store for CountingStore {
    fn backend(&self) -> &'static str {
        self.inner.backend()
    }
    fn events(&self) -> Option<tokio::sync::broadcast::Receiver<hourglass_store::StoreEvent>> {
        self.events.as_ref().map(|tx| tx.subscribe())
    }
    async fn create_jobs(
        &self,
        jobs: Vec<NewJob>,
        audit: Option<hourglass_store::AuditRecord>,
    ) -> hourglass_store::Result<Vec<hourglass_store::Created>> {
        self.inner.create_jobs(jobs, audit).await
    }
    async fn claim_due(
        &self,
        scope: ClaimScope<'_>,
        horizon: Timestamp,
        limit: usize,
        lease: &hourglass_store::Lease,
    ) -> hourglass_store::Result<Vec<Occurrence>> {
        self.claims
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let claimed = self.inner.claim_due(scope, horizon, limit, lease).await?;
        self.claimed
            .fetch_add(claimed.len(), std::sync::atomic::Ordering::SeqCst);
        Ok(claimed)
    }
    async fn extend_claims(
        &self,
        claims: Vec<hourglass_core::Claim>,
        until: Timestamp,
        now: Timestamp,
    ) -> hourglass_store::Result<Vec<hourglass_store::Applied>> {
        self.inner.extend_claims(claims, until, now).await
    }
    async fn purge(
        &self,
        before: Timestamp,
        limit: usize,
    ) -> hourglass_store::Result<hourglass_store::Purged> {
        self.inner.purge(before, limit).await
    }
    async fn purge_dead_letters(
        &self,
        before: Timestamp,
        limit: usize,
    ) -> hourglass_store::Result<u64> {
        self.inner.purge_dead_letters(before, limit).await
    }
    async fn append_audit(
        &self,
        record: hourglass_store::AuditRecord,
    ) -> hourglass_store::Result<()> {
        self.appended
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.inner.append_audit(record).await
    }
    async fn audit_entries(
        &self,
        query: hourglass_store::AuditQuery,
    ) -> hourglass_store::Result<Vec<hourglass_store::AuditEntry>> {
        self.inner.audit_entries(query).await
    }
    async fn purge_audit(&self, before: Timestamp, limit: usize) -> hourglass_store::Result<u64> {
        self.inner.purge_audit(before, limit).await
    }
    async fn gauges(
        &self,
        now: Timestamp,
    ) -> hourglass_store::Result<hourglass_store::StoreGauges> {
        self.inner.gauges(now).await
    }
    async fn queue_stats(
        &self,
        namespace: &str,
        queue: Option<&str>,
        now: Timestamp,
    ) -> hourglass_store::Result<Vec<hourglass_store::QueueStats>> {
        self.inner.queue_stats(namespace, queue, now).await
    }
    async fn complete(
        &self,
        batch: Vec<hourglass_core::Completion>,
        now: Timestamp,
    ) -> hourglass_store::Result<Vec<hourglass_store::Applied>> {
        self.completions.lock().unwrap().push(batch.len());
        self.inner.complete(batch, now).await
    }
    fn completion_linger(&self) -> Option<Duration> {
        self.linger.or_else(|| self.inner.completion_linger())
    }
    async fn release(&self, claims: Vec<hourglass_store::Release>) -> hourglass_store::Result<()> {
        self.inner.release(claims).await
    }
    async fn next_due(&self, scope: ClaimScope<'_>) -> hourglass_store::Result<Option<Timestamp>> {
        self.probes
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.inner.next_due(scope).await
    }
    async fn get_job(
        &self,
        ns: Option<&str>,
        id: JobId,
    ) -> hourglass_store::Result<Option<hourglass_store::JobRecord>> {
        self.inner.get_job(ns, id).await
    }
    async fn get_job_by_key(
        &self,
        ns: &str,
        key: &str,
    ) -> hourglass_store::Result<Option<hourglass_store::JobRecord>> {
        self.inner.get_job_by_key(ns, key).await
    }
    async fn list_jobs(
        &self,
        q: hourglass_store::JobQuery,
    ) -> hourglass_store::Result<Vec<hourglass_store::JobRecord>> {
        self.inner.list_jobs(q).await
    }
    async fn count_jobs(&self, ns: Option<&str>) -> hourglass_store::Result<u64> {
        self.inner.count_jobs(ns).await
    }
    async fn update_job(
        &self,
        ns: Option<&str>,
        id: JobId,
        u: hourglass_store::JobUpdate,
        audit: Option<hourglass_store::AuditRecord>,
    ) -> hourglass_store::Result<hourglass_store::JobRecord> {
        self.inner.update_job(ns, id, u, audit).await
    }
    async fn transition(
        &self,
        ns: Option<&str>,
        id: JobId,
        t: hourglass_store::Transition,
        audit: Option<hourglass_store::AuditRecord>,
    ) -> hourglass_store::Result<hourglass_store::JobRecord> {
        let interfere = *self.cancel_under_audited.lock().unwrap() == Some(id);
        if interfere && audit.is_some() {
            let now = match &t {
                hourglass_store::Transition::Pause { now }
                | hourglass_store::Transition::Resume { now }
                | hourglass_store::Transition::Cancel { now }
                | hourglass_store::Transition::Trigger { now, .. } => *now,
            };
            let cancel = hourglass_store::Transition::Cancel { now };
            self.inner.transition(ns, id, cancel, None).await?;
        }
        self.inner.transition(ns, id, t, audit).await
    }
    async fn runs(
        &self,
        ns: Option<&str>,
        id: JobId,
        before: Option<hourglass_store::RunCursor>,
        limit: usize,
    ) -> hourglass_store::Result<Vec<hourglass_store::RunRecord>> {
        self.inner.runs(ns, id, before, limit).await
    }
    async fn dead_letters(
        &self,
        ns: Option<&str>,
        after: Option<i64>,
        limit: usize,
    ) -> hourglass_store::Result<Vec<hourglass_store::DeadLetter>> {
        self.inner.dead_letters(ns, after, limit).await
    }
    async fn get_dead_letter(
        &self,
        ns: Option<&str>,
        id: i64,
    ) -> hourglass_store::Result<Option<hourglass_store::DeadLetter>> {
        self.inner.get_dead_letter(ns, id).await
    }
    async fn delete_dead_letter(
        &self,
        ns: Option<&str>,
        id: i64,
        audit: Option<hourglass_store::AuditRecord>,
    ) -> hourglass_store::Result<bool> {
        self.inner.delete_dead_letter(ns, id, audit).await
    }
    async fn heartbeat(&self, beat: &hourglass_store::NodeBeat) -> hourglass_store::Result<()> {
        self.inner.heartbeat(beat).await
    }
    async fn nodes(
        &self,
        now: jiff::Timestamp,
    ) -> hourglass_store::Result<Vec<hourglass_store::NodeBeat>> {
        self.inner.nodes(now).await
    }
    async fn signing_secrets(
        &self,
        ns: &str,
    ) -> hourglass_store::Result<Option<hourglass_store::SigningSecrets>> {
        self.secret_reads
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        // A store call takes a while: let other tasks run meanwhile, as a real one would.
        tokio::task::yield_now().await;
        if self.secrets_down.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(hourglass_store::StoreError::Unavailable("down".into()));
        }
        self.inner.signing_secrets(ns).await
    }
    async fn init_signing_secret(&self, ns: &str, secret: &str) -> hourglass_store::Result<String> {
        self.secret_inits
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        tokio::task::yield_now().await;
        self.inner.init_signing_secret(ns, secret).await
    }
    async fn rotate_signing_secret(
        &self,
        ns: &str,
        secret: &str,
        until: Option<Timestamp>,
        audit: Option<hourglass_store::AuditRecord>,
    ) -> hourglass_store::Result<()> {
        self.inner
            .rotate_signing_secret(ns, secret, until, audit)
            .await
    }
    async fn signing_namespaces(&self) -> hourglass_store::Result<Vec<String>> {
        self.inner.signing_namespaces().await
    }
    async fn replace_signing_secrets(
        &self,
        ns: &str,
        expected: &hourglass_store::SigningSecrets,
        replacement: &hourglass_store::SigningSecrets,
    ) -> hourglass_store::Result<bool> {
        self.inner
            .replace_signing_secrets(ns, expected, replacement)
            .await
    }
    async fn put_calendar(
        &self,
        record: &hourglass_store::CalendarRecord,
        audit: Option<hourglass_store::AuditRecord>,
    ) -> hourglass_store::Result<()> {
        self.inner.put_calendar(record, audit).await
    }
    async fn get_calendar(
        &self,
        ns: &str,
        name: &str,
    ) -> hourglass_store::Result<Option<hourglass_store::CalendarRecord>> {
        self.inner.get_calendar(ns, name).await
    }
    async fn list_calendars(
        &self,
        ns: &str,
    ) -> hourglass_store::Result<Vec<hourglass_store::CalendarRecord>> {
        self.inner.list_calendars(ns).await
    }
    async fn delete_calendar(
        &self,
        ns: &str,
        name: &str,
        audit: Option<hourglass_store::AuditRecord>,
    ) -> hourglass_store::Result<bool> {
        self.inner.delete_calendar(ns, name, audit).await
    }
    async fn put_anchor(
        &self,
        record: &hourglass_store::AnchorRecord,
        audit: Option<hourglass_store::AuditRecord>,
    ) -> hourglass_store::Result<Vec<hourglass_store::JobRecord>> {
        self.inner.put_anchor(record, audit).await
    }
    async fn get_anchor(
        &self,
        ns: &str,
        name: &str,
    ) -> hourglass_store::Result<Option<hourglass_store::AnchorRecord>> {
        self.inner.get_anchor(ns, name).await
    }
    async fn list_anchors(
        &self,
        ns: &str,
    ) -> hourglass_store::Result<Vec<hourglass_store::AnchorRecord>> {
        self.inner.list_anchors(ns).await
    }
    async fn delete_anchor(
        &self,
        ns: &str,
        name: &str,
        how: hourglass_store::AnchorDelete,
        audit: Option<hourglass_store::AuditRecord>,
    ) -> hourglass_store::Result<hourglass_store::AnchorDeleted> {
        self.inner.delete_anchor(ns, name, how, audit).await
    }
}

#[tokio::test]
async fn deliveries_that_find_a_namespaces_keys_missing_together_load_them_once() {
    let counting = Arc::new(CountingStore::new(Arc::new(MemoryStore::new())));
    let clock: Arc<dyn hourglass_core::Clock> = Arc::new(hourglass_core::SystemClock);
    let secrets = hourglass_engine::Secrets::new(counting.clone(), clock);
    // A new namespace's first deliveries, as many as a destination lets run at once.
    let signatures = futures_util::future::join_all((0..64).map(|_| {
        let secrets = secrets.clone();
        tokio::spawn(async move {
            let keys = secrets.keys_for("t").await.expect("keys");
            keys.sign("msg", 1, b"{}")
        })
    }))
    .await;
    let load = |a: &std::sync::atomic::AtomicUsize| a.load(std::sync::atomic::Ordering::SeqCst);
    assert_eq!(
        load(&counting.secret_reads),
        1,
        "one read of the namespace's secrets"
    );
    assert_eq!(
        load(&counting.secret_inits),
        1,
        "one secret generated and stored"
    );
    let first = signatures[0].as_ref().expect("task").clone();
    assert!(
        signatures
            .iter()
            .all(|s| s.as_ref().expect("task") == &first),
        "every delivery signs with the one stored secret"
    );
    // Cached from then on.
    secrets.keys_for("t").await.expect("keys");
    assert_eq!(load(&counting.secret_reads), 1);
}

#[tokio::test]
async fn deliveries_waiting_on_a_failed_key_load_fail_with_it_instead_of_each_trying() {
    let counting = Arc::new(CountingStore::new(Arc::new(MemoryStore::new())));
    counting
        .secrets_down
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let clock: Arc<dyn hourglass_core::Clock> = Arc::new(hourglass_core::SystemClock);
    let secrets = hourglass_engine::Secrets::new(counting.clone(), clock);
    let results = futures_util::future::join_all((0..64).map(|_| {
        let secrets = secrets.clone();
        tokio::spawn(async move { secrets.keys_for("t").await.is_err() })
    }))
    .await;
    assert!(
        results.iter().all(|failed| *failed.as_ref().expect("task")),
        "every delivery waiting on the failed load gets its error"
    );
    let load = |a: &std::sync::atomic::AtomicUsize| a.load(std::sync::atomic::Ordering::SeqCst);
    assert_eq!(load(&counting.secret_reads), 1, "one read for all of them");
    // A later delivery tries again, and succeeds once the store is back.
    counting
        .secrets_down
        .store(false, std::sync::atomic::Ordering::SeqCst);
    secrets
        .keys_for("t")
        .await
        .expect("keys once the store is back");
    assert_eq!(load(&counting.secret_reads), 2);
}

#[tokio::test(start_paused = true)]
async fn an_idle_engine_makes_no_store_calls() {
    let counting = Arc::new(CountingStore::new(Arc::new(MemoryStore::new())));
    let clock = Arc::new(TokioClock::new(BASE.parse().unwrap()));
    let deliverer = Arc::new(FakeDeliverer {
        clock: clock.clone(),
        seen: Mutex::new(Vec::new()),
        down: Default::default(),
    });
    // One job a day ahead: the planner must sleep until then, not poll.
    let now = clock.now();
    let due = now + SignedDuration::from_hours(24);
    counting
        .create_jobs(vec![job("ok", Schedule::at(due), due, now)], None)
        .await
        .unwrap();
    let mut registry = prometheus_client::registry::Registry::default();
    let engine = Engine::start(
        quiet(),
        counting.clone(),
        deliverer.clone(),
        clock.clone(),
        Metrics::new(&mut registry),
    );
    let load = |a: &std::sync::atomic::AtomicUsize| a.load(std::sync::atomic::Ordering::SeqCst);
    // Let the planner make its first claim and probe (real store I/O), then let hours pass.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while load(&counting.probes) == 0 {
        assert!(std::time::Instant::now() < deadline, "planner never probed");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    tokio::time::sleep(Duration::from_secs(6 * 3600)).await;
    for _ in 0..20 {
        // Real time for any stray store call to show up.
        std::thread::sleep(Duration::from_millis(5));
        tokio::task::yield_now().await;
    }
    assert_eq!(
        load(&counting.claims),
        1,
        "one claim at start, then nothing"
    );
    assert_eq!(load(&counting.probes), 1, "one next-due probe, then sleep");
    assert!(deliverer.seen.lock().unwrap().is_empty());
    engine.shutdown().await;
}

/// A wall clock that moves only when the test sets it.
struct ManualClock(std::sync::atomic::AtomicI64);

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        hourglass_core::from_ms(self.0.load(std::sync::atomic::Ordering::SeqCst))
    }
}

/// Regression (an edit racing the planner): after an edit, the API fences the job's claims at the
/// edit's token. A claim the planner made after the edit, and before that fence reached the
/// timer, carries a higher token and must survive it: the engine used to drop every claim of
/// the job, that one included, and the job then waited out its two-minute lease.
///
/// The wall clock stands still until the due time while tokio's is paused: nothing may fire
/// before the steps are in place, however long they take.
#[tokio::test(start_paused = true)]
async fn a_claim_made_after_an_edit_survives_the_edits_fence() {
    // The edit's announcement and its fence reach the engine as store events, the way another
    // node's edit does: the test orders them around the planner's second claim.
    let (events, _) = tokio::sync::broadcast::channel(16);
    let counting = Arc::new(CountingStore {
        events: Some(events.clone()),
        ..CountingStore::new(Arc::new(MemoryStore::new()))
    });
    let base: Timestamp = BASE.parse().unwrap();
    let clock = Arc::new(ManualClock(base.as_millisecond().into()));
    let deliverer = Arc::new(FakeDeliverer {
        clock: clock.clone(),
        seen: Mutex::new(Vec::new()),
        down: Default::default(),
    });
    let mut registry = prometheus_client::registry::Registry::default();
    let engine = Engine::start(
        quiet(),
        counting.clone(),
        deliverer.clone(),
        clock.clone(),
        Metrics::new(&mut registry),
    );
    let due = base + SignedDuration::from_millis(1500);
    let announce = || {
        events
            .send(StoreEvent::Due(DueEvent {
                namespace: "default".into(),
                queue: None,
                at: due,
            }))
            .unwrap();
    };
    let new = job("ok", Schedule::at(due), due, base);
    let (id, spec) = (new.id, new.spec.clone());
    counting.create_jobs(vec![new], None).await.unwrap();
    announce();
    // Waits until the planner's claims have handed out `n` occurrences. The planner sends a
    // claim on to the timer in the poll that gets the store's answer; a few more yields let the
    // timer take it (and any fence sent meanwhile).
    let settle = || async {
        for _ in 0..20 {
            tokio::task::yield_now().await;
        }
    };
    let claimed = |n: usize| {
        let counting = counting.clone();
        async move {
            let deadline = std::time::Instant::now() + Duration::from_secs(20);
            while counting.claimed.load(std::sync::atomic::Ordering::SeqCst) < n {
                assert!(std::time::Instant::now() < deadline, "never claimed");
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
    };
    claimed(1).await;
    settle().await;
    let edited = counting
        .update_job(
            None,
            id,
            hourglass_store::JobUpdate {
                read_token: None,
                spec,
                payload: Some(r#"{"v":2}"#.into()),
                next_due: Some(due),
                now: base,
            },
            None,
        )
        .await
        .unwrap();
    // The edited job is announced, the planner claims it again, and only then does the edit's
    // fence reach the timer.
    announce();
    claimed(2).await;
    settle().await;
    events
        .send(StoreEvent::Fenced {
            job_id: id,
            token: edited.token,
        })
        .unwrap();
    settle().await;
    clock
        .0
        .store(due.as_millisecond(), std::sync::atomic::Ordering::SeqCst);
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while deliverer.seen.lock().unwrap().is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "not delivered at its due time: the claim made after the edit was dropped"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let seen = deliverer.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!((seen[0].job_id, seen[0].at), (id, due));
    let job = counting.get_job(None, id).await.unwrap().unwrap();
    assert!(job.token > edited.token, "delivered under the new claim");
    engine.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn shutdown_hands_back_claims_that_have_not_fired() {
    let rig = rig_with(EngineConfig {
        lookahead: Duration::from_secs(10),
        ..quiet()
    });
    let now = rig.now();
    let due = now + SignedDuration::from_secs(5);
    rig.add(vec![job("ok", Schedule::at(due), due, now)]).await;
    // Within the lookahead: claimed into the timer, not yet fired.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(rig.seen().is_empty());
    let store = rig.store.clone();
    rig.engine.shutdown().await;
    assert_eq!(
        store.next_due(ClaimScope::Fired).await.unwrap(),
        Some(due),
        "released to its own due time, not to the lease expiry"
    );
}

/// Leases are short and renewed: a delivery that takes longer than the lease TTL keeps its claim
/// while this node lives, so no other node takes it over (and delivers it twice). Paused time is
/// fine on the memory store, which a renewal never waits on; on SQLite the paused clock would
/// jump past the lease while a renewal waits for the writer thread.
#[tokio::test(start_paused = true)]
async fn a_slow_delivery_keeps_its_claim_while_the_node_lives() {
    let ttl = Duration::from_millis(600);
    let rig = rig_with(EngineConfig {
        lease_ttl: ttl,
        lookahead: Duration::from_millis(200),
        ..EngineConfig::default()
    });
    let now = rig.now();
    rig.add(vec![job("slow", Schedule::at(now), now, now)])
        .await;
    rig.run_until(|seen| !seen.is_empty()).await;
    let started = tokio::time::Instant::now();
    while started.elapsed() < Duration::from_millis(1700) {
        let now = rig.now();
        let rival = hourglass_store::Lease {
            owner: "rival".into(),
            ttl,
            now,
        };
        let taken = rig
            .store
            .claim_due(
                ClaimScope::Fired,
                now + SignedDuration::from_secs(1),
                10,
                &rival,
            )
            .await
            .unwrap();
        assert!(taken.is_empty(), "a live node's claim was taken over");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let id = rig.seen()[0].job_id;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let job = rig.store.get_job(None, id).await.unwrap().unwrap();
        if job.state == hourglass_core::JobState::Completed {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "never completed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(rig.seen().len(), 1);
    rig.engine.shutdown().await;
}

/// A claim that became stale without this node hearing of it (here: paused directly in the
/// store, as another node's API would) is found at the next renewal and dropped from the timer
/// before it fires.
#[tokio::test(start_paused = true)]
async fn a_claim_fenced_elsewhere_is_dropped_at_renewal() {
    let rig = rig_with(EngineConfig {
        lease_ttl: Duration::from_millis(300),
        lookahead: Duration::from_secs(2),
        ..EngineConfig::default()
    });
    let now = rig.now();
    let due = now + SignedDuration::from_millis(1500);
    let new = job("ok", Schedule::at(due), due, now);
    let id = new.id;
    rig.add(vec![new]).await;
    // Claimed into the timer: the store shows the lease expiry instead of the due time.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while rig.store.next_due(ClaimScope::Fired).await.unwrap() == Some(due) {
        assert!(std::time::Instant::now() < deadline, "never claimed");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    rig.store
        .transition(
            None,
            id,
            hourglass_store::Transition::Pause { now: rig.now() },
            None,
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(2000)).await;
    assert!(rig.seen().is_empty(), "a fenced claim fired");
    rig.engine.shutdown().await;
}

/// A claim fenced while its delivery runs is found lost at the next renewal, once: it is not
/// renewed again every round while the delivery finishes (a node back from a pause holds
/// thousands of such claims), and the delivery's completion is refused.
#[tokio::test(start_paused = true)]
async fn a_lost_claim_is_not_renewed_again() {
    let rig = rig_with(EngineConfig {
        lease_ttl: Duration::from_millis(300),
        lookahead: Duration::from_millis(200),
        ..EngineConfig::default()
    });
    let now = rig.now();
    let new = job("slow", Schedule::at(now), now, now);
    let id = new.id;
    rig.add(vec![new]).await;
    // The delivery has started and takes two seconds; the job is paused meanwhile, which fences
    // the claim. The renewer runs every 100 ms, about fifteen rounds before the delivery ends.
    rig.run_until(|seen| !seen.is_empty()).await;
    rig.store
        .transition(
            None,
            id,
            hourglass_store::Transition::Pause { now: rig.now() },
            None,
        )
        .await
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while rig.metrics.stale_completions.get() == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the completion was never refused"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        rig.metrics.lost_leases.get(),
        1,
        "the lost claim was counted once"
    );
    assert_eq!(rig.seen().len(), 1);
    rig.engine.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn the_retention_sweep_deletes_finished_jobs_once_they_are_old_enough() {
    let rig = rig_with(EngineConfig {
        retention: Some(Duration::from_secs(3600)),
        ..EngineConfig::default()
    });
    let now = rig.now();
    let due = now + SignedDuration::from_secs(1);
    let done = job("ok", Schedule::at(due), due, now);
    let later = now + SignedDuration::from_secs(7200);
    let waiting = job(
        "ok",
        Schedule::at(later + SignedDuration::from_secs(86_400)),
        later,
        now,
    );
    let (done_id, waiting_id) = (done.id, waiting.id);
    rig.add(vec![done, waiting]).await;
    rig.run_until(|s| !s.is_empty()).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let job = rig.store.get_job(None, done_id).await.unwrap().unwrap();
        if job.state == hourglass_core::JobState::Completed {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "never completed");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // Within the retention, the finished job stays.
    tokio::time::sleep(Duration::from_secs(30 * 60)).await;
    assert!(rig.store.get_job(None, done_id).await.unwrap().is_some());
    // An hour and a sweep later, it is gone; the job still waiting is not.
    tokio::time::sleep(Duration::from_secs(32 * 60)).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while rig.store.get_job(None, done_id).await.unwrap().is_some() {
        assert!(std::time::Instant::now() < deadline, "not swept");
        tokio::time::sleep(Duration::from_secs(60)).await;
    }
    assert!(rig.store.get_job(None, waiting_id).await.unwrap().is_some());
    rig.engine.shutdown().await;
}

/// Dead letters have a retention of their own: swept once older than it, while the retention of
/// finished jobs is off here (the job stays, its dead letter goes).
#[tokio::test(start_paused = true)]
async fn the_retention_sweep_deletes_dead_letters_once_they_are_old_enough() {
    let rig = rig_with(EngineConfig {
        retention: None,
        dead_letter_retention: Some(Duration::from_secs(3600)),
        ..EngineConfig::default()
    });
    let now = rig.now();
    let due = now + SignedDuration::from_secs(1);
    let gone = job("gone", Schedule::at(due), due, now);
    let id = gone.id;
    rig.add(vec![gone]).await;
    rig.run_until(|s| !s.is_empty()).await;
    let letters = || async { rig.store.dead_letters(None, None, 10).await.unwrap() };
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while letters().await.is_empty() {
        assert!(std::time::Instant::now() < deadline, "never dead-lettered");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // Within the retention, the letter stays.
    tokio::time::sleep(Duration::from_secs(30 * 60)).await;
    assert_eq!(letters().await.len(), 1);
    // An hour and a sweep later, it is gone (the sweep counts it once its delete has committed,
    // so wait for the count); the failed job is not.
    tokio::time::sleep(Duration::from_secs(32 * 60)).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while rig.metrics.purged_dead_letters.get() == 0 {
        assert!(std::time::Instant::now() < deadline, "not swept");
        tokio::time::sleep(Duration::from_secs(60)).await;
    }
    assert_eq!(rig.metrics.purged_dead_letters.get(), 1);
    assert!(letters().await.is_empty());
    assert!(rig.store.get_job(None, id).await.unwrap().is_some());
    rig.engine.shutdown().await;
}

/// Issue "Hardening", defect 1: a job whose misfire window reaches past the representable
/// past (`200000000h`), picked up later than the misfire threshold, made `now - window`
/// overflow and killed the dispatcher: from then on nothing was delivered. Such a job can still
/// sit in a store written by an older version, so the engine must take it in its stride.
#[tokio::test(start_paused = true)]
async fn a_huge_misfire_window_stops_nothing() {
    let rig = rig();
    let now = rig.now();
    let anchor = now - SignedDuration::from_secs(120);
    let mut poison = job(
        "ok",
        Schedule::unbounded(ScheduleKind::Every {
            interval: Duration::from_secs(1),
            anchor,
        }),
        anchor,
        now,
    );
    poison.spec.misfire = MisfirePolicy::All {
        window: Duration::from_secs(200_000_000 * 3600),
    };
    let poison_id = poison.id;
    let due = now + SignedDuration::from_secs(1);
    let ordinary = job("ok", Schedule::at(due), due, now);
    let ordinary_id = ordinary.id;
    rig.add(vec![poison, ordinary]).await;
    rig.run_until(|s| s.iter().any(|s| s.job_id == ordinary_id))
        .await;
    // The window covers every missed occurrence, so the poison job catches up one by one.
    assert!(rig.seen().iter().any(|s| s.job_id == poison_id));
    assert!(!rig.engine.scheduler().has_failed());
    rig.engine.shutdown().await;
}

/// A panic while one occurrence is handled dead-letters that occurrence with reason
/// `internal_error` and fails its job (quarantine: it is not picked up again in a loop); the
/// dispatcher goes on delivering everything else.
#[tokio::test(start_paused = true)]
async fn a_panicking_delivery_quarantines_only_its_job() {
    let rig = rig();
    let now = rig.now();
    let due = now + SignedDuration::from_secs(1);
    let every = Schedule::unbounded(ScheduleKind::Every {
        interval: Duration::from_secs(5),
        anchor: due,
    });
    let poison = job("panic", every.clone(), due, now);
    let poison_id = poison.id;
    let steady = job("ok", every, due, now);
    let steady_id = steady.id;
    rig.add(vec![poison, steady]).await;
    // The healthy job keeps firing well after the poison one blew up.
    rig.run_until(|s| s.iter().filter(|s| s.job_id == steady_id).count() >= 5)
        .await;
    let poison_runs = rig.seen().iter().filter(|s| s.job_id == poison_id).count();
    assert_eq!(poison_runs, 1, "the poison occurrence is attempted once");
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let letters = loop {
        let letters = rig.store.dead_letters(None, None, 10).await.unwrap();
        if !letters.is_empty() {
            break letters;
        }
        assert!(std::time::Instant::now() < deadline, "no dead letter");
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    assert_eq!(letters.len(), 1);
    assert_eq!(letters[0].job_id, poison_id);
    assert_eq!(letters[0].reason, hourglass_engine::INTERNAL_ERROR);
    let job = rig.store.get_job(None, poison_id).await.unwrap().unwrap();
    assert_eq!(job.state, hourglass_core::JobState::Failed);
    assert_eq!(rig.metrics.quarantined.get(), 1);
    assert!(!rig.engine.scheduler().has_failed());
    rig.engine.shutdown().await;
}

/// A stage that dies anyway (here: every clock reading panics) is reported, so the node can
/// answer `/readyz` with 503 and exit instead of accepting jobs it never fires.
#[tokio::test(start_paused = true)]
async fn a_dead_stage_is_reported_as_failed() {
    let rig = rig();
    let failed = rig.engine.failed();
    let now = rig.now();
    let due = now + SignedDuration::from_secs(1);
    rig.add(vec![job("ok", Schedule::at(due), due, now)]).await;
    rig.run_until(|s| !s.is_empty()).await;
    assert!(!rig.engine.scheduler().has_failed());
    rig.clock
        .broken
        .store(true, std::sync::atomic::Ordering::SeqCst);
    // The next job wakes the planner, whose first clock reading panics.
    let later = job("ok", Schedule::at(due), due, now);
    rig.add(vec![later]).await;
    tokio::time::timeout(Duration::from_secs(60), failed)
        .await
        .expect("the engine reports the dead stage");
    assert!(rig.engine.scheduler().has_failed());
    tokio::time::timeout(Duration::from_secs(120), rig.engine.shutdown())
        .await
        .expect("an engine with a dead stage still shuts down");
}

fn to(url: &str, mut job: NewJob) -> NewJob {
    job.spec.target = Target::Webhook(WebhookTarget {
        url: url.parse().unwrap(),
        headers: Default::default(),
        rate_limit: None,
        batch: None,
    });
    job
}

/// Regression (isolation): delivery slots were first come, first served, so occurrences to a
/// receiver that never answers filled every slot and a healthy receiver's deliveries waited
/// behind them. A destination now holds at most `destination_concurrency` slots: with 8 slots,
/// a cap of 2 and 20 hanging deliveries due first, the healthy destination gets all of its own
/// while exactly 2 deliveries hang.
#[tokio::test(start_paused = true)]
async fn a_hanging_destination_holds_only_its_cap_of_the_slots() {
    let rig = rig_with(EngineConfig {
        delivery_concurrency: 8,
        destination_concurrency: 2,
        ..quiet()
    });
    let now = rig.now();
    let due = now + SignedDuration::from_secs(1);
    let hanging: Vec<NewJob> = (0..20)
        .map(|_| {
            to(
                "https://slow.example/",
                job("hang", Schedule::at(due), due, now),
            )
        })
        .collect();
    let started_hanging = started_beside_a_healthy_destination(&rig, hanging, due).await;
    assert_eq!(
        started_hanging, 2,
        "the hanging destination holds exactly its cap"
    );
    assert_eq!(rig.metrics.destination_waiting.get(), 18);
    let (store, clock) = (rig.store.clone(), rig.clock.clone());
    rig.engine.shutdown().await;
    // The parked occurrences were handed back at shutdown, not left leased.
    let checker = hourglass_store::Lease {
        owner: "checker".into(),
        ttl: Duration::from_secs(60),
        now: clock.now(),
    };
    let claimed = store
        .claim_due(
            ClaimScope::Fired,
            clock.now() + SignedDuration::from_secs(2),
            100,
            &checker,
        )
        .await
        .unwrap();
    assert!(
        claimed.len() >= 18,
        "{} of 18 parked handed back",
        claimed.len()
    );
}

/// Bus and cloud targets have a cap of their own (`connection_concurrency`): a stalled subject
/// holds exactly that many slots, not the webhooks' `destination_concurrency`.
#[tokio::test(start_paused = true)]
async fn a_stalled_connection_target_holds_the_connection_cap() {
    let rig = rig_with(EngineConfig {
        delivery_concurrency: 8,
        destination_concurrency: 2,
        connection_concurrency: 3,
        ..quiet()
    });
    let now = rig.now();
    let due = now + SignedDuration::from_secs(1);
    let stalled: Vec<NewJob> = (0..20)
        .map(|_| {
            let mut job = job("hang", Schedule::at(due), due, now);
            job.spec.target = hourglass_core::Target::Nats(hourglass_core::NatsTarget {
                connection: "bus".into(),
                subject: "jobs.stalled".into(),
            });
            job
        })
        .collect();
    let started = started_beside_a_healthy_destination(&rig, stalled, due).await;
    assert_eq!(
        started, 3,
        "the stalled subject holds exactly the connection cap"
    );
    assert_eq!(rig.metrics.destination_waiting.get(), 17);
    rig.engine.shutdown().await;
}

/// Adds `stuck` (due at `due`, to a destination that never answers) and ten jobs to a healthy
/// destination due a millisecond later, runs until all ten healthy ones were delivered, and
/// answers how many of `stuck` had started by then.
async fn started_beside_a_healthy_destination(
    rig: &Rig,
    stuck: Vec<NewJob>,
    due: Timestamp,
) -> usize {
    let now = rig.now();
    let healthy_due = due + SignedDuration::from_millis(1);
    let healthy: Vec<NewJob> = (0..10)
        .map(|_| {
            to(
                "https://fast.example:8443/hook",
                job("ok", Schedule::at(healthy_due), healthy_due, now),
            )
        })
        .collect();
    let healthy_ids: std::collections::HashSet<_> = healthy.iter().map(|j| j.id).collect();
    rig.add(stuck).await;
    rig.add(healthy).await;
    rig.run_until(|s| s.iter().filter(|s| healthy_ids.contains(&s.job_id)).count() == 10)
        .await;
    rig.seen()
        .iter()
        .filter(|s| !healthy_ids.contains(&s.job_id))
        .count()
}

fn in_namespace(namespace: &str, mut job: NewJob) -> NewJob {
    job.namespace = namespace.into();
    job
}

/// Regression (isolation): delivery slots were handed out in due order, so a namespace with a
/// backlog of slow deliveries made every other namespace wait behind all of it. When slots are
/// scarce they now go to the namespaces with waiting work in turn: with 4 slots, 100 two-second
/// deliveries of `big` due first and 4 of `small` right after, `small` is served as soon as the
/// first slots free, alternating with `big` (within two waves of two seconds in virtual time,
/// where first come first served took 22 s and 48 of `big`'s deliveries).
#[tokio::test(start_paused = true)]
async fn scarce_slots_are_shared_between_namespaces_in_turn() {
    let rig = rig_with(EngineConfig {
        delivery_concurrency: 4,
        ..quiet()
    });
    let now = rig.now();
    let due = now + SignedDuration::from_secs(1);
    let big: Vec<NewJob> = (0..100)
        .map(|_| in_namespace("big", job("slow", Schedule::at(due), due, now)))
        .collect();
    let small_due = due + SignedDuration::from_millis(1);
    let small: Vec<NewJob> = (0..4)
        .map(|_| in_namespace("small", job("ok", Schedule::at(small_due), small_due, now)))
        .collect();
    let small_ids: std::collections::HashSet<_> = small.iter().map(|j| j.id).collect();
    rig.add(big).await;
    rig.add(small).await;
    rig.run_until(|s| s.iter().filter(|s| small_ids.contains(&s.job_id)).count() == 4)
        .await;
    let seen = rig.seen();
    let big_started = seen
        .iter()
        .filter(|s| !small_ids.contains(&s.job_id))
        .count();
    // Time is tokio's paused clock: deterministic, not a measurement. Slots free in waves every
    // two seconds; `small` gets every other free slot, so it is done within two waves (its
    // instant deliveries free their slots at once, and those alternate too).
    let second_wave = due + SignedDuration::from_secs(4);
    for s in seen.iter().filter(|s| small_ids.contains(&s.job_id)) {
        assert!(
            s.at <= second_wave,
            "small served at {} (second wave {second_wave})",
            s.at
        );
    }
    assert!(
        big_started <= 16,
        "{big_started} of big's deliveries started before small's 4 were done"
    );
    rig.engine.shutdown().await;
}

/// A destination that answers 503 opens its breaker after `breaker_failures` failures in a row.
/// While it is open, its occurrences are handed back due when it closes, their attempts not
/// counted: a receiver down for longer than a job's whole retry schedule (3 attempts, 10 s then
/// 20 s apart, where the receiver is down for 45 s) costs no dead letter. A probe after the
/// receiver is back closes the breaker, and everything is delivered.
#[tokio::test(start_paused = true)]
async fn an_open_breaker_holds_deliveries_back_without_spending_attempts() {
    let rig = rig_with(EngineConfig {
        breaker_failures: 3,
        breaker_open_for: Duration::from_secs(30),
        ..quiet()
    });
    rig.deliverer
        .down
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let now = rig.now();
    let due = now + SignedDuration::from_secs(1);
    let jobs: Vec<NewJob> = (0..10)
        .map(|_| job("flaky", Schedule::at(due), due, now))
        .collect();
    let ids: std::collections::HashSet<_> = jobs.iter().map(|j| j.id).collect();
    rig.add(jobs).await;
    // The first attempts fail together; the retries find the breaker open.
    rig.run_until(|s| s.len() >= 10).await;
    tokio::time::sleep(Duration::from_secs(15)).await;
    let open = rig.engine.scheduler().open_breakers("t");
    assert_eq!(open.len(), 1, "{open:?}");
    assert_eq!(open[0].destination, "https://example.com:443");
    assert!(rig.engine.scheduler().open_breakers("other").is_empty());
    assert!(rig.metrics.breaker_deferred.get() > 0);
    tokio::time::sleep(Duration::from_secs(30)).await;
    rig.deliverer
        .down
        .store(false, std::sync::atomic::Ordering::SeqCst);
    rig.run_until(|s| {
        let delivered: std::collections::HashSet<_> = s
            .iter()
            .filter(|s| s.at >= due + SignedDuration::from_secs(46))
            .map(|s| s.job_id)
            .collect();
        delivered == ids
    })
    .await;
    let letters = rig.store.dead_letters(None, None, 10).await.unwrap();
    assert!(letters.is_empty(), "{letters:?}");
    assert!(
        rig.seen().iter().all(|s| s.attempt <= 3),
        "deferred deliveries spent no attempts"
    );
    assert!(rig.engine.scheduler().open_breakers("t").is_empty());
    rig.engine.shutdown().await;
}

/// Quotas with one namespace's own entry, set by `set`.
fn quota(
    namespace: &str,
    set: impl FnOnce(&mut hourglass_engine::NamespaceQuota),
) -> hourglass_engine::Quotas {
    let mut own = hourglass_engine::NamespaceQuota::default();
    set(&mut own);
    hourglass_engine::Quotas {
        default: Default::default(),
        namespaces: [(namespace.to_string(), own)].into(),
    }
}

/// The operator's delivery quota: `t` may start 10 deliveries a second (a burst of 10 at once),
/// so 30 occurrences due together go out over two more seconds, in due order, while namespace
/// `other`, without a quota, is delivered on time. Times are tokio's paused clock.
#[tokio::test(start_paused = true)]
async fn a_namespace_past_its_delivery_quota_waits_and_others_do_not() {
    let rig = rig_with(EngineConfig {
        quotas: quota("t", |q| q.deliveries_per_second = Some(10)),
        ..quiet()
    });
    let now = rig.now();
    let due = now + SignedDuration::from_secs(1);
    let limited: Vec<NewJob> = (0..30)
        .map(|_| job("ok", Schedule::at(due), due, now))
        .collect();
    let free = in_namespace("other", job("ok", Schedule::at(due), due, now));
    let free_id = free.id;
    rig.add(limited).await;
    rig.add(vec![free]).await;
    rig.run_until(|s| s.len() == 31).await;
    let seen = rig.seen();
    let free_at = seen.iter().find(|s| s.job_id == free_id).unwrap().at;
    assert_eq!(free_at, due, "a namespace without a quota is not held back");
    let mut limited_at: Vec<Timestamp> = seen
        .iter()
        .filter(|s| s.job_id != free_id)
        .map(|s| s.at)
        .collect();
    limited_at.sort();
    let within = |secs: i64| {
        limited_at
            .iter()
            .filter(|&&at| at < due + SignedDuration::from_millis(secs))
            .count()
    };
    assert_eq!(
        within(1),
        10,
        "the burst, then one every 100 ms: {limited_at:?}"
    );
    assert!(within(1001) <= 20, "{limited_at:?}");
    assert!(
        *limited_at.last().unwrap() >= due + SignedDuration::from_millis(1900),
        "{limited_at:?}"
    );
    rig.engine.shutdown().await;
}

/// A webhook target's `rate_limit`: the namespace's deliveries to that destination start at most
/// 5 a second (a burst of 5, then one every 200 ms); its deliveries elsewhere are not held back.
#[tokio::test(start_paused = true)]
async fn a_targets_rate_limit_spaces_its_destinations_deliveries() {
    let rig = rig();
    let now = rig.now();
    let due = now + SignedDuration::from_secs(1);
    let limited: Vec<NewJob> = (0..15)
        .map(|_| {
            let mut j = to(
                "https://api.example.com/v1/notify",
                job("ok", Schedule::at(due), due, now),
            );
            if let Target::Webhook(w) = &mut j.spec.target {
                w.rate_limit = Some(5);
            }
            j
        })
        .collect();
    let limited_ids: std::collections::HashSet<_> = limited.iter().map(|j| j.id).collect();
    let elsewhere: Vec<NewJob> = (0..5)
        .map(|_| {
            to(
                "https://other.example/",
                job("ok", Schedule::at(due), due, now),
            )
        })
        .collect();
    rig.add(limited).await;
    rig.add(elsewhere).await;
    rig.run_until(|s| s.len() == 20).await;
    let seen = rig.seen();
    assert!(
        seen.iter()
            .filter(|s| !limited_ids.contains(&s.job_id))
            .all(|s| s.at == due),
        "deliveries to another destination are not held back"
    );
    let mut at: Vec<Timestamp> = seen
        .iter()
        .filter(|s| limited_ids.contains(&s.job_id))
        .map(|s| s.at)
        .collect();
    at.sort();
    assert_eq!(at.iter().filter(|&&t| t == due).count(), 5, "{at:?}");
    assert_eq!(at[5], due + SignedDuration::from_millis(200), "{at:?}");
    assert_eq!(at[14], due + SignedDuration::from_millis(2000), "{at:?}");
    rig.engine.shutdown().await;
}

/// A namespace the operator gave a destination cap of its own uses it; the others keep the
/// node's: 2 hanging deliveries for `t`, 5 for `wide`, to the same receiver.
#[tokio::test(start_paused = true)]
async fn a_namespace_can_have_a_destination_cap_of_its_own() {
    let rig = rig_with(EngineConfig {
        destination_concurrency: 2,
        quotas: quota("wide", |q| q.destination_concurrency = Some(5)),
        ..quiet()
    });
    let now = rig.now();
    let due = now + SignedDuration::from_secs(1);
    let hang = |ns: &str| {
        in_namespace(
            ns,
            to(
                "https://slow.example/",
                job("hang", Schedule::at(due), due, now),
            ),
        )
    };
    let narrow: Vec<NewJob> = (0..10).map(|_| hang("t")).collect();
    let narrow_ids: std::collections::HashSet<_> = narrow.iter().map(|j| j.id).collect();
    rig.add(narrow).await;
    rig.add((0..10).map(|_| hang("wide")).collect()).await;
    rig.run_until(|s| s.len() >= 7).await;
    // Nothing more starts while they hang.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let seen = rig.seen();
    let narrow_started = seen
        .iter()
        .filter(|s| narrow_ids.contains(&s.job_id))
        .count();
    assert_eq!((narrow_started, seen.len() - narrow_started), (2, 5));
    rig.engine.shutdown().await;
}

/// Regression (issue 39): a cancel reached occurrences in the timer only. Twelve one-offs due
/// together to a destination with `rate_limit: 1` go out one a second; the eight still waiting
/// for their turn when they are cancelled, 3.5 s in, are never sent, and nothing is written for
/// them (they stay cancelled, with no run).
#[tokio::test(start_paused = true)]
async fn a_cancel_reaches_occurrences_waiting_for_a_rate_limit() {
    let rig = rig();
    let now = rig.now();
    let due = now + SignedDuration::from_secs(1);
    let jobs: Vec<NewJob> = (0..12)
        .map(|_| {
            let mut j = to(
                "https://api.example.com/v1/notify",
                job("ok", Schedule::at(due), due, now),
            );
            if let Target::Webhook(w) = &mut j.spec.target {
                w.rate_limit = Some(1);
            }
            j
        })
        .collect();
    rig.add(jobs.clone()).await;
    rig.run_until(|s| s.len() == 4).await;
    tokio::time::sleep_until(tokio::time::Instant::now() + Duration::from_millis(500)).await;
    let sent: std::collections::HashSet<_> = rig.seen().iter().map(|s| s.job_id).collect();
    assert_eq!(sent.len(), 4);
    let waiting: Vec<JobId> = jobs
        .iter()
        .map(|j| j.id)
        .filter(|id| !sent.contains(id))
        .collect();
    for id in &waiting {
        rig.transition(*id, |now| hourglass_store::Transition::Cancel { now })
            .await;
    }
    tokio::time::sleep(Duration::from_secs(20)).await;
    assert_eq!(rig.seen().len(), 4, "cancelled occurrences were sent");
    assert_eq!(rig.metrics.withdrawn.get(), 8);
    for id in &waiting {
        let job = rig.store.get_job(Some("t"), *id).await.unwrap().unwrap();
        assert_eq!(job.state, hourglass_core::JobState::Cancelled);
        let runs = rig.store.runs(Some("t"), *id, None, 10).await.unwrap();
        assert!(runs.is_empty(), "a withdrawn occurrence recorded a run");
    }
    rig.engine.shutdown().await;
}

/// Regression (issue 39): a pause did not reach occurrences waiting for their namespace's
/// delivery quota. With `t` allowed 1 delivery a second, the three still waiting when they are
/// paused are not sent; resumed, each is delivered once.
#[tokio::test(start_paused = true)]
async fn a_pause_reaches_occurrences_waiting_for_a_delivery_quota() {
    let rig = rig_with(EngineConfig {
        quotas: quota("t", |q| q.deliveries_per_second = Some(1)),
        ..quiet()
    });
    let now = rig.now();
    let due = now + SignedDuration::from_secs(1);
    let jobs: Vec<NewJob> = (0..4)
        .map(|_| job("ok", Schedule::at(due), due, now))
        .collect();
    rig.add(jobs.clone()).await;
    rig.run_until(|s| s.len() == 1).await;
    let first = rig.seen()[0].job_id;
    let paused: Vec<JobId> = jobs
        .iter()
        .map(|j| j.id)
        .filter(|&id| id != first)
        .collect();
    for id in &paused {
        rig.transition(*id, |now| hourglass_store::Transition::Pause { now })
            .await;
    }
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(rig.seen().len(), 1, "paused occurrences were sent");
    assert_eq!(rig.metrics.withdrawn.get(), 3);
    for id in &paused {
        rig.transition(*id, |now| hourglass_store::Transition::Resume { now })
            .await;
    }
    rig.run_until(|s| s.len() == 4).await;
    tokio::time::sleep(Duration::from_secs(10)).await;
    let seen = rig.seen();
    assert_eq!(seen.len(), 4, "each resumed job delivered once: {seen:?}");
    for id in &paused {
        assert_eq!(seen.iter().filter(|s| s.job_id == *id).count(), 1);
    }
    rig.engine.shutdown().await;
}

/// Regression (issue 39): an edit did not reach an occurrence waiting for its destination's
/// slot, which was then sent twice: the old payload, and the new one under the same delivery
/// id. With a cap of one slot and a two-second delivery holding it, an occurrence edited while
/// it waits is sent once, with the new payload, and one cancelled while it waits is not sent.
#[tokio::test(start_paused = true)]
async fn an_edit_and_a_cancel_reach_occurrences_waiting_for_a_destination_slot() {
    let rig = rig_with(EngineConfig {
        destination_concurrency: 1,
        ..quiet()
    });
    let now = rig.now();
    let due = now + SignedDuration::from_secs(1);
    let url = "https://busy.example/hook";
    let slow = to(url, job("slow", Schedule::at(due), due, now));
    let later = due + SignedDuration::from_millis(1);
    let mut edited = to(url, job("ok", Schedule::at(later), later, now));
    edited.payload = Some(r#"{"v":1}"#.into());
    let cancelled = to(url, job("ok", Schedule::at(later), later, now));
    let (slow_id, edited_id, cancelled_id) = (slow.id, edited.id, cancelled.id);
    rig.add(vec![slow]).await;
    rig.add(vec![edited, cancelled]).await;
    rig.run_until(|s| !s.is_empty()).await;
    // The slow delivery holds the destination; the other two wait for it.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(rig.metrics.destination_waiting.get(), 2);
    let edit = hourglass_engine::JobEdit {
        job_type: None,
        schedule: None,
        target: None,
        retry: None,
        misfire: None,
        overlap: None,
        payload: Some(Some(r#"{"v":2}"#.into())),
        labels: None,
        on_failure: None,
        on_success: None,
    };
    rig.engine
        .scheduler()
        .edit(
            "t",
            &hourglass_engine::JobRef::Id(edited_id),
            edit,
            &hourglass_engine::Actor::new("test"),
        )
        .await
        .unwrap()
        .unwrap();
    rig.transition(cancelled_id, |now| hourglass_store::Transition::Cancel {
        now,
    })
    .await;
    rig.run_until(|s| s.iter().any(|s| s.job_id == edited_id))
        .await;
    tokio::time::sleep(Duration::from_secs(10)).await;
    let seen = rig.seen();
    assert_eq!(seen.iter().filter(|s| s.job_id == slow_id).count(), 1);
    assert!(!seen.iter().any(|s| s.job_id == cancelled_id), "{seen:?}");
    let edited: Vec<_> = seen.iter().filter(|s| s.job_id == edited_id).collect();
    assert_eq!(edited.len(), 1, "sent once: {edited:?}");
    assert_eq!(edited[0].payload.as_deref(), Some(r#"{"v":2}"#));
    assert_eq!(rig.metrics.withdrawn.get(), 2);
    rig.engine.shutdown().await;
}

/// Regression (issue 39): a cancel did not reach an occurrence waiting for one of the node's
/// delivery slots. With one slot, held two seconds by a slow delivery, an occurrence to another
/// destination cancelled while it waits is not sent.
#[tokio::test(start_paused = true)]
async fn a_cancel_reaches_an_occurrence_waiting_for_a_delivery_slot() {
    let rig = rig_with(EngineConfig {
        delivery_concurrency: 1,
        ..quiet()
    });
    let now = rig.now();
    let due = now + SignedDuration::from_secs(1);
    let slow = to(
        "https://slow.example/",
        job("slow", Schedule::at(due), due, now),
    );
    let later = due + SignedDuration::from_millis(1);
    let waiting = to(
        "https://other.example/",
        job("ok", Schedule::at(later), later, now),
    );
    let waiting_id = waiting.id;
    rig.add(vec![slow, waiting]).await;
    rig.run_until(|s| !s.is_empty()).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(rig.metrics.slot_waiting.get(), 1);
    rig.transition(waiting_id, |now| hourglass_store::Transition::Cancel {
        now,
    })
    .await;
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(rig.seen().len(), 1, "{:?}", rig.seen());
    assert_eq!(rig.metrics.withdrawn.get(), 1);
    rig.engine.shutdown().await;
}

/// Regression (issue 39): destination caps bound one receiver, not a namespace: with hanging
/// deliveries to enough destinations, one namespace took every delivery slot and another's
/// waited for them to time out. A namespace now holds at most three quarters of the slots: with
/// 8 slots, a destination cap of 2 and 40 hanging deliveries of `noisy` to 10 destinations, 6
/// hang, and `t`'s ten deliveries to a healthy receiver go out on time.
#[tokio::test(start_paused = true)]
async fn a_namespace_with_many_hanging_destinations_leaves_slots_to_others() {
    let rig = rig_with(EngineConfig {
        delivery_concurrency: 8,
        destination_concurrency: 2,
        ..quiet()
    });
    let now = rig.now();
    let due = now + SignedDuration::from_secs(1);
    let hanging: Vec<NewJob> = (0..40)
        .map(|i| {
            in_namespace(
                "noisy",
                to(
                    &format!("https://hang{}.example/", i % 10),
                    job("hang", Schedule::at(due), due, now),
                ),
            )
        })
        .collect();
    let started = started_beside_a_healthy_destination(&rig, hanging, due).await;
    assert_eq!(
        started, 6,
        "the noisy namespace holds three quarters of the slots"
    );
    let healthy_late = rig
        .seen()
        .iter()
        .filter(|s| s.due > due)
        .map(|s| s.at.as_millisecond() - s.due.as_millisecond())
        .max()
        .unwrap();
    assert_eq!(healthy_late, 0, "the other namespace waited");
    rig.engine.shutdown().await;
}

/// A store that other writers share says so with a resync after every poll (DynamoDB: every
/// second). A resync with nothing due within the lookahead costs a look at the next due time,
/// not a claim (on DynamoDB a claim reads every shard strongly, the look at half the price); one
/// with something due there is claimed and fired as before.
#[tokio::test(start_paused = true)]
async fn a_resync_claims_only_when_something_is_due_within_the_lookahead() {
    let (events, _) = tokio::sync::broadcast::channel(16);
    let counting = Arc::new(CountingStore {
        events: Some(events.clone()),
        ..CountingStore::new(Arc::new(MemoryStore::new()))
    });
    let base: Timestamp = BASE.parse().unwrap();
    let clock = Arc::new(ManualClock(base.as_millisecond().into()));
    let deliverer = Arc::new(FakeDeliverer {
        clock: clock.clone(),
        seen: Mutex::new(Vec::new()),
        down: Default::default(),
    });
    let mut registry = prometheus_client::registry::Registry::default();
    let engine = Engine::start(
        quiet(),
        counting.clone(),
        deliverer.clone(),
        clock.clone(),
        Metrics::new(&mut registry),
    );
    let load = |a: &std::sync::atomic::AtomicUsize| a.load(std::sync::atomic::Ordering::SeqCst);
    // Written by "another node" an hour ahead, unannounced: the planner sleeps past it.
    let later = base + SignedDuration::from_secs(3600);
    counting
        .create_jobs(vec![job("ok", Schedule::at(later), later, base)], None)
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let (claims, probes) = (load(&counting.claims), load(&counting.probes));
    for _ in 0..5 {
        events.send(StoreEvent::Resync).unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(load(&counting.claims), claims, "nothing was due: no claim");
    assert_eq!(load(&counting.probes), probes + 5, "a look per resync");
    // Another writer's job due within the lookahead, unannounced: the next resync claims it.
    let soon = base + SignedDuration::from_millis(500);
    let new = job("ok", Schedule::at(soon), soon, base);
    let id = new.id;
    counting.create_jobs(vec![new], None).await.unwrap();
    events.send(StoreEvent::Resync).unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(load(&counting.claimed), 1, "claimed on the resync");
    clock
        .0
        .store(soon.as_millisecond(), std::sync::atomic::Ordering::SeqCst);
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while deliverer.seen.lock().unwrap().is_empty() {
        assert!(std::time::Instant::now() < deadline, "never delivered");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(deliverer.seen.lock().unwrap()[0].job_id, id);
    engine.shutdown().await;
}

/// On a store that asks completions to linger (DynamoDB shares one write among them), a recurring
/// job whose next occurrence is far enough off lingers too; one due again within the linger and
/// the planner's lead does not wait, or its next occurrence would be late.
#[tokio::test(start_paused = true)]
async fn recurring_completions_linger_only_when_their_next_occurrence_is_far_enough_off() {
    async fn completion_calls(interval: Duration) -> Vec<usize> {
        let counting = Arc::new(CountingStore {
            linger: Some(Duration::from_secs(1)),
            ..CountingStore::new(Arc::new(MemoryStore::new()))
        });
        let rig = rig_on(counting.clone(), None, quiet());
        let now = rig.now();
        let jobs = (0..3)
            .map(|i| {
                let first = now + SignedDuration::from_millis(1_000 + 300 * i);
                let every = ScheduleKind::Every {
                    interval,
                    anchor: first,
                };
                job("ok", Schedule::unbounded(every), first, now)
            })
            .collect();
        rig.add(jobs).await;
        rig.run_until(|s| s.len() >= 3).await;
        tokio::time::sleep(Duration::from_millis(1_500)).await;
        let calls = counting.completions.lock().unwrap().clone();
        rig.engine.shutdown().await;
        calls
    }
    let hourly = completion_calls(Duration::from_secs(3600)).await;
    assert_eq!(
        hourly[0], 3,
        "the three completions in one call: {hourly:?}"
    );
    let every_second = completion_calls(Duration::from_secs(1)).await;
    assert_eq!(
        &every_second[..3],
        &[1, 1, 1],
        "each written at once: {every_second:?}"
    );
}

/// Issue 37: a jittered occurrence fires at its jittered time — never before it, named by its
/// due time — and a recurring one whose jitter the gap between due times cuts is never counted
/// as missed for the wait its jitter adds (misfire lateness is measured from the fire time).
#[tokio::test(start_paused = true)]
async fn jittered_occurrences_fire_at_their_jittered_time_and_not_before() {
    let rig = rig();
    let now = rig.now();
    let due = now + SignedDuration::from_secs(1);
    let one_offs: Vec<NewJob> = (0..50)
        .map(|_| {
            let schedule = Schedule {
                jitter: Some(Duration::from_secs(30)),
                calendar: None,
                anchor: None,
                ..Schedule::at(due)
            };
            job("ok", schedule, due, now)
        })
        .collect();
    let fires: std::collections::HashMap<JobId, Timestamp> =
        one_offs.iter().map(|j| (j.id, j.first_fire())).collect();
    let mut recurring = job(
        "ok",
        Schedule {
            jitter: Some(Duration::from_secs(300)),
            calendar: None,
            anchor: None,
            ..Schedule::unbounded(ScheduleKind::Every {
                interval: Duration::from_secs(10),
                anchor: due,
            })
        },
        due,
        now,
    );
    recurring.spec.misfire = MisfirePolicy::Skip;
    let (recurring_id, schedule) = (recurring.id, recurring.spec.schedule.clone());
    let mut all = one_offs;
    all.push(recurring);
    rig.add(all).await;
    rig.run_until(|s| {
        s.iter().filter(|x| x.job_id != recurring_id).count() >= 50
            && s.iter().filter(|x| x.job_id == recurring_id).count() >= 5
    })
    .await;
    let seen = rig.seen();
    for s in seen.iter().filter(|s| s.job_id != recurring_id) {
        assert_eq!(s.due, due, "the occurrence keeps its due time as its name");
        assert!(
            s.at >= fires[&s.job_id],
            "fired before its jittered time: {s:?}"
        );
    }
    let spread: std::collections::HashSet<_> = fires.values().collect();
    assert!(
        spread.len() > 40,
        "50 jobs share {} fire times",
        spread.len()
    );
    let recurring_seen: Vec<_> = seen.iter().filter(|s| s.job_id == recurring_id).collect();
    for (n, s) in recurring_seen.iter().enumerate() {
        let nominal = due + SignedDuration::from_secs(10 * n as i64);
        assert_eq!(s.due, nominal, "every occurrence runs, in order");
        assert!(s.at >= schedule.fire_time(recurring_id, nominal));
    }
    let job = rig
        .store
        .get_job(None, recurring_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(job.skipped, 0, "jitter is not lateness");
    rig.engine.shutdown().await;
}

/// Adds an every-900 ms job of `job_type` (what the fake receiver does with it) under `policy`,
/// first due a second from now: its id and that first due time.
async fn add_every_900_ms(rig: &Rig, job_type: &str, policy: OverlapPolicy) -> (JobId, Timestamp) {
    let now = rig.now();
    let anchor = now + SignedDuration::from_secs(1);
    let mut every = job(
        job_type,
        Schedule::unbounded(ScheduleKind::Every {
            interval: Duration::from_millis(900),
            anchor,
        }),
        anchor,
        now,
    );
    every.spec.overlap = policy;
    let id = every.id;
    rig.add(vec![every]).await;
    (id, anchor)
}

/// An every-900 ms job whose receiver holds each delivery open for two seconds, under each
/// overlap policy: the dues it delivers, in order, until it has delivered `n`.
async fn dues_under_overlap(policy: OverlapPolicy, n: usize) -> (Rig, JobId, Vec<i64>) {
    let rig = rig();
    let (id, anchor) = add_every_900_ms(&rig, "slow", policy).await;
    rig.run_until(|s| s.len() >= n).await;
    let dues = rig
        .seen()
        .iter()
        .take(n)
        .map(|s| s.due.as_millisecond() - anchor.as_millisecond())
        .collect();
    (rig, id, dues)
}

#[tokio::test(start_paused = true)]
async fn buffer_all_runs_every_occurrence_that_fell_due_during_a_run_in_turn() {
    let (rig, _, dues) = dues_under_overlap(OverlapPolicy::BufferAll, 5).await;
    // Nothing dropped: each waits for the one before it (what jobs always did).
    assert_eq!(dues, [0, 900, 1800, 2700, 3600]);
    assert_eq!(rig.metrics.overlap_skipped.get(), 0);
    rig.engine.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn buffer_one_keeps_only_the_latest_occurrence_that_fell_due_during_a_run() {
    let (rig, id, dues) = dues_under_overlap(OverlapPolicy::BufferOne, 4).await;
    // 0 runs until 2000: 900 and 1800 fell due, 1800 is kept; it runs until about 4000: 2700
    // and 3600 fell due, 3600 is kept; and so on.
    assert_eq!(dues, [0, 1800, 3600, 5400]);
    let job = rig.store.get_job(None, id).await.unwrap().unwrap();
    assert!(
        job.skipped >= 3,
        "900, 2700 and 4500 dropped: {}",
        job.skipped
    );
    rig.engine.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn skip_drops_every_occurrence_that_fell_due_during_a_run_and_records_why() {
    let (rig, id, dues) = dues_under_overlap(OverlapPolicy::Skip, 3).await;
    // 0 runs until 2000: 900 and 1800 dropped, 2700 is next; it runs until 4700: 3600 and 4500
    // dropped.
    assert_eq!(dues, [0, 2700, 5400]);
    // Wait for the third run's completion to be written, then read what the store kept.
    rig.run_until(|s| s.len() >= 4).await;
    let job = rig.store.get_job(None, id).await.unwrap().unwrap();
    assert!(job.skipped >= 4, "{}", job.skipped);
    let runs = rig.store.runs(Some("t"), id, None, 100).await.unwrap();
    let base = job
        .spec
        .schedule
        .first_due(hourglass_core::from_ms(0))
        .unwrap();
    let overlap: Vec<_> = runs
        .iter()
        .filter(|r| r.outcome == hourglass_store::RunOutcome::Skipped)
        .map(|r| {
            (
                r.due.as_millisecond() - base.as_millisecond(),
                r.attempt,
                r.error.clone().unwrap_or_default(),
            )
        })
        .collect();
    assert!(
        overlap.contains(&(
            900,
            0,
            "overlap: 2 occurrences fell due while the previous one was in flight".into()
        )),
        "{overlap:?}"
    );
    assert!(
        overlap.iter().any(|(due, _, _)| *due == 3600),
        "{overlap:?}"
    );
    assert!(rig.metrics.overlap_skipped.get() >= 4);
    rig.engine.shutdown().await;
}

/// `allow`: with the receiver holding each delivery open for two seconds, every occurrence of an
/// every-900 ms job still goes out at its own time, beside the ones in flight, under the job's
/// id and its own delivery id; each was handed to a one-off job of its own, and the runs are
/// recorded under the job.
#[tokio::test(start_paused = true)]
async fn allow_fires_each_occurrence_at_its_time_while_earlier_ones_are_in_flight() {
    let (rig, id, dues) = dues_under_overlap(OverlapPolicy::Allow, 5).await;
    assert_eq!(dues, [0, 900, 1800, 2700, 3600]);
    let seen = rig.seen();
    let first = seen[0].due;
    for s in seen.iter().take(5) {
        assert_eq!(s.job_id, id, "sent under the job's id");
        assert_eq!(
            s.delivery_id,
            hourglass_core::DeliveryId::new(id, s.due).to_string()
        );
        // Sent at its own time (not after the one before it ended, two seconds later).
        let late = s.at.as_millisecond() - s.due.as_millisecond();
        assert!((0..200).contains(&late), "{} sent {late} ms late", s.due);
    }
    // The second went out while the first was still open (it ends two seconds after it began).
    assert!(seen[1].at < seen[0].at + SignedDuration::from_secs(2));
    // Each delivered run is the job's, once its delivery ended.
    rig.run_until(|s| s.len() >= 8).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let runs = rig.store.runs(Some("t"), id, None, 100).await.unwrap();
    let mut delivered: Vec<i64> = runs
        .iter()
        .filter(|r| r.outcome == hourglass_store::RunOutcome::Delivered)
        .map(|r| r.due.as_millisecond() - first.as_millisecond())
        .collect();
    delivered.sort();
    assert_eq!(delivered[..5], [0, 900, 1800, 2700, 3600], "{delivered:?}");
    let job = rig.store.get_job(None, id).await.unwrap().unwrap();
    assert_eq!(job.skipped, 0);
    assert!(job.runs >= 8, "each hand-off counts as a run: {}", job.runs);
    // The one-off jobs that delivered them name the occurrence they delivered.
    let children: Vec<_> = rig
        .store
        .list_jobs(hourglass_store::JobQuery {
            limit: 100,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_iter()
        .filter_map(|j| j.spec.occurrence_of)
        .collect();
    assert!(children.len() >= 8, "{}", children.len());
    assert!(children.iter().all(|of| of.job_id == id));
    assert!(children.iter().any(|of| of.due == first));
    rig.engine.shutdown().await;
}

/// Cancelling an `allow` job cancels the jobs it handed occurrences to that are still live (here
/// retrying against a receiver that always fails): nothing of it is sent once the cancel is
/// answered.
#[tokio::test(start_paused = true)]
async fn cancelling_an_allow_job_stops_the_occurrences_it_handed_off() {
    let rig = rig();
    let (id, _) = add_every_900_ms(&rig, "fail", OverlapPolicy::Allow).await;
    // Several occurrences handed off, some of them retried.
    rig.run_until(|s| s.len() >= 6 && s.iter().any(|s| s.attempt > 1))
        .await;
    rig.transition(id, |now| hourglass_store::Transition::Cancel { now })
        .await;
    let cancelled_at = rig.now();
    let handed_off = rig
        .store
        .list_jobs(hourglass_store::JobQuery {
            labels: vec![hourglass_core::Selector {
                key: hourglass_core::overlap::OCCURRENCE_OF_LABEL.into(),
                value: Some(id.to_string()),
            }],
            limit: 100,
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(handed_off.len() >= 2, "{}", handed_off.len());
    assert!(
        handed_off.iter().all(|j| j.state.is_terminal()),
        "{:?}",
        handed_off.iter().map(|j| j.state).collect::<Vec<_>>()
    );
    tokio::time::sleep(Duration::from_secs(60)).await;
    let late: Vec<_> = rig
        .seen()
        .into_iter()
        .filter(|s| s.at > cancelled_at)
        .map(|s| (s.due, s.attempt))
        .collect();
    assert!(late.is_empty(), "sent after the cancel: {late:?}");
    rig.engine.shutdown().await;
}

/// A backfill runs each nominal occurrence of its range once, oldest first, paced, though the
/// misfire policy would drop anything that late; then the job resumes its own. Repeating it
/// runs nothing.
#[tokio::test(start_paused = true)]
async fn a_backfill_runs_its_range_once_paced_then_the_job_resumes() {
    let rig = rig();
    let now = rig.now();
    // Hourly, anchored a day ago; its own next occurrence is the next hour.
    let anchor = now - SignedDuration::from_hours(24);
    let next_own = now + SignedDuration::from_hours(1);
    let mut hourly = job(
        "ok",
        Schedule::unbounded(ScheduleKind::Every {
            interval: Duration::from_secs(3600),
            anchor,
        }),
        next_own,
        now,
    );
    hourly.spec.misfire = MisfirePolicy::Skip;
    let id = hourly.id;
    rig.add(vec![hourly]).await;
    let scheduler = rig.engine.scheduler();
    let job_ref = hourglass_engine::JobRef::Id(id);
    let (from, to) = (
        anchor + SignedDuration::from_hours(2),
        anchor + SignedDuration::from_hours(5),
    );
    let accepted = scheduler.backfill("t", &job_ref, from, to).await.unwrap();
    assert!(matches!(
        accepted,
        Some(hourglass_engine::Backfilled::Accepted { occurrences: 3, .. })
    ));
    rig.run_until(|s| s.len() >= 3).await;
    let seen = rig.seen();
    let dues: Vec<_> = seen.iter().map(|s| s.due).collect();
    assert_eq!(
        dues,
        [
            from,
            from + SignedDuration::from_hours(1),
            from + SignedDuration::from_hours(2)
        ]
    );
    for pair in seen.windows(2) {
        assert!(
            pair[1].at >= pair[0].at + SignedDuration::from_millis(100),
            "paced: {seen:?}"
        );
    }
    // Then the job's own occurrence, and nothing else before it.
    rig.run_until(|s| s.len() >= 4).await;
    assert_eq!(rig.seen()[3].due, next_own);
    let again = scheduler.backfill("t", &job_ref, from, to).await.unwrap();
    assert!(matches!(
        again,
        Some(hourglass_engine::Backfilled::Accepted { occurrences: 0, .. })
    ));
    let runs = rig.store.runs(Some("t"), id, None, 100).await.unwrap();
    let record = rig.store.get_job(None, id).await.unwrap().unwrap();
    let backfill = record
        .spec
        .backfill
        .expect("the job remembers its backfill");
    let marked = runs
        .iter()
        .filter(|r| backfill.marks(r.due, r.started_at))
        .count();
    assert_eq!(marked, 3);
    rig.engine.shutdown().await;
}

/// Issue 37: an occurrence its calendar rolls fires at the rolled time, under its own nominal
/// time (its identity), and the job then goes on to its next nominal occurrence. A weekly job on
/// Sundays at 12:05 whose calendar excludes Sunday 2 June 2030, rolled to the previous day: it
/// fires on Saturday 1 June at 12:05 as the occurrence due on the 2nd, and next waits for the 9th.
#[tokio::test(start_paused = true)]
async fn an_occurrence_rolled_by_its_calendar_fires_at_the_rolled_time_under_its_own() {
    let rig = rig();
    let now = rig.now(); // Saturday 1 June 2030, 12:00 UTC.
    let cron = hourglass_core::schedule::CronSchedule::parse("0 5 12 * * SUN", "UTC").unwrap();
    let mut schedule = Schedule::unbounded(ScheduleKind::Cron(Box::new(cron)));
    schedule.calendar = Some(Box::new(hourglass_core::ScheduleCalendar {
        name: "holidays".into(),
        roll: hourglass_core::Roll::Previous,
        rules: hourglass_core::Calendar {
            timezone: "UTC".into(),
            dates: vec![jiff::civil::date(2030, 6, 2)],
            ranges: vec![],
            weekdays: vec![],
        },
    }));
    let nominal: Timestamp = "2030-06-02T12:05:00Z".parse().unwrap();
    let rolled: Timestamp = "2030-06-01T12:05:00Z".parse().unwrap();
    let first_due = schedule.first_due(now).unwrap();
    assert_eq!(first_due, nominal, "the occurrence keeps its nominal time");
    let weekly = job("ok", schedule, first_due, now);
    let id = weekly.id;
    rig.add(vec![weekly]).await;
    rig.run_until(|s| !s.is_empty()).await;
    let seen = rig.seen();
    assert_eq!(seen[0].due, nominal, "{seen:?}");
    assert!(
        seen[0].at >= rolled,
        "fired before its rolled time: {seen:?}"
    );
    assert!(
        seen[0].at < rolled + SignedDuration::from_secs(1),
        "fired late or on the nominal day: {seen:?}"
    );
    // Let the rest of Saturday and the nominal Sunday pass: it does not fire again.
    tokio::time::sleep(Duration::from_secs(26 * 3600)).await;
    assert_eq!(rig.seen().len(), 1, "{:?}", rig.seen());
    let job = rig.store.get_job(None, id).await.unwrap().unwrap();
    assert_eq!(job.runs, 1);
    assert_eq!(
        job.next_due,
        Some("2030-06-09T12:05:00Z".parse().unwrap()),
        "the next Sunday is not excluded"
    );
    assert_eq!(job.next_attempt, job.next_due);
    rig.engine.shutdown().await;
}

fn callback_to(host: &str) -> hourglass_core::Callback {
    hourglass_core::Callback {
        target: Target::Webhook(WebhookTarget {
            url: format!("https://{host}/callbacks").parse().unwrap(),
            headers: Default::default(),
            rate_limit: None,
            batch: None,
        }),
        every_attempt: false,
        include_payload: true,
        retry: RetryPolicy {
            max_attempts: 2,
            initial_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(1),
        },
    }
}

/// A dead-lettered occurrence fires its `on_failure` callback once, a delivered one its
/// `on_success` once (and never the other), each as a job of its own carrying the event; a
/// callback that fails is retried by its own policy and dead-lettered, and starts no callback.
#[tokio::test(start_paused = true)]
async fn callbacks_report_each_outcome_once_and_a_failing_one_does_not_loop() {
    let rig = rig();
    let now = rig.now();
    let due = now + SignedDuration::from_secs(1);
    let with_callbacks = |job_type: &str, host: &str| {
        let mut j = job(job_type, Schedule::at(due), due, now);
        j.spec.on_failure = Some(callback_to(host));
        j.spec.on_success = Some(callback_to(host));
        j.spec.callback_key = Some(format!("key-{job_type}-{host}"));
        j.payload = Some(r#"{"order":7}"#.into());
        j
    };
    let failing = with_callbacks("gone", "hooks.example");
    let succeeding = with_callbacks("ok", "hooks.example");
    let unreported = with_callbacks("gone", "down.example");
    rig.add(vec![
        failing.clone(),
        succeeding.clone(),
        unreported.clone(),
    ])
    .await;
    // Three deliveries, two callbacks delivered, and two attempts of the one whose receiver is
    // down.
    rig.run_until(|s| s.len() >= 7).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while rig.store.dead_letters(None, None, 10).await.unwrap().len() < 3 {
        assert!(
            std::time::Instant::now() < deadline,
            "dead letters not written"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // More time passes: nothing else is sent, and no callback of a callback is made.
    tokio::time::sleep(Duration::from_secs(600)).await;
    let seen = rig.seen();
    assert_eq!(seen.len(), 7, "{seen:?}");
    let events: Vec<serde_json::Value> = seen
        .iter()
        .filter(|s| ![failing.id, succeeding.id, unreported.id].contains(&s.job_id))
        .map(|s| serde_json::from_str(s.payload.as_deref().unwrap()).unwrap())
        .collect();
    let of = |id: JobId, event: &str| {
        events
            .iter()
            .filter(|e| e["job_id"] == id.to_string() && e["event"] == event)
            .count()
    };
    assert_eq!(of(failing.id, "occurrence.failed"), 1);
    assert_eq!(of(failing.id, "occurrence.succeeded"), 0);
    assert_eq!(of(succeeding.id, "occurrence.succeeded"), 1);
    assert_eq!(of(succeeding.id, "occurrence.failed"), 0);
    assert_eq!(of(unreported.id, "occurrence.failed"), 2, "two attempts");
    let failed = events
        .iter()
        .find(|e| e["job_id"] == failing.id.to_string())
        .unwrap();
    assert_eq!(failed["key"], "key-gone-hooks.example");
    assert_eq!(failed["type"], "gone");
    assert_eq!(failed["attempts"], 1);
    assert_eq!(failed["dead_lettered"], true);
    assert_eq!(failed["last_error"], "http 410");
    assert_eq!(failed["payload"], serde_json::json!({"order": 7}));
    assert_eq!(
        failed["delivery_id"],
        hourglass_core::DeliveryId::new(failing.id, due).as_str()
    );

    // The callback whose receiver is down ended as a dead letter of its own, marked as a
    // callback; the six jobs are the three and their three callbacks, nothing more.
    let letters = rig.store.dead_letters(None, None, 10).await.unwrap();
    let of_callback: Vec<_> = letters
        .iter()
        .filter(|l| l.spec.callback_of.is_some())
        .collect();
    assert_eq!(of_callback.len(), 1);
    assert_eq!(
        of_callback[0].spec.callback_of.as_ref().unwrap().job_id,
        unreported.id
    );
    assert_eq!(rig.store.count_jobs(Some("t")).await.unwrap(), 6);
    rig.engine.shutdown().await;
}

/// Issue 38: an edit that puts a job on an anchor, racing a move of that anchor. The API read
/// the anchor before the move committed and computed the job's time from the old instant; the
/// move, committing before the edit's write, did not see the job on the anchor. After the write
/// the scheduler reads the anchor again and re-bases the job on the instant stored now, so no
/// job is left at an instant its anchor no longer has.
#[tokio::test(start_paused = true)]
async fn an_edit_onto_an_anchor_that_moved_meanwhile_lands_on_the_moved_instant() {
    let rig = rig();
    let now = rig.now();
    let scheduler = rig.engine.scheduler();
    let old_at = now + SignedDuration::from_secs(3600);
    let new_at = now + SignedDuration::from_secs(7200);
    scheduler
        .put_anchor("t", "flight", old_at, &hourglass_engine::Actor::new("test"))
        .await
        .unwrap();
    let plain = job(
        "ok",
        Schedule::at(now + SignedDuration::from_secs(600)),
        now,
        now,
    );
    let id = plain.id;
    rig.add(vec![plain]).await;
    // What the API computed from its reading of the anchor, before the move.
    let mut onto = Schedule::at(old_at - SignedDuration::from_secs(60));
    onto.anchor = Some(Box::new(hourglass_core::anchor::ScheduleAnchor {
        name: "flight".into(),
        offset_ms: -60_000,
    }));
    let first_due = old_at - SignedDuration::from_secs(60);
    // The move commits first: the job is not on the anchor yet, so it is not moved.
    let (_, moved) = scheduler
        .put_anchor("t", "flight", new_at, &hourglass_engine::Actor::new("test"))
        .await
        .unwrap();
    assert_eq!(moved, 0);
    let edit = hourglass_engine::JobEdit {
        schedule: Some((onto, first_due)),
        ..Default::default()
    };
    let edited = scheduler
        .edit(
            "t",
            &hourglass_engine::JobRef::Id(id),
            edit,
            &hourglass_engine::Actor::new("test"),
        )
        .await
        .unwrap()
        .unwrap();
    let moved_due = new_at - SignedDuration::from_secs(60);
    assert_eq!(edited.next_due, Some(moved_due), "{edited:?}");
    let stored = rig.store.get_job(None, id).await.unwrap().unwrap();
    assert_eq!(stored.next_due, Some(moved_due));
    assert_eq!(
        stored.spec.schedule.kind,
        hourglass_core::ScheduleKind::At(moved_due)
    );
    rig.engine.shutdown().await;
}

/// Issue 38: an anchor holds at most 10,000 live jobs, and an edit that would put one more on
/// it is refused as a create is (`AnchorFull`), while an edit of a job already on it is not.
#[tokio::test(start_paused = true)]
async fn an_edit_onto_a_full_anchor_is_refused() {
    let rig = rig();
    let now = rig.now();
    let scheduler = rig.engine.scheduler();
    let by = hourglass_engine::Actor::new("test");
    let at = now + SignedDuration::from_secs(86_400);
    scheduler.put_anchor("t", "full", at, &by).await.unwrap();
    let anchored = || {
        let mut schedule = Schedule::at(at - SignedDuration::from_secs(60));
        schedule.anchor = Some(Box::new(hourglass_core::anchor::ScheduleAnchor {
            name: "full".into(),
            offset_ms: -60_000,
        }));
        schedule
    };
    let on_anchor: Vec<NewJob> = (0..10_000)
        .map(|_| job("ok", anchored(), at - SignedDuration::from_secs(60), now))
        .collect();
    let first = on_anchor[0].id;
    rig.add(on_anchor).await;
    let plain = job(
        "ok",
        Schedule::at(now + SignedDuration::from_secs(600)),
        now,
        now,
    );
    let id = plain.id;
    rig.add(vec![plain]).await;
    let onto = || hourglass_engine::JobEdit {
        schedule: Some((anchored(), at - SignedDuration::from_secs(60))),
        ..Default::default()
    };
    let refused = scheduler
        .edit("t", &hourglass_engine::JobRef::Id(id), onto(), &by)
        .await;
    assert!(
        matches!(refused, Err(hourglass_store::StoreError::AnchorFull { .. })),
        "{refused:?}"
    );
    // A job already on the anchor may be edited (here, moved by an hour on it).
    let mut again = onto();
    if let Some((schedule, due)) = &mut again.schedule {
        *schedule = schedule.anchored_at(at - SignedDuration::from_secs(3600));
        *due -= SignedDuration::from_secs(3600);
    }
    scheduler
        .edit("t", &hourglass_engine::JobRef::Id(first), again, &by)
        .await
        .unwrap()
        .unwrap();
    rig.engine.shutdown().await;
}

/// A bulk action's one audit entry rides in the write of its last selected job: with nothing in
/// the way, no entry is appended on its own. When that last job changed under the request (here
/// another request cancels it first, so the pause is refused), the entry naming the jobs it did
/// change is appended on its own afterwards: still one entry, naming exactly them.
#[tokio::test(start_paused = true)]
async fn a_bulk_actions_entry_rides_with_its_last_write_or_follows_a_refusal() {
    let counting = Arc::new(CountingStore::new(Arc::new(MemoryStore::new())));
    let rig = rig_on(counting.clone(), None, quiet());
    let now = rig.now();
    let later = now + SignedDuration::from_secs(3600);
    let jobs: Vec<NewJob> = (0..3)
        .map(|_| {
            let mut job = job("bulk", Schedule::at(later), later, now);
            job.spec.labels = [("team".to_owned(), "a".to_owned())].into_iter().collect();
            job
        })
        .collect();
    // In id order, as a bulk action walks them.
    let mut ids: Vec<JobId> = jobs.iter().map(|j| j.id).collect();
    ids.sort();
    rig.add(jobs).await;
    let scheduler = rig.engine.scheduler();
    let by = hourglass_engine::Actor::new("test");
    let selected = || hourglass_store::JobQuery {
        labels: vec![hourglass_core::Selector::parse("team=a").unwrap()],
        ..Default::default()
    };
    let entries = |action: hourglass_store::AuditAction| {
        let scheduler = scheduler.clone();
        async move {
            let log = scheduler.audit("t", None, None, 100).await.unwrap();
            log.into_iter()
                .map(|e| e.record)
                .filter(|r| r.action == action)
                .collect::<Vec<_>>()
        }
    };

    let paused = scheduler
        .bulk("t", selected(), hourglass_engine::BulkAction::Pause, &by)
        .await
        .unwrap();
    assert_eq!(paused.changed, 3);
    let pauses = entries(hourglass_store::AuditAction::Pause).await;
    assert_eq!(pauses.len(), 1);
    assert_eq!((pauses[0].jobs.clone(), pauses[0].count), (ids.clone(), 3));
    assert_eq!(
        counting.appended.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "rode with a write"
    );

    *counting.cancel_under_audited.lock().unwrap() = Some(ids[2]);
    let resumed = scheduler
        .bulk("t", selected(), hourglass_engine::BulkAction::Resume, &by)
        .await
        .unwrap();
    assert_eq!(resumed.changed, 2);
    let resumes = entries(hourglass_store::AuditAction::Resume).await;
    assert_eq!(resumes.len(), 1);
    assert_eq!(
        (resumes[0].jobs.clone(), resumes[0].count),
        (ids[..2].to_vec(), 2)
    );
    assert_eq!(
        counting.appended.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "appended on its own"
    );
    rig.engine.shutdown().await;
}
