//! Calendars: a namespace's named sets of excluded days (`PUT /v1/calendars/{name}`), which a
//! job's `schedule.calendar` names.

use serde::{Deserialize, Serialize};

/// A calendar as written: its time zone and the days it excludes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct CalendarIn {
    /// The IANA zone whose wall clock the excluded days are read on (`Europe/Berlin`).
    pub timezone: String,
    #[serde(default)]
    pub exclude: ExcludeIn,
}

/// The excluded days: dates, inclusive date ranges and days of the week.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ExcludeIn {
    /// Dates (`2026-12-25`), at most 1000.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dates: Vec<String>,
    /// Inclusive ranges of dates, at most 100.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ranges: Vec<DateRangeIn>,
    /// Days of the week: `MON` … `SUN`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub weekdays: Vec<String>,
}

/// An inclusive range of dates.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct DateRangeIn {
    pub from: String,
    pub to: String,
}

/// A stored calendar.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Calendar {
    pub name: String,
    pub timezone: String,
    pub exclude: ExcludeIn,
    /// When it was last written (RFC 3339).
    pub updated_at: String,
    /// In the answer to a `PUT`: how many of the namespace's jobs using the calendar were
    /// re-planned (their pending occurrence recomputed, older claims fenced).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replanned: Option<u64>,
}

/// A namespace's calendars, in name order.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CalendarList {
    pub calendars: Vec<Calendar>,
}
