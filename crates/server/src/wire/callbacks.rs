//! Validation of a job's callbacks (`on_failure`, `on_success`): each target is checked exactly
//! as a job's own target is (the same rules, the same namespace's connections and address
//! policy), and every error names its field under the callback (`on_failure.target.webhook.url`).

use hourglass_api::CallbackIn;
use hourglass_core::{Callback, ValidationError};

use super::{Limits, TargetRules};

/// `on_failure` or `on_success`, by its field's name.
pub fn callback(
    input: &CallbackIn,
    field: &'static str,
    rules: TargetRules,
    limits: &Limits,
) -> Result<Callback, ValidationError> {
    if input.every_attempt && field != "on_failure" {
        return Err(ValidationError::new(
            "invalid_field",
            format!("{field}.every_attempt"),
            "every_attempt is for on_failure only: a delivery is one attempt",
        ));
    }
    let target = super::target(&input.target, rules, limits).map_err(|e| e.within(field))?;
    let retry = input
        .retry
        .as_ref()
        .map(|r| super::retry(r).map_err(|e| e.within(field)))
        .transpose()?
        .unwrap_or_default();
    Ok(Callback {
        target,
        every_attempt: input.every_attempt,
        include_payload: input.include_payload,
        retry,
    })
}

/// Both callbacks of a create request: `(on_failure, on_success)`.
pub fn callbacks(
    on_failure: Option<&CallbackIn>,
    on_success: Option<&CallbackIn>,
    rules: TargetRules,
    limits: &Limits,
) -> Result<(Option<Callback>, Option<Callback>), ValidationError> {
    let on_failure = on_failure
        .map(|c| callback(c, "on_failure", rules, limits))
        .transpose()?;
    let on_success = on_success
        .map(|c| callback(c, "on_success", rules, limits))
        .transpose()?;
    Ok((on_failure, on_success))
}
