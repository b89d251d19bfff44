//! API metrics, registered beside the engine's in the node's one registry and served with them at
//! `/metrics`. They live here rather than in the engine because their labels are HTTP notions
//! (route templates, methods, status classes) that only this crate knows.

use axum::extract::{MatchedPath, Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::Response;
use hourglass_core::JobState;
use hourglass_core::ScheduleKind;
use hourglass_engine::{Metrics, Scheduler};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant};
use tokio::sync::Mutex;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    pub method: &'static str,
    /// The route template (`/v1/jobs/{id}`), never the raw path, so ids do not become series;
    /// `unmatched` for paths no route serves.
    pub route: String,
    /// `2xx`, `4xx`, `5xx`, ...: the class, not the code, keeps the series few.
    pub status: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CreatedLabels {
    /// `at` (including `after`, which is stored as the `at` it resolves to), `cron` or `every`.
    pub schedule: &'static str,
}

const SCHEDULE_KINDS: [&str; 3] = ["at", "cron", "every"];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StateLabels {
    pub state: &'static str,
}

/// `hourglass_build_info`'s labels: what this binary was built with. Nodes that disagree on the
/// tz database compute different fire times for the same cron job, so operators compare these.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BuildLabels {
    pub version: &'static str,
    /// The IANA release of the tz database compiled into the binary, e.g. `2025b`.
    pub tzdata: &'static str,
}

#[derive(Clone)]
pub struct ApiMetrics {
    pub requests: Family<RequestLabels, Counter>,
    pub jobs_created: Family<CreatedLabels, Counter>,
    store: StoreFigures,
    /// The engine's metrics, read (not scraped) for the dashboard's summary.
    engine: Metrics,
}

/// Whole-store figures (jobs by state, backlog, queue totals), read from the store when
/// /metrics is scraped, at most once per `NodeConfig::store_figures_ttl` (default
/// [`STORE_FIGURES_TTL`]): counting may scan the store.
#[derive(Clone)]
struct StoreFigures {
    jobs: Family<StateLabels, Gauge>,
    backlog: Gauge,
    backlog_age: Gauge<f64, AtomicU64>,
    queue_messages: Family<StateLabels, Gauge>,
    queue_oldest_age: Gauge<f64, AtomicU64>,
    sampled: Arc<Mutex<Option<Instant>>>,
    /// How long a sample is reused (`NodeConfig::store_figures_ttl`).
    ttl: Duration,
}

/// The default of `NodeConfig::store_figures_ttl`.
pub const STORE_FIGURES_TTL: Duration = Duration::from_secs(10);

impl ApiMetrics {
    pub fn new(registry: &mut Registry, engine: &Metrics, store_figures_ttl: Duration) -> Self {
        let m = Self {
            engine: engine.clone(),
            requests: Family::default(),
            jobs_created: Family::default(),
            store: StoreFigures {
                jobs: Family::default(),
                backlog: Gauge::default(),
                backlog_age: Gauge::default(),
                queue_messages: Family::default(),
                queue_oldest_age: Gauge::default(),
                sampled: Arc::new(Mutex::new(None)),
                ttl: store_figures_ttl,
            },
        };
        let f = &m.store;
        registry.register(
            "hourglass_jobs",
            "Jobs by state (sampled from the store at most every 10 s)",
            f.jobs.clone(),
        );
        registry.register(
            "hourglass_due_backlog",
            "Occurrences past their fire time that no node has claimed yet (webhook targets)",
            f.backlog.clone(),
        );
        registry.register(
            "hourglass_due_backlog_age_seconds",
            "How long the oldest unclaimed past-due occurrence has been due (0 when none)",
            f.backlog_age.clone(),
        );
        registry.register(
            "hourglass_queue_messages",
            "Pull-queue messages across all queues: available, in_flight (leased) or scheduled",
            f.queue_messages.clone(),
        );
        registry.register(
            "hourglass_queue_oldest_available_age_seconds",
            "How long the oldest available queue message has waited (0 when none)",
            f.queue_oldest_age.clone(),
        );
        // Present at zero from the start (a family prints nothing until a series exists). The
        // request counter is not: its label combinations are only known as requests come.
        for schedule in SCHEDULE_KINDS {
            drop(m.jobs_created.get_or_create(&CreatedLabels { schedule }));
        }
        let build = Family::<BuildLabels, Gauge>::default();
        build
            .get_or_create(&BuildLabels {
                version: env!("CARGO_PKG_VERSION"),
                tzdata: hourglass_core::cron::tzdata_version(),
            })
            .set(1);
        registry.register(
            "hourglass_build_info",
            "Always 1; the labels name this binary's version and its bundled tz database release",
            build,
        );
        registry.register(
            "hourglass_api_requests",
            "API requests answered, by method, route template and status class",
            m.requests.clone(),
        );
        registry.register(
            "hourglass_jobs_created",
            "Jobs newly stored through the API (idempotent repeats excluded), by schedule kind",
            m.jobs_created.clone(),
        );
        m
    }

