//! A job spec's JSON packed for storage: the fragments every spec repeats (key names, the
//! schedule's and target's skeleton, `https://`) become one byte each, and an RFC 3339 instant
//! becomes its number. A one-off webhook job's 113 bytes of JSON pack into 33.
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
//! An instant is packed only in the one form jiff prints a timestamp in, which this module reads
//! and writes itself (the tests hold it to jiff's reading and printing): parsing and printing
//! with jiff cost about six times as many instructions. The codes are a stored format: fragments
//! may be appended (while codes remain), never changed or reordered.

use std::borrow::Cow;

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
    // A fragment is up to 41 bytes for its one, an instant 32 for its 7 or 9.
    let mut out = Vec::with_capacity(packed.len() * 4 + 64);
    let mut i = 0;
    while i < packed.len() {
        // Literal bytes up to the next code.
        let literal = packed[i..]
            .iter()
            .position(|&b| b < 0x20)
            .unwrap_or(packed.len() - i);
        out.extend_from_slice(&packed[i..i + literal]);
        i += literal;
        let Some(&b) = packed.get(i) else { break };
        i += 1;
        match b {
            MILLIS | NANOS => {
                let (ns, len) =
                    read_instant(&packed[i - 1..]).ok_or("a packed spec ends inside an instant")?;
                i += len - 1;
                out.push(b'"');
                print_instant(ns, &mut out)?;
                out.push(b'"');
            }
            PACKED => return Err("a packed spec holds a stray 0x00".into()),
            code => {
                let fragment = FRAGMENTS
                    .get(usize::from(code) - 1)
                    .ok_or("a packed spec holds an unknown code")?;
                out.extend_from_slice(fragment.as_bytes());
            }
        }
    }
    Ok(Cow::Owned(out))
}

/// A packed one-off spec's instant: where its code and number are in `stored`, and its
/// nanoseconds since the Unix epoch. `None` unless the spec opens with its schedule's `at`
/// (`{"schedule":{"kind":{"at":` or `{"job_type":"…","schedule":{"kind":{"at":`, each one
/// fragment, neither of which can occur inside a JSON string) followed by a packed instant.
/// Two such specs whose bytes differ only there differ only in that instant.
pub(crate) fn one_off_instant(stored: &[u8]) -> Option<(std::ops::Range<usize>, i128)> {
    const AT: u8 = 1;
    const JOB_TYPE: u8 = 4;
    const JOB_TYPE_THEN_AT: u8 = 5;
    let Some((&PACKED, rest)) = stored.split_first() else {
        return None;
    };
    let at = match *rest.first()? {
        AT => 2,
        JOB_TYPE => {
            // The type's text up to the fragment that ends it; any other code inside it is a
            // fragment of the text (an instant there would be a second instant: give up).
            let mut i = 2;
            loop {
                match *stored.get(i)? {
                    JOB_TYPE_THEN_AT => break i + 1,
                    MILLIS | NANOS => return None,
                    _ => i += 1,
                }
            }
        }
        _ => return None,
    };
    let (ns, len) = read_instant(stored.get(at..)?)?;
    Some((at..at + len, ns))
}

/// The packed instant `bytes` start with (its code, then its number): its nanoseconds since the
/// Unix epoch, and how many bytes it takes.
fn read_instant(bytes: &[u8]) -> Option<(i128, usize)> {
    let width = match *bytes.first()? {
        MILLIS => 6,
        NANOS => 8,
        _ => return None,
    };
    let raw = bytes.get(1..1 + width)?;
    let mut be = [0u8; 8];
    be[8 - width..].copy_from_slice(raw);
    // Sign-extend the 48-bit count.
    let n = i64::from_be_bytes(be) << (64 - 8 * width) >> (64 - 8 * width);
    let ns = if width == 6 {
        i128::from(n) * 1_000_000
    } else {
        i128::from(n)
    };
    Some((ns, 1 + width))
}

/// Fragment indexes by first byte, and within one first byte longest first, so the first that
/// matches is the longest; `BY_FIRST_BYTE[b]..BY_FIRST_BYTE[b + 1]` is where byte `b`'s are.
const ORDER: [usize; FRAGMENTS.len()] = {
    let mut order = [0; FRAGMENTS.len()];
    let mut i = 0;
    while i < order.len() {
        order[i] = i;
        let mut j = i;
        while j > 0 && goes_before(order[j], order[j - 1]) {
            (order[j - 1], order[j]) = (order[j], order[j - 1]);
            j -= 1;
        }
        i += 1;
    }
    order
};

