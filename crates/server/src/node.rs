//! A running node: its store (embedded or PostgreSQL), the engine, and the API server, started and
//! stopped in order. `hourglass serve` and the integration tests both start nodes through here.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use hourglass_core::Clock;
use hourglass_engine::instrumented::InstrumentedStore;
use hourglass_engine::sealing::Sealing;
use hourglass_engine::{
    Engine, EngineConfig, Metrics, SealingError, Secrets, TargetPolicy, WebhookDeliverer,
};
use hourglass_store::{
    DynamoOptions, DynamoStore, PostgresOptions, PostgresStore, SqliteStore, Store, StoreError,
};
use hourglass_targets::Connections;
use ipnet::IpNet;
use prometheus_client::registry::Registry;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::auth::{ApiKeyConfig, Auth};
use crate::metrics::ApiMetrics;
use crate::quotas::Quotas;
use crate::serve::{HttpConfig, serve};
use crate::state::AppState;
use crate::wire::Limits;

/// Where a node keeps its jobs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum StoreBackend {
    /// The embedded SQLite store in `NodeConfig::data_dir`: one node, no server.
    #[default]
    Embedded,
    /// A PostgreSQL database shared by any number of nodes; the schema is created and migrated
    /// at start.
    Postgres(PostgresOptions),
    /// A DynamoDB table shared by any number of nodes and serverless functions; created (on
    /// demand capacity) if missing, checked if present.
    Dynamo(DynamoOptions),
}

/// Lease TTL on a shared store: a dead or paused node's claims are taken over this long after it
/// stopped renewing them (every third of it).
pub const SHARED_LEASE_TTL: Duration = Duration::from_secs(10);

#[derive(Debug, Clone)]
pub struct NodeConfig {
    pub listen: SocketAddr,
    /// A second address serving only `GET /metrics`, without authentication, for scrapers that
    /// cannot send an admin key; keep it on an internal interface. `None`: no such listener.
    pub metrics_listen: Option<SocketAddr>,
    /// Connection cap and timeouts of the HTTP listeners.
    pub http: HttpConfig,
    pub store: StoreBackend,
    /// The embedded store's directory (unused on PostgreSQL).
    pub data_dir: PathBuf,
    /// How long a claim stays exclusive without renewal; `None` picks the backend's default:
    /// [`SHARED_LEASE_TTL`] on PostgreSQL, and on the embedded store (one node, which releases
    /// its claims at restart) lookahead + delivery timeout + 30 s.
    pub lease_ttl: Option<Duration>,
    /// Address ranges webhooks may reach even though they are loopback/private/link-local.
    /// Without `api_keys` (development mode) loopback is allowed besides these.
    pub allow_targets: Vec<IpNet>,
    pub api_keys: Vec<ApiKeyConfig>,
    pub engine: EngineConfig,
    pub limits: Limits,
    /// Per-namespace quotas (creates and deliveries per second); none by default.
    pub quotas: Quotas,
    pub delivery_timeout: Duration,
    /// How long /metrics reuses its whole-store figures (jobs by state, backlog, queue totals)
    /// before reading them from the store again, which may scan it. Default
    /// [`crate::metrics::STORE_FIGURES_TTL`] (10 s); tests set it to zero to see every change.
    pub store_figures_ttl: Duration,
    /// The bus and cloud connections jobs may publish through (`[connections.NAME]`).
    pub connections: Connections,
    /// The secrets key that seals signing secrets at rest (and the previous one while changing
    /// keys); `None` stores them as they are, and is refused by a store whose secrets are sealed.
    pub sealing: Option<Sealing>,
}

impl Default for NodeConfig {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 7070)),
            metrics_listen: None,
            http: HttpConfig::default(),
            store: StoreBackend::Embedded,
            data_dir: PathBuf::from("hourglass-data"),
            lease_ttl: None,
            allow_targets: Vec::new(),
            api_keys: Vec::new(),
            engine: EngineConfig::default(),
            limits: Limits::default(),
            quotas: Quotas::default(),
            delivery_timeout: Duration::from_secs(10),
            store_figures_ttl: crate::metrics::STORE_FIGURES_TTL,
            connections: Connections::default(),
            sealing: None,
        }
    }
}