    /// Refreshes the whole-store figures if the last sample is older than the TTL. A failure
    /// keeps the previous figures (the store error is counted by the store's own metrics).
    pub async fn refresh_store_figures(&self, scheduler: &Scheduler) {
        let f = &self.store;
        let mut sampled = f.sampled.lock().await;
        if sampled.is_some_and(|at| at.elapsed() < f.ttl) {
            return;
        }
        let now = scheduler.now();
        let Ok(g) = scheduler.gauges().await else {
            return;
        };
        *sampled = Some(Instant::now());
        for (state, n) in &g.jobs_by_state {
            f.jobs
                .get_or_create(&StateLabels {
                    state: state.as_str(),
                })
                .set(*n as i64);
        }
        let age = |t: Option<jiff::Timestamp>| {
            t.map_or(0.0, |t| {
                ((now.as_millisecond() - t.as_millisecond()).max(0)) as f64 / 1000.0
            })
        };
        f.backlog.set(g.due_backlog as i64);
        f.backlog_age.set(age(g.oldest_backlog));
        for (state, n) in [
            ("available", g.queue_available),
            ("in_flight", g.queue_in_flight),
            ("scheduled", g.queue_scheduled),
        ] {
            f.queue_messages
                .get_or_create(&StateLabels { state })
                .set(n as i64);
        }
        f.queue_oldest_age.set(age(g.oldest_queue_available));
    }

    /// The figures the dashboard shows, as JSON (`GET /v1/summary`): this node's delivery
    /// counters and gauges, and the whole store's figures (refreshed as for /metrics, so at most
    /// every `store_figures_ttl`). Node-wide and store-wide: every namespace's.
    pub async fn summary(&self, scheduler: &Scheduler) -> hourglass_api::Summary {
        use hourglass_api::{
            Lateness, LatenessBucket, NodeFigures, QueueFigures, StoreFigures, Summary,
        };
        self.refresh_store_figures(scheduler).await;
        let e = &self.engine;
        let deliveries = e
            .deliveries_by_outcome()
            .into_iter()
            .map(|(outcome, n)| (outcome.to_string(), n))
            .collect();
        let lateness = e.lateness.figures();
        // Cumulative, as Prometheus buckets are; the implicit +Inf bucket is `count`.
        let mut seen = 0;
        let buckets = lateness
            .buckets
            .iter()
            .filter_map(|&(le, n)| {
                seen += n;
                le.is_finite().then_some(LatenessBucket { count: seen, le })
            })
            .collect();
        let f = &self.store;
        let state_count = |family: &Family<StateLabels, Gauge>, state: &'static str| {
            family
                .get(&StateLabels { state })
                .map_or(0, |g| g.get().max(0))
        };
        let jobs = JobState::ALL
            .iter()
            .map(|s| (s.as_str().to_string(), state_count(&f.jobs, s.as_str())))
            .collect();
        Summary {
            node: NodeFigures {
                deliveries,
                fire_lateness: Lateness {
                    buckets,
                    count: lateness.count,
                    sum_seconds: lateness.sum,
                },
                in_flight: e.in_flight.get().max(0),
                timer_queue: e.timer_queue.get().max(0),
            },
            store: StoreFigures {
                due_backlog: f.backlog.get().max(0),
                due_backlog_age_seconds: f.backlog_age.get(),
                jobs,
                queue_messages: QueueFigures {
                    available: state_count(&f.queue_messages, "available"),
                    in_flight: state_count(&f.queue_messages, "in_flight"),
                    scheduled: state_count(&f.queue_messages, "scheduled"),
                },
            },
        }
    }

    pub fn job_created(&self, kind: &ScheduleKind) {
        let schedule = match kind {
            ScheduleKind::At(_) => SCHEDULE_KINDS[0],
            ScheduleKind::Cron(_) => SCHEDULE_KINDS[1],
            ScheduleKind::Every { .. } => SCHEDULE_KINDS[2],
        };
        self.jobs_created
            .get_or_create(&CreatedLabels { schedule })
            .inc();
    }
}

/// Middleware counting every answered request. Installed with `Router::layer`, which wraps each
/// route, so the matched route template is in the request's extensions here.
pub async fn count_requests(
    State(metrics): State<ApiMetrics>,
    request: Request,
    next: Next,
) -> Response {
    let method = method_label(request.method());
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or("unmatched", MatchedPath::as_str)
        .to_string();
    let response = next.run(request).await;
    let status = match response.status().as_u16() / 100 {
        1 => "1xx",
        2 => "2xx",
        3 => "3xx",
        4 => "4xx",
        _ => "5xx",
    };
    metrics
        .requests
        .get_or_create(&RequestLabels {
            method,
            route,
            status,
        })
        .inc();
    response
}

/// Standard methods by name; anything else is one `other` series, whatever a client invents.
fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PATCH => "PATCH",
        Method::DELETE => "DELETE",
        Method::PUT => "PUT",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        _ => "other",
    }
}