const BY_FIRST_BYTE: [u8; 257] = {
    let mut starts = [0u8; 257];
    let mut i = 0;
    while i < FRAGMENTS.len() {
        starts[FRAGMENTS[i].as_bytes()[0] as usize + 1] += 1;
        i += 1;
    }
    let mut b = 1;
    while b < starts.len() {
        starts[b] += starts[b - 1];
        b += 1;
    }
    starts
};

const fn goes_before(a: usize, b: usize) -> bool {
    let (a, b) = (FRAGMENTS[a].as_bytes(), FRAGMENTS[b].as_bytes());
    a[0] < b[0] || (a[0] == b[0] && a.len() > b.len())
}

fn longest_fragment(rest: &str) -> Option<(u8, usize)> {
    let first = usize::from(*rest.as_bytes().first()?);
    let candidates =
        &ORDER[usize::from(BY_FIRST_BYTE[first])..usize::from(BY_FIRST_BYTE[first + 1])];
    candidates
        .iter()
        .find(|&&i| rest.starts_with(FRAGMENTS[i]))
        .map(|&i| (i as u8 + 1, FRAGMENTS[i].len()))
}

/// Packs a quoted instant at the start of `rest` into `out`; the bytes of `rest` it took.
fn pack_instant(rest: &str, out: &mut Vec<u8>) -> Option<usize> {
    let b = rest.as_bytes();
    if b.first() != Some(&b'"') {
        return None;
    }
    // `"YYYY-MM-DDTHH:MM:SS[.fraction]Z"`: 22 to 32 bytes with the quotes.
    let end = b.get(1..b.len().min(32))?.iter().position(|&c| c == b'"')? + 1;
    let ns = parse_instant(&b[1..end])?;
    if ns % 1_000_000 == 0 && (-(1i128 << 47)..1i128 << 47).contains(&(ns / 1_000_000)) {
        out.push(MILLIS);
        out.extend_from_slice(&((ns / 1_000_000) as i64).to_be_bytes()[2..]);
    } else {
        let ns = i64::try_from(ns).ok()?;
        out.push(NANOS);
        out.extend_from_slice(&ns.to_be_bytes());
    }
    Some(end + 1)
}

const NANOS_A_SECOND: i128 = 1_000_000_000;
const SECONDS_A_DAY: i64 = 86_400;

/// The nanoseconds since the Unix epoch of an instant written the way jiff prints a timestamp:
/// `YYYY-MM-DDTHH:MM:SSZ`, a four-digit year, and a fraction of 1 to 9 digits after the
/// seconds that does not end in 0. Any other text (another zone, a leap second, a 31 April) is
/// not an instant here, so [`print_instant`] gives back exactly the text this accepted.
fn parse_instant(t: &[u8]) -> Option<i128> {
    if t.len() < 20 || t.len() > 30 || t[t.len() - 1] != b'Z' {
        return None;
    }
    let number = |range: std::ops::Range<usize>| -> Option<i64> {
        t[range].iter().try_fold(0i64, |n, &c| {
            c.is_ascii_digit().then(|| n * 10 + i64::from(c - b'0'))
        })
    };
    if [(4, b'-'), (7, b'-'), (10, b'T'), (13, b':'), (16, b':')]
        .iter()
        .any(|&(i, c)| t[i] != c)
    {
        return None;
    }
    let (year, month, day) = (number(0..4)?, number(5..7)?, number(8..10)?);
    let (hour, minute, second) = (number(11..13)?, number(14..16)?, number(17..19)?);
    let fraction = match t.len() {
        20 => 0,
        _ => {
            let digits = &t[20..t.len() - 1];
            if t[19] != b'.' || digits.is_empty() || digits[digits.len() - 1] == b'0' {
                return None;
            }
            number(20..t.len() - 1)? * 10i64.pow(9 - digits.len() as u32)
        }
    };
    if !(1..=12).contains(&month)
        || day < 1
        || day > days_in_month(year, month)
        || hour > 23
        || minute > 59
        || second > 59
    {
        return None;
    }
    let seconds =
        days_from_civil(year, month, day) * SECONDS_A_DAY + hour * 3600 + minute * 60 + second;
    Some(i128::from(seconds) * NANOS_A_SECOND + i128::from(fraction))
}