/// Why a node (or a tick, or the API alone) did not start, by what starting again would do.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The configuration cannot work as given (API keys, connections, TLS trust, listening
    /// without keys, lease against lookahead): the same start fails the same way until it is
    /// changed, so a supervisor should not retry it.
    #[error("{0}")]
    Config(String),
    /// Something outside the node failed or is not there yet (the store unreachable or locked
    /// by another node, an address in use): starting again may work.
    #[error("{0}")]
    Unavailable(String),
}

impl StartError {
    /// A store that did not open: a config error when its settings cannot work, otherwise
    /// unavailable (starting again may find it).
    fn opening(what: &str, e: StoreError) -> Self {
        match e {
            StoreError::Misconfigured(_) => Self::Config(format!("{what}{e}")),
            e => Self::Unavailable(format!("{what}{e}")),
        }
    }
}

/// `<host>-<pid>-<random>`: readable in the jobs table's `lease_owner`, and distinct for every
/// process, even two on one host or one restarted with the same pid.
fn unique_node_name() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "node".into());
    format!(
        "{host}-{}-{:04x}",
        std::process::id(),
        rand::random::<u16>()
    )
}

pub struct Node {
    addr: SocketAddr,
    metrics_addr: Option<SocketAddr>,
    stop_http: CancellationToken,
    http: Vec<JoinHandle<()>>,
    engine: Engine,
    ready: Arc<AtomicBool>,
    store: Arc<dyn Store>,
}

/// What every way of running a node shares, made before anything is bound or started: the
/// store (opened, instrumented), the deliverer, the engine's configuration, and the API's parts.
struct Parts {
    auth: Auth,
    store: Arc<dyn Store>,
    registry: Registry,
    metrics: Metrics,
    api_metrics: ApiMetrics,
    policy: TargetPolicy,
    secrets: Secrets,
    targets: Arc<hourglass_targets::Router>,
    engine_config: EngineConfig,
}

