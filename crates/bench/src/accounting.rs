//! What the receiver saw, held against what was submitted. Pure: no clocks, no I/O, so the counts
//! and percentiles can be checked on hand-made inputs.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::fmt;

use hourglass_testkit::percentile;

/// A delivery id (`<job id, 32 hex digits>_<due unix ms>`) in a compact, hashable form.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DeliveryKey {
    pub job: u128,
    pub due_ms: i64,
}

impl DeliveryKey {
    pub fn new(job: u128, due_ms: i64) -> Self {
        Self { job, due_ms }
    }

    /// Parses the `webhook-id` header. `None` for anything that is not an Hourglass delivery id.
    pub fn parse(text: &[u8]) -> Option<Self> {
        let text = std::str::from_utf8(text).ok()?;
        let (job, due) = text.split_once('_')?;
        if job.len() != 32 {
            return None;
        }
        Some(Self {
            job: u128::from_str_radix(job, 16).ok()?,
            due_ms: due.parse().ok()?,
        })
    }
}

impl fmt::Display for DeliveryKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:032x}_{}", self.job, self.due_ms)
    }
}

/// A job id as the API prints it (hyphenated or not) → the number inside delivery ids.
pub fn parse_job_id(text: &str) -> Option<u128> {
    let hex: String = text.chars().filter(|c| *c != '-').collect();
    if hex.len() != 32 {
        return None;
    }
    u128::from_str_radix(&hex, 16).ok()
}

/// One request as the receiver recorded it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Receipt {
    pub id: DeliveryKey,
    /// The `hourglass-due-at` header, unix ms (`i64::MIN` when absent or unparsable).
    pub due_header_ms: i64,
    /// Wall clock at arrival, unix ms.
    pub received_ms: i64,
}

/// Lateness percentiles over occurrences (first receipt of each), in ms; nearest-rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lateness {
    pub p50: i64,
    pub p90: i64,
    pub p99: i64,
    pub p999: i64,
    pub max: i64,
}