/// Writes `ns` since the Unix epoch as [`parse_instant`] reads it.
fn print_instant(ns: i128, out: &mut Vec<u8>) -> Result<(), String> {
    let seconds = i64::try_from(ns.div_euclid(NANOS_A_SECOND))
        .map_err(|_| "a packed spec holds an instant out of range".to_string())?;
    let fraction = ns.rem_euclid(NANOS_A_SECOND) as i64;
    let (days, of_day) = (
        seconds.div_euclid(SECONDS_A_DAY),
        seconds.rem_euclid(SECONDS_A_DAY),
    );
    let (year, month, day) = civil_from_days(days);
    if !(0..=9999).contains(&year) {
        return Err(format!("a packed spec holds an instant in the year {year}"));
    }
    for (n, width, after) in [
        (year, 4, b'-'),
        (month, 2, b'-'),
        (day, 2, b'T'),
        (of_day / 3600, 2, b':'),
        (of_day / 60 % 60, 2, b':'),
    ] {
        push_digits(out, n, width);
        out.push(after);
    }
    push_digits(out, of_day % 60, 2);
    if fraction != 0 {
        let (mut fraction, mut width) = (fraction, 9);
        while fraction % 10 == 0 {
            fraction /= 10;
            width -= 1;
        }
        out.push(b'.');
        push_digits(out, fraction, width);
    }
    out.push(b'Z');
    Ok(())
}

