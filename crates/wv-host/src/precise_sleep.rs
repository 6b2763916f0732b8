//! A sleep that lasts what it was asked for, not that plus the kernel's timer slack.
//!
//! Linux lets a sleeping thread's timer fire up to its *timer slack* late (50 µs by default
//! for a normal thread) so that it can batch wake-ups. For the device models' command latency
//! that slack is most of the wait: a 20 µs sleep measured 80–90 µs here with the default slack
//! and 30–40 µs with a slack of 1 ns. `KeDelayExecutionThread`, which `delay` stands for, has
//! no such per-thread slack, so a thread that sleeps for a device's latency asks for none the
//! first time it does. The sleep never ends early: only its lateness changes.

use std::cell::Cell;
use std::time::Duration;

thread_local! {
    /// This thread's timer slack is already at its minimum.
    static SLACK_SET: Cell<bool> = const { Cell::new(false) };
}

/// Blocks the calling thread for at least `ns` nanoseconds.
pub(crate) fn sleep_ns(ns: u64) {
    if !SLACK_SET.with(Cell::get) {
        minimise_timer_slack();
        SLACK_SET.with(|s| s.set(true));
    }
    std::thread::sleep(Duration::from_nanos(ns));
}

#[cfg(target_os = "linux")]
fn minimise_timer_slack() {
    // A failure leaves the default slack, which only makes sleeps longer.
    let _ = rustix::thread::set_current_timer_slack(core::num::NonZeroU64::new(1));
}

#[cfg(not(target_os = "linux"))]
fn minimise_timer_slack() {}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn never_ends_early() {
        for ns in [1, 1_000, 20_000, 200_000] {
            let started = Instant::now();
            sleep_ns(ns);
            assert!(started.elapsed() >= Duration::from_nanos(ns));
        }
    }
}