impl Parts {
    async fn build(config: &NodeConfig, clock: &Arc<dyn Clock>) -> Result<Parts, StartError> {
        let auth = Auth::new(&config.api_keys).map_err(StartError::Config)?;
        let backend: Arc<dyn Store> = match &config.store {
            StoreBackend::Embedded => Arc::new(
                SqliteStore::open(&config.data_dir).map_err(|e| StartError::opening("", e))?,
            ),
            StoreBackend::Postgres(options) => Arc::new(
                PostgresStore::open(options.clone())
                    .await
                    .map_err(|e| StartError::opening("postgres store: ", e))?,
            ),
            StoreBackend::Dynamo(options) => Arc::new(
                DynamoStore::open(options.clone())
                    .await
                    .map_err(|e| StartError::opening("dynamodb store: ", e))?,
            ),
        };
        // No prefix: prometheus-client joins a prefix to each name with `_` even when the prefix
        // is empty, which served every metric as `_hourglass_...`.
        let mut registry = Registry::default();
        let store: Arc<dyn Store> = Arc::new(InstrumentedStore::new(backend, &mut registry));
        let metrics = Metrics::new(&mut registry);
        let api_metrics = ApiMetrics::new(&mut registry, &metrics, config.store_figures_ttl);
        let mut policy = TargetPolicy::new(config.allow_targets.clone());
        if auth.is_open() {
            // Development mode listens on loopback only, so whoever creates jobs is on this
            // host already: a webhook receiver on this host is what they will try first.
            policy = policy.allowing_loopback();
            tracing::info!(
                "development mode: webhook targets on loopback (127.0.0.0/8, ::1) are allowed without --allow-targets; with api_keys configured they need --allow-targets 127.0.0.0/8"
            );
        }
        let (secrets, resealed) =
            Secrets::open(store.clone(), clock.clone(), config.sealing.clone())
                .await
                .map_err(|e| match e {
                    SealingError::Store(e) => {
                        StartError::Unavailable(format!("signing secrets: {e}"))
                    }
                    e => StartError::Config(e.to_string()),
                })?;
        if let Some(sealing) = &config.sealing {
            tracing::info!(
                key = sealing.current_id(),
                resealed,
                "signing secrets are sealed at rest"
            );
        }
        let webhooks = Arc::new(
            WebhookDeliverer::new(
                secrets.clone(),
                clock.clone(),
                policy.clone(),
                config.delivery_timeout,
                config.engine.delivery_concurrency,
                &metrics,
            )
            .map_err(|e| StartError::Config(format!("webhook client (TLS trust store): {e}")))?,
        );
        // Webhooks go to the webhook deliverer, bus and cloud targets to their connection.
        let targets = Arc::new(
            hourglass_targets::Router::open(
                config.connections.clone(),
                webhooks,
                config.delivery_timeout,
                &mut registry,
            )
            .await
            .map_err(|e| StartError::Config(e.to_string()))?,
        );
        let mut engine_config = config.engine.clone();
        engine_config.quotas = config.quotas.clone();
        // Lease owners must differ between nodes sharing a store; a restarted node is a new
        // owner (its old claims lapse or were released).
        engine_config.node_id = unique_node_name();
        engine_config.lease_ttl = match (config.lease_ttl, &config.store) {
            (Some(ttl), _) => ttl,
            (None, StoreBackend::Postgres(_) | StoreBackend::Dynamo(_)) => SHARED_LEASE_TTL,
            // One node, which releases every claim when it starts: a long lease only matters if
            // the process is wedged, and then a redelivery is worse than waiting.
            (None, StoreBackend::Embedded) => engine_config
                .lease_ttl
                .max(engine_config.lookahead + config.delivery_timeout + Duration::from_secs(30)),
        };
        // A claim is made up to a lookahead before its fire time and must not lapse before then
        // while its node is alive (renewals come every third of a lease).
        if engine_config.lease_ttl <= engine_config.lookahead {
            return Err(StartError::Config(format!(
                "lease_ttl ({:?}) must be longer than lookahead ({:?})",
                engine_config.lease_ttl, engine_config.lookahead
            )));
        }
        Ok(Parts {
            auth,
            store,
            registry,
            metrics,
            api_metrics,
            policy,
            secrets,
            targets,
            engine_config,
        })
    }

    /// The API's state over `engine`'s scheduler.
    fn app_state(self, config: &NodeConfig, engine: &Engine, ready: Arc<AtomicBool>) -> AppState {
        AppState {
            scheduler: engine.scheduler(),
            limits: config.limits.clone(),
            policy: self.policy,
            auth: Arc::new(self.auth),
            secrets: self.secrets,
            registry: Arc::new(self.registry),
            metrics: self.api_metrics,
            ready,
            targets: self.targets,
            bodies: Arc::new(crate::budget::Budgets::new(config.limits.body_budget)),
        }
    }
}

/// What a [`tick`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TickOutcome {
    /// Nothing was due within the window: the engine was not started.
    Idle,
    /// The engine ran for this long, until the window ended or nothing more was due in it.
    Ran(Duration),
    /// `stop` ended the tick early (a signal) after this long; the engine drained what it had
    /// in flight and handed back its other claims, as at the window's end.
    Stopped(Duration),
}

