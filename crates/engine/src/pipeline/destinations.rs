//! Delivery slots per destination: a destination (a webhook's scheme, host and port) holds at
//! most `cap` of the node's delivery slots, so a receiver that hangs or crawls delays only the
//! occurrences addressed to it, never everyone else's.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::Route;

/// One semaphore per destination with deliveries running or waiting; a destination's entry is
/// removed when its last permit returns, so the map holds only destinations in use.
pub(crate) struct Destinations {
    /// Each destination's semaphore and the cap it was made with.
    slots: Mutex<HashMap<Route, (Arc<Semaphore>, usize)>>,
}

/// A delivery's slot at its destination; dropping it returns the slot.
pub(crate) struct DestinationPermit {
    destinations: Arc<Destinations>,
    key: Route,
    permit: Option<OwnedSemaphorePermit>,
}

/// What [`Destinations::try_acquire`] answers.
pub(crate) enum Slot {
    /// A slot was free: deliver now.
    Ready(DestinationPermit),
    /// The destination is at its cap: wait for one of its deliveries to end.
    Full(WaitForSlot),
}

/// A claim on the next free slot of a destination at its cap.
pub(crate) struct WaitForSlot {
    destinations: Arc<Destinations>,
    key: Route,
    /// `None` once the wait turned into a permit.
    semaphore: Option<Arc<Semaphore>>,
}

impl Destinations {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self {
            slots: Mutex::new(HashMap::new()),
        })
    }

    /// The map holds no invariant a panic could break halfway (an insert or a remove), so a
    /// poisoned lock is used as it is.
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<Route, (Arc<Semaphore>, usize)>> {
        self.slots.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes a slot at `key` if one is free, without waiting. `cap` applies when the destination
    /// is not in use yet (a changed cap takes effect once its deliveries have drained).
    pub(crate) fn try_acquire(self: &Arc<Self>, key: Route, cap: usize) -> Slot {
        let semaphore = self
            .map()
            .entry(key.clone())
            .or_insert_with(|| (Arc::new(Semaphore::new(cap.max(1))), cap.max(1)))
            .0
            .clone();
        match semaphore.clone().try_acquire_owned() {
            Ok(permit) => Slot::Ready(DestinationPermit {
                destinations: self.clone(),
                key,
                permit: Some(permit),
            }),
            Err(_) => Slot::Full(WaitForSlot {
                destinations: self.clone(),
                key,
                semaphore: Some(semaphore),
            }),
        }
    }

    /// Destinations with deliveries running or waiting (for metrics).
    pub(crate) fn in_use(&self) -> usize {
        self.map().len()
    }

    /// Drops `key`'s entry if no delivery holds or waits for one of its slots. Every handle to a
    /// destination's semaphore is cloned from the map under its lock, so with the lock held a
    /// count of one means the map's own handle is the last.
    fn release_if_idle(&self, key: &Route) {
        let mut map = self.map();
        if let Some((semaphore, cap)) = map.get(key)
            && Arc::strong_count(semaphore) == 1
            && semaphore.available_permits() == *cap
        {
            map.remove(key);
        }
    }
}

impl WaitForSlot {
    /// Waits, in arrival order, for a slot at this destination.
    pub(crate) async fn acquire(mut self) -> DestinationPermit {
        let permit = match self.semaphore.take() {
            // The semaphore is never closed, so acquiring only waits.
            Some(semaphore) => semaphore.acquire_owned().await.ok(),
            None => None,
        };
        DestinationPermit {
            destinations: self.destinations.clone(),
            key: self.key.clone(),
            permit,
        }
    }
}

impl Drop for WaitForSlot {
    fn drop(&mut self) {
        // A wait given up (at shutdown) may have been the destination's last user; our handle
        // must go before the idle check counts handles.
        if let Some(semaphore) = self.semaphore.take() {
            drop(semaphore);
            self.destinations.release_if_idle(&self.key);
        }
    }
}

impl Drop for DestinationPermit {
    fn drop(&mut self) {
        drop(self.permit.take());
        self.destinations.release_if_idle(&self.key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn to(destination: &str) -> Route {
        Route {
            namespace: "ns".into(),
            destination: destination.into(),
        }
    }

    fn ready(slot: Slot) -> DestinationPermit {
        match slot {
            Slot::Ready(p) => p,
            Slot::Full(_) => panic!("expected a free slot"),
        }
    }

    #[tokio::test]
    async fn a_destination_holds_at_most_its_cap_and_others_go_ahead() {
        const CAP: usize = 2;
        let d = Destinations::new();
        let a1 = ready(d.try_acquire(to("a"), CAP));
        let _a2 = ready(d.try_acquire(to("a"), CAP));
        let Slot::Full(wait) = d.try_acquire(to("a"), CAP) else {
            panic!("a third delivery to a must wait");
        };
        let _b = ready(d.try_acquire(to("b"), CAP));
        let waiting = tokio::spawn(wait.acquire());
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        drop(a1);
        let _a3 = waiting.await.unwrap();
        assert_eq!(d.in_use(), 2);
    }

    #[tokio::test]
    async fn idle_destinations_leave_the_map() {
        const CAP: usize = 1;
        let d = Destinations::new();
        let a = ready(d.try_acquire(to("a"), CAP));
        let Slot::Full(wait) = d.try_acquire(to("a"), CAP) else {
            panic!("at the cap");
        };
        drop(wait);
        assert_eq!(d.in_use(), 1, "a delivery still holds a's slot");
        drop(a);
        assert_eq!(d.in_use(), 0);
        let b = ready(d.try_acquire(to("b"), CAP));
        let Slot::Full(wait) = d.try_acquire(to("b"), CAP) else {
            panic!("at the cap");
        };
        let waiting = tokio::spawn(wait.acquire());
        drop(b);
        drop(waiting.await.unwrap());
        assert_eq!(d.in_use(), 0);
    }
}
