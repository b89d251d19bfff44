//! The OpenAPI document (`crates/server/openapi.json`), generated from this crate's types
//! (feature `openapi`). Each schema a type derives (`utoipa::ToSchema`, its field docs as
//! descriptions, bounds and formats in `#[schema(...)]`) takes the place its name holds in the
//! hand-kept frame (`crates/api/openapi/frame.json`: info, paths, responses, examples, webhooks
//! and the schemas no type carries yet). The server serves the committed file; the freshness
//! test (`tests/openapi.rs`) fails when it differs from what this module writes, and
//! `scripts/openapi-generate` rewrites it.
//!
//! Derived schemas are tidied in two ways: the lines of a description's paragraph (a doc
//! comment's lines) are joined with spaces, as Markdown reads them, and integer formats (`int32`,
//! `int64`: the Rust field's width) are left out, as the API's bounds say what it takes.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{SerializeMap, SerializeSeq, Serializer};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa::openapi::{RefOr, Schema};

use crate::*;

/// The document's hand-kept part. A schema a type derives stands in it as the string
/// `"derived"`, so the document keeps the frame's order.
pub const FRAME: &str = include_str!("../openapi/frame.json");

/// What stands in the frame for a derived schema.
const PLACEHOLDER: &str = "derived";

/// The schemas derived from types, each under the name the document gives it.
fn derived() -> Vec<(Cow<'static, str>, RefOr<Schema>)> {
    vec![
        schema::<WebhookBatch>(),
        schema::<TargetIn>(),
        schema::<RetryIn>(),
        schema::<RetryOut>(),
        schema::<CallbackIn>(),
        schema::<CallbackOut<'static>>(),
        schema::<CallbackOf>(),
        schema::<OccurrenceOf>(),
        schema::<CreateJob>(),
        schema::<PatchJob>(),
        schema::<BatchCreate>(),
        schema::<PreviewRequest>(),
        schema::<BackfillRequest>(),
        schema::<BackfillAccepted>(),
        schema::<BulkChanged>(),
        schema::<SchedulePreview>(),
        schema::<Job<'static>>(),
        schema::<JobList<'static>>(),
        schema::<LeaseRequest>(),
        schema::<Message<'static>>(),
        schema::<LeaseResult<'static>>(),
        schema::<AckRequest>(),
        schema::<NackRequest>(),
        schema::<ExtendRequest>(),
        schema::<Queue>(),
        schema::<QueueList>(),
        schema::<QueueMessage<'static>>(),
        schema::<QueueMessageList<'static>>(),
        schema::<EventBridgeTarget>(),
        schema::<SqsTarget>(),
        schema::<SnsTarget>(),
        schema::<LambdaTarget>(),
        schema::<NatsTarget>(),
        schema::<RedisStreamTarget>(),
        schema::<AmqpTarget>(),
        schema::<NodeList>(),
        schema::<JobState>(),
        schema::<QueueMessageStatus>(),
        schema::<ErrorCode>(),
        schema::<Summary>(),
        schema::<NodeFigures>(),
        schema::<DeadLetterList<'static>>(),
        schema::<ReceiptResults>(),
        schema::<BreakerList>(),
        schema::<KeyRole>(),
        schema::<AllowedRoute>(),
        schema::<Identity>(),
        schema::<AuditEntry>(),
        schema::<AuditList>(),
        schema::<ErrorBody>(),
        schema::<CalendarIn>(),
        schema::<ExcludeIn>(),
        schema::<DateRangeIn>(),
        schema::<Calendar>(),
        schema::<CalendarList>(),
        schema::<AnchorIn>(),
        schema::<Anchor>(),
        schema::<AnchorList>(),
        schema::<AnchorDeleted>(),
    ]
}

fn schema<T: ToSchema>() -> (Cow<'static, str>, RefOr<Schema>) {
    (T::name(), T::schema())
}

/// `LeaseRequest.types`: 1 to 32 job types, each 1 to 128 characters.
pub(crate) fn job_types() -> utoipa::openapi::schema::Array {
    use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, Type};
    let job_type = ObjectBuilder::new()
        .schema_type(Type::String)
        .min_length(Some(1))
        .max_length(Some(128));
    ArrayBuilder::new()
        .items(job_type)
        .min_items(Some(1))
        .max_items(Some(32))
        .description(Some("Only messages of these job types (1–32 of them)."))
        .build()
}

