//! Reads: one item, a batch of items, a query's pages (on one partition, or merged over every
//! shard's), and a scan.

use std::time::Duration;

use aws_sdk_dynamodb::types::KeysAndAttributes;

use super::expr::Expr;
use crate::dynamodb::item::{self, Attrs, Item, unavailable};
use crate::dynamodb::{Inner, RequestCounts};
use crate::{Result, StoreError};

/// One Query: a partition of the table, optionally only sort keys below or above a bound or
/// with a prefix, in either order, up to `limit` items over as many pages as that takes.
pub(in crate::dynamodb) struct Query {
    pub(in crate::dynamodb) partition: String,
    pub(in crate::dynamodb) range: Range,
    pub(in crate::dynamodb) forward: bool,
    pub(in crate::dynamodb) limit: usize,
    /// Strongly consistent (a read unit a started 4 KB) unless asked otherwise (half that).
    pub(in crate::dynamodb) consistent: bool,
}

pub(in crate::dynamodb) enum Range {
    All,
    /// Sort keys strictly below this.
    Below(String),
    /// Sort keys strictly above this.
    Above(String),
    /// Sort keys starting with this.
    Prefix(String),
}

impl Query {
    pub(in crate::dynamodb) fn new(partition: String) -> Self {
        Self {
            partition,
            range: Range::All,
            forward: true,
            limit: usize::MAX,
            consistent: true,
        }
    }

    pub(in crate::dynamodb) fn below(mut self, bound: String) -> Self {
        self.range = Range::Below(bound);
        self
    }

    pub(in crate::dynamodb) fn above(mut self, bound: String) -> Self {
        self.range = Range::Above(bound);
        self
    }

    pub(in crate::dynamodb) fn prefix(mut self, prefix: String) -> Self {
        self.range = Range::Prefix(prefix);
        self
    }

    pub(in crate::dynamodb) fn backward(mut self) -> Self {
        self.forward = false;
        self
    }

    pub(in crate::dynamodb) fn limit(mut self, limit: usize) -> Self {
        self.limit = limit;
        self
    }

    pub(in crate::dynamodb) fn eventually_consistent(mut self) -> Self {
        self.consistent = false;
        self
    }
}

