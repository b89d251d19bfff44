//! Anchors on the wire: a `PUT /v1/anchors/{name}` body into its instant, a job's
//! `schedule.anchor` and `schedule.offset` into the reference its schedule keeps and the instant
//! it resolves to now, and records into answers.

use hourglass_api::{Anchor as AnchorOut, ScheduleIn};
use hourglass_core::ValidationError;
use hourglass_core::anchor::{self, ScheduleAnchor};
use hourglass_store::AnchorRecord;
use jiff::{SignedDuration, Timestamp};

use super::{MAX_FUTURE, parse_instant, rfc3339, truncate_ms};

/// An anchor's name, in a path, a query or a schedule.
pub fn anchor_name(name: &str, field: &str) -> Result<(), ValidationError> {
    anchor::check_name(name, field)
}

/// The anchor name a schedule gives, if any (for the handler to fetch it).
pub fn named_anchor(input: &ScheduleIn) -> Option<&str> {
    input.anchor.as_deref()
}

/// A `PUT /v1/anchors/{name}` body's instant: RFC 3339, within 100 years of `now` either way.
pub fn anchor_at(
    input: &hourglass_api::AnchorIn,
    now: Timestamp,
) -> Result<Timestamp, ValidationError> {
    let at = truncate_ms(parse_instant(&input.at, "at")?);
    let within = |t: Timestamp| {
        let gap = if t > now {
            t.duration_since(now)
        } else {
            now.duration_since(t)
        };
        gap <= MAX_FUTURE
    };
    if !within(at) {
        return Err(ValidationError::new(
            "instant_too_far",
            "at",
            "an anchor is at most 100 years away from now",
        ));
    }
    Ok(at)
}

/// `schedule.offset`: a signed duration (`"-8h"`, `"+30m"`, `"90s"`), at most 100 years.
fn offset(text: &str) -> Result<i64, ValidationError> {
    let invalid = |why: &str| {
        ValidationError::new(
            "invalid_anchor",
            "schedule.offset",
            format!("{text:?} {why}; use a signed duration such as \"-8h\" or \"30m\""),
        )
    };
    let trimmed = text.trim();
    let (negative, magnitude) = match trimmed.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, trimmed.strip_prefix('+').unwrap_or(trimmed)),
    };
    // jiff reads a sign of its own, and more (ISO 8601); one sign, ours, is the contract.
    if magnitude.starts_with(['-', '+']) {
        return Err(invalid("is not a duration"));
    }
    let parsed: SignedDuration = magnitude
        .parse()
        .map_err(|_| invalid("is not a duration"))?;
    if parsed.is_negative() {
        return Err(invalid("is not a duration"));
    }
    if parsed.subsec_nanos() % 1_000_000 != 0 {
        return Err(invalid("has more than millisecond precision"));
    }
    if parsed > MAX_FUTURE {
        return Err(invalid("is more than 100 years"));
    }
    let ms = parsed.as_millis() as i64;
    Ok(if negative { -ms } else { ms })
}

/// A schedule's anchor and offset, resolved against the fetched `anchors` (name to instant):
/// the reference the job keeps and the instant it resolves to now; `None` without
/// `schedule.anchor`. The schedule's kind is the caller's to check.
pub fn schedule_anchor(
    input: &ScheduleIn,
    anchors: &std::collections::HashMap<String, Timestamp>,
) -> Result<Option<(ScheduleAnchor, Timestamp)>, ValidationError> {
    let Some(name) = input.anchor.as_deref() else {
        if input.offset.is_some() {
            return Err(ValidationError::new(
                "invalid_anchor",
                "schedule.offset",
                "offset applies to a schedule with an anchor only",
            ));
        }
        return Ok(None);
    };
    anchor_name(name, "schedule.anchor")?;
    let misplaced = [
        ("after", input.after.is_some()),
        ("cron", input.cron.is_some()),
    ];
    if let Some((field, _)) = misplaced.iter().find(|(_, given)| *given) {
        return Err(ValidationError::new(
            "invalid_anchor",
            format!("schedule.{field}"),
            "an anchored schedule is a one-off at the anchor plus its offset, or `every` \
             starting there: leave out at, after, cron and start",
        ));
    }
    let offset_ms = input
        .offset
        .as_deref()
        .map(offset)
        .transpose()?
        .unwrap_or(0);
    let at = anchors.get(name).copied().ok_or_else(|| {
        ValidationError::new(
            "unknown_anchor",
            "schedule.anchor",
            format!("the namespace has no anchor {name:?} (PUT /v1/anchors/{name})"),
        )
    })?;
    let reference = ScheduleAnchor {
        name: name.to_owned(),
        offset_ms,
    };
    let instant = reference.instant(at);
    // A schedule read back from a job shows the instant it resolved to (`at`, or `start` for an
    // interval) beside its anchor, so that instant may be sent back with it; any other is
    // refused, as is one the anchor has moved away from since.
    for (field, given) in [("at", &input.at), ("start", &input.start)] {
        let Some(text) = given else { continue };
        let field = format!("schedule.{field}");
        if truncate_ms(parse_instant(text, &field)?) != instant {
            return Err(ValidationError::new(
                "invalid_anchor",
                field,
                format!(
                    "an anchored schedule is at its anchor plus its offset, now {}: leave out \
                     at, after, cron and start, or give that instant",
                    rfc3339(instant)
                ),
            ));
        }
    }
    Ok(Some((reference, instant)))
}

/// A stored anchor as the API shows it.
pub fn anchor_out(record: &AnchorRecord, jobs_moved: Option<u64>) -> AnchorOut {
    AnchorOut {
        name: record.name.clone(),
        at: rfc3339(record.at),
        updated_at: rfc3339(record.updated_at),
        jobs_moved,
    }
}

/// A reference's offset as the API shows it (`"-8h"`), the way `schedule.offset` reads it.
pub fn offset_out(offset_ms: i64) -> String {
    let text = hourglass_core::duration::format_duration(std::time::Duration::from_millis(
        offset_ms.unsigned_abs(),
    ));
    if offset_ms < 0 {
        format!("-{text}")
    } else {
        text
    }
}