/// A string enum of `values` (the wire names serde writes), described by `description`.
fn string_enum<T: Serialize>(values: &[T], description: &str) -> RefOr<Schema> {
    use utoipa::openapi::schema::{ObjectBuilder, Type};
    let names = values.iter().map(|v| match serde_json::to_value(v) {
        Ok(serde_json::Value::String(name)) => name,
        other => panic!("an enum value serializes as a string, not {other:?}"),
    });
    ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some(names))
        .description(Some(description))
        .into()
}

/// `JobState`: the states the server has (`JobState::ALL`; not `Unknown`, a client's catch-all).
impl utoipa::PartialSchema for JobState {
    fn schema() -> RefOr<Schema> {
        string_enum(
            &JobState::ALL,
            "`completed`: no occurrence left. `failed`: a one-off job whose occurrence was \
             dead-lettered. `completed`, `failed` and `cancelled` are terminal.",
        )
    }
}

impl ToSchema for JobState {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("JobState")
    }
}

/// `QueueMessageStatus`: every status but `Unknown` (a client's catch-all).
impl utoipa::PartialSchema for QueueMessageStatus {
    fn schema() -> RefOr<Schema> {
        use QueueMessageStatus::*;
        // A status added to the type must be placed here (the match has no catch-all).
        let listed = |s: &QueueMessageStatus| match s {
            Available | Scheduled | Leased => true,
            Unknown => false,
        };
        let all: Vec<_> = [Available, Scheduled, Leased, Unknown]
            .into_iter()
            .filter(listed)
            .collect();
        string_enum(
            &all,
            "`available`: due and waiting for a lease (a lapsed lease included); `scheduled`: not \
             due yet, or waiting out a nack's delay; `leased`: held by a worker until \
             `leased_until`.",
        )
    }
}

impl ToSchema for QueueMessageStatus {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("QueueMessageStatus")
    }
}

/// `ReceiptFailure.code`: the codes a receipt fails with.
pub(crate) fn receipt_failure_code() -> utoipa::openapi::schema::Object {
    use utoipa::openapi::schema::{ObjectBuilder, Type};
    ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some([crate::STALE_RECEIPT]))
        .build()
}

/// Declares the schemas the frame still keeps by hand, so that a derived schema can refer to
/// one (`#[schema(value_type = crate::openapi::Instant)]` writes `{"$ref": ".../Instant"}`).
macro_rules! kept {
    ($($name:ident),* $(,)?) => {$(
        #[doc = concat!("The frame's `", stringify!($name), "` schema, for references to it.")]
        pub struct $name;

        impl utoipa::PartialSchema for $name {
            fn schema() -> RefOr<Schema> {
                RefOr::Ref(utoipa::openapi::Ref::from_schema_name(stringify!($name)))
            }
        }

        impl ToSchema for $name {
            fn name() -> Cow<'static, str> {
                Cow::Borrowed(stringify!($name))
            }
        }
    )*};
}

kept!(
    Instant,
    InstantOut,
    Duration,
    DeliveryId,
    QueueName,
    Schedule,
    JobSchedule,
    Misfire,
    Overlap,
    Labels,
    Receipts,
    TargetOut,
    Receipt,
    Node,
    Webhook,
    DeliveryCounts,
    LatenessFigures,
    SummaryStore,
    DeadLetter,
);

/// The document, as committed: two-space indents, a final newline.
pub fn document() -> Result<String, String> {
    let mut doc: Json = serde_json::from_str(FRAME).map_err(|e| format!("frame.json: {e}"))?;
    let schemas = doc
        .get_mut("components")
        .and_then(|c| c.get_mut("schemas"))
        .ok_or("frame.json has no components.schemas")?;
    let Json::Object(slots) = schemas else {
        return Err("frame.json: components.schemas is not an object".into());
    };
    for (name, schema) in derived() {
        let text = serde_json::to_string(&schema).map_err(|e| e.to_string())?;
        let mut schema: Json = serde_json::from_str(&text).map_err(|e| e.to_string())?;
        schema.tidy();
        let slot = slots
            .iter_mut()
            .find(|(key, _)| *key == name)
            .ok_or_else(|| format!("frame.json has no slot for the derived schema {name}"))?;
        if slot.1 != Json::String(PLACEHOLDER.into()) {
            return Err(format!(
                "frame.json: schema {name} is derived; its slot must be \"{PLACEHOLDER}\""
            ));
        }
        slot.1 = schema;
    }
    if let Some((name, _)) = slots
        .iter()
        .find(|(_, s)| *s == Json::String(PLACEHOLDER.into()))
    {
        return Err(format!("frame.json: no type derives the schema {name}"));
    }
    let mut text = serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?;
    text.push('\n');
    Ok(text)
}