impl Inner {
    /// One item by key, strongly consistent.
    pub(in crate::dynamodb) async fn get(&self, key: Item) -> Result<Option<Item>> {
        RequestCounts::count(&self.counts.reads);
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(key))
            .consistent_read(true)
            .send()
            .await
            .map_err(unavailable)?;
        Ok(out.item)
    }

    /// Items by key, strongly consistent, in no particular order; missing ones are left out.
    pub(in crate::dynamodb) async fn get_many(&self, keys: Vec<Item>) -> Result<Vec<Item>> {
        self.get_many_as(keys, true).await
    }

    /// Items by key, in no particular order; missing ones are left out. Eventually consistent
    /// reads cost half, and may miss a write of the last second.
    pub(in crate::dynamodb) async fn get_many_as(
        &self,
        keys: Vec<Item>,
        consistent: bool,
    ) -> Result<Vec<Item>> {
        let mut found = Vec::with_capacity(keys.len());
        for chunk in keys.chunks(100) {
            let mut pending = chunk.to_vec();
            let mut rounds = 0;
            while !pending.is_empty() {
                rounds += 1;
                if rounds > 8 {
                    return Err(StoreError::Unavailable(
                        "dynamodb: reads left unprocessed after 8 rounds (throttled)".into(),
                    ));
                }
                RequestCounts::count(&self.counts.reads);
                let request = KeysAndAttributes::builder()
                    .set_keys(Some(std::mem::take(&mut pending)))
                    .consistent_read(consistent)
                    .build()
                    .expect("keys");
                let out = self
                    .client
                    .batch_get_item()
                    .request_items(&self.table, request)
                    .send()
                    .await
                    .map_err(unavailable)?;
                if let Some(mut responses) = out.responses
                    && let Some(items) = responses.remove(&self.table)
                {
                    found.extend(items);
                }
                if let Some(mut left) = out.unprocessed_keys
                    && let Some(left) = left.remove(&self.table)
                {
                    pending = left.keys;
                    if !pending.is_empty() {
                        tokio::time::sleep(Duration::from_millis(50 << rounds.min(5))).await;
                    }
                }
            }
        }
        Ok(found)
    }

    /// A query's items, page after page, up to its limit.
    pub(in crate::dynamodb) async fn query(&self, query: &Query) -> Result<Vec<Item>> {
        self.query_while(query, |_| true).await
    }

    /// A query's items in order, page after page, up to its limit or until `more` answers
    /// false for an item (that item is the last one returned).
    pub(in crate::dynamodb) async fn query_while(
        &self,
        query: &Query,
        mut more: impl FnMut(&Item) -> bool,
    ) -> Result<Vec<Item>> {
        let (pk, sk) = ("pk", "sk");
        let mut expr = Expr::default();
        let mut condition = format!(
            "{} = {}",
            expr.name(pk),
            expr.value(item::s(query.partition.clone()))
        );
        match &query.range {
            Range::All => {}
            Range::Below(bound) => {
                let (name, value) = (expr.name(sk), expr.value(item::s(bound.clone())));
                condition.push_str(&format!(" AND {name} < {value}"));
            }
            Range::Above(bound) => {
                let (name, value) = (expr.name(sk), expr.value(item::s(bound.clone())));
                condition.push_str(&format!(" AND {name} > {value}"));
            }
            Range::Prefix(prefix) => {
                let (name, value) = (expr.name(sk), expr.value(item::s(prefix.clone())));
                condition.push_str(&format!(" AND begins_with({name}, {value})"));
            }
        }
        let mut items = Vec::new();
        let mut start = None;
        loop {
            RequestCounts::count(&self.counts.queries);
            let page = (query.limit - items.len()).clamp(1, 100) as i32;
            let out = self
                .client
                .query()
                .table_name(&self.table)
                .key_condition_expression(&condition)
                .set_expression_attribute_names(expr.names())
                .set_expression_attribute_values(expr.values())
                .scan_index_forward(query.forward)
                .consistent_read(query.consistent)
                .limit(page)
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(unavailable)?;
            for item in out.items.unwrap_or_default() {
                let go_on = more(&item);
                items.push(item);
                if !go_on {
                    return Ok(items);
                }
            }
            start = out.last_evaluated_key;
            if start.is_none() || items.len() >= query.limit {
                return Ok(items);
            }
        }
    }

    /// The same query on every shard's partition, merged in sort-key order (ascending or as the
    /// query says), up to the query's limit.
    pub(in crate::dynamodb) async fn query_shards(
        &self,
        partition: impl Fn(u32) -> String,
        template: impl Fn(String) -> Query,
    ) -> Result<Vec<Item>> {
        let queries: Vec<Query> = (0..self.shards).map(|s| template(partition(s))).collect();
        let (limit, forward, sort_key) = match queries.first() {
            Some(q) => (q.limit, q.forward, "sk"),
            None => return Ok(Vec::new()),
        };
        let pages =
            futures_util::future::try_join_all(queries.iter().map(|q| self.query(q))).await?;
        let mut merged: Vec<(String, Item)> = Vec::new();
        for item in pages.into_iter().flatten() {
            let sort = item.str(sort_key)?.to_owned();
            merged.push((sort, item));
        }
        merged.sort_by(|a, b| {
            if forward {
                a.0.cmp(&b.0)
            } else {
                b.0.cmp(&a.0)
            }
        });
        merged.truncate(limit);
        Ok(merged.into_iter().map(|(_, item)| item).collect())
    }

    /// Every item whose partition key starts with `prefix`, reading only `attrs` (all when
    /// empty; a full scan:
    /// for what DynamoDB cannot index, see `dynamodb/mod.rs`'s opening comment).
    pub(in crate::dynamodb) async fn scan(
        &self,
        prefix: &str,
        attrs: &[&str],
    ) -> Result<Vec<Item>> {
        let mut expr = Expr::default();
        let filter = format!(
            "begins_with({}, {})",
            expr.name("pk"),
            expr.value(item::s(prefix))
        );
        let projection = attrs
            .iter()
            .map(|a| expr.name(a))
            .collect::<Vec<_>>()
            .join(", ");
        let projection = (!projection.is_empty()).then_some(projection);
        let mut items = Vec::new();
        let mut start = None;
        loop {
            RequestCounts::count(&self.counts.scans);
            let out = self
                .client
                .scan()
                .table_name(&self.table)
                .filter_expression(&filter)
                .set_projection_expression(projection.clone())
                .set_expression_attribute_names(expr.names())
                .set_expression_attribute_values(expr.values())
                .consistent_read(true)
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(unavailable)?;
            items.extend(out.items.unwrap_or_default());
            start = out.last_evaluated_key;
            if start.is_none() {
                return Ok(items);
            }
        }
    }
}
