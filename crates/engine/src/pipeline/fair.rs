//! The node's delivery slots, shared fairly between namespaces when they are scarce.
//!
//! While a slot is free, whoever asks gets it at once. When none is, waiters queue per namespace,
//! and each slot that frees goes to the next namespace in turn that has a waiter (round robin
//! over namespaces with waiting work, one slot per turn: deficit round robin with equal quanta).
//! Within a namespace, waiters are served in the order they came, which is due-time order. So a
//! namespace with 100,000 due occurrences and one with 10 each get every other free slot, and the
//! small one is done after about 20 slot releases, not 100,010.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::oneshot;

pub(crate) struct FairSlots {
    inner: Mutex<Inner>,
}

struct Inner {
    free: usize,
    /// Waiters by namespace, oldest first. A namespace is here only while it has waiters.
    waiting: HashMap<Arc<str>, VecDeque<oneshot::Sender<SlotPermit>>>,
    /// The namespaces with waiters, in turn order.
    turns: VecDeque<Arc<str>>,
}

/// One delivery slot; dropping it hands the slot to the next waiter in turn.
pub(crate) struct SlotPermit {
    slots: Option<Arc<FairSlots>>,
}

impl FairSlots {
    pub(crate) fn new(slots: usize) -> Arc<Self> {
        Arc::new(Self {
            inner: Mutex::new(Inner {
                free: slots,
                waiting: HashMap::new(),
                turns: VecDeque::new(),
            }),
        })
    }

    /// Nothing here is left half-changed by a panic (each change is one push or pop), so a
    /// poisoned lock is used as it is.
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A slot now if one is free and nobody waits (waiters are served first).
    pub(crate) fn try_acquire(self: &Arc<Self>) -> Option<SlotPermit> {
        let mut inner = self.lock();
        if inner.free > 0 && inner.turns.is_empty() {
            inner.free -= 1;
            Some(SlotPermit {
                slots: Some(self.clone()),
            })
        } else {
            None
        }
    }

    /// Waits for a slot in `namespace`'s turn.
    pub(crate) async fn acquire(self: &Arc<Self>, namespace: &Arc<str>) -> SlotPermit {
        let rx = {
            let mut inner = self.lock();
            if inner.free > 0 && inner.turns.is_empty() {
                inner.free -= 1;
                return SlotPermit {
                    slots: Some(self.clone()),
                };
            }
            let (tx, rx) = oneshot::channel();
            let queue = inner.waiting.entry(namespace.clone()).or_default();
            let first = queue.is_empty();
            queue.push_back(tx);
            if first {
                inner.turns.push_back(namespace.clone());
            }
            rx
        };
        // The sender is dropped only when a waiter is skipped, which happens only to a waiter
        // whose receiver is gone: this one is alive, so the answer always comes.
        match rx.await {
            Ok(permit) => permit,
            Err(_) => SlotPermit { slots: None },
        }
    }

    /// Waiters across all namespaces.
    #[cfg(test)]
    fn waiting(&self) -> usize {
        self.lock().waiting.values().map(VecDeque::len).sum()
    }

    /// A slot came back: give it to the next namespace in turn, or keep it free.
    fn release(self: &Arc<Self>) {
        let mut inner = self.lock();
        while let Some(namespace) = inner.turns.pop_front() {
            let Some(queue) = inner.waiting.get_mut(&namespace) else {
                continue;
            };
            let next = queue.pop_front();
            if queue.is_empty() {
                inner.waiting.remove(&namespace);
            } else {
                inner.turns.push_back(namespace);
            }
            if let Some(tx) = next {
                let permit = SlotPermit {
                    slots: Some(self.clone()),
                };
                match tx.send(permit) {
                    Ok(()) => return,
                    // The waiter gave up (shutdown). The permit comes back here, and dropping
                    // it would re-enter this lock: defuse it and offer the slot to the next.
                    Err(mut unused) => unused.slots = None,
                }
            }
        }
        inner.free += 1;
    }
}

impl Drop for SlotPermit {
    fn drop(&mut self) {
        if let Some(slots) = self.slots.take() {
            slots.release();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn free_slots_are_taken_at_once_and_come_back() {
        let slots = FairSlots::new(2);
        let a = slots.try_acquire().expect("free");
        let _b = slots.try_acquire().expect("free");
        assert!(slots.try_acquire().is_none());
        drop(a);
        assert!(slots.try_acquire().is_some());
    }

    /// Namespace `big` queues 10 waiters before `small` queues 2; freed slots alternate between
    /// them, so `small` is served within its first turns.
    #[tokio::test]
    async fn freed_slots_alternate_between_namespaces_with_waiters() {
        let slots = FairSlots::new(1);
        let held = slots.try_acquire().expect("free");
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        let big: Arc<str> = "big".into();
        let small: Arc<str> = "small".into();
        for (i, ns) in std::iter::repeat_n(&big, 10)
            .chain(std::iter::repeat_n(&small, 2))
            .enumerate()
        {
            let (slots, order, ns) = (slots.clone(), order.clone(), ns.clone());
            tasks.push(tokio::spawn(async move {
                let permit = slots.acquire(&ns).await;
                order.lock().unwrap().push(format!("{ns}{i}"));
                drop(permit);
            }));
            // Queue in a known order.
            tokio::task::yield_now().await;
        }
        assert_eq!(slots.waiting(), 12);
        drop(held);
        for t in tasks {
            t.await.unwrap();
        }
        let order = order.lock().unwrap().clone();
        assert_eq!(&order[..4], ["big0", "small10", "big1", "small11"]);
        assert_eq!(order.len(), 12);
        assert_eq!(slots.waiting(), 0);
    }

    #[tokio::test]
    async fn a_waiter_that_gave_up_passes_its_turn_on() {
        let slots = FairSlots::new(1);
        let held = slots.try_acquire().expect("free");
        let a: Arc<str> = "a".into();
        let b: Arc<str> = "b".into();
        let gave_up = {
            let (slots, a) = (slots.clone(), a.clone());
            tokio::spawn(async move { slots.acquire(&a).await })
        };
        tokio::task::yield_now().await;
        let waiting = {
            let (slots, b) = (slots.clone(), b.clone());
            tokio::spawn(async move { slots.acquire(&b).await })
        };
        tokio::task::yield_now().await;
        gave_up.abort();
        let _ = gave_up.await;
        drop(held);
        let permit = waiting.await.unwrap();
        drop(permit);
        assert!(slots.try_acquire().is_some(), "the slot is free again");
    }
}
