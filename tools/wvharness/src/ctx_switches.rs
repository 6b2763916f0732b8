//! Context switches of this process, counted from `/proc` (Linux): each thread's voluntary and
//! involuntary switches (`voluntary_ctxt_switches` and `nonvoluntary_ctxt_switches` in
//! `/proc/self/task/TID/status`, the per-thread figures `getrusage(RUSAGE_SELF)` adds up).
//!
//! A count over a window is the sum over the threads alive at its end of what each did since
//! its start (a thread started within the window counts from zero). A thread that ended within
//! the window is not counted, so a window is drawn where no thread ends: around a benchmark's
//! loop, inside which its threads, the host model's workers and its timer thread all live.

use std::collections::BTreeMap;

/// Every thread's switches so far, by thread id.
#[derive(Clone, Debug, Default)]
pub struct Switches(BTreeMap<u32, u64>);

impl Switches {
    /// The counters now; `None` where `/proc` does not have them (not Linux).
    pub fn now() -> Option<Switches> {
        let mut all = BTreeMap::new();
        for entry in std::fs::read_dir("/proc/self/task").ok()? {
            let Ok(entry) = entry else { continue };
            let Some(tid) = entry.file_name().to_str().and_then(|t| t.parse().ok()) else {
                continue;
            };
            // A thread may end between the listing and the read: it is simply not counted.
            if let Ok(status) = std::fs::read_to_string(entry.path().join("status"))
                && let Some(n) = parse(&status)
            {
                all.insert(tid, n);
            }
        }
        (!all.is_empty()).then_some(Switches(all))
    }

    /// The switches of the threads alive now (in `self`) since `earlier`.
    pub fn since(&self, earlier: &Switches) -> u64 {
        self.0
            .iter()
            .map(|(tid, &n)| n.saturating_sub(earlier.0.get(tid).copied().unwrap_or(0)))
            .sum()
    }
}

/// Voluntary + involuntary switches from a `status` file.
fn parse(status: &str) -> Option<u64> {
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse::<u64>().ok())
    };
    Some(field("voluntary_ctxt_switches:")? + field("nonvoluntary_ctxt_switches:")?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_kinds_are_added() {
        let status = "Name:\tx\nvoluntary_ctxt_switches:\t12\nnonvoluntary_ctxt_switches:\t3\n";
        assert_eq!(parse(status), Some(15));
        assert_eq!(parse("Name:\tx\n"), None);
    }

    #[test]
    fn a_thread_that_sleeps_is_counted() {
        let Some(before) = Switches::now() else {
            return; // No /proc here.
        };
        // Each sleep gives the CPU up: at least one voluntary switch of the sleeping thread.
        for _ in 0..5 {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert!(Switches::now().unwrap().since(&before) >= 5);
    }
}
