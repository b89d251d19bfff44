//! Human durations such as `90s`, `15m`, `1h30m` or ISO 8601 `PT15M`, as accepted by the API.

use std::time::Duration;

use crate::ValidationError;

/// Parses a strictly positive duration with at most millisecond precision.
pub fn parse_duration(text: &str, field: &str) -> Result<Duration, ValidationError> {
    let parsed: jiff::SignedDuration = text.trim().parse().map_err(|_| {
        ValidationError::new(
            "invalid_duration",
            field,
            format!("{text:?} is not a duration; use forms like \"90s\", \"15m\" or \"1h30m\""),
        )
    })?;
    if parsed.is_negative() || parsed.is_zero() {
        return Err(ValidationError::new(
            "invalid_duration",
            field,
            "duration must be positive",
        ));
    }
    let std: Duration = parsed.unsigned_abs();
    if !std.subsec_nanos().is_multiple_of(1_000_000) {
        return Err(ValidationError::new(
            "invalid_duration",
            field,
            "durations have millisecond precision at most",
        ));
    }
    Ok(std)
}

/// Formats a duration the way [`parse_duration`] reads it back.
pub fn format_duration(d: Duration) -> String {
    let signed = jiff::SignedDuration::try_from(d).unwrap_or(jiff::SignedDuration::MAX);
    format!("{signed:#}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_friendly_and_iso_forms() {
        assert_eq!(parse_duration("90s", "f").unwrap(), Duration::from_secs(90));
        assert_eq!(
            parse_duration("15m", "f").unwrap(),
            Duration::from_secs(900)
        );
        assert_eq!(
            parse_duration("1h30m", "f").unwrap(),
            Duration::from_secs(5400)
        );
        assert_eq!(parse_duration("PT2S", "f").unwrap(), Duration::from_secs(2));
        assert_eq!(
            parse_duration("250ms", "f").unwrap(),
            Duration::from_millis(250)
        );
    }

    #[test]
    fn rejects_nonsense_zero_negative_and_sub_millisecond() {
        for bad in ["", "soon", "0s", "-5s", "10us", "1.5ns"] {
            let err = parse_duration(bad, "schedule.after").unwrap_err();
            assert_eq!(err.code, "invalid_duration", "{bad}");
            assert_eq!(err.field, "schedule.after");
        }
    }

    #[test]
    fn format_round_trips() {
        for d in [Duration::from_secs(90), Duration::from_millis(1500)] {
            assert_eq!(parse_duration(&format_duration(d), "f").unwrap(), d);
        }
    }
}
