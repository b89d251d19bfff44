//! The API's error body, `{"error": {"code": "...", "field": "...", "message": "..."}}`, and the
//! closed set of codes with the HTTP status each answers.

use serde::{Deserialize, Serialize};

/// Declares [`ErrorCode`] from one table of `Variant = "code" => status, "meaning"` rows (the
/// meaning is the OpenAPI document's, in its `ErrorCode` table).
macro_rules! error_codes {
    ($($variant:ident = $code:literal => $status:literal, $meaning:literal,)*) => {
        /// Every code an API error can carry (the OpenAPI document's `ErrorCode`).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum ErrorCode {
            $($variant,)*
        }

        impl ErrorCode {
            /// Every code, in table order.
            pub const ALL: &[ErrorCode] = &[$(ErrorCode::$variant,)*];

            /// The stable code clients match on.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(ErrorCode::$variant => $code,)*
                }
            }

            /// The HTTP status an error with this code answers.
            pub fn status(self) -> u16 {
                match self {
                    $(ErrorCode::$variant => $status,)*
                }
            }

            /// What the code means, for the API's users (the OpenAPI document's table).
            pub fn meaning(self) -> &'static str {
                match self {
                    $(ErrorCode::$variant => $meaning,)*
                }
            }

            /// The code named `code`, if this build knows it.
            pub fn parse(code: &str) -> Option<Self> {
                match code {
                    $($code => Some(ErrorCode::$variant),)*
                    _ => None,
                }
            }
        }
    };
}

