//! A job spec's JSON packed for storage: the fragments every spec repeats (key names, the
//! schedule's and target's skeleton, `https://`) become one byte each, and an RFC 3339 instant
//! becomes its number. A far-future one-off's 113 bytes of JSON pack into about 35, a third of
//! what the embedded store kept for a whole job.
//!
//! Packing is lossless at the byte level: unpacking gives back the exact JSON text that was
//! packed, whatever it holds, so the spec's serde shape stays the one definition of a spec.
//! serde_json writes no byte below 0x20 (control characters in strings are escaped), so such a
//! byte in a packed spec is always a code:
//! - `0x00` first: the value is packed (JSON text starts with `{`, so old rows need no rewrite);
//! - `0x01..=0x1d`: the fragment [`FRAGMENTS`]`[code - 1]`;
//! - `0x1e` + 6 bytes: a quoted instant of whole milliseconds, as a big-endian 48-bit count since
//!   the Unix epoch;
//! - `0x1f` + 8 bytes: a quoted instant, as a big-endian 64-bit count of nanoseconds.
//!
//! An instant is packed only when it prints back as exactly the same text. The codes are a
//! stored format: fragments may be appended (while codes remain), never changed or reordered.

use std::borrow::Cow;
use std::io::Write;

use jiff::Timestamp;

/// The first byte of a packed spec.
const PACKED: u8 = 0x00;
const MILLIS: u8 = 0x1e;
const NANOS: u8 = 0x1f;

/// The fragments, by code - 1. At each point the longest fragment that matches is taken.
const FRAGMENTS: [&str; MILLIS as usize - 1] = [
    r#"{"schedule":{"kind":{"at":"#,
    r#"{"schedule":{"kind":{"cron":{"expr":""#,
    r#"{"schedule":{"kind":{"every":{"interval":"#,
    r#"{"job_type":""#,
    r#"","schedule":{"kind":{"at":"#,
    r#"","schedule":{"kind":{"cron":{"expr":""#,
    r#"","schedule":{"kind":{"every":{"interval":"#,
    r#"","tz":""#,
    r#","anchor":"#,
    r#","start":"#,
    r#","end":"#,
    r#","max_runs":"#,
    r#","target":{"webhook":{"url":""#,
    r#","target":{"queue":{"name":""#,
    r#","target":{""#,
    r#","headers":{""#,
    r#","rate_limit":"#,
    r#","retry":{"max_attempts":"#,
    r#","initial_backoff":"#,
    r#","max_backoff":"#,
    r#","misfire":"#,
    r#"":{"connection":""#,
    r#""}}}"#,
    r#""}}"#,
    "}}",
    "https://",
    "http://",
    r#"",""#,
    r#"":""#,
];

/// `json` packed; see the module's documentation for the format.
pub(crate) fn pack(json: &str) -> Vec<u8> {
    let bytes = json.as_bytes();
    let mut out = Vec::with_capacity(bytes.len() / 2 + 8);
    out.push(PACKED);
    let mut i = 0;
    while i < bytes.len() {
        let rest = &json[i..];
        if let Some((code, len)) = longest_fragment(rest) {
            out.push(code);
            i += len;
        } else if let Some(len) = pack_instant(rest, &mut out) {
            i += len;
        } else {
            // Copy up to the next byte that could start a fragment or an instant.
            let run = bytes[i + 1..]
                .iter()
                .position(|b| matches!(b, b'{' | b'}' | b',' | b'"' | b'h'))
                .map_or(bytes.len() - i, |n| n + 1);
            out.extend_from_slice(&bytes[i..i + run]);
            i += run;
        }
    }
    out
}

