//! The node's delivery slots, shared fairly between namespaces.
//!
//! A namespace holds at most its cap of the slots (`namespace_concurrency`, three quarters of
//! `delivery_concurrency` unless the operator says otherwise), so that a tenant whose deliveries
//! hang — to many destinations, each within its own cap — cannot take every slot: the rest of
//! the node stays free for everyone else. Below its cap, while a slot is free, whoever asks gets
//! it at once. When none is (or only a capped namespace waits), waiters queue per namespace, and
//! each slot that frees goes to the next namespace in turn that has a waiter and is below its cap
//! (round robin over namespaces with waiting work, one slot per turn: deficit round robin with
//! equal quanta). Within a namespace, waiters are served in the order they came, which is
//! due-time order. So a namespace with 100,000 due occurrences and one with 10 each get every
//! other free slot, and the small one is done after about 20 slot releases, not 100,010.
//!
//! Invariant (after every change, under the lock): either no slot is free, or no waiter may take
//! one (every namespace with waiters is at its cap). So a free slot can be granted to a caller
//! below its cap without looking at the queues.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::oneshot;

pub(crate) struct FairSlots {
    inner: Mutex<Inner>,
    /// The most slots a namespace may hold, unless `caps` names it.
    cap: usize,
    caps: HashMap<String, usize>,
}

struct Inner {
    free: usize,
    /// Slots held per namespace; a namespace is here only while it holds one.
    held: HashMap<Arc<str>, usize>,
    /// Waiters by namespace, oldest first. A namespace is here only while it has waiters.
    waiting: HashMap<Arc<str>, VecDeque<oneshot::Sender<SlotPermit>>>,
    /// The namespaces with waiters, in turn order.
    turns: VecDeque<Arc<str>>,
}

/// One delivery slot; dropping it hands the slot to the next waiter in turn.
pub(crate) struct SlotPermit {
    slots: Option<Arc<FairSlots>>,
    namespace: Arc<str>,
}

impl FairSlots {
    /// `slots` in all; a namespace holds at most `cap` of them, or what `caps` gives it.
    pub(crate) fn new(slots: usize, cap: usize, caps: HashMap<String, usize>) -> Arc<Self> {
        Arc::new(Self {
            inner: Mutex::new(Inner {
                free: slots,
                held: HashMap::new(),
                waiting: HashMap::new(),
                turns: VecDeque::new(),
            }),
            cap: cap.max(1),
            caps,
        })
    }

    /// Nothing here is left half-changed by a panic (each change is a few counts and one push or
    /// pop), so a poisoned lock is used as it is.
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn cap_of(&self, namespace: &str) -> usize {
        self.caps.get(namespace).copied().unwrap_or(self.cap).max(1)
    }

    /// Whether `namespace` may take a free slot: it is below its cap.
    fn below_cap(&self, inner: &Inner, namespace: &str) -> bool {
        inner.held.get(namespace).copied().unwrap_or(0) < self.cap_of(namespace)
    }

    /// Takes a free slot for `namespace` (the caller checked there is one it may take).
    fn take(self: &Arc<Self>, inner: &mut Inner, namespace: &Arc<str>) -> SlotPermit {
        inner.free -= 1;
        *inner.held.entry(namespace.clone()).or_insert(0) += 1;
        SlotPermit {
            slots: Some(self.clone()),
            namespace: namespace.clone(),
        }
    }

    /// A slot now if one is free and `namespace` is below its cap (by the invariant, no waiter
    /// could take it).
    pub(crate) fn try_acquire(self: &Arc<Self>, namespace: &Arc<str>) -> Option<SlotPermit> {
        let mut inner = self.lock();
        (inner.free > 0 && self.below_cap(&inner, namespace))
            .then(|| self.take(&mut inner, namespace))
    }

