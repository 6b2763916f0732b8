//! perftest's CQE poll batch: how many completions a bandwidth loop asks the CQ for at once
//! (`perftest_resources.c`: `init_dyn_poll_ctx`, `poll_cq_adaptive`, `poll_completions`).
//!
//! The batch is fixed (`--cqe_poll N`, default 16) or "dynamic", perftest's default for a
//! bandwidth run of at least 3000 iterations or one in duration mode: it then starts at 1024
//! and, while the run is in its first quarter (at most 16384 completions; the first 1000 in
//! duration mode), moves towards what the polls return — a poll that fills the batch keeps it
//! (perftest's growth step averages the batch with a count equal to it), one that returns
//! under 85 % of it halves the distance to that count, never below 16 — and stops adapting for
//! good once ten polls in a row return the same count. Latency tests and shorter runs poll a
//! fixed batch, and perftest says so (`Disabling dynamic polling`) before its header.

use std::sync::atomic::{AtomicBool, Ordering};

use super::{Params, Test};

/// perftest's `CTX_POLL_BATCH`: the fixed batch.
pub const CTX_POLL_BATCH: u16 = 16;
/// Where a dynamic batch starts, and its largest value (the completion array's size).
pub const DYNAMIC_MAX: u16 = 1024;
/// The smallest dynamic batch.
const DYNAMIC_MIN: u16 = 16;
/// Polls in a row with the same count after which adapting stops.
const STABILIZE: u32 = 10;
/// A poll returning less than this share of the batch shrinks it.
const THRESHOLD: f64 = 0.85;
/// perftest's `MAX_QP_NUM`: the most completions an iteration-count run adapts over.
const MAX_QP_NUM: u64 = 16384;
/// Iteration counts below this disable dynamic polling (perftest's `force_dependecies`).
pub const DYNAMIC_MIN_ITERS: u64 = 3000;

/// Whether perftest turns dynamic polling off for this test and prints `Disabling dynamic
/// polling`: every latency test, and bandwidth runs of fewer than 3000 iterations (an
/// iteration count, not a duration). It says so even when an option already turned it off.
pub fn disables_dynamic(test: Test, iters: u64, duration: bool) -> bool {
    test.is_latency() || (!duration && iters < DYNAMIC_MIN_ITERS)
}

/// One loop's poll batch.
pub struct CqePoll<'a> {
    /// The side's dynamic-polling switch: perftest keeps it in its parameters, so a run that
    /// stabilised stays fixed for the following sizes of a sweep (each of which starts at
    /// `--cqe_poll` then).
    dynamic: &'a AtomicBool,
    size: u16,
    stable: u32,
    last: usize,
    /// Completions after which the batch no longer adapts.
    until: u64,
}

impl<'a> CqePoll<'a> {
    /// The batch for one size of `iters` iterations (`init_dyn_poll_ctx`).
    pub fn new(p: &Params, iters: u64, dynamic: &'a AtomicBool) -> CqePoll<'a> {
        let on = dynamic.load(Ordering::Relaxed);
        CqePoll {
            dynamic,
            size: if on { DYNAMIC_MAX } else { p.cqe_poll },
            stable: 0,
            last: 0,
            until: if p.duration.is_some() {
                1000
            } else {
                (iters / 4).min(MAX_QP_NUM)
            },
        }
    }

    /// How many completions the next poll asks for.
    pub fn batch(&self) -> usize {
        usize::from(self.size)
    }

    /// Accounts for a poll that returned `ne` completions when `count` had been taken before
    /// it (`poll_completions`: the batch adapts only while dynamic and early in the run).
    pub fn observe(&mut self, ne: usize, count: u64) {
        if !self.dynamic.load(Ordering::Relaxed) || count >= self.until {
            return;
        }
        let size = usize::from(self.size);
        if ne == size && self.size < DYNAMIC_MAX {
            self.size = ((size + ne) / 2).min(usize::from(DYNAMIC_MAX)) as u16;
            self.stable = 0;
        } else if (ne as f64) < size as f64 * THRESHOLD {
            if self.size > DYNAMIC_MIN {
                self.size = ((size + ne) / 2).max(usize::from(DYNAMIC_MIN)) as u16;
                self.stable = 0;
            }
        } else if ne == self.last {
            self.stable += 1;
            if self.stable >= STABILIZE {
                self.dynamic.store(false, Ordering::Relaxed);
            }
        } else {
            self.stable = 0;
        }
        self.last = ne;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::perftest::{PerftestArgs, params};

    fn bw(iters: u64) -> Params {
        params(
            Test::SendBw,
            &PerftestArgs {
                iters: Some(iters),
                ..PerftestArgs::default()
            },
            4096,
        )
        .unwrap()
    }

    #[test]
    fn short_runs_and_latency_tests_disable_dynamic_polling() {
        assert!(disables_dynamic(Test::SendLat, 100_000, false));
        assert!(disables_dynamic(Test::WriteBw, 2999, false));
        assert!(!disables_dynamic(Test::WriteBw, 3000, false));
        assert!(
            !disables_dynamic(Test::ReadBw, 5, true),
            "duration runs keep it"
        );
    }

    #[test]
    fn a_dynamic_batch_shrinks_towards_what_polls_return_then_settles() {
        let p = bw(10_000);
        let on = AtomicBool::new(true);
        let mut b = CqePoll::new(&p, 10_000, &on);
        assert_eq!(b.batch(), 1024);
        // A poll of 100: (1024 + 100) / 2.
        b.observe(100, 0);
        assert_eq!(b.batch(), 562);
        // Empty polls halve it down to the floor.
        for _ in 0..10 {
            b.observe(0, 100);
        }
        assert_eq!(b.batch(), 16);
        // Full polls keep it where it is (the growth step averages it with itself).
        b.observe(16, 200);
        assert_eq!(b.batch(), 16);
        // The same count within the threshold band: after the first, ten more in a row end the
        // adaptation.
        for _ in 0..11 {
            b.observe(15, 300);
        }
        assert!(!on.load(Ordering::Relaxed));
        b.observe(0, 400);
        assert_eq!(b.batch(), 16, "no longer adapting");
        // The next size of a sweep starts at the fixed batch.
        assert_eq!(CqePoll::new(&p, 10_000, &on).batch(), 16);
    }

    #[test]
    fn adapting_stops_after_the_first_quarter_of_the_run() {
        let p = bw(4000);
        let on = AtomicBool::new(true);
        let mut b = CqePoll::new(&p, 4000, &on);
        b.observe(0, 1000);
        assert_eq!(b.batch(), 1024, "1000 completions is a quarter of 4000");
        b.observe(0, 999);
        assert_eq!(b.batch(), 512);
    }

    #[test]
    fn a_fixed_batch_never_moves() {
        let p = bw(10_000);
        let off = AtomicBool::new(false);
        let mut b = CqePoll::new(&p, 10_000, &off);
        assert_eq!(b.batch(), usize::from(CTX_POLL_BATCH));
        b.observe(0, 0);
        assert_eq!(b.batch(), usize::from(CTX_POLL_BATCH));
    }
}