/// One tick, as the serverless tick function and `hourglass tick` run it: if anything the engine
/// fires is due before `window` ends, runs the engine (no API) until nothing more is due within
/// the window and the engine holds no claim, or the window ends, or `stop` resolves; then shuts
/// it down, which hands back the claims it did not fire (another tick, or any node, takes them).
/// Overlapping ticks are safe: claims are fenced.
pub async fn tick(
    config: NodeConfig,
    clock: Arc<dyn Clock>,
    window: Duration,
    stop: impl Future<Output = ()>,
) -> Result<TickOutcome, StartError> {
    let parts = Parts::build(&config, &clock).await?;
    let started = tokio::time::Instant::now();
    let end = clock.now() + window;
    let due_in_window = |store: Arc<dyn Store>| async move {
        match store.next_due(hourglass_store::ClaimScope::Fired).await {
            Ok(next) => Ok(next.is_some_and(|at| at < end)),
            Err(e) => Err(StartError::Unavailable(format!(
                "cannot read the due index: {e}"
            ))),
        }
    };
    if !due_in_window(parts.store.clone()).await? {
        tracing::info!(window = ?window, "tick: nothing due in the window");
        return Ok(TickOutcome::Idle);
    }
    let store = parts.store.clone();
    // A tick runs for seconds and is no node of the cluster: it writes no heartbeat, and
    // `GET /v1/nodes` does not list it.
    let mut engine_config = parts.engine_config.clone();
    engine_config.heartbeat_interval = None;
    let engine = Engine::start(
        engine_config,
        parts.store.clone(),
        parts.targets.clone(),
        clock.clone(),
        parts.metrics.clone(),
    );
    let deadline = started + window;
    let mut check = tokio::time::interval(Duration::from_secs(1));
    let mut stopped = false;
    tokio::pin!(stop);
    loop {
        tokio::select! {
            _ = tokio::time::sleep_until(deadline) => break,
            _ = engine.failed() => break,
            _ = &mut stop => {
                stopped = true;
                break;
            }
            _ = check.tick() => {
                // Done when nothing is due in the window and nothing is held. The engine's own
                // claims are not in the first answer: a claimed occurrence sits in the due
                // index at its lease expiry, which may lie past the window's end, while it
                // waits for a due time inside it. The store is read first: a claim the store
                // granted before that read is held by the time the engine is asked, except in
                // the moment between the grant and its bookkeeping, and one missed there is
                // handed back by the shutdown for the next tick (late, never lost).
                if matches!(due_in_window(store.clone()).await, Ok(false))
                    && !engine.holds_claims()
                {
                    break;
                }
            }
        }
    }
    engine.shutdown().await;
    let ran = started.elapsed();
    if stopped {
        tracing::info!(?ran, "tick: stopped early");
        return Ok(TickOutcome::Stopped(ran));
    }
    tracing::info!(?ran, "tick: done");
    Ok(TickOutcome::Ran(ran))
}

/// A node's API without its firing: for a serverless API function. Every change the API makes
/// due is passed to `hook` (which starts a tick); nothing is claimed or fired here.
pub struct ApiOnly {
    pub router: axum::Router,
    engine: Engine,
}

impl ApiOnly {
    pub async fn start(
        config: NodeConfig,
        clock: Arc<dyn Clock>,
        hook: Arc<dyn hourglass_engine::DueHook>,
    ) -> Result<ApiOnly, StartError> {
        let parts = Parts::build(&config, &clock).await?;
        if parts.auth.is_open() {
            return Err(StartError::Config(
                "refusing to serve the API without api keys: configure api_keys".into(),
            ));
        }
        let engine = Engine::start_without_firing(
            parts.engine_config.clone(),
            parts.store.clone(),
            clock,
            parts.metrics.clone(),
            hook,
        );
        let ready = Arc::new(AtomicBool::new(true));
        let router = crate::routes::router(parts.app_state(&config, &engine, ready));
        Ok(ApiOnly { router, engine })
    }

    pub async fn shutdown(self) {
        self.engine.shutdown().await;
    }
}

