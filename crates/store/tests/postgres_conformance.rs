//! Runs the store conformance suite against PostgreSQL, each test in a fresh schema that is
//! dropped afterwards, plus what only a shared store has: several stores (nodes) on one database.
//!
//! Needs `HOURGLASS_TEST_DATABASE_URL`; `scripts/test` sets it, starting a throwaway PostgreSQL
//! when none is running. Without it these tests fail (they never pass vacuously).

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hourglass_core::{Action, AttemptRecord, Completion, Occurrence, from_ms};
use hourglass_store::conformance::fixtures::{delivered_without_run, job, lease, ms, t0};
use hourglass_store::{
    Applied, ClaimScope, DueEvent, Lease, NewJob, PostgresOptions, PostgresStore, Release, Store,
    StoreError, StoreEvent, Transition,
};
use hourglass_testkit::postgres;
use tokio::sync::broadcast;

/// A schema of its own for one test (dropped with everything in it when the test ends), and the
/// store's options for it: its sessions carry the schema's name, so the clean-up can end them.
struct Schema(postgres::Schema);

impl Schema {
    fn new() -> Self {
        Self(postgres::Schema::new("test"))
    }

    fn options(&self) -> PostgresOptions {
        PostgresOptions {
            schema: Some(self.0.name().to_string()),
            pool_size: 4,
            ..PostgresOptions::new(self.0.url())
        }
    }

    async fn open(&self) -> PostgresStore {
        PostgresStore::open(self.options())
            .await
            .unwrap_or_else(|e| panic!("cannot open the store at {}: {e}", self.0.url()))
    }
}

async fn fresh_store() -> (Arc<dyn Store>, Schema) {
    let schema = Schema::new();
    let store = schema.open().await;
    (Arc::new(store), schema)
}

hourglass_store::conformance_tests!(fresh_store);
// A move in one transaction, and an anchor's bound in live jobs (DynamoDB's move is not one
// transaction and its bound counts creates: see its `anchors.rs`).
hourglass_store::conformance_tests!(@cases fresh_store; a_reader_never_sees_half_a_move,
    an_anchor_is_bounded_and_moves_all_its_jobs);

/// The next event that is not a [`StoreEvent::Resync`], within a few seconds.
async fn next_event(rx: &mut broadcast::Receiver<StoreEvent>) -> StoreEvent {
    tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            match rx.recv().await.expect("event channel open") {
                StoreEvent::Resync => continue,
                event => return event,
            }
        }
    })
    .await
    .expect("an event within 5 s")
}

/// A job created through one node wakes every other node: the NOTIFY reaches them all, carrying
/// the earliest due time of the transaction per kind of target, and an edit fences claims.
#[tokio::test]
async fn events_reach_every_store_on_the_database() {
    let schema = Schema::new();
    let a = schema.open().await;
    let b = schema.open().await;
    let mut rx = b.events().expect("postgres announces events");

    let early = job("ns", t0() + ms(200), None);
    let early_id = early.id;
    a.create_jobs(vec![job("ns", t0() + ms(900), None), early], None)
        .await
        .unwrap();
    assert_eq!(
        next_event(&mut rx).await,
        StoreEvent::Due(DueEvent {
            namespace: "ns".into(),
            queue: None,
            at: t0() + ms(200),
        }),
        "one event per transaction, with its earliest due time"
    );

    a.create_jobs(vec![job("ns", t0() + ms(50), Some("emails"))], None)
        .await
        .unwrap();
    assert_eq!(
        next_event(&mut rx).await,
        StoreEvent::Due(DueEvent {
            namespace: "ns".into(),
            queue: Some("emails".into()),
            at: t0() + ms(50),
        })
    );

    a.transition(Some("ns"), early_id, Transition::Pause { now: t0() }, None)
        .await
        .unwrap();
    assert!(matches!(
        next_event(&mut rx).await,
        StoreEvent::Fenced { job_id, .. } if job_id == early_id
    ));

    // A rolled-back transaction announces nothing: a conflicting batch, then a marker.
    let mut keyed = job("ns", t0(), None);
    keyed.key = Some("k".into());
    a.create_jobs(vec![keyed.clone()], None).await.unwrap();
    assert!(matches!(next_event(&mut rx).await, StoreEvent::Due(_)));
    let mut conflicting = keyed.clone();
    conflicting.id = uuid::Uuid::now_v7();
    conflicting.fingerprint = 2;
    let fresh = job("ns", t0() - ms(1), None);
    assert!(matches!(
        a.create_jobs(vec![fresh, conflicting], None).await,
        Err(StoreError::KeyConflict { index: 1, .. })
    ));
    a.create_jobs(vec![job("other", t0() + ms(7), None)], None)
        .await
        .unwrap();
    assert_eq!(
        next_event(&mut rx).await,
        StoreEvent::Due(DueEvent {
            namespace: "other".into(),
            queue: None,
            at: t0() + ms(7),
        })
    );
}