/// The JSON text `stored` holds: itself when it is not packed.
pub(crate) fn unpack(stored: &[u8]) -> Result<Cow<'_, [u8]>, String> {
    let Some((&PACKED, packed)) = stored.split_first() else {
        return Ok(Cow::Borrowed(stored));
    };
    let mut out = Vec::with_capacity(packed.len() * 3);
    let mut i = 0;
    while i < packed.len() {
        let b = packed[i];
        i += 1;
        match b {
            0x20.. => out.push(b),
            MILLIS | NANOS => {
                let width = if b == MILLIS { 6 } else { 8 };
                let raw = packed
                    .get(i..i + width)
                    .ok_or("a packed spec ends inside an instant")?;
                i += width;
                let mut be = [0u8; 8];
                be[8 - width..].copy_from_slice(raw);
                // Sign-extend the 48-bit count.
                let n = i64::from_be_bytes(be) << (64 - 8 * width) >> (64 - 8 * width);
                let at = if b == MILLIS {
                    Timestamp::from_millisecond(n)
                } else {
                    Timestamp::from_nanosecond(n.into())
                }
                .map_err(|e| format!("a packed spec holds an instant out of range: {e}"))?;
                write!(out, "\"{at}\"").expect("writing to a Vec succeeds");
            }
            PACKED => return Err("a packed spec holds a stray 0x00".into()),
            code => out.extend_from_slice(FRAGMENTS[usize::from(code) - 1].as_bytes()),
        }
    }
    Ok(Cow::Owned(out))
}

/// Fragment indexes, longest fragment first, so the first that matches is the longest.
const LONGEST_FIRST: [usize; FRAGMENTS.len()] = {
    let mut order = [0; FRAGMENTS.len()];
    let mut i = 0;
    while i < order.len() {
        order[i] = i;
        let mut j = i;
        while j > 0 && FRAGMENTS[order[j - 1]].len() < FRAGMENTS[order[j]].len() {
            (order[j - 1], order[j]) = (order[j], order[j - 1]);
            j -= 1;
        }
        i += 1;
    }
    order
};

fn longest_fragment(rest: &str) -> Option<(u8, usize)> {
    let first = *rest.as_bytes().first()?;
    LONGEST_FIRST
        .iter()
        .map(|&i| (i, FRAGMENTS[i]))
        .find(|(_, f)| f.as_bytes()[0] == first && rest.starts_with(f))
        .map(|(i, f)| (i as u8 + 1, f.len()))
}

