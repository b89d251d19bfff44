//! Engine metrics, registered in a registry the server exposes at /metrics. No global registry:
//! several nodes in one test process keep separate figures.

use std::sync::{Arc, Mutex, PoisonError};

use prometheus_client::encoding::{EncodeLabelSet, EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::metrics::{MetricType, TypedMetric};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabels {
    pub target: &'static str,
    /// One of [`OUTCOMES`].
    pub outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CodeLabels {
    /// The HTTP status code, or `none` when no response came (connect error, timeout, refusal).
    pub code: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StageLabels {
    /// `dispatch` (due, waiting for a delivery slot) or `complete` (finished, waiting to be
    /// written).
    pub stage: &'static str,
}

/// The outcomes a delivery attempt (or a misfire skip) is counted under.
pub const OUTCOMES: [&str; 4] = ["delivered", "retry", "dead_letter", "skipped"];
/// Target kinds, as `Target::kind` names them.
const TARGET_KINDS: [&str; 9] = hourglass_core::Target::KINDS;

#[derive(Clone)]
pub struct Metrics {
    pub fired: Family<OutcomeLabels, Counter>,
    /// Seconds from due time to the start of the first delivery attempt (readable: the
    /// dashboard's summary reports its buckets).
    pub lateness: ReadableHistogram,
    pub skipped_occurrences: Counter,
    /// Occurrences dropped by overlap policies (`skip`, `buffer_one`).
    pub overlap_skipped: Counter,
    pub stale_completions: Counter,
    pub claimed: Counter,
    pub in_flight: Gauge,
    pub timer_queue: Gauge,
    /// Due occurrences waiting because their destination holds all the slots it may.
    pub destination_waiting: Gauge,
    /// Destinations with deliveries running or waiting.
    pub destinations_busy: Gauge,
    /// Due occurrences waiting for one of the node's delivery slots.
    pub slot_waiting: Gauge,
    /// Due occurrences waiting because their namespace is past its delivery quota.
    pub quota_waiting: Gauge,
    /// Breakers open (or probing) on this node.
    pub breakers_open: Gauge,
    /// Occurrences handed back because their destination's breaker was open.
    pub breaker_deferred: Counter,
    pub store_errors: Counter,
    /// Claims found taken over or fenced when this node tried to renew them.
    pub lost_leases: Counter,
    /// Occurrences not sent because their claim was taken back (a pause, cancel or edit, or a
    /// lost lease) while they waited after the timer: for a slot, a rate, a quota or a batch.
    pub withdrawn: Counter,
    /// Occurrences whose handling panicked: dead-lettered as `internal_error`, job failed.
    pub quarantined: Counter,
    /// Queue messages handed to workers (each lease of each message, redeliveries included).
    pub queue_leased: Counter,
    pub webhook_responses: Family<CodeLabels, Counter>,
    /// Deliveries in each batched webhook request (targets with `batch`).
    pub webhook_batch_size: Histogram,
    pub purged_jobs: Counter,
    pub purged_runs: Counter,
    pub purged_dead_letters: Counter,
    pub stage_queue: Family<StageLabels, Gauge>,
}

impl Metrics {
    pub fn new(registry: &mut Registry) -> Self {
        let m = Self {
            fired: Family::default(),
            lateness: ReadableHistogram::new(&[
                0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0, 30.0, 120.0,
            ]),
            skipped_occurrences: Counter::default(),
            overlap_skipped: Counter::default(),
            stale_completions: Counter::default(),
            claimed: Counter::default(),
            in_flight: Gauge::default(),
            timer_queue: Gauge::default(),
            destination_waiting: Gauge::default(),
            destinations_busy: Gauge::default(),
            slot_waiting: Gauge::default(),
            quota_waiting: Gauge::default(),
            breakers_open: Gauge::default(),
            breaker_deferred: Counter::default(),
            store_errors: Counter::default(),
            lost_leases: Counter::default(),
            withdrawn: Counter::default(),
            quarantined: Counter::default(),
            queue_leased: Counter::default(),
            webhook_responses: Family::default(),
            webhook_batch_size: Histogram::new([
                1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0,
            ]),
            purged_jobs: Counter::default(),
            purged_runs: Counter::default(),
            purged_dead_letters: Counter::default(),
            stage_queue: Family::default(),
        };
        for stage in ["dispatch", "complete"] {
            drop(m.stage_queue.get_or_create(&StageLabels { stage }));
        }
        // A family prints nothing until a series exists. Create every outcome at zero, so a fresh
        // node exposes `hourglass_deliveries_total` and rate() over a first failure has a base.
        for target in TARGET_KINDS {
            for outcome in OUTCOMES {
                // The returned guard only reads the new series; drop it at once.
                drop(m.fired.get_or_create(&OutcomeLabels { target, outcome }));
            }
        }
        registry.register(
            "hourglass_deliveries",
            "Occurrence delivery attempts and skips by target kind and outcome",
            m.fired.clone(),
        );
        registry.register(
            "hourglass_fire_lateness_seconds",
            "Time from an occurrence's due time to its first delivery attempt",
            m.lateness.clone(),
        );
        registry.register(
            "hourglass_misfire_skipped_occurrences",
            "Occurrences dropped by misfire policies",
            m.skipped_occurrences.clone(),
        );
        registry.register(
            "hourglass_overlap_skipped_occurrences",
            "Occurrences dropped by overlap policies because the previous one was still in flight",
            m.overlap_skipped.clone(),
        );
        registry.register(
            "hourglass_stale_completions",
            "Completions refused because their lease was no longer current",
            m.stale_completions.clone(),
        );
        registry.register(
            "hourglass_claimed_occurrences",
            "Occurrences claimed from the store by this node",
            m.claimed.clone(),
        );
        registry.register(
            "hourglass_in_flight",
            "Occurrences claimed by this node and not yet completed",
            m.in_flight.clone(),
        );
        registry.register(
            "hourglass_timer_queue",
            "Claimed occurrences waiting in the timer for their due instant",
            m.timer_queue.clone(),
        );
        registry.register(
            "hourglass_destination_waiting",
            "Due occurrences waiting for a slot at their destination, which is at its cap (destination_concurrency)",
            m.destination_waiting.clone(),
        );
        registry.register(
            "hourglass_delivery_waiting",
            "Due occurrences waiting for a delivery slot (delivery_concurrency), served in turns by namespace",
            m.slot_waiting.clone(),
        );
        registry.register(
            "hourglass_quota_waiting",
            "Due occurrences waiting because their namespace is past its deliveries_per_second quota",
            m.quota_waiting.clone(),
        );
        registry.register(
            "hourglass_breakers_open",
            "Destinations (per namespace) whose circuit breaker is open or probing",
            m.breakers_open.clone(),
        );
        registry.register(
            "hourglass_breaker_deferred",
            "Occurrences handed back, attempt not counted, because their destination's breaker was open",
            m.breaker_deferred.clone(),
        );
        registry.register(
            "hourglass_destinations_busy",
            "Destinations (scheme, host, port) with deliveries running or waiting",
            m.destinations_busy.clone(),
        );
        registry.register(
            "hourglass_store_errors",
            "Store calls by the engine that failed and were retried",
            m.store_errors.clone(),
        );
        registry.register(
            "hourglass_lost_leases",
            "Claims this node gave up: found taken over or fenced when renewing them, or their lease ran out before they fired",
            m.lost_leases.clone(),
        );
        registry.register(
            "hourglass_withdrawn_occurrences",
            "Occurrences not sent because a pause, cancel or edit of their job (or a lost lease) reached them while they waited for a slot, a rate, a quota or a batch",
            m.withdrawn.clone(),
        );
        registry.register(
            "hourglass_quarantined_occurrences",
            "Occurrences whose handling panicked: dead-lettered with reason internal_error and their job failed",
            m.quarantined.clone(),
        );
        registry.register(
            "hourglass_webhook_responses",
            "Webhook delivery attempts by HTTP status code (`none`: no response)",
            m.webhook_responses.clone(),
        );
        registry.register(
            "hourglass_webhook_batch_size",
            "Deliveries in each batched webhook request (targets with batch)",
            m.webhook_batch_size.clone(),
        );
        registry.register(
            "hourglass_stage_queue",
            "Occurrences waiting between engine stages (the timer's are hourglass_timer_queue)",
            m.stage_queue.clone(),
        );
        registry.register(
            "hourglass_purged_jobs",
            "Finished jobs deleted by the retention sweep",
            m.purged_jobs.clone(),
        );
        registry.register(
            "hourglass_purged_runs",
            "Run records deleted by the retention sweep",
            m.purged_runs.clone(),
        );
        registry.register(
            "hourglass_purged_dead_letters",
            "Dead letters deleted by the retention sweep",
            m.purged_dead_letters.clone(),
        );
        registry.register(
            "hourglass_queue_leased",
            "Queue messages leased to workers, redeliveries included",
            m.queue_leased.clone(),
        );
        m
    }
}

impl Metrics {
    /// Delivery attempts and skips on this node since it started, by outcome (summed over target
    /// kinds), in the order of [`OUTCOMES`].
    pub fn deliveries_by_outcome(&self) -> [(&'static str, u64); OUTCOMES.len()] {
        OUTCOMES.map(|outcome| {
            let total = TARGET_KINDS
                .iter()
                .filter_map(|&target| {
                    self.fired
                        .get(&OutcomeLabels { target, outcome })
                        .map(|c| c.get())
                })
                .sum();
            (outcome, total)
        })
    }
}

/// A classic histogram whose figures can be read back, which prometheus-client's [`Histogram`]
/// does not allow (it only encodes them). It is encoded exactly as a `Histogram` with the same
/// bounds would be, so /metrics does not change.
#[derive(Clone, Debug)]
pub struct ReadableHistogram {
    inner: Arc<Mutex<HistogramFigures>>,
}

/// A [`ReadableHistogram`]'s figures at one moment.
#[derive(Clone, Debug, PartialEq)]
pub struct HistogramFigures {
    pub sum: f64,
    pub count: u64,
    /// (upper bound, observations in this bucket alone, not cumulative), by bound; the last
    /// bound is `+Inf`.
    pub buckets: Vec<(f64, u64)>,
}

impl ReadableHistogram {
    /// A histogram over the finite bounds in `bounds` (ascending), plus the implicit `+Inf`.
    pub fn new(bounds: &[f64]) -> Self {
        let buckets = bounds
            .iter()
            .copied()
            .filter(|b| b.is_finite())
            .chain(std::iter::once(f64::INFINITY))
            .map(|b| (b, 0))
            .collect();
        Self {
            inner: Arc::new(Mutex::new(HistogramFigures {
                sum: 0.0,
                count: 0,
                buckets,
            })),
        }
    }

    pub fn observe(&self, v: f64) {
        let mut f = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        f.sum += v;
        f.count += 1;
        // As prometheus-client counts: NaN in the last bucket, anything else in the first whose
        // bound holds it.
        let bucket = if v.is_nan() {
            f.buckets.last_mut()
        } else {
            f.buckets.iter_mut().find(|(bound, _)| *bound >= v)
        };
        if let Some((_, n)) = bucket {
            *n += 1;
        }
    }

    pub fn figures(&self) -> HistogramFigures {
        self.inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl TypedMetric for ReadableHistogram {
    const TYPE: MetricType = MetricType::Histogram;
}

impl EncodeMetric for ReadableHistogram {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        let f = self.figures();
        encoder.encode_histogram::<NoLabelSet>(f.sum, f.count, &f.buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The readable histogram prints exactly what prometheus-client's own does.
    #[test]
    fn a_readable_histogram_encodes_as_a_histogram() {
        let bounds = [0.001, 0.01, 0.1, 1.0];
        let ours = ReadableHistogram::new(&bounds);
        let theirs = Histogram::new(bounds);
        for v in [0.0005, 0.001, 0.05, 0.5, 3.0, 3.0, f64::NAN] {
            ours.observe(v);
            theirs.observe(v);
        }
        let encode = |register: &dyn Fn(&mut Registry)| {
            let mut registry = Registry::default();
            register(&mut registry);
            let mut text = String::new();
            prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
            text
        };
        let a = encode(&|r| r.register("x", "h", ours.clone()));
        let b = encode(&|r| r.register("x", "h", theirs.clone()));
        assert_eq!(a, b);
        assert!(a.contains("x_bucket{le=\"0.1\"} 3"), "{a}");
        let f = ours.figures();
        assert_eq!(f.count, 7);
        assert_eq!(
            f.buckets.iter().map(|b| b.1).collect::<Vec<_>>(),
            [2, 0, 1, 1, 3]
        );
    }
}