impl Node {
    pub async fn start(config: NodeConfig, clock: Arc<dyn Clock>) -> Result<Node, StartError> {
        if config.api_keys.is_empty() {
            if !config.listen.ip().is_loopback() {
                return Err(StartError::Config(format!(
                    "refusing to listen on {} without api keys: configure api_keys, or listen on a loopback address for development",
                    config.listen
                )));
            }
            // The metrics listener needs no key in any mode: without keys it is as open as the
            // API, so it stays on loopback too.
            if let Some(at) = config.metrics_listen
                && !at.ip().is_loopback()
            {
                return Err(StartError::Config(format!(
                    "refusing to serve /metrics on {at} without api keys: configure api_keys, or use a loopback address for metrics_listen in development"
                )));
            }
            tracing::warn!(
                listen = %config.listen,
                "development mode: no api keys configured, every request is admin in the namespace it names; loopback only"
            );
        }
        let parts = Parts::build(&config, &clock).await?;
        let store = parts.store.clone();
        let deliverer: Arc<dyn hourglass_engine::Deliverer> = parts.targets.clone();
        let engine_config = parts.engine_config.clone();
        // Bind before the engine starts: a taken address must fail the start without leaving a
        // running engine (claiming, firing) behind.
        let bind = |addr: SocketAddr| async move {
            let listener = tokio::net::TcpListener::bind(addr)
                .await
                .map_err(|e| StartError::Unavailable(format!("cannot listen on {addr}: {e}")))?;
            let bound = listener
                .local_addr()
                .map_err(|e| StartError::Unavailable(e.to_string()))?;
            Ok::<_, StartError>((listener, bound))
        };
        let (listener, addr) = bind(config.listen).await?;
        let metrics_listener = match config.metrics_listen {
            Some(at) => Some(bind(at).await?),
            None => None,
        };
        let node_name = engine_config.node_id.clone();
        let engine = Engine::start(
            engine_config,
            store.clone(),
            deliverer,
            clock,
            parts.metrics.clone(),
        );
        let ready = Arc::new(AtomicBool::new(false));
        let state = parts.app_state(&config, &engine, ready.clone());
        let stop_http = CancellationToken::new();
        let mut http = Vec::new();
        let metrics_addr = metrics_listener.as_ref().map(|(_, bound)| *bound);
        if let Some((listener, bound)) = metrics_listener {
            tracing::info!(addr = %bound, "serving /metrics without authentication");
            http.push(tokio::spawn(serve(
                listener,
                crate::routes::metrics_router(state.clone()),
                config.http.clone(),
                stop_http.clone(),
            )));
        }
        http.push(tokio::spawn(serve(
            listener,
            crate::routes::router(state),
            config.http.clone(),
            stop_http.clone(),
        )));
        ready.store(true, Ordering::Release);
        match &config.store {
            StoreBackend::Embedded => {
                tracing::info!(%addr, node = %node_name, data_dir = %config.data_dir.display(), "hourglass node started")
            }
            StoreBackend::Postgres(_) => {
                tracing::info!(%addr, node = %node_name, store = "postgres", "hourglass node started")
            }
            StoreBackend::Dynamo(options) => {
                tracing::info!(%addr, node = %node_name, store = "dynamodb", table = %options.table, "hourglass node started")
            }
        }
        Ok(Node {
            addr,
            metrics_addr,
            stop_http,
            http,
            engine,
            ready,
            store,
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The address of the unauthenticated metrics listener, when `metrics_listen` is set.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_addr
    }

    pub fn store(&self) -> Arc<dyn Store> {
        self.store.clone()
    }

    /// Resolves if the engine has died (a pipeline stage panicked). `/readyz` answers 503 from
    /// then on; the owner should shut the node down and exit non-zero so that a supervisor starts
    /// a fresh process (`hourglass serve` does).
    pub fn failed(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        self.engine.failed()
    }

    /// Drains in order: stop accepting API calls, stop claiming, release unfired claims, let
    /// in-flight deliveries finish within the grace period, flush completions.
    pub async fn shutdown(self) {
        self.ready.store(false, Ordering::Release);
        self.stop_http.cancel();
        for server in self.http {
            let _ = server.await;
        }
        self.engine.shutdown().await;
        tracing::info!("hourglass node stopped");
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    use hourglass_core::{Clock, SystemClock};
    use jiff::Timestamp;

    use super::*;

    fn config(dir: &std::path::Path, listen: SocketAddr) -> NodeConfig {
        let mut config = NodeConfig {
            listen,
            data_dir: dir.to_path_buf(),
            ..NodeConfig::default()
        };
        config.engine.shutdown_grace = Duration::from_secs(1);
        config
    }

    /// Regression: `Node::start` used to start the engine before binding its listener, so a
    /// taken address returned an error and left an engine behind, claiming and firing with
    /// nobody to stop it. The engine holds the store, and the embedded store holds its data
    /// directory's lock: a second start on that directory succeeds only if nothing was left.
    #[tokio::test]
    async fn a_taken_address_fails_the_start_and_leaves_nothing_running() {
        let first_dir = tempfile::tempdir().unwrap();
        let first = Node::start(
            config(first_dir.path(), "127.0.0.1:0".parse().unwrap()),
            Arc::new(SystemClock),
        )
        .await
        .expect("first node starts");
        let dir = tempfile::tempdir().unwrap();
        let Err(e) = Node::start(config(dir.path(), first.addr()), Arc::new(SystemClock)).await
        else {
            panic!("a second node on a taken address must not start");
        };
        assert!(
            matches!(&e, StartError::Unavailable(m) if m.contains("cannot listen")),
            "{e}"
        );
        let again = Node::start(
            config(dir.path(), "127.0.0.1:0".parse().unwrap()),
            Arc::new(SystemClock),
        )
        .await
        .expect("the failed start released its data directory");
        again.shutdown().await;
        first.shutdown().await;
    }

    /// The system clock until `broken` is set; then every reading panics, as a bug in a stage
    /// would.
    struct BreakableClock {
        broken: AtomicBool,
    }

    impl Clock for BreakableClock {
        fn now(&self) -> Timestamp {
            assert!(!self.broken.load(Ordering::SeqCst), "the clock is broken");
            SystemClock.now()
        }
    }

    /// A node whose engine died must say so: `/readyz` answers 503 `engine_failed` (a load
    /// balancer stops sending it jobs it would never fire), while `/healthz` still answers.
    #[tokio::test]
    async fn readyz_answers_503_once_a_pipeline_stage_died() {
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(BreakableClock {
            broken: AtomicBool::new(false),
        });
        let mut config = config(dir.path(), "127.0.0.1:0".parse().unwrap());
        config.allow_targets = vec!["127.0.0.0/8".parse().unwrap()];
        let node = Node::start(config, clock.clone())
            .await
            .expect("node starts");
        let base = format!("http://{}", node.addr());
        let http = reqwest::Client::new();
        let ready = http.get(format!("{base}/readyz")).send().await.unwrap();
        assert_eq!(ready.status(), 200);
        // A job due in a moment: the planner wakes for it and reads the clock.
        let created = http
            .post(format!("{base}/v1/jobs"))
            .json(&serde_json::json!({
                "schedule": {"after": "1s"},
                // Nothing listens on the discard port; the delivery is never reached anyway.
                "target": {"webhook": {"url": "http://127.0.0.1:9/"}},
            }))
            .send()
            .await
            .unwrap();
        assert_eq!(created.status(), 201);
        clock.broken.store(true, Ordering::SeqCst);
        tokio::time::timeout(Duration::from_secs(30), node.failed())
            .await
            .expect("the engine reports its dead stage");
        let ready = http.get(format!("{base}/readyz")).send().await.unwrap();
        assert_eq!(ready.status(), 503);
        let body: serde_json::Value = ready.json().await.unwrap();
        assert_eq!(body["error"]["code"], "engine_failed", "{body}");
        let health = http.get(format!("{base}/healthz")).send().await.unwrap();
        assert_eq!(health.status(), 200);
        tokio::time::timeout(Duration::from_secs(30), node.shutdown())
            .await
            .expect("a node with a dead engine still shuts down");
    }
}
