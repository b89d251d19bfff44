//! The table itself, and the requests every other module is written in: creating or checking the
//! table at open, expressions with their placeholders, reads (one item, a batch, a query's
//! pages) and writes (a conditional update, a transaction, batched deletes).
//!
//! This file holds the table's settings and its creation or check at open, and the count of
//! requests sent (`RequestCounts`); `expr.rs` the
//! expressions with their placeholders, the conditional update (`Change`) and a transaction's
//! actions; `reads.rs` reads (one item, a batch, a query's pages, a scan); `writes.rs` writes (a
//! conditional update or delete, puts, a transaction, batched writes).

mod expr;
mod reads;
mod writes;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, KeySchemaElement, KeyType, ScalarAttributeType, TableStatus,
    TimeToLiveSpecification,
};

use super::DynamoOptions;
use super::item::{Attrs, condition_failed, key, n, unavailable};
use crate::{Result, StoreError};

pub(super) use self::expr::{Change, delete, put, put_new};
pub(super) use self::reads::Query;

pub(super) fn valid_table_name(name: &str) -> bool {
    (3..=255).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

/// The layout of items this version reads and writes, kept in the table's settings item. Layout
/// 1 (until November 2026) indexed jobs with three global secondary indexes; layout 2 keeps its
/// time index and namespace lists in items of the table (`entry.rs`, `jobs.rs`).
pub(super) const LAYOUT: i64 = 2;

/// The attribute DynamoDB's time to live reads: items carrying it are deleted, for free, some
/// time after that instant (seconds since the epoch).
pub(super) const TTL: &str = "ttl";

fn schema(pk: &str, sk: &str) -> Vec<KeySchemaElement> {
    let element = |name: &str, kind| {
        KeySchemaElement::builder()
            .attribute_name(name)
            .key_type(kind)
            .build()
            .expect("key schema element")
    };
    vec![element(pk, KeyType::Hash), element(sk, KeyType::Range)]
}

/// Creates the table when it is missing, checks its keys and indexes when it is there, and
/// answers the shard count the table was created with.
pub(super) async fn prepare(client: &Client, options: &DynamoOptions) -> Result<u32> {
    let table = &options.table;
    let described = client.describe_table().table_name(table).send().await;
    match described {
        Ok(out) => check(out.table(), table)?,
        Err(e)
            if e.as_service_error()
                .is_some_and(|e| e.is_resource_not_found_exception()) =>
        {
            create(client, table).await?
        }
        Err(e) => return Err(unavailable(e)),
    }
    // The shard count is the table's, not each node's: claims must read every shard writers use.
    let meta = key("meta".into(), "meta");
    let mut item = meta.clone();
    item.insert("shards".into(), n(i64::from(options.shards)));
    item.insert("layout".into(), n(LAYOUT));
    let put = client
        .put_item()
        .table_name(table)
        .set_item(Some(item))
        .condition_expression("attribute_not_exists(pk)")
        .send()
        .await;
    if let Err(e) = put
        && !condition_failed(&e)
    {
        return Err(unavailable(e));
    }
    let stored = client
        .get_item()
        .table_name(table)
        .set_key(Some(meta))
        .consistent_read(true)
        .send()
        .await
        .map_err(unavailable)?;
    let settings = stored
        .item()
        .ok_or_else(|| StoreError::Corrupt("the table's settings item is missing".into()))?
        .clone();
    let layout = settings.opt_num("layout")?.unwrap_or(1);
    if layout != LAYOUT {
        return Err(StoreError::Unavailable(format!(
            "table {table} holds Hourglass's layout {layout}, and this version reads and writes \
             layout {LAYOUT} (no secondary indexes; due entries and namespace lists in the \
             table): point HOURGLASS_STORE at a new table name, or delete this one"
        )));
    }
    let shards = settings.num("shards")?;
    let shards = u32::try_from(shards)
        .ok()
        .filter(|s| (1..=super::MAX_SHARDS).contains(s))
        .ok_or_else(|| StoreError::Corrupt(format!("the table's shard count is {shards}")))?;
    if shards != options.shards {
        tracing::info!(
            table,
            shards,
            asked = options.shards,
            "the table keeps the shard count it was created with"
        );
    }
    Ok(shards)
}

fn check(
    description: Option<&aws_sdk_dynamodb::types::TableDescription>,
    table: &str,
) -> Result<()> {
    let Some(description) = description else {
        return Err(StoreError::Unavailable(format!(
            "DynamoDB described no table {table}"
        )));
    };
    let wrong = |what: String| {
        StoreError::Unavailable(format!(
            "table {table} is not an Hourglass table: {what} (create it with the deployment \
             template, or let `hourglass serve` create it under a new name)"
        ))
    };
    let names = |elements: &[KeySchemaElement]| {
        elements
            .iter()
            .map(|e| e.attribute_name().to_owned())
            .collect::<Vec<_>>()
    };
    if names(description.key_schema()) != ["pk", "sk"] {
        return Err(wrong("its key is not (pk, sk)".into()));
    }
    if let Some(index) = description.global_secondary_indexes().first() {
        let name = index.index_name().unwrap_or_default();
        return Err(StoreError::Unavailable(format!(
            "table {table} has the secondary index {name:?}: it was made for Hourglass's layout \
             1, and this version reads and writes layout {LAYOUT}, which has none (point \
             HOURGLASS_STORE at a new table name, or delete this one)"
        )));
    }
    Ok(())
}

async fn create(client: &Client, table: &str) -> Result<()> {
    let definitions = ["pk", "sk"]
        .map(|name| {
            AttributeDefinition::builder()
                .attribute_name(name)
                .attribute_type(ScalarAttributeType::S)
                .build()
                .expect("attribute definition")
        })
        .to_vec();
    let created = client
        .create_table()
        .table_name(table)
        .billing_mode(BillingMode::PayPerRequest)
        .set_attribute_definitions(Some(definitions))
        .set_key_schema(Some(schema("pk", "sk")))
        .send()
        .await;
    match created {
        Ok(_) => tracing::info!(table, "created the DynamoDB table (on-demand capacity)"),
        // Another node created it meanwhile.
        Err(e)
            if e.as_service_error()
                .is_some_and(|e| e.is_resource_in_use_exception()) => {}
        Err(e) => return Err(unavailable(e)),
    }
    // A new table takes a while to become usable on AWS.
    let started = Instant::now();
    loop {
        let out = client
            .describe_table()
            .table_name(table)
            .send()
            .await
            .map_err(unavailable)?;
        let active = out
            .table()
            .is_some_and(|t| t.table_status() == Some(&TableStatus::Active));
        if active {
            check(out.table(), table)?;
            break;
        }
        if started.elapsed() > Duration::from_secs(300) {
            return Err(StoreError::Unavailable(format!(
                "table {table} is not active five minutes after its creation"
            )));
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    // Retention is DynamoDB's time to live on `ttl`: deletes that cost nothing.
    let ttl = TimeToLiveSpecification::builder()
        .attribute_name(TTL)
        .enabled(true)
        .build()
        .expect("time to live");
    let enabled = client
        .update_time_to_live()
        .table_name(table)
        .time_to_live_specification(ttl)
        .send()
        .await;
    match enabled {
        Ok(_) => Ok(()),
        // Another node enabled it meanwhile.
        Err(e) if format!("{e:?}").contains("already enabled") => Ok(()),
        Err(e) => Err(unavailable(e)),
    }
}

/// Requests this store sent, by kind: how the bench tells what one fire costs.
#[derive(Debug, Default)]
pub struct RequestCounts {
    pub reads: AtomicU64,
    pub writes: AtomicU64,
    pub transactions: AtomicU64,
    pub queries: AtomicU64,
    pub scans: AtomicU64,
}

impl RequestCounts {
    /// (reads, writes, transactions, queries, scans) so far.
    pub fn snapshot(&self) -> [u64; 5] {
        [
            &self.reads,
            &self.writes,
            &self.transactions,
            &self.queries,
            &self.scans,
        ]
        .map(|c| c.load(Ordering::Relaxed))
    }

    fn count(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }
}
