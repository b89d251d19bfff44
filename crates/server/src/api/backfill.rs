//! `POST /v1/jobs/{id}/backfill`: runs a past range of a recurring job's nominal occurrences
//! once each (`hourglass_core::backfill`). Extract, one scheduler call, answer `202`.

use hourglass_api::{BackfillAccepted, BackfillRequest};
use hourglass_core::backfill::{MAX_OCCURRENCES, MAX_RANGES, Refusal};
use hourglass_engine::{BackfillRefusal, Backfilled};

use super::*;

pub(crate) async fn backfill_job(
    State(state): State<AppState>,
    headers: HeaderMap,
    Segment(id): Segment,
    body: Body,
) -> ApiResult {
    let principal = principal(&state, &headers)?;
    let job = parse_job_ref(&id, &state.limits)?;
    let req: BackfillRequest =
        parse_body(&read_body(&state, &headers, body, SMALL_BODY_BYTES).await?)?;
    let (from, to) = wire::backfill_range(&req, state.scheduler.now())?;
    let outcome = state
        .scheduler
        .backfill(&principal.namespace, &job, from, to)
        .await?
        .ok_or_else(|| ApiError::not_found("job"))?;
    let occurrences = match outcome {
        Backfilled::Accepted { occurrences, .. } => occurrences,
        Backfilled::Refused(why) => return Err(refusal(why)),
    };
    Ok(typed_response(
        StatusCode::ACCEPTED,
        &BackfillAccepted { occurrences },
    ))
}

fn refusal(why: BackfillRefusal) -> ApiError {
    let invalid = |field: &str, message: String| {
        ApiError::from(hourglass_core::ValidationError::new(
            "invalid_field",
            field,
            message,
        ))
    };
    match why {
        BackfillRefusal::NotRecurring => invalid(
            "id",
            "only a recurring job's occurrences can be backfilled".into(),
        ),
        BackfillRefusal::PastPending(pending) => invalid(
            "to",
            format!(
                "to must not be after the job's pending due time {}",
                hourglass_api::instant::format(pending)
            ),
        ),
        BackfillRefusal::Plan(Refusal::TooMany) => invalid(
            "to",
            format!(
                "the range holds more than {MAX_OCCURRENCES} occurrences not yet backfilled; \
                 backfill it in parts"
            ),
        ),
        BackfillRefusal::Plan(Refusal::TooManyRanges) => ApiError::new(
            ErrorCode::InvalidState,
            format!("the job remembers {MAX_RANGES} backfills, the most it may"),
        ),
        BackfillRefusal::Plan(Refusal::Running) => ApiError::new(
            ErrorCode::InvalidState,
            "the job's previous backfill is still running",
        ),
    }
}
