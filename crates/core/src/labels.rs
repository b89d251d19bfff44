//! Job labels and the selectors that pick jobs by them.
//!
//! A job carries at most [`MAX_LABELS`] labels, each a key and a value: `{"tenant": "acme"}`.
//! Keys are short and plain so that they can be written in a query string without escaping
//! (`?label=tenant=acme`) and indexed cheaply; values are free text within a bound.
//!
//! A selector is either `key=value` (the job has the label with that value) or `key` (the job
//! has the label, whatever its value); a query's selectors are ANDed. Splitting a selector at its
//! first `=` is unambiguous because a key never holds one.

use std::collections::BTreeMap;

use crate::ValidationError;

/// A job's labels, by key.
pub type Labels = BTreeMap<String, String>;

/// The most labels a job carries.
pub const MAX_LABELS: usize = 16;
/// The longest key, in bytes.
pub const MAX_KEY_BYTES: usize = 63;
/// The longest value, in bytes.
pub const MAX_VALUE_BYTES: usize = 255;
/// The most selectors one request may give.
pub const MAX_SELECTORS: usize = 8;

/// Label keys under this prefix are set by Hourglass only (such as
/// [`crate::overlap::OCCURRENCE_OF_LABEL`]); a client's are refused.
pub const RESERVED_PREFIX: &str = "hourglass/";

/// The validation code of every label refusal.
const CODE: &str = "invalid_label";

/// Whether `key` is a label key: 1 to [`MAX_KEY_BYTES`] bytes of `a-z 0-9 _ . - /`, starting
/// with a letter or a digit.
pub fn valid_key(key: &str) -> bool {
    let bytes = key.as_bytes();
    (1..=MAX_KEY_BYTES).contains(&bytes.len())
        && (bytes[0].is_ascii_lowercase() || bytes[0].is_ascii_digit())
        && bytes
            .iter()
            .all(|&b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"_.-/".contains(&b))
}

/// Whether `value` is a label value: 1 to [`MAX_VALUE_BYTES`] bytes of UTF-8 without control
/// characters.
pub fn valid_value(value: &str) -> bool {
    (1..=MAX_VALUE_BYTES).contains(&value.len()) && !value.chars().any(char::is_control)
}

const KEY_RULE: &str = "a label key is 1 to 63 bytes of a-z, 0-9, '_', '.', '-' or '/', starting \
                        with a letter or a digit";
const VALUE_RULE: &str = "a label value is 1 to 255 bytes without control characters";

/// Checks a job's labels; an error names the offending one as `labels.<key>` (or `labels` for
/// their count, or a key that cannot be shown as a path).
pub fn validate(labels: &Labels) -> Result<(), ValidationError> {
    if labels.len() > MAX_LABELS {
        return Err(ValidationError::new(
            CODE,
            "labels",
            format!(
                "a job has at most {MAX_LABELS} labels, not {}",
                labels.len()
            ),
        ));
    }
    for (key, value) in labels {
        if !valid_key(key) {
            // A key with control characters or of any length is not echoed into the field path.
            let field = if key.len() <= MAX_KEY_BYTES * 2 && !key.chars().any(char::is_control) {
                format!("labels.{key}")
            } else {
                "labels".to_owned()
            };
            return Err(ValidationError::new(CODE, field, KEY_RULE));
        }
        if key.starts_with(RESERVED_PREFIX) {
            return Err(ValidationError::new(
                CODE,
                format!("labels.{key}"),
                format!("label keys starting with {RESERVED_PREFIX} are set by Hourglass only"),
            ));
        }
        if !valid_value(value) {
            return Err(ValidationError::new(
                CODE,
                format!("labels.{key}"),
                VALUE_RULE,
            ));
        }
    }
    Ok(())
}

/// One selector: the label `key` present, with `value` when given.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Selector {
    pub key: String,
    pub value: Option<String>,
}

impl Selector {
    /// `key=value` or `key`; the error is a sentence saying what is wrong.
    pub fn parse(text: &str) -> Result<Self, String> {
        let (key, value) = match text.split_once('=') {
            Some((key, value)) => (key, Some(value)),
            None => (text, None),
        };
        if !valid_key(key) {
            return Err(format!("{KEY_RULE} (selector {text:?})"));
        }
        if let Some(value) = value
            && !valid_value(value)
        {
            return Err(format!("{VALUE_RULE} (selector {text:?})"));
        }
        Ok(Selector {
            key: key.to_owned(),
            value: value.map(str::to_owned),
        })
    }