impl Lateness {
    /// `None` for an empty sample. Sorts `values` in place.
    pub fn of(values: &mut [i64]) -> Option<Self> {
        if values.is_empty() {
            return None;
        }
        values.sort_unstable();
        Some(Self {
            p50: percentile(values, 0.50),
            p90: percentile(values, 0.90),
            p99: percentile(values, 0.99),
            p999: percentile(values, 0.999),
            max: values[values.len() - 1],
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Accounting {
    /// Occurrences that should have been delivered.
    pub expected: u64,
    /// Distinct expected delivery ids received at least once.
    pub executed: u64,
    /// Expected delivery ids never received.
    pub missing: u64,
    /// Receipts of an expected delivery id beyond its first.
    pub duplicates: u64,
    /// Receipts (first or not) that arrived before their due time.
    pub early: u64,
    /// Receipts whose delivery id was not expected (another job, or outside the window).
    pub unexpected: u64,
    /// Receipts whose `hourglass-due-at` header disagrees with the due time of their delivery id.
    pub due_mismatch: u64,
    pub lateness: Option<Lateness>,
    /// First and last arrival among counted (expected) receipts, unix ms.
    pub first_received_ms: Option<i64>,
    pub last_received_ms: Option<i64>,
}

impl Accounting {
    /// Fires per second between the first and the last counted arrival.
    pub fn fire_rate_per_s(&self) -> Option<f64> {
        let (first, last) = (self.first_received_ms?, self.last_received_ms?);
        if self.executed < 2 || last <= first {
            return None;
        }
        Some((self.executed - 1) as f64 * 1000.0 / (last - first) as f64)
    }
}

/// Holds the receipts against the expected occurrences (delivery id → due ms). Lateness is taken
/// per occurrence, from its earliest receipt; early counts every early receipt.
pub fn account(expected: &HashMap<DeliveryKey, i64>, receipts: &[Receipt]) -> Accounting {
    let mut first: HashMap<DeliveryKey, i64> = HashMap::with_capacity(expected.len());
    let mut acc = Accounting {
        expected: expected.len() as u64,
        ..Accounting::default()
    };
    for receipt in receipts {
        let Some(&due) = expected.get(&receipt.id) else {
            acc.unexpected += 1;
            continue;
        };
        if receipt.received_ms < due {
            acc.early += 1;
        }
        if receipt.due_header_ms != due {
            acc.due_mismatch += 1;
        }
        acc.first_received_ms = Some(
            acc.first_received_ms
                .map_or(receipt.received_ms, |f| f.min(receipt.received_ms)),
        );
        acc.last_received_ms = Some(
            acc.last_received_ms
                .map_or(receipt.received_ms, |l| l.max(receipt.received_ms)),
        );
        match first.entry(receipt.id) {
            Entry::Occupied(mut seen) => {
                acc.duplicates += 1;
                if receipt.received_ms < *seen.get() {
                    seen.insert(receipt.received_ms);
                }
            }
            Entry::Vacant(slot) => {
                slot.insert(receipt.received_ms);
            }
        }
    }
    acc.executed = first.len() as u64;
    acc.missing = acc.expected - acc.executed;
    let mut lateness: Vec<i64> = first
        .iter()
        .map(|(id, received)| received - expected[id])
        .collect();
    acc.lateness = Lateness::of(&mut lateness);
    acc
}

/// Expected occurrences not received within `limit_ms` of their due time: received later than
/// that (by their earliest receipt), or not at all.
pub fn not_within(
    expected: &HashMap<DeliveryKey, i64>,
    receipts: &[Receipt],
    limit_ms: i64,
) -> u64 {
    let mut first: HashMap<DeliveryKey, i64> = HashMap::with_capacity(expected.len());
    for receipt in receipts.iter().filter(|r| expected.contains_key(&r.id)) {
        first
            .entry(receipt.id)
            .and_modify(|at| *at = (*at).min(receipt.received_ms))
            .or_insert(receipt.received_ms);
    }
    expected
        .iter()
        .filter(|(id, due)| first.get(id).is_none_or(|at| at - *due > limit_ms))
        .count() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn receipt(id: DeliveryKey, received_ms: i64) -> Receipt {
        Receipt {
            id,
            due_header_ms: id.due_ms,
            received_ms,
        }
    }

    #[test]
    fn delivery_ids_round_trip() {
        let key = DeliveryKey::new(0x0190_abcd_0000_7000_8000_0000_0000_0001, 1_700_000_000_123);
        let text = key.to_string();
        assert_eq!(text, "0190abcd000070008000000000000001_1700000000123");
        assert_eq!(DeliveryKey::parse(text.as_bytes()), Some(key));
        assert_eq!(DeliveryKey::parse(b"nope"), None);
        assert_eq!(DeliveryKey::parse(b"abc_12"), None);
        assert_eq!(
            parse_job_id("0190abcd-0000-7000-8000-000000000001"),
            Some(key.job)
        );
        assert_eq!(parse_job_id("0190abcd"), None);
    }

    #[test]
    fn nearest_rank_percentiles() {
        let mut values: Vec<i64> = (1..=1000).rev().collect();
        let l = Lateness::of(&mut values).unwrap();
        assert_eq!(
            (l.p50, l.p90, l.p99, l.p999, l.max),
            (500, 900, 990, 999, 1000)
        );
        let mut one = vec![7];
        let l = Lateness::of(&mut one).unwrap();
        assert_eq!((l.p50, l.p999, l.max), (7, 7, 7));
        assert_eq!(Lateness::of(&mut []), None);
        // Few values: p99 of ten is the largest.
        let mut ten: Vec<i64> = (0..10).collect();
        let l = Lateness::of(&mut ten).unwrap();
        assert_eq!((l.p50, l.p90, l.p99), (4, 8, 9));
    }

    /// 100 expected occurrences, each due at 1000 + i ms. Occurrence i arrives i ms late, except:
    /// 90..100 never arrive, 0..5 arrive twice (the second 50 ms later), 10 and 11 arrive 3 ms
    /// early, 20 arrives a second time *earlier* than its first receipt, plus two receipts for a
    /// job that was never submitted and one with a wrong due header.
    #[test]
    fn counts_duplicates_early_missing_and_lateness() {
        let job = |i: u128| 0xabc0_0000_0000_0000_0000_0000_0000_0000 + i;
        let expected: HashMap<DeliveryKey, i64> = (0..100)
            .map(|i| {
                let due = 1000 + i as i64;
                (DeliveryKey::new(job(i), due), due)
            })
            .collect();
        let key = |i: u128| DeliveryKey::new(job(i), 1000 + i as i64);
        let mut receipts = Vec::new();
        for i in 0..90u128 {
            let due = 1000 + i as i64;
            let received = match i {
                10 | 11 => due - 3,
                20 => due + 40,
                _ => due + i as i64,
            };
            receipts.push(receipt(key(i), received));
        }
        for i in 0..5u128 {
            receipts.push(receipt(key(i), 1000 + i as i64 + i as i64 + 50));
        }
        // A later-logged but earlier-received duplicate of 20: lateness uses the earliest (20 ms).
        receipts.push(receipt(key(20), 1000 + 20 + 20));
        // Not ours.
        receipts.push(receipt(DeliveryKey::new(7, 1000), 1001));
        receipts.push(receipt(DeliveryKey::new(job(1), 999_999), 1_000_000));
        // Right id, wrong due header.
        receipts.push(Receipt {
            id: key(30),
            due_header_ms: 5,
            received_ms: 1000 + 30 + 30,
        });

        let acc = account(&expected, &receipts);
        assert_eq!(acc.expected, 100);
        assert_eq!(acc.executed, 90);
        assert_eq!(acc.missing, 10);
        assert_eq!(acc.duplicates, 5 + 1 + 1);
        assert_eq!(acc.early, 2);
        assert_eq!(acc.unexpected, 2);
        assert_eq!(acc.due_mismatch, 1);
        assert_eq!(acc.first_received_ms, Some(1000));
        assert_eq!(acc.last_received_ms, Some(1000 + 89 + 89));

        // Lateness per occurrence: i for i in 0..90 except 10 and 11 (−3 each).
        let mut want: Vec<i64> = (0..90)
            .map(|i| if i == 10 || i == 11 { -3 } else { i })
            .collect();
        want.sort_unstable();
        let lateness = acc.lateness.unwrap();
        assert_eq!(lateness.p50, want[44]);
        assert_eq!(lateness.p50, 44);
        assert_eq!(lateness.p90, want[80]);
        assert_eq!(lateness.p99, want[89]);
        assert_eq!(lateness.p999, 89);
        assert_eq!(lateness.max, 89);
        let rate = acc.fire_rate_per_s().unwrap();
        assert!((rate - 89.0 * 1000.0 / 178.0).abs() < 1e-9);
    }

    /// Four occurrences due at 1000: one on time, one 1 s late to the ms, one a ms later, one
    /// never; a late duplicate of the first and a stray receipt change nothing.
    #[test]
    fn counts_what_did_not_arrive_within_a_limit() {
        let key = |i: u128| DeliveryKey::new(i, 1000);
        let expected: HashMap<DeliveryKey, i64> = (0..4).map(|i| (key(i), 1000)).collect();
        let receipts = [
            receipt(key(0), 1002),
            receipt(key(0), 9000),
            receipt(key(1), 2000),
            receipt(key(2), 2001),
            receipt(DeliveryKey::new(9, 1000), 5000),
        ];
        assert_eq!(
            not_within(&expected, &receipts, 1000),
            2,
            "one a ms past the limit, one never"
        );
        assert_eq!(not_within(&expected, &receipts, 999), 3);
        assert_eq!(
            not_within(&expected, &receipts, 30_000),
            1,
            "only the missing one"
        );
        assert_eq!(not_within(&HashMap::new(), &receipts, 0), 0);
    }

    #[test]
    fn nothing_expected_nothing_received() {
        let acc = account(&HashMap::new(), &[]);
        assert_eq!(acc, Accounting::default());
        assert_eq!(acc.fire_rate_per_s(), None);
    }

    #[test]
    fn everything_missing() {
        let expected: HashMap<DeliveryKey, i64> =
            (0..3).map(|i| (DeliveryKey::new(i, 10), 10)).collect();
        let stray = [receipt(DeliveryKey::new(9, 10), 11)];
        let acc = account(&expected, &stray);
        assert_eq!(
            (acc.executed, acc.missing, acc.unexpected, acc.lateness),
            (0, 3, 1, None)
        );
    }
}
