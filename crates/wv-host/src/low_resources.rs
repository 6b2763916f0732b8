//! Driver Verifier's (randomized) low-resources simulation, for the host model.
//!
//! [`LowResources`] is a global allocator over the system's that can refuse allocations made
//! by *driver code*: code running inside a driver callback of the host model (dispatch, work
//! items, DPCs, PnP and file callbacks), but not inside the platform or the lower device the
//! driver calls (their allocations are the operating system's business, not the driver's).
//! A test binary installs it with
//!
//! ```ignore
//! #[global_allocator]
//! static ALLOC: wv_host::LowResources = wv_host::LowResources;
//! ```
//!
//! and then, on its own thread, arms a [`Plan`]: count the driver's allocations, fail the
//! N-th one, or fail a random fraction of them. A driver that handles failure completes the
//! request with a status; one that does not calls the allocation-error handler, which aborts
//! the test process (on Windows: a bug check), which the test reports as its failure.
//!
//! It also counts driver allocations made while the thread holds a spin lock: the core may
//! not allocate there at all (it pre-allocates with the lock released); and the bytes each
//! thread holds ([`live_bytes`]), so a test can see memory a failed request left behind.
//!
//! Everything is per thread (the plan and the scope), so tests running in parallel in one
//! binary do not disturb each other; the deterministic host model runs every callback on the
//! test's thread.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use crate::irql;

/// Whose code the thread is running: allocations are only ever refused to the driver's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Scope {
    Host,
    Driver,
}

/// What the allocator does with the driver's allocations on this thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Plan {
    /// Nothing: allocations pass and are not counted.
    Off,
    /// Count them; refuse none.
    Count,
    /// Refuse the N-th (1-based) and count the rest.
    FailNth(u64),
    /// Refuse each with probability `per_million` / 1 000 000 (a xorshift stream from `seed`).
    Random {
        /// Probability of a refusal, in millionths.
        per_million: u32,
        /// Seed of the stream (not 0).
        seed: u64,
    },
}

/// What the allocator saw under the current plan.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// Driver allocations (including reallocations) made.
    pub seen: u64,
    /// Of those, refused.
    pub refused: u64,
    /// Driver allocations made while holding a spin lock.
    pub under_spin_lock: u64,
}

#[derive(Clone, Copy)]
struct State {
    scope: Scope,
    plan: Plan,
    tally: Tally,
    rng: u64,
    /// Bytes allocated on this thread and not yet freed (see [`live_bytes`]).
    live: i64,
}

thread_local! {
    // Const-initialised `Cell` of a `Copy` type: no lazy initialisation and no destructor, so
    // the allocator may touch it at any time.
    static STATE: Cell<State> = const {
        Cell::new(State {
            scope: Scope::Host,
            plan: Plan::Off,
            tally: Tally { seen: 0, refused: 0, under_spin_lock: 0 },
            rng: 0,
            live: 0,
        })
    };
}

fn with<R>(f: impl FnOnce(&mut State) -> R) -> Option<R> {
    STATE
        .try_with(|cell| {
            let mut state = cell.get();
            let r = f(&mut state);
            cell.set(state);
            r
        })
        .ok()
}

/// Arms `plan` on this thread and clears the tally.
pub fn arm(plan: Plan) {
    with(|s| {
        s.plan = plan;
        s.tally = Tally::default();
        s.rng = match plan {
            Plan::Random { seed, .. } => seed.max(1),
            _ => 0,
        };
    });
}

/// Disarms this thread's plan and returns what it saw.
pub fn disarm() -> Tally {
    with(|s| {
        s.plan = Plan::Off;
        s.tally
    })
    .unwrap_or_default()
}

/// What this thread's plan has seen so far.
pub fn tally() -> Tally {
    with(|s| s.tally).unwrap_or_default()
}