/// Several nodes claiming at once never get the same occurrence (SKIP LOCKED), and together they
/// get all of them.
#[tokio::test]
async fn concurrent_claims_never_share_an_occurrence() {
    let schema = Schema::new();
    let stores: Vec<Arc<PostgresStore>> = vec![
        Arc::new(schema.open().await),
        Arc::new(schema.open().await),
        Arc::new(schema.open().await),
    ];
    let jobs: Vec<NewJob> = (0..300).map(|i| job("ns", t0() + ms(i), None)).collect();
    stores[0].create_jobs(jobs, None).await.unwrap();
    let mut tasks = Vec::new();
    for (n, store) in stores.iter().enumerate() {
        for worker in 0..2 {
            let store = store.clone();
            tasks.push(tokio::spawn(async move {
                let owner = format!("node-{n}-{worker}");
                let mut got = Vec::new();
                loop {
                    let batch = store
                        .claim_due(ClaimScope::Fired, t0() + ms(1000), 7, &lease(&owner, t0()))
                        .await
                        .unwrap();
                    if batch.is_empty() {
                        return got;
                    }
                    got.extend(batch.into_iter().map(|o| o.job_id));
                }
            }));
        }
    }
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await.unwrap());
    }
    let unique: HashSet<_> = all.iter().collect();
    assert_eq!(all.len(), 300, "every occurrence claimed");
    assert_eq!(unique.len(), 300, "none claimed twice");
}

/// A node back from a stall holds claims another node has taken over. Renewing, completing or
/// releasing them must not wait for the new owner's transactions on those rows: the answer is
/// "stale" at once. (Before, the stalled node locked those rows too and queued behind the new
/// owner; with thousands of such claims both nodes' statements ran into the statement timeout.)
/// The new owner's transaction stays open throughout, holding the row, and the stalled node's
/// store has a 2 s statement timeout: a call that waited for the row would fail with it.
#[tokio::test]
async fn a_stalled_nodes_stale_claims_never_wait_for_the_new_owner() {
    let schema = Schema::new();
    let stalled = PostgresStore::open(PostgresOptions {
        statement_timeout: Duration::from_secs(2),
        ..schema.options()
    })
    .await
    .unwrap();
    let owner = schema.open().await;
    let short = |name: &str, now| Lease {
        owner: name.into(),
        ttl: Duration::from_secs(1),
        now,
    };
    let jobs: Vec<NewJob> = (0..3).map(|i| job("ns", t0() + ms(i), None)).collect();
    stalled.create_jobs(jobs, None).await.unwrap();
    let old = stalled
        .claim_due(
            ClaimScope::Fired,
            t0() + ms(10),
            10,
            &short("stalled", t0()),
        )
        .await
        .unwrap();
    assert_eq!(old.len(), 3);
    // The stalled node's leases lapse; the other node takes every occurrence over.
    let later = t0() + ms(5_000);
    let new = owner
        .claim_due(ClaimScope::Fired, later, 10, &short("owner", later))
        .await
        .unwrap();
    assert_eq!(new.len(), 3, "every lapsed claim taken over");

    // The new owner is in the middle of a transaction on those rows (say, its completion). The
    // session carries the schema's name, so that the clean-up ends it if an assertion fails.
    let client = connect(&schema.options().url).await;
    client.batch_execute("BEGIN").await.unwrap();
    let ids: Vec<uuid::Uuid> = new.iter().map(|o| o.job_id).collect();
    let locked = client
        .query(
            &format!(
                "SELECT id FROM {}.jobs WHERE id = ANY($1) FOR UPDATE",
                schema.0.name()
            ),
            &[&ids],
        )
        .await
        .unwrap();
    assert_eq!(locked.len(), 3);

    let stale: Vec<_> = old.iter().map(Occurrence::claim).collect();
    let renewed = stalled
        .extend_claims(stale, later + ms(1_000), later)
        .await
        .expect("renewing stale claims does not wait for the new owner");
    assert_eq!(renewed, vec![Applied::StaleLease; 3]);
    let completions: Vec<Completion> = old.iter().map(delivered_without_run).collect();
    let completed = stalled
        .complete(completions, later)
        .await
        .expect("completing stale claims does not wait for the new owner");
    assert_eq!(completed, vec![Applied::StaleLease; 3]);
    let releases = old
        .iter()
        .map(|o| Release {
            job_id: o.job_id,
            token: o.token,
            fire_at: o.fire_at,
        })
        .collect();
    stalled
        .release(releases)
        .await
        .expect("releasing stale claims does not wait for the new owner");

    // The new owner's leases are untouched by all of that.
    client.batch_execute("COMMIT").await.unwrap();
    let current: Vec<_> = new.iter().map(Occurrence::claim).collect();
    let renewed = owner
        .extend_claims(current, later + ms(1_000), later)
        .await
        .unwrap();
    assert_eq!(renewed, vec![Applied::Yes; 3]);
}