    /// Whether a job with `labels` satisfies this selector.
    pub fn matches(&self, labels: &Labels) -> bool {
        match (labels.get(&self.key), &self.value) {
            (Some(have), Some(want)) => have == want,
            (Some(_), None) => true,
            (None, _) => false,
        }
    }
}

impl std::fmt::Display for Selector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.value {
            Some(value) => write!(f, "{}={value}", self.key),
            None => f.write_str(&self.key),
        }
    }
}

/// Whether a job with `labels` satisfies every selector (ANDed; none selects every job).
pub fn matches_all(selectors: &[Selector], labels: &Labels) -> bool {
    selectors.iter().all(|s| s.matches(labels))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn keys_are_short_plain_and_start_with_a_letter_or_digit() {
        for good in ["tenant", "a", "k8s.io/app", "team_1-x", &"k".repeat(63)] {
            assert!(valid_key(good), "{good}");
        }
        for bad in ["", "Tenant", "-x", "/x", "a=b", "a b", "é", &"k".repeat(64)] {
            assert!(!valid_key(bad), "{bad}");
        }
    }

    #[test]
    fn values_are_bounded_and_free_of_control_characters() {
        assert!(valid_value("Acme Corp = 1"));
        assert!(valid_value(&"é".repeat(127)));
        assert!(!valid_value(&"v".repeat(256)));
        assert!(!valid_value(""));
        assert!(!valid_value("a\nb"));
    }

    #[test]
    fn validation_names_the_offending_label() {
        let e = validate(&labels(&[("tenant", "acme"), ("Bad", "x")])).unwrap_err();
        assert_eq!((e.code, e.field.as_str()), ("invalid_label", "labels.Bad"));
        let e = validate(&labels(&[("tenant", &"v".repeat(256))])).unwrap_err();
        assert_eq!(e.field, "labels.tenant");
        let many: Vec<(String, String)> = (0..17).map(|i| (format!("k{i}"), "v".into())).collect();
        let e = validate(&many.into_iter().collect()).unwrap_err();
        assert_eq!(e.field, "labels");
        let e = validate(&labels(&[("a\u{7}", "x")])).unwrap_err();
        assert_eq!(e.field, "labels");
        assert!(validate(&labels(&[("tenant", "acme"), ("kind", "reminder")])).is_ok());
    }

    #[test]
    fn keys_under_hourglass_slash_are_reserved_but_selectable() {
        let e = validate(&labels(&[("hourglass/occurrence-of", "x")])).unwrap_err();
        assert_eq!(
            (e.code, e.field.as_str()),
            ("invalid_label", "labels.hourglass/occurrence-of")
        );
        assert!(e.message.contains("set by Hourglass"), "{}", e.message);
        assert!(validate(&labels(&[("hourglass-team", "x")])).is_ok());
        assert!(Selector::parse("hourglass/occurrence-of=x").is_ok());
    }

    #[test]
    fn selectors_parse_equality_and_existence_and_and_together() {
        let eq = Selector::parse("tenant=acme").unwrap();
        assert_eq!(eq.value.as_deref(), Some("acme"));
        let has = Selector::parse("kind").unwrap();
        assert_eq!(has.value, None);
        // Only the first `=` splits: a value may hold more.
        assert_eq!(
            Selector::parse("k=a=b").unwrap().value.as_deref(),
            Some("a=b")
        );
        for bad in ["", "=x", "Tenant=x", "k=", "k=a\u{0}"] {
            assert!(Selector::parse(bad).is_err(), "{bad:?}");
        }
        let job = labels(&[("tenant", "acme"), ("kind", "reminder")]);
        assert!(matches_all(&[eq.clone(), has.clone()], &job));
        assert!(!matches_all(
            &[eq, Selector::parse("tenant=other").unwrap()],
            &job
        ));
        assert!(!matches_all(&[Selector::parse("missing").unwrap()], &job));
        assert_eq!(Selector::parse("k=a=b").unwrap().to_string(), "k=a=b");
    }
}