/// Bytes this thread has allocated and not freed, whoever allocated them and whatever the
/// plan: a test that reads it before building a scenario and after tearing it down finds the
/// memory the scenario left behind. A block freed on another thread than the one that
/// allocated it counts there (the deterministic host model runs everything on one thread).
pub fn live_bytes() -> i64 {
    with(|s| s.live).unwrap_or(0)
}

fn account(bytes: i64) {
    with(|s| s.live += bytes);
}

/// Restores the thread's previous scope on drop.
#[must_use = "the scope ends when the guard drops"]
pub struct ScopeGuard(Option<Scope>);

impl std::fmt::Debug for ScopeGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("ScopeGuard").field(&self.0).finish()
    }
}

impl Drop for ScopeGuard {
    fn drop(&mut self) {
        if let Some(previous) = self.0 {
            with(|s| s.scope = previous);
        }
    }
}

fn enter(scope: Scope) -> ScopeGuard {
    ScopeGuard(with(|s| core::mem::replace(&mut s.scope, scope)))
}

/// Marks platform (or lower-device) code: its allocations are never refused.
pub(crate) fn host_scope() -> ScopeGuard {
    enter(Scope::Host)
}

/// Marks driver code: a driver callback, or a lower device calling back into the driver.
pub(crate) fn driver_scope() -> ScopeGuard {
    enter(Scope::Driver)
}

/// Decides one driver allocation: `true` to refuse it.
fn refuse() -> bool {
    with(|s| {
        if s.scope != Scope::Driver || s.plan == Plan::Off {
            return false;
        }
        s.tally.seen += 1;
        if irql::get_raw().is_some_and(|state| state.locks > 0) {
            s.tally.under_spin_lock += 1;
        }
        let refused = match s.plan {
            Plan::Off | Plan::Count => false,
            Plan::FailNth(n) => s.tally.seen == n,
            Plan::Random { per_million, .. } => {
                // xorshift64
                let mut x = s.rng;
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                s.rng = x;
                x % 1_000_000 < u64::from(per_million)
            }
        };
        if refused {
            s.tally.refused += 1;
        }
        refused
    })
    .unwrap_or(false)
}

/// The low-resources allocator: the system allocator, refusing the driver's allocations as
/// this thread's [`Plan`] says.
#[derive(Clone, Copy, Debug, Default)]
pub struct LowResources;

/// A size as a count of live bytes (no allocation reaches `i64::MAX` bytes).
fn bytes(size: usize) -> i64 {
    i64::try_from(size).unwrap_or(i64::MAX)
}

/// Null when this thread's plan refuses the allocation; otherwise the block `get` returns,
/// with `growth` live bytes counted when it is not null.
fn admit(growth: i64, get: impl FnOnce() -> *mut u8) -> *mut u8 {
    if refuse() {
        return std::ptr::null_mut();
    }
    let block = get();
    if !block.is_null() {
        account(growth);
    }
    block
}

// SAFETY: Every method forwards to `System` with the caller's arguments unchanged, or returns
// null, which `GlobalAlloc` allows for `alloc`, `alloc_zeroed` and `realloc` (a failed
// `realloc` leaves the old block untouched, as required). The decision and the byte count
// touch only a thread-local `Cell` and never allocate.
unsafe impl GlobalAlloc for LowResources {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: The caller's contract for `alloc` is `System::alloc`'s.
        admit(bytes(layout.size()), || unsafe { System.alloc(layout) })
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: The caller's contract for `alloc_zeroed` is `System::alloc_zeroed`'s.
        admit(bytes(layout.size()), || unsafe {
            System.alloc_zeroed(layout)
        })
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System` (every block this allocator hands out does).
        unsafe { System.dealloc(ptr, layout) }
        account(-bytes(layout.size()));
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let growth = bytes(new_size) - bytes(layout.size());
        // SAFETY: The caller's contract for `realloc` is `System::realloc`'s, and `ptr` came
        // from `System`.
        admit(growth, || unsafe { System.realloc(ptr, layout, new_size) })
    }
}