/// A plain connection to the test database, as its superuser.
async fn admin() -> tokio_postgres::Client {
    connect(&postgres::admin_url()).await
}

/// A plain connection to `url`, driven in the background.
async fn connect(url: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    client
}

/// The server's TLS certificate file. The test server must have TLS on: a packaged PostgreSQL
/// does (Debian's, with a self-signed certificate for `localhost`), and so does the throwaway one
/// `scripts/with-postgres` starts.
async fn server_certificate() -> String {
    let client = admin().await;
    let show = |name: &'static str| {
        let client = &client;
        async move {
            let row = client.query_one(&format!("SHOW {name}"), &[]).await;
            row.unwrap().get::<_, String>(0)
        }
    };
    assert_eq!(
        show("ssl").await,
        "on",
        "the test server has TLS off; the TLS tests need it on. scripts/with-postgres turns it on \
         in the PostgreSQL it starts: HOURGLASS_TEST_LOCAL_POSTGRES=127.0.0.1:1 makes it start one"
    );
    let file = show("ssl_cert_file").await;
    if file.starts_with('/') {
        file
    } else {
        format!("{}/{file}", show("data_directory").await)
    }
}

/// Opens a store on a fresh schema, with the URL's host renamed `host` and `tls` added to it,
/// writes through it, and tells whether every session of it is encrypted by the server's own
/// account; the error's text when it cannot open.
async fn encrypted_sessions(host: &str, tls: &str) -> Result<bool, String> {
    let schema = Schema::new();
    let mut options = schema.options();
    options.url = format!(
        "{}&{tls}",
        options.url.replacen("@127.0.0.1:", &format!("@{host}:"), 1)
    );
    let store = PostgresStore::open(options)
        .await
        .map_err(|e| e.to_string())?;
    store
        .create_jobs(vec![job("ns", t0(), None)], None)
        .await
        .unwrap();
    let row = admin()
        .await
        .query_one(
            "SELECT count(*), count(*) FILTER (WHERE s.ssl)
             FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid)
             WHERE a.application_name = $1",
            &[&schema.0.name()],
        )
        .await
        .unwrap();
    let (sessions, encrypted): (i64, i64) = (row.get(0), row.get(1));
    assert!(sessions > 0, "no session of the store found");
    Ok(sessions == encrypted)
}

/// TLS as the database URL asks for it (`sslmode`, `sslrootcert`, read as libpq reads them):
/// none without `sslmode` or with `disable`; `prefer` and `require` encrypt every session, the
/// pooled ones and the LISTEN one; `verify-full` refuses a certificate no trusted root signed,
/// and one that does not name the host; `verify-ca` accepts that second one; `verify-full` to the
/// name on it succeeds.
#[tokio::test]
async fn tls_is_used_and_checked_as_the_url_asks() {
    let cert = server_certificate().await;
    let url = postgres::admin_url();
    assert!(
        url.contains("@127.0.0.1:"),
        "the test server is expected on 127.0.0.1: {url}"
    );
    let ip = "127.0.0.1";
    assert_eq!(encrypted_sessions(ip, "").await, Ok(false));
    assert_eq!(encrypted_sessions(ip, "sslmode=disable").await, Ok(false));
    assert_eq!(encrypted_sessions(ip, "sslmode=prefer").await, Ok(true));
    assert_eq!(encrypted_sessions(ip, "sslmode=require").await, Ok(true));

    // The system's roots: refused. The certificate is self-signed, and names localhost, not
    // 127.0.0.1 (Debian's own snakeoil certificate sits among the system's, so either reason
    // may be the one given).
    let refused = encrypted_sessions(ip, "sslmode=verify-full")
        .await
        .expect_err("verify-full accepted a certificate no trusted root signed for this host");
    assert!(refused.to_lowercase().contains("certificate"), "{refused}");
    println!("verify-full, system roots: {refused}");

    // With it as the root: it still names localhost, not 127.0.0.1.
    let root = format!("sslrootcert={cert}");
    let wrong_name = encrypted_sessions(ip, &format!("sslmode=verify-full&{root}"))
        .await
        .expect_err("verify-full accepted a certificate for another name");
    assert!(
        wrong_name.to_lowercase().contains("certificate"),
        "{wrong_name}"
    );
    println!("verify-full, another name: {wrong_name}");
    assert_eq!(
        encrypted_sessions(ip, &format!("sslmode=verify-ca&{root}")).await,
        Ok(true)
    );
    assert_eq!(
        encrypted_sessions("localhost", &format!("sslmode=verify-full&{root}")).await,
        Ok(true)
    );
}