/// `n` in `width` decimal digits, zero-padded.
fn push_digits(out: &mut Vec<u8>, n: i64, width: usize) {
    let mut n = n.unsigned_abs();
    let at = out.len();
    out.resize(at + width, b'0');
    for digit in out[at..].iter_mut().rev() {
        *digit = b'0' + (n % 10) as u8;
        n /= 10;
    }
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days from 1970-01-01 to a date of the proleptic Gregorian calendar. Years are counted from
/// March, so a leap day ends its year, in 400-year eras of 146,097 days.
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let day_of_year = (153 * ((month + 9) % 12) + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// The date `days` after 1970-01-01: the inverse of [`days_from_civil`].
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let days = days + 719_468;
    let era = days.div_euclid(146_097);
    let day_of_era = days - era * 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let shifted_month = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * shifted_month + 2) / 5 + 1;
    let month = if shifted_month < 10 {
        shifted_month + 3
    } else {
        shifted_month - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
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
            "2024-02-29T23:59:59.5Z",
            "2000-02-29T00:00:00Z",
            "0000-01-01T00:00:00Z",
            "0001-01-01T00:00:00Z",
            "9999-12-31T23:59:59.999999999Z",
            "-009999-01-02T01:59:59Z",
        ] {
            let json = format!(r#"{{"schedule":{{"kind":{{"at":"{at}"}}}}}}"#);
            round_trip(&json);
        }
    }

    /// jiff is the oracle: every instant it prints (whole seconds, milliseconds and nanoseconds,
    /// 1677 to 2262) is read as the same count of nanoseconds, packed as a number, and printed
    /// back as the same text.
    #[test]
    fn every_instant_jiff_prints_is_read_as_jiff_reads_it() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        for i in 0..20_000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let ns = (state as i64) as i128;
            let ns = match i % 3 {
                0 => ns - ns.rem_euclid(1_000_000_000),
                1 => ns - ns.rem_euclid(1_000_000),
                _ => ns,
            };
            let at = jiff::Timestamp::from_nanosecond(ns).unwrap();
            let text = at.to_string();
            assert_eq!(parse_instant(text.as_bytes()), Some(ns), "{text}");
            let mut printed = Vec::new();
            print_instant(ns, &mut printed).unwrap();
            assert_eq!(std::str::from_utf8(&printed).unwrap(), text);
            let quoted = format!("\"{text}\"");
            let packed = pack(&quoted);
            assert!(matches!(packed[1], MILLIS | NANOS), "{text}: {packed:?}");
            assert_eq!(unpack(&packed).unwrap().as_ref(), quoted.as_bytes());
        }
    }

    #[test]
    fn text_that_only_looks_like_an_instant_or_a_code_is_kept_as_it_is() {
        for json in [
            r#"{"a":"2026-13-45T10:11:12Z"}"#,
            r#"{"a":"2026-12-15T10:11:12+01:00"}"#,
            r#"{"a":"2026-12-15T10:11:12.000Z"}"#,
            r#"{"a":"2026-12-15T10:11:12.1234567890Z"}"#,
            r#"{"a":"2026-02-29T10:11:12Z"}"#,
            r#"{"a":"1900-02-29T10:11:12Z"}"#,
            r#"{"a":"2026-04-31T10:11:12Z"}"#,
            r#"{"a":"2026-12-15T24:00:00Z"}"#,
            r#"{"a":"2026-12-15T23:59:60Z"}"#,
            r#"{"a":"2026-12-15T10:11:12z"}"#,
            r#"{"a":"2026-12-15 10:11:12Z"}"#,
            r#"{"a":"+2026-12-15T10:11:12Z"}"#,
            r#"{"a":"2026-1a-15T10:11:12Z"}"#,
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
        for pair in ORDER.windows(2) {
            let (a, b) = (FRAGMENTS[pair[0]], FRAGMENTS[pair[1]]);
            assert!(
                a.as_bytes()[0] < b.as_bytes()[0] || a.len() >= b.len(),
                "{a} {b}"
            );
        }
        for first in [b'{', b'}', b',', b'"', b'h', b'x'] {
            let range = usize::from(BY_FIRST_BYTE[usize::from(first)])
                ..usize::from(BY_FIRST_BYTE[usize::from(first) + 1]);
            let mut found: Vec<_> = ORDER[range].to_vec();
            found.sort_unstable();
            let expected: Vec<_> = (0..FRAGMENTS.len())
                .filter(|&i| FRAGMENTS[i].as_bytes()[0] == first)
                .collect();
            assert_eq!(found, expected, "{}", first as char);
        }
        let (code, len) = longest_fragment(r#"","schedule":{"kind":{"at":"2026"#).unwrap();
        assert_eq!((code, len), (5, r#"","schedule":{"kind":{"at":"#.len()));
    }

    #[test]
    fn a_one_off_s_instant_is_found_where_the_spec_opens_with_it_and_nowhere_else() {
        let at = |json: &str| {
            let packed = pack(json);
            one_off_instant(&packed).map(|(range, ns)| (packed[range.start], range.len(), ns))
        };
        let ms = i128::from(
            "2026-12-15T10:11:12.345Z"
                .parse::<jiff::Timestamp>()
                .unwrap()
                .as_millisecond(),
        );
        let one_off = r#"{"schedule":{"kind":{"at":"2026-12-15T10:11:12.345Z"}},"target":{"queue":{"name":"q"}}}"#;
        assert_eq!(at(one_off), Some((MILLIS, 7, ms * 1_000_000)));
        let typed = r#"{"job_type":"https://x/\"2026-12-15T10:11:12Z\"","schedule":{"kind":{"at":"2026-12-15T10:11:12.000000001Z"},"end":"2027-01-01T00:00:00Z"},"target":{"queue":{"name":"q"}}}"#;
        assert_eq!(at(typed), Some((NANOS, 9, (ms - 345) * 1_000_000 + 1)));
        for not_one_off in [
            r#"{"schedule":{"kind":{"cron":{"expr":"* * * * *","tz":"UTC"}}},"target":{"queue":{"name":"q"}}}"#,
            r#"{"schedule":{"kind":{"every":{"interval":1000,"anchor":"2026-12-15T10:11:12Z"}}},"target":{"queue":{"name":"q"}}}"#,
            r#"{"schedule":{"kind":{"at":"2026-12-15T10:11:12.000Z"}},"target":{"queue":{"name":"q"}}}"#,
        ] {
            assert_eq!(at(not_one_off), None, "{not_one_off}");
        }
        assert_eq!(one_off_instant(one_off.as_bytes()), None);
        assert_eq!(one_off_instant(&[PACKED, 1, MILLIS, 0, 0]), None);
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