error_codes! {
    AnchorFull = "anchor_full" => 422,
        "the anchor `schedule.anchor` names has the most jobs an anchor may have (10,000 active \
        or paused; on DynamoDB, created)",
    AnchorInUse = "anchor_in_use" => 409,
        "`DELETE /v1/anchors/{name}?if_unused=true`: an active or paused job of the namespace \
        refers to the anchor (the message names one)",
    BodyTimeout = "body_timeout" => 408,
        "the request body did not arrive whole within the body read timeout (60 s by default)",
    BodyTooLarge = "body_too_large" => 413,
        "the request body exceeds its endpoint's limit (payload limit + 64 KiB for a job, 16 MiB \
        by default for a batch, 256 KiB elsewhere)",
    CalendarExcludesEveryDay = "calendar_excludes_every_day" => 422,
        "the calendar excludes every day of the next 100 years",
    CalendarInUse = "calendar_in_use" => 409,
        "the calendar is named by an active or paused job of the namespace (the message names \
        one); edit or cancel those jobs first",
    CronNeverFires = "cron_never_fires" => 422,
        "the cron expression has no occurrence within 5 years",
    EngineFailed = "engine_failed" => 503,
        "`/readyz` only: a pipeline stage died; the node fires nothing and exits so that it is \
        restarted",
    Forbidden = "forbidden" => 403,
        "the API key is bound to another namespace than the one requested, or the route \
        (`/metrics`, `/v1/summary`, `/v1/nodes`) covers every namespace and needs a key of every \
        namespace",
    ForbiddenTarget = "forbidden_target" => 422,
        "the webhook URL is, or resolves to, an address that is not globally reachable (loopback, \
        private, link-local, shared, documentation, benchmarking, multicast, reserved, or one \
        embedding such an IPv4 address) that the operator has not allowed",
    InstantInPast = "instant_in_past" => 422,
        "`at` is further in the past than the allowed skew (5 minutes)",
    InstantTooFar = "instant_too_far" => 422,
        "`at`, `after` or `start` lies more than 100 years ahead",
    InsufficientRole = "insufficient_role" => 403,
        "the API key's role does not allow the call; the message names the roles that do \
        (`reader`, `worker`, `writer`, `admin`)",
    Internal = "internal" => 500,
        "an internal error; nothing the client can fix",
    InvalidAnchor = "invalid_anchor" => 422,
        "an anchor's name (1-64 letters, digits, '-', '_' or '.', not `.` or `..`) or \
        `schedule.offset` is not valid, or `schedule.offset` is given without `schedule.anchor`, \
        or `schedule.anchor` with `cron`, `after` or `start`",
    InvalidBatch = "invalid_batch" => 422,
        "a batch must hold 1 to 1000 jobs",
    InvalidCalendar = "invalid_calendar" => 422,
        "a calendar's name (1-64 letters, digits, '-', '_' or '.'), date (`YYYY-MM-DD`), range \
        (`to` before `from`), weekday (`MON`-`SUN`), or count of dates (1000) or ranges (100) is \
        not valid, or `schedule.roll` is not `skip`, `previous` or `next` or is given without \
        `schedule.calendar`",
    InvalidCron = "invalid_cron" => 422,
        "not a 5- or 6-field cron expression, or longer than 1024 bytes",
    InvalidDuration = "invalid_duration" => 422,
        "not a positive duration with millisecond precision, or an interval under 1s",
    InvalidField = "invalid_field" => 422,
        "a field has the wrong type or an out-of-range value",
    InvalidHeader = "invalid_header" => 422,
        "a target header is not a valid HTTP header, is one Hourglass sets itself, is given twice \
        (names are case-insensitive), or the headers exceed their limits (count, name, value or \
        total size)",
    InvalidHost = "invalid_host" => 421,
        "development mode only: the `Host` header names neither `localhost` nor a loopback address \
        (DNS rebinding)",
    InvalidId = "invalid_id" => 400,
        "the path id is not a job UUID or a positive dead-letter id",
    InvalidIdempotencyKey = "invalid_idempotency_key" => 400,
        "a trigger's `Idempotency-Key` header is empty, longer than 256 characters or not \
        printable ASCII",
    InvalidInstant = "invalid_instant" => 422,
        "not an RFC 3339 instant with an offset",
    InvalidJson = "invalid_json" => 400,
        "the body is empty or not well-formed JSON",
    InvalidLabel = "invalid_label" => 422,
        "a label's key (1-63 bytes of a-z, 0-9, '_', '.', '-' or '/', starting with a letter or \
        digit) or value (1-255 bytes without control characters) is not valid, or a job has more \
        than 16 labels; the field names the label (`labels.<key>`)",
    InvalidMisfire = "invalid_misfire" => 422,
        "the misfire policy is not one of the accepted forms",
    InvalidNamespace = "invalid_namespace" => 400,
        "the `hourglass-namespace` header is not a valid namespace (1-64 letters, digits, '-', '_' \
        or '.', not `.` or `..`)",
    InvalidQuery = "invalid_query" => 400,
        "an unknown or malformed query parameter",
    InvalidQueue = "invalid_queue" => 422,
        "a queue name (`target.queue`, or in the path: then `400`) is not 1-64 letters, digits, \
        '-', '_' or '.', or is `.` or `..`",
    InvalidReceipt = "invalid_receipt" => 422,
        "a receipt is not one a lease returned",
    InvalidSchedule = "invalid_schedule" => 422,
        "the schedule mixes kinds or bounds that do not go together",
    InvalidState = "invalid_state" => 409,
        "the job's state does not allow the action",
    InvalidTarget = "invalid_target" => 422,
        "the target names no webhook",
    InvalidUrl = "invalid_url" => 422,
        "the webhook URL is malformed, not http(s), has no host, carries credentials or is longer \
        than the node's limit (8192 bytes by default)",
    KeyConflict = "key_conflict" => 409,
        "the idempotency key is already used by a job created with a different body",
    MethodNotAllowed = "method_not_allowed" => 405,
        "the path exists but not with this method",
    MissingField = "missing_field" => 422,
        "a required field is absent",
    NotFound = "not_found" => 404,
        "no such job, dead letter or route (in this namespace)",
    NotReady = "not_ready" => 503,
        "the node is starting or shutting down",
    PayloadTooLarge = "payload_too_large" => 413,
        "the payload exceeds the configured limit (256 KiB by default)",
    QuotaExceeded = "quota_exceeded" => 429,
        "the namespace's `max_jobs` quota is reached; nothing was stored",
    RateLimited = "rate_limited" => 429,
        "the namespace is past its `creates_per_second` quota; nothing was stored, retry after \
        `Retry-After`",
    ScheduleNeverFires = "schedule_never_fires" => 422,
        "the schedule has no occurrence before its end",
    SelectorRequired = "selector_required" => 422,
        "a bulk action (`/v1/jobs/bulk/{action}`) was sent without a `label` selector",
    ServerBusy = "server_busy" => 503,
        "the node holds as many request bodies as its memory budget allows (node-wide, or this API \
        key's share); the body was not read and nothing was changed, retry shortly",
    StoreUnavailable = "store_unavailable" => 503,
        "the store cannot serve now; nothing was changed, retry later",
    Unauthorized = "unauthorized" => 401,
        "the API key is missing, malformed or unknown",
    UnknownAnchor = "unknown_anchor" => 422,
        "`schedule.anchor` names no anchor of the namespace",
    UnknownCalendar = "unknown_calendar" => 422,
        "`schedule.calendar` names no calendar of the namespace",
    UnknownConnection = "unknown_connection" => 422,
        "a target names a connection that does not exist or that this namespace may not use, or a \
        resource off the connection's lists (the same answer either way)",
    UnknownField = "unknown_field" => 422,
        "a field that the object does not have",
    UnknownTimezone = "unknown_timezone" => 422,
        "not an IANA time zone name",
    UnsupportedMediaType = "unsupported_media_type" => 415,
        "a `POST`, `PUT` or `PATCH` (or a `DELETE` with a body) without `Content-Type: \
        application/json`, empty bodies included, or with another media type",
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Every error answer's body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(
    feature = "openapi",
    schema(as = Error, description = "Every error answer's body.")
)]
pub struct ErrorBody {
    #[cfg_attr(feature = "openapi", schema(inline))]
    pub error: ErrorDetail,
}

/// What went wrong. Keys in this order (they have always come sorted).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(
    feature = "openapi",
    schema(
        description = "What went wrong: a stable `code`, a message for humans, and the \
        offending field when there is one."
    )
)]
pub struct ErrorDetail {
    // The Rust type keeps the code as text, so a code newer than this build still reads.
    #[cfg_attr(feature = "openapi", schema(value_type = ErrorCode))]
    pub code: String,
    /// JSON path of the offending field, query parameter or header, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "openapi",
        schema(
            nullable = false,
            examples(
                "schedule.timezone",
                "jobs[3].target.webhook.url",
                "hourglass-namespace"
            )
        )
    )]
    pub field: Option<String>,
    /// For humans; may change.
    pub message: String,
}