    /// Waits for a slot in `namespace`'s turn.
    pub(crate) async fn acquire(self: &Arc<Self>, namespace: &Arc<str>) -> SlotPermit {
        let rx = {
            let mut inner = self.lock();
            if inner.free > 0 && self.below_cap(&inner, namespace) {
                return self.take(&mut inner, namespace);
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
            Err(_) => SlotPermit {
                slots: None,
                namespace: namespace.clone(),
            },
        }
    }

    /// Waiters across all namespaces.
    #[cfg(test)]
    fn waiting(&self) -> usize {
        self.lock().waiting.values().map(VecDeque::len).sum()
    }

    /// A slot of `namespace` came back: hand free slots to the namespaces in turn that may take
    /// them, or keep them free.
    fn release(self: &Arc<Self>, namespace: &Arc<str>) {
        let mut inner = self.lock();
        inner.free += 1;
        if let Some(held) = inner.held.get_mut(namespace) {
            *held -= 1;
            if *held == 0 {
                inner.held.remove(namespace);
            }
        }
        self.hand_out(&mut inner);
    }

    /// Restores the invariant: free slots go to waiters below their cap, one per turn.
    fn hand_out(self: &Arc<Self>, inner: &mut Inner) {
        // Namespaces passed over (at their cap) since the last grant: a full round of them means
        // no waiter can take a slot now.
        let mut passed = 0;
        while inner.free > 0 && passed < inner.turns.len() {
            let Some(namespace) = inner.turns.pop_front() else {
                break;
            };
            if !inner.waiting.contains_key(&namespace) {
                continue;
            }
            if !self.below_cap(inner, &namespace) {
                inner.turns.push_back(namespace);
                passed += 1;
                continue;
            }
            let Some(queue) = inner.waiting.get_mut(&namespace) else {
                continue;
            };
            let next = queue.pop_front();
            if queue.is_empty() {
                inner.waiting.remove(&namespace);
            } else {
                inner.turns.push_back(namespace.clone());
            }
            let Some(tx) = next else { continue };
            let permit = self.take(inner, &namespace);
            match tx.send(permit) {
                Ok(()) => passed = 0,
                // The waiter gave up (shutdown). The permit comes back here, and dropping it
                // would re-enter this lock: defuse it, give the slot back, and go on.
                Err(mut unused) => {
                    unused.slots = None;
                    inner.free += 1;
                    if let Some(held) = inner.held.get_mut(&namespace) {
                        *held -= 1;
                        if *held == 0 {
                            inner.held.remove(&namespace);
                        }
                    }
                }
            }
        }
    }
}

impl Drop for SlotPermit {
    fn drop(&mut self) {
        if let Some(slots) = self.slots.take() {
            slots.release(&self.namespace);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn free_slots_are_taken_at_once_and_come_back() {
        let slots = FairSlots::new(2, 2, HashMap::new());
        let ns: Arc<str> = "t".into();
        let a = slots.try_acquire(&ns).expect("free");
        let _b = slots.try_acquire(&ns).expect("free");
        assert!(slots.try_acquire(&ns).is_none());
        drop(a);
        assert!(slots.try_acquire(&ns).is_some());
    }

    /// Namespace `big` queues 10 waiters before `small` queues 2; freed slots alternate between
    /// them, so `small` is served within its first turns.
    #[tokio::test]
    async fn freed_slots_alternate_between_namespaces_with_waiters() {
        let slots = FairSlots::new(1, 1, HashMap::new());
        let held = slots.try_acquire(&"other".into()).expect("free");
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
        let slots = FairSlots::new(1, 1, HashMap::new());
        let held = slots.try_acquire(&"other".into()).expect("free");
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
        assert!(
            slots.try_acquire(&"c".into()).is_some(),
            "the slot is free again"
        );
    }

    /// Regression (issue 39): a namespace with hanging deliveries to enough destinations took
    /// every slot. With 4 slots and a cap of 3, it holds 3, and another namespace gets the
    /// fourth at once; the capped one's waiter gets a slot only when one of its own returns.
    #[tokio::test]
    async fn a_namespace_holds_at_most_its_cap() {
        let slots = FairSlots::new(4, 3, HashMap::new());
        let (noisy, quiet): (Arc<str>, Arc<str>) = ("noisy".into(), "quiet".into());
        let mut hanging: Vec<SlotPermit> = (0..3)
            .map(|_| slots.try_acquire(&noisy).expect("free"))
            .collect();
        assert!(slots.try_acquire(&noisy).is_none(), "past its cap");
        let more = {
            let (slots, noisy) = (slots.clone(), noisy.clone());
            tokio::spawn(async move { slots.acquire(&noisy).await })
        };
        tokio::task::yield_now().await;
        assert_eq!(
            slots.waiting(),
            1,
            "a free slot, but the waiter is at its cap"
        );
        let q = slots.try_acquire(&quiet).expect("the slot kept for others");
        // Another namespace's slot coming back does not lift the cap.
        drop(q);
        tokio::task::yield_now().await;
        assert_eq!(slots.waiting(), 1);
        // One of its own does.
        hanging.pop();
        let permit = more.await.unwrap();
        assert_eq!(slots.waiting(), 0);
        drop(permit);
        drop(hanging);
        // Everything came back.
        let all: Vec<_> = (0..4)
            .map(|i| slots.try_acquire(&format!("n{i}").into()))
            .collect();
        assert!(all.iter().all(Option::is_some));
    }

    /// A namespace the operator gave a cap of its own uses it.
    #[tokio::test]
    async fn a_namespace_can_have_a_cap_of_its_own() {
        let slots = FairSlots::new(4, 1, [("wide".to_string(), 4)].into());
        let wide: Arc<str> = "wide".into();
        let narrow: Arc<str> = "narrow".into();
        let held: Vec<_> = (0..3)
            .map(|_| slots.try_acquire(&wide).expect("free"))
            .collect();
        let one = slots.try_acquire(&narrow).expect("free");
        assert!(slots.try_acquire(&narrow).is_none());
        drop((held, one));
    }
}
