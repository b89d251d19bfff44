//! The node's budget for request bodies held in memory. A batch body may be 16 MiB and take a
//! minute to arrive, and a node keeps up to `max_connections` connections open: without a budget
//! across them, slow senders could make the node hold gigabytes. Each body takes its bytes from
//! the node's budget, and from its API key's share of it, as it is read (a declared
//! `Content-Length` takes them all before the first byte is read), and gives them back once the
//! request has been parsed. A body that finds the budget spent is refused at once with `503
//! server_busy` instead of being buffered.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Bytes of request bodies a node holds at once, in total and for one API key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodyBudget {
    pub node_bytes: usize,
    pub key_bytes: usize,
}

impl Default for BodyBudget {
    fn default() -> Self {
        Self {
            node_bytes: 256 * 1024 * 1024,
            key_bytes: 64 * 1024 * 1024,
        }
    }
}

/// The budget's live counts.
pub struct Budgets {
    node: Arc<Semaphore>,
    key_bytes: usize,
    /// One semaphore per API key (by its hash) that has a body in flight; dropped once the key's
    /// last body is done, so the map holds only keys in use.
    keys: Mutex<HashMap<String, Arc<Semaphore>>>,
}

/// Bytes taken from the budgets, given back when dropped.
pub struct Held {
    node: Option<OwnedSemaphorePermit>,
    key: Option<OwnedSemaphorePermit>,
    bytes: usize,
}

impl Held {
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

impl Budgets {
    pub fn new(budget: BodyBudget) -> Self {
        Self {
            node: Arc::new(Semaphore::new(clamp(budget.node_bytes))),
            key_bytes: clamp(budget.key_bytes),
            keys: Mutex::new(HashMap::new()),
        }
    }

    /// An empty hold for one request's body, charged to `key` (an API key's hash) too when given.
    pub fn hold(&self, key: Option<&str>) -> Hold<'_> {
        let key = key.map(|k| {
            self.keys
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .entry(k.to_owned())
                .or_insert_with(|| Arc::new(Semaphore::new(self.key_bytes)))
                .clone()
        });
        Hold {
            budgets: self,
            key,
            held: Held {
                node: None,
                key: None,
                bytes: 0,
            },
        }
    }

    /// Bytes of the node's budget not held by any body now.
    pub fn node_available(&self) -> usize {
        self.node.available_permits()
    }

    /// Forgets keys that hold nothing and that no request is charging.
    fn sweep(&self) {
        let mut keys = self.keys.lock().unwrap_or_else(PoisonError::into_inner);
        if keys.len() > 64 {
            keys.retain(|_, s| Arc::strong_count(s) > 1 || s.available_permits() < self.key_bytes);
        }
    }
}

fn clamp(bytes: usize) -> usize {
    bytes.clamp(1, Semaphore::MAX_PERMITS)
}

/// One request's hold on the budgets while its body is read.
pub struct Hold<'a> {
    budgets: &'a Budgets,
    key: Option<Arc<Semaphore>>,
    held: Held,
}

impl Hold<'_> {
    /// Bytes taken so far.
    pub fn bytes(&self) -> usize {
        self.held.bytes
    }

    /// Takes `bytes` more, or answers false (taking nothing) when the node's or the key's
    /// budget has not that much left.
    pub fn take(&mut self, bytes: usize) -> bool {
        if bytes == 0 {
            return true;
        }
        let Ok(n) = u32::try_from(bytes) else {
            return false;
        };
        let Ok(node) = self.budgets.node.clone().try_acquire_many_owned(n) else {
            return false;
        };
        let key = match &self.key {
            Some(key) => match key.clone().try_acquire_many_owned(n) {
                Ok(permit) => Some(permit),
                Err(_) => return false,
            },
            None => None,
        };
        merge(&mut self.held.node, node);
        if let Some(key) = key {
            merge(&mut self.held.key, key);
        }
        self.held.bytes += bytes;
        true
    }

    /// What was taken, to be kept while the bytes are.
    pub fn finish(self) -> Held {
        let held = self.held;
        drop(self.key);
        self.budgets.sweep();
        held
    }
}

fn merge(into: &mut Option<OwnedSemaphorePermit>, permit: OwnedSemaphorePermit) {
    match into {
        Some(held) => held.merge(permit),
        None => *into = Some(permit),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_share_the_node_budget_and_each_key_its_share() {
        let budgets = Budgets::new(BodyBudget {
            node_bytes: 100,
            key_bytes: 60,
        });
        let mut a = budgets.hold(Some("a"));
        assert!(a.take(50));
        assert!(!a.take(11), "past key a's share");
        assert!(a.take(10));
        let mut b = budgets.hold(Some("b"));
        assert!(b.take(40));
        assert!(!b.take(1), "past the node's budget");
        let mut open = budgets.hold(None);
        assert!(!open.take(1));
        let held_a = a.finish();
        assert_eq!(held_a.bytes(), 60);
        drop(held_a);
        assert_eq!(budgets.node_available(), 60);
        assert!(open.take(60));
        drop(b.finish());
        drop(open.finish());
        assert_eq!(budgets.node_available(), 100);
    }
}
