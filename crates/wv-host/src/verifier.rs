//! The host verifier: every rule violation is recorded here, then fails the offending thread.
//!
//! It is on in every run and cannot be switched off: the point of the host model is that a bug
//! which would bugcheck (or silently hang) a Windows machine fails a test on Linux, with a
//! message that names the rule. Violations are recorded before the panic so that threaded runs,
//! where the panic happens on a worker thread, still fail at teardown.

use std::fmt::Write as _;

use crate::sync::{Arc, AtomicBool, AtomicUsize, Mutex, Ordering};

/// A check that contributes messages at teardown (e.g. `FakeVerbs`' leaked objects).
type TeardownCheck = Box<dyn Fn() -> Vec<String> + Send + Sync>;

/// The violation log and the live-object counters of one [`crate::HostPlatform`].
///
/// Cheap to clone; all clones share one log.
#[derive(Clone, Default)]
pub struct Verifier {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    violations: Mutex<Vec<String>>,
    requests: AtomicUsize,
    queues: AtomicUsize,
    files: AtomicUsize,
    checks: Mutex<Vec<TeardownCheck>>,
    torn_down: AtomicBool,
}

/// The kinds of objects whose lifetimes the verifier counts.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Counted {
    Request,
    Queue,
    File,
}

impl Verifier {
    /// Every violation recorded so far, oldest first (they are kept after the panic they caused,
    /// so a threaded test can see what went wrong on a worker thread).
    pub fn violations(&self) -> Vec<String> {
        self.inner.violations.lock().clone()
    }

    /// Removes and returns the recorded violations. For tests that provoke a violation on
    /// purpose in threaded mode and then want a clean teardown.
    pub fn take_violations(&self) -> Vec<String> {
        std::mem::take(&mut *self.inner.violations.lock())
    }

    /// IRPs created and not yet completed (parked, in flight, or leaked).
    pub fn live_requests(&self) -> usize {
        self.inner.requests.load(Ordering::SeqCst)
    }

    /// Manual queues created and not yet dropped.
    pub fn live_queues(&self) -> usize {
        self.inner.queues.load(Ordering::SeqCst)
    }

    /// File objects opened and not yet closed (`file_close` not yet run).
    pub fn live_files(&self) -> usize {
        self.inner.files.load(Ordering::SeqCst)
    }

    /// Adds a check that runs at teardown and returns one message per leak it finds. Lower
    /// device models use it to report objects the driver never destroyed.
    pub fn add_teardown_check(&self, check: impl Fn() -> Vec<String> + Send + Sync + 'static) {
        self.inner.checks.lock().push(Box::new(check));
    }

    /// Records a violation without panicking (for paths that clean up first and panic later).
    pub fn report(&self, message: impl Into<String>) {
        self.inner.violations.lock().push(message.into());
    }

    /// Records a violation and panics with the same message. The panic is what fails a
    /// deterministic test; the record is what fails a threaded one at teardown.
    #[track_caller]
    pub fn fail(&self, message: impl Into<String>) -> ! {
        let message = message.into();
        self.report(message.clone());
        panic!("{message}");
    }

    /// Records a violation, and panics unless the thread is already unwinding (a second panic
    /// during unwinding would abort the whole test binary). For checks that run from `Drop`.
    #[track_caller]
    pub fn fail_unless_panicking(&self, message: impl Into<String>) {
        let message = message.into();
        self.report(message.clone());
        if !std::thread::panicking() {
            panic!("{message}");
        }
    }

    pub(crate) fn created(&self, what: Counted) {
        self.counter(what).fetch_add(1, Ordering::SeqCst);
    }

    pub(crate) fn destroyed(&self, what: Counted) {
        self.counter(what).fetch_sub(1, Ordering::SeqCst);
    }

    fn counter(&self, what: Counted) -> &AtomicUsize {
        match what {
            Counted::Request => &self.inner.requests,
            Counted::Queue => &self.inner.queues,
            Counted::File => &self.inner.files,
        }
    }

    /// Runs the teardown checks once (later calls return `None`): the live counters and every
    /// registered check. New findings are recorded; returns the whole log when it is not empty.
    pub(crate) fn teardown(&self) -> Option<Vec<String>> {
        if self.inner.torn_down.swap(true, Ordering::SeqCst) {
            return None;
        }
        let (r, q, f) = (self.live_requests(), self.live_queues(), self.live_files());
        if r + q + f != 0 {
            self.report(format!(
                "verifier: {r} requests / {q} queues / {f} files alive at teardown"
            ));
        }
        // Take the checks out so that closures holding device state are dropped here.
        let checks = std::mem::take(&mut *self.inner.checks.lock());
        for check in &checks {
            for message in check() {
                self.report(message);
            }
        }
        let all = self.violations();
        (!all.is_empty()).then_some(all)
    }

    /// The panic message of a failed teardown.
    pub(crate) fn summary(violations: &[String]) -> String {
        let mut s = format!("verifier: {} violation(s) in this run:", violations.len());
        for v in violations {
            let _ = write!(s, "\n  {v}");
        }
        s
    }
}

impl std::fmt::Debug for Verifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Verifier")
            .field("violations", &self.violations())
            .field("live_requests", &self.live_requests())
            .field("live_queues", &self.live_queues())
            .field("live_files", &self.live_files())
            .finish()
    }
}
