//! The engine's random draws (a retry's jitter, the planner's extra lead): from the thread's
//! generator, or, on a thread whose draws a simulation seeded ([`seed_thread`]), from that seed,
//! so that a seeded run of engines on one current-thread runtime repeats itself exactly.

use std::cell::RefCell;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

thread_local! {
    static SEEDED: RefCell<Option<StdRng>> = const { RefCell::new(None) };
}

/// Makes the engine's random draws on this thread come from `seed` from now on; `None` returns
/// them to the thread's own generator. For simulations that run engines on one thread (the
/// engine's `tests/simulate`); a node never calls it.
#[doc(hidden)]
pub fn seed_thread(seed: Option<u64>) {
    SEEDED.with(|seeded| *seeded.borrow_mut() = seed.map(StdRng::seed_from_u64));
}

fn draw<T>(f: impl FnOnce(&mut dyn rand::RngCore) -> T) -> T {
    SEEDED.with(|seeded| match seeded.borrow_mut().as_mut() {
        Some(rng) => f(rng),
        None => f(&mut rand::rng()),
    })
}

/// A number in [0, 1).
pub(crate) fn unit() -> f64 {
    draw(|rng| rng.random::<f64>())
}

/// A number in [0, max].
pub(crate) fn up_to(max: u64) -> u64 {
    draw(|rng| rng.random_range(0..=max))
}
