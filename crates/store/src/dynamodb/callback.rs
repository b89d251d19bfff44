//! A completion's callback job ([`hourglass_core::callback`]) as actions of the completion's
//! transaction: the items a create writes for one job without a key (its payload item when the
//! payload lives out, its due entry with the entry's snapshot, the namespace's registry item and
//! the job item, new only if no job has its id). A create batch is not a transaction (it would
//! bill every item twice); a callback is, so that a completion and its callback are written
//! together or not at all. Completions without a callback never come here and cost what they did.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::TransactWriteItem;

use super::Inner;
use super::entry::{Listed, root_item};
use super::item::{Lane, key, n, new_job_item, registry_pk, s};
use super::table::{TTL, put, put_new};
use crate::{NewJob, Result};

/// The actions that create `job` in a transaction.
pub(super) async fn create_actions(inner: &Inner, job: &NewJob) -> Result<Vec<TransactWriteItem>> {
    let mut actions = Vec::with_capacity(5);
    if let Some(queue) = job.spec.target.queue() {
        // Idempotent and outside the transaction: a queue name listed before its first message
        // is harmless.
        super::jobs::register_queues(inner, vec![(job.namespace.clone(), queue.to_owned())])
            .await?;
    }
    if let Some(payload) = job
        .payload
        .as_deref()
        .filter(|p| super::payload::lives_out(p))
    {
        actions.push(put(
            &inner.table,
            super::payload::payload_item(job.id, payload, 0),
        ));
    }
    let fire = job.first_fire().as_millisecond();
    let listed = Listed {
        id: job.id,
        fire,
        version: 0,
    };
    let root = match job.spec.target.queue() {
        None => {
            let root = inner.new_root(Lane::Fired, fire);
            let by_id = HashMap::from([(job.id, job)]);
            let (entry, snapshot) =
                super::snapshot::fired_entry(inner, &root, std::slice::from_ref(&listed), &by_id);
            actions.extend(snapshot.map(|snapshot| put(&inner.table, snapshot)));
            actions.push(put(&inner.table, entry));
            root
        }
        Some(queue) => {
            let lane = Lane::Queue {
                namespace: &job.namespace,
                queue,
            };
            let root = inner.new_root(lane, fire);
            let size = [job.payload.as_deref().map_or(0, str::len)];
            let entry = root_item(
                &root,
                std::slice::from_ref(&listed),
                Some((&job.spec.job_type, &size)),
            );
            actions.push(put(&inner.table, entry));
            root
        }
    };
    // Listed in its namespace as a create lists it, the registry item expiring with the job.
    let ttl = inner.one_off_ttl(job.spec.schedule.is_recurring(), fire);
    let sk = format!("{}#{:016x}", job.id, rand::random::<u64>());
    let mut registry = key(registry_pk(&job.namespace), &sk);
    registry.insert(
        "ids".into(),
        aws_sdk_dynamodb::types::AttributeValue::B(aws_sdk_dynamodb::primitives::Blob::new(
            job.id.as_bytes().to_vec(),
        )),
    );
    let mut home = new_job_item(job, &root, ttl);
    home.insert("reg".into(), s(&sk));
    if let Some(ttl) = ttl {
        registry.insert(TTL.into(), n(ttl));
        home.insert("regttl".into(), n(ttl));
    }
    actions.push(put(&inner.table, registry));
    actions.push(put_new(&inner.table, home));
    Ok(actions)
}
