//! Whether a short piece of PASSIVE_LEVEL work costs the caller less in its own thread than on
//! a work item.
//!
//! A work item exists so that a caller never waits for a controller command that may take
//! milliseconds (firmware round trips). But handing work to a system worker is not free: the
//! worker has to be woken and scheduled, and the caller that waits for the result is woken
//! again after it. Where the controller answers its commands in less time than that hand-off
//! takes (a software device, or a fast one), the hand-off is the larger cost. The driver times
//! both, from what it does anyway: every QP command it issues ([`Estimate`] per device) and
//! every work item it queues (one [`Estimate`] per driver, from the queueing to the worker's
//! start), and runs the work in the caller's thread only while the commands it needs are
//! expected to end sooner than a hand-off.
//!
//! Three requests use it: an ACCEPT (three commands) and an active DISCONNECT's QP step (one),
//! both waited for one at a time by the caller that issues them, and a QP_MODIFY, for which
//! the rule counts the commands of the modifies a caller may keep in flight (see
//! [`crate::qp_modify`]).

use core::sync::atomic::{AtomicU64, Ordering};

/// No sample yet.
const NONE: u64 = u64::MAX;

/// A sample larger than this many times the estimate counts as this many times the estimate:
/// one command or one hand-off that was preempted for a scheduler tick should not decide the
/// next hundred, while a device that really became slower moves the estimate up within a few
/// samples (×1.375 a sample at the cap).
const CAP: u64 = 4;

/// Below this, samples are not capped (a first estimate of a few nanoseconds, or of zero on a
/// clock that did not move, must not hold every later sample down to nothing).
const CAP_FLOOR_NS: u64 = 1_000;

/// A running estimate of a duration in nanoseconds: a moving average weighted 1/8 towards each
/// new sample. Lock-free and any IRQL; two samples recorded at the same instant may lose one,
/// which only makes the estimate one sample older.
pub(crate) struct Estimate {
    ns: AtomicU64,
}

impl Estimate {
    /// No sample yet.
    pub const fn new() -> Self {
        Estimate {
            ns: AtomicU64::new(NONE),
        }
    }

    /// The estimate, or `None` before the first sample.
    pub fn get(&self) -> Option<u64> {
        match self.ns.load(Ordering::Relaxed) {
            NONE => None,
            ns => Some(ns),
        }
    }

    /// Takes one sample into the estimate.
    pub fn record(&self, sample_ns: u64) {
        let sample = sample_ns.min(NONE - 1);
        let next = match self.get() {
            None => sample,
            Some(old) => {
                let capped = sample.min(old.saturating_mul(CAP).max(CAP_FLOOR_NS));
                if capped >= old {
                    old + (capped - old) / 8
                } else {
                    old - (old - capped) / 8
                }
            }
        };
        self.ns.store(next, Ordering::Relaxed);
    }
}

/// Whether `commands` controller commands at `command` each are expected to end before a
/// hand-off to a worker at `hand_off` would even have started the work. Both must have been
/// measured: until they are, the work item (the safe side: the caller never waits for a slow
/// controller) is taken.
pub(crate) fn inline_pays(command: &Estimate, hand_off: &Estimate, commands: u64) -> bool {
    match (command.get(), hand_off.get()) {
        (Some(command), Some(hand_off)) => command.saturating_mul(commands) < hand_off,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_is_known_before_the_first_sample() {
        let e = Estimate::new();
        assert_eq!(e.get(), None);
        e.record(2_000);
        assert_eq!(e.get(), Some(2_000));
    }

    #[test]
    fn the_estimate_moves_an_eighth_towards_each_sample() {
        let e = Estimate::new();
        e.record(8_000);
        e.record(16_000);
        assert_eq!(e.get(), Some(9_000));
        e.record(1_000);
        assert_eq!(e.get(), Some(8_000));
    }

    #[test]
    fn one_outlier_moves_it_by_at_most_the_cap() {
        let e = Estimate::new();
        e.record(2_000);
        // A command preempted for 4 ms counts as 8 µs, four times the estimate.
        e.record(4_000_000);
        assert_eq!(e.get(), Some(2_000 + (8_000 - 2_000) / 8));
    }

    #[test]
    fn a_device_that_became_slow_is_seen_within_a_few_dozen_samples() {
        let e = Estimate::new();
        e.record(1_000);
        let mut samples = 0;
        while e.get().unwrap() < 100_000 {
            e.record(1_000_000);
            samples += 1;
        }
        assert!(samples < 40, "{samples} samples");
    }

    #[test]
    fn a_zero_estimate_still_follows_real_samples() {
        let e = Estimate::new();
        e.record(0);
        for _ in 0..64 {
            e.record(5_000);
        }
        assert!(e.get().unwrap() > 1_000);
    }

    #[test]
    fn inline_only_when_both_are_known_and_the_commands_are_shorter() {
        let (command, hand_off) = (Estimate::new(), Estimate::new());
        assert!(!inline_pays(&command, &hand_off, 3));
        command.record(1_000);
        assert!(!inline_pays(&command, &hand_off, 3), "no hand-off measured");
        hand_off.record(10_000);
        assert!(inline_pays(&command, &hand_off, 3));
        assert!(
            !inline_pays(&command, &hand_off, 10),
            "ten commands take as long"
        );
        let slow = Estimate::new();
        slow.record(20_000);
        assert!(!inline_pays(&slow, &hand_off, 1));
    }
}