/// Packs a quoted instant at the start of `rest` into `out`; the bytes of `rest` it took.
fn pack_instant(rest: &str, out: &mut Vec<u8>) -> Option<usize> {
    // `"YYYY-MM-DDTHH:MM:SS[.fraction]Z"`: 22 to 32 bytes with the quotes.
    let b = rest.as_bytes();
    if b.len() < 22 || b[0] != b'"' || !b[1..5].iter().all(u8::is_ascii_digit) || b[5] != b'-' {
        return None;
    }
    let end = b[1..b.len().min(33)].iter().position(|&c| c == b'"')? + 1;
    let text = &rest[1..end];
    let at: Timestamp = text.parse().ok()?;
    if at.to_string() != text {
        return None;
    }
    let ms = at.as_millisecond();
    if at.subsec_nanosecond() % 1_000_000 == 0 && (-(1i64 << 47)..1i64 << 47).contains(&ms) {
        out.push(MILLIS);
        out.extend_from_slice(&ms.to_be_bytes()[2..]);
    } else {
        let ns = i64::try_from(at.as_nanosecond()).ok()?;
        out.push(NANOS);
        out.extend_from_slice(&ns.to_be_bytes());
    }
    Some(end + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(json: &str) -> usize {
        let packed = pack(json);
        let back = unpack(&packed).unwrap();
        assert_eq!(std::str::from_utf8(&back).unwrap(), json);
        packed.len()
    }

    #[test]
    fn a_one_off_webhook_spec_packs_to_a_third_and_back_exactly() {
        let json = r#"{"schedule":{"kind":{"at":"2026-12-15T10:11:12.345Z"}},"target":{"webhook":{"url":"https://api.example.com/hook"}}}"#;
        // 1 mark, 1 fragment, 7 instant, 1 `}}`, 1 target, 1 `https://`, 20 host and path, 1 `"}}}`.
        assert_eq!(round_trip(json), 33, "{:?}", pack(json));
    }

    #[test]
    fn instants_of_every_precision_and_range_come_back_as_written() {
        for at in [
            "2026-12-15T10:11:12Z",
            "1970-01-01T00:00:00Z",
            "1969-12-31T23:59:59.999Z",
            "2026-12-15T10:11:12.000000001Z",
            "2026-12-15T10:11:12.1234567Z",
            "0001-01-01T00:00:00Z",
            "9999-12-31T23:59:59.999999999Z",
            "-009999-01-02T01:59:59Z",
        ] {
            let json = format!(r#"{{"schedule":{{"kind":{{"at":"{at}"}}}}}}"#);
            round_trip(&json);
        }
    }

    #[test]
    fn text_that_only_looks_like_an_instant_or_a_code_is_kept_as_it_is() {
        for json in [
            r#"{"a":"2026-13-45T10:11:12Z"}"#,
            r#"{"a":"2026-12-15T10:11:12+01:00"}"#,
            r#"{"a":"2026-12-15T10:11:12.000Z"}"#,
            r#"{"a":"2026-12-15"}"#,
            r#"{"a":"\"2026-12-15T10:11:12Z\""}"#,
            r#"{"a":"\u0000\u001f\u001e","b":"h","c":"}}}"}"#,
            r#"{"a":"https://x/{\"schedule\":{\"kind\":{\"at\":\"2026-12-15T10:11:12Z\"}}}"}"#,
            "",
            "{",
        ] {
            round_trip(json);
        }
    }

    #[test]
    fn the_longest_matching_fragment_is_taken() {
        assert!(
            LONGEST_FIRST
                .windows(2)
                .all(|w| FRAGMENTS[w[0]].len() >= FRAGMENTS[w[1]].len())
        );
        let (code, len) = longest_fragment(r#"","schedule":{"kind":{"at":"2026"#).unwrap();
        assert_eq!((code, len), (5, r#"","schedule":{"kind":{"at":"#.len()));
    }

    #[test]
    fn a_value_that_is_not_packed_is_read_as_it_is_and_a_broken_one_is_an_error() {
        let json = br#"{"schedule":{}}"#;
        assert!(matches!(unpack(json), Ok(Cow::Borrowed(b)) if b == json));
        assert!(unpack(&[PACKED, MILLIS, 1, 2]).is_err());
        assert!(unpack(&[PACKED, b'{', PACKED]).is_err());
    }

    /// Every spec the API can hold, packed and unpacked, is the same JSON and the same spec.
    #[test]
    fn every_kind_of_spec_round_trips() {
        let specs = [
            serde_json::json!({"job_type": "reminder",
                "schedule": {"kind": {"cron": {"expr": "0 9 * * MON", "tz": "Europe/Berlin"}},
                             "start": "2026-01-01T00:00:00Z", "end": "2027-01-01T00:00:00.5Z",
                             "max_runs": 10},
                "target": {"webhook": {"url": "http://127.0.0.1:9/h?a=1",
                                       "headers": {"x-a": "b"}, "rate_limit": 5}},
                "retry": {"max_attempts": 3, "initial_backoff": 1000, "max_backoff": 60000},
                "misfire": {"all": {"window": 3600000}}}),
            serde_json::json!({"schedule": {"kind": {"every": {"interval": 60000,
                                                               "anchor": "2026-11-27T01:00:00Z"}}},
                "target": {"queue": {"name": "emails"}}, "misfire": "skip"}),
            serde_json::json!({"schedule": {"kind": {"at": "2026-11-27T01:00:00.123456789Z"}},
                "target": {"sqs": {"connection": "aws", "queue_url": "https://sqs/1/q",
                                   "group_id": "g"}}}),
            serde_json::json!({"schedule": {"kind": {"at": "2026-11-27T01:00:00Z"}},
                "target": {"amqp": {"connection": "rmq", "exchange": "", "routing_key": "r"}}}),
        ];
        for value in specs {
            let spec: hourglass_core::JobSpec = serde_json::from_value(value.clone()).unwrap();
            let json = serde_json::to_string(&spec).unwrap();
            let packed = pack(&json);
            assert!(packed.len() < json.len() / 2 + 20, "{json}: {packed:?}");
            let back: hourglass_core::JobSpec =
                serde_json::from_slice(&unpack(&packed).unwrap()).unwrap();
            assert_eq!(back, spec);
        }
    }
}