/// JSON that keeps its objects' keys in order (serde_json's `Value` sorts them unless the whole
/// build turns on `preserve_order`, which would change the server's answers).
#[derive(Debug, Clone, PartialEq)]
enum Json {
    Null,
    Bool(bool),
    Number(serde_json::Number),
    String(String),
    Array(Vec<Json>),
    Object(Vec<(String, Json)>),
}

impl Json {
    fn get_mut(&mut self, key: &str) -> Option<&mut Json> {
        match self {
            Json::Object(entries) => entries.iter_mut().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// Joins the lines of each description's paragraphs, everywhere below.
    fn tidy(&mut self) {
        match self {
            Json::Array(items) => items.iter_mut().for_each(Json::tidy),
            Json::Object(entries) => {
                for (key, value) in entries.iter_mut() {
                    match value {
                        Json::String(text) if key == "description" => *text = paragraphs(text),
                        _ => value.tidy(),
                    }
                }
                entries.retain(|(key, value)| {
                    !(key == "format"
                        && matches!(value, Json::String(f) if f == "int32" || f == "int64"))
                });
            }
            _ => {}
        }
    }
}

/// `text` with each paragraph on one line (a table keeps its rows); paragraphs stay apart, by
/// one blank line.
fn paragraphs(text: &str) -> String {
    text.split("\n\n")
        .map(|p| match p.starts_with('|') {
            true => p.to_owned(),
            false => p.lines().map(str::trim).collect::<Vec<_>>().join(" "),
        })
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// `ErrorCode`: every code, and a table of each with its status and meaning.
impl utoipa::PartialSchema for ErrorCode {
    fn schema() -> RefOr<Schema> {
        use utoipa::openapi::schema::{ObjectBuilder, Type};
        let mut table = String::from(
            "Stable, machine-readable error codes and the status each comes with:\n\n\
             | code | status | meaning |\n|---|---|---|",
        );
        for code in ErrorCode::ALL {
            let row = format!("\n| `{code}` | {} | {} |", code.status(), code.meaning());
            table.push_str(&row);
        }
        ObjectBuilder::new()
            .schema_type(Type::String)
            .enum_values(Some(ErrorCode::ALL.iter().map(|code| code.as_str())))
            .description(Some(table))
            .into()
    }
}

impl ToSchema for ErrorCode {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("ErrorCode")
    }
}

impl Serialize for Json {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Json::Null => s.serialize_unit(),
            Json::Bool(b) => s.serialize_bool(*b),
            Json::Number(n) => n.serialize(s),
            Json::String(text) => s.serialize_str(text),
            Json::Array(items) => {
                let mut seq = s.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(item)?;
                }
                seq.end()
            }
            Json::Object(entries) => {
                let mut map = s.serialize_map(Some(entries.len()))?;
                for (key, value) in entries {
                    map.serialize_entry(key, value)?;
                }
                map.end()
            }
        }
    }
}

impl<'de> Deserialize<'de> for Json {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(JsonVisitor)
    }
}

struct JsonVisitor;

impl<'de> Visitor<'de> for JsonVisitor {
    type Value = Json;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_unit<E>(self) -> Result<Json, E> {
        Ok(Json::Null)
    }
    fn visit_bool<E>(self, b: bool) -> Result<Json, E> {
        Ok(Json::Bool(b))
    }
    fn visit_u64<E>(self, n: u64) -> Result<Json, E> {
        Ok(Json::Number(n.into()))
    }
    fn visit_i64<E>(self, n: i64) -> Result<Json, E> {
        Ok(Json::Number(n.into()))
    }
    fn visit_f64<E: de::Error>(self, n: f64) -> Result<Json, E> {
        serde_json::Number::from_f64(n)
            .map(Json::Number)
            .ok_or_else(|| E::custom("a number JSON cannot hold"))
    }
    fn visit_str<E>(self, text: &str) -> Result<Json, E> {
        Ok(Json::String(text.to_owned()))
    }
    fn visit_string<E>(self, text: String) -> Result<Json, E> {
        Ok(Json::String(text))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Json, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Json::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Json, A::Error> {
        let mut entries = Vec::new();
        while let Some(entry) = map.next_entry()? {
            entries.push(entry);
        }
        Ok(Json::Object(entries))
    }
}
