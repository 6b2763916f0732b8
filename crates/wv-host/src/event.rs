//! [`HostEvent`]: a notification event with the IRQL rules of `KEVENT`.

use wv_hal::{Event, Irql};

use crate::irql;
use crate::low_resources;
use crate::platform::Shared;
use crate::sync::{Arc, Condvar, Mutex};

/// A notification event (`KeInitializeEvent(NotificationEvent)`).
///
/// Verifier: waiting at or above DISPATCH_LEVEL ("verifier: wait at DISPATCH_LEVEL"), setting
/// above DISPATCH_LEVEL. In deterministic mode a wait runs queued work items and DPCs until
/// the event is set (they stand for the other processors); if the queue runs dry first the
/// wait could never end, and the verifier fails it ("verifier: wait on an event that nothing
/// queued can set").
pub struct HostEvent {
    shared: Arc<Shared>,
    set: Mutex<bool>,
    cv: Condvar,
}

impl HostEvent {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        HostEvent {
            shared,
            set: Mutex::new(false),
            cv: Condvar::new(),
        }
    }
}

impl Event for HostEvent {
    fn set(&self) {
        let _host = low_resources::host_scope();
        let level = irql::current();
        if level > Irql::Dispatch {
            self.shared
                .verifier
                .fail(format!("verifier: KeSetEvent at {}", level.name()));
        }
        *self.set.lock() = true;
        self.cv.notify_all();
    }

    fn is_set(&self) -> bool {
        let level = irql::current();
        if level > Irql::Dispatch {
            self.shared
                .verifier
                .fail(format!("verifier: KeReadStateEvent at {}", level.name()));
        }
        *self.set.lock()
    }

    fn wait(&self) {
        let _host = low_resources::host_scope();
        let level = irql::current();
        if level >= Irql::Dispatch {
            self.shared
                .verifier
                .fail(format!("verifier: wait at {}", level.name()));
        }
        if self.shared.is_deterministic() {
            while !self.is_set() {
                if !self.shared.run_one() {
                    self.shared.verifier.fail(
                        "verifier: wait on an event that nothing queued can set \
                         (deterministic mode: it would block for ever)",
                    );
                }
            }
        } else {
            // A processor that blocks at PASSIVE_LEVEL has run its DPCs first.
            crate::deferred::drain_thread_dpcs();
            let mut set = self.set.lock();
            while !*set {
                self.cv.wait(&mut set);
            }
        }
    }
}

impl std::fmt::Debug for HostEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostEvent")
            .field("set", &self.is_set())
            .finish()
    }
}