/// Nodes starting together on an empty database apply each migration once.
#[tokio::test]
async fn nodes_starting_together_migrate_once() {
    let schema = Arc::new(Schema::new());
    let opens: Vec<_> = (0..4)
        .map(|_| {
            let options = schema.options();
            tokio::spawn(async move { PostgresStore::open(options).await })
        })
        .collect();
    let mut stores = Vec::new();
    for open in opens {
        stores.push(open.await.unwrap().expect("every node opens"));
    }
    let row = admin()
        .await
        .query_one(
            &format!(
                "SELECT COUNT(*), COUNT(DISTINCT version) FROM {}.hourglass_migrations",
                schema.0.name()
            ),
            &[],
        )
        .await
        .unwrap();
    let (rows, versions): (i64, i64) = (row.get(0), row.get(1));
    assert!(
        rows >= 1 && rows == versions,
        "{rows} rows, {versions} versions"
    );
    drop(stores);
}

/// A database that cannot be reached is `Unavailable` within the acquire timeout, not a hang.
#[tokio::test]
async fn an_unreachable_database_is_unavailable_quickly() {
    let started = Instant::now();
    let options = PostgresOptions {
        acquire_timeout: Duration::from_secs(1),
        ..PostgresOptions::new("postgres://postgres@127.0.0.1:1/test")
    };
    match PostgresStore::open(options).await {
        Err(StoreError::Unavailable(message)) => {
            assert!(started.elapsed() < Duration::from_secs(3), "{message}")
        }
        Err(other) => panic!("expected unavailable, got {other}"),
        Ok(_) => panic!("opened a store on a closed port"),
    }
}

/// Not a test: how long the batched statements take. `cargo test -p hourglass-store --test
/// postgres_conformance measure -- --ignored --nocapture`.
#[tokio::test]
#[ignore = "a measurement, run by hand"]
async fn measure_batches() {
    let schema = Schema::new();
    let store = schema.open().await;
    for round in 0..3 {
        let jobs: Vec<NewJob> = (0..1000)
            .map(|i| job("ns", t0() + ms(round * 10_000 + i), None))
            .collect();
        let started = Instant::now();
        store.create_jobs(jobs, None).await.unwrap();
        let created = started.elapsed();
        let now = t0() + ms(round * 10_000 + 5_000);
        let started = Instant::now();
        let claimed = store
            .claim_due(ClaimScope::Fired, now, 1000, &lease("m", now))
            .await
            .unwrap();
        let claim = started.elapsed();
        assert_eq!(claimed.len(), 1000);
        let batch: Vec<Completion> = claimed
            .iter()
            .map(|o| Completion {
                job_id: o.job_id,
                token: o.token,
                due: o.due,
                attempt: Some(AttemptRecord {
                    attempt: 1,
                    started_at: now,
                    latency_ms: 1,
                    status: Some(200),
                    error: None,
                    response: None,
                }),
                action: Action::Delivered {
                    next: None,
                    skipped: 0,
                },
                callback: None,
                origin: None,
            })
            .collect();
        let started = Instant::now();
        store.complete(batch, now).await.unwrap();
        let complete = started.elapsed();
        let claims: Vec<_> = claimed.iter().map(Occurrence::claim).collect();
        let started = Instant::now();
        store
            .extend_claims(claims, now + ms(1000), now)
            .await
            .unwrap();
        let extend = started.elapsed();
        println!(
            "round {round}: create 1000 {created:?}, claim 1000 {claim:?}, complete 1000 {complete:?}, extend 1000 (all stale) {extend:?}"
        );
    }
    let _ = from_ms(0);
}
