//! Calendar handlers: `PUT`, `GET`, `DELETE /v1/calendars/{name}` and `GET /v1/calendars`, and
//! the fetch of the calendars a request's schedules name (before wire validation, which does no
//! I/O).

use hourglass_api::{CalendarIn, CalendarList, ScheduleIn};

use super::*;

/// A calendar name in the path: 400 `invalid_calendar` naming `name` when it is not one.
fn path_name(name: &str) -> Result<&str, ApiError> {
    wire::calendar_name(name, "name")
        .map_err(|e| ApiError::bad_request(ErrorCode::InvalidCalendar, "name", e.message))?;
    Ok(name)
}

/// Adds to `calendars` the one `schedule` names, if it names a valid one that exists, and the
/// anchor it names (`anchors.rs`); wire validation then refuses a missing or malformed name,
/// naming the field.
pub(crate) async fn fetch_named(
    state: &AppState,
    namespace: &str,
    schedule: &ScheduleIn,
    calendars: &mut wire::Calendars,
) -> Result<(), ApiError> {
    super::anchors::fetch_named(state, namespace, schedule, calendars).await?;
    let Some(name) = wire::named(schedule) else {
        return Ok(());
    };
    if calendars.contains_key(name) || wire::calendar_name(name, "").is_err() {
        return Ok(());
    }
    if let Some(record) = state.scheduler.calendar(namespace, name).await? {
        calendars.insert(name.to_owned(), record.calendar);
    }
    Ok(())
}

pub(crate) async fn put_calendar(
    State(state): State<AppState>,
    headers: HeaderMap,
    Segment(name): Segment,
    body: Body,
) -> ApiResult {
    let principal = principal(&state, &headers)?;
    let name = path_name(&name)?;
    let req: CalendarIn = parse_body(&read_body(&state, &headers, body, SMALL_BODY_BYTES).await?)?;
    let calendar = wire::calendar(&req, state.scheduler.now())?;
    let existed = state
        .scheduler
        .calendar(&principal.namespace, name)
        .await?
        .is_some();
    let (record, replanned) = state
        .scheduler
        .put_calendar(&principal.namespace, name, calendar, &principal.actor())
        .await?;
    let status = if existed {
        StatusCode::OK
    } else {
        StatusCode::CREATED
    };
    Ok(typed_response(
        status,
        &wire::calendar_out(&record, Some(replanned as u64)),
    ))
}

pub(crate) async fn get_calendar(
    State(state): State<AppState>,
    headers: HeaderMap,
    Segment(name): Segment,
) -> ApiResult {
    let principal = principal(&state, &headers)?;
    let name = path_name(&name)?;
    let record = state
        .scheduler
        .calendar(&principal.namespace, name)
        .await?
        .ok_or_else(|| ApiError::not_found("calendar"))?;
    Ok(typed_response(
        StatusCode::OK,
        &wire::calendar_out(&record, None),
    ))
}

pub(crate) async fn list_calendars(State(state): State<AppState>, headers: HeaderMap) -> ApiResult {
    let principal = principal(&state, &headers)?;
    let records = state.scheduler.calendars(&principal.namespace).await?;
    let list = CalendarList {
        calendars: records
            .iter()
            .map(|r| wire::calendar_out(r, None))
            .collect(),
    };
    Ok(typed_response(StatusCode::OK, &list))
}

pub(crate) async fn delete_calendar(
    State(state): State<AppState>,
    headers: HeaderMap,
    Segment(name): Segment,
) -> ApiResult {
    let principal = principal(&state, &headers)?;
    let name = path_name(&name)?;
    match state
        .scheduler
        .delete_calendar(&principal.namespace, name, &principal.actor())
        .await?
    {
        Ok(true) => Ok(StatusCode::NO_CONTENT.into_response()),
        Ok(false) => Err(ApiError::not_found("calendar")),
        Err(job) => Err(ApiError::new(
            ErrorCode::CalendarInUse,
            format!("job {job} uses calendar {name:?}; edit or cancel the jobs that use it first"),
        )),
    }
}
