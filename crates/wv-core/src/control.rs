//! The control device's lifetime and what runs in the caller's context: rules the WDF glue
//! follows, kept here so they are tested with the rest of the core.
//!
//! * **Lifetime** ([`ControlDevice`]): `\Device\WinVerbs` exists while at least one RDMA
//!   controller is below the filter or one handle to it is open. The first controller's
//!   AddDevice creates it, and if that creation fails the AddDevice fails (OFW ignored the
//!   failure and later passed a null device to every queue creation, spec §7.1-k). It is
//!   deleted when the last controller has gone and the last handle has closed, whichever comes
//!   last — never under an open handle, whose cleanup still needs the device's queues. A
//!   deletion decided at the last close runs later, from a work item (not inside the device's
//!   own close callback); [`ControlDevice::delete_now`] confirms it then, so a controller or a
//!   handle that arrived in between keeps the device. The glue serialises the decisions with
//!   the creation and deletion themselves (one PASSIVE_LEVEL lock), so a new controller never
//!   tries to create the device while the old one is still being deleted.
//! * **Caller context** ([`runs_in_caller_context`]): the IOCTLs that always complete inline
//!   (device open, MR registration, CQ/QP/SRQ creation: the verbs that pin or map the caller's
//!   memory, and every other inline one) run in `EvtIoInCallerContext`, in the calling process
//!   at PASSIVE_LEVEL, whatever queue the framework would have used (spec §7.1-l). Requests
//!   that may park go through the control device's queue first, because only a request the
//!   framework has delivered from a queue can be forwarded to another.

use wv_abi::ioctl::{Completion, Ioctl};
use wv_hal::{Platform, SpinLock};

/// What the glue must do after telling [`ControlDevice`] about an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use]
pub enum ControlAction {
    /// Create the control device, then report the outcome with [`ControlDevice::created`].
    Create,
    /// Delete the control device (PASSIVE_LEVEL, outside every framework callback of it).
    Delete,
    /// Nothing.
    None,
}

#[derive(Clone, Copy, Debug, Default)]
struct State {
    controllers: u32,
    files: u32,
    exists: bool,
}

impl State {
    fn unused(&self) -> bool {
        self.controllers == 0 && self.files == 0
    }

    fn delete_if_unused(&self) -> ControlAction {
        if self.exists && self.unused() {
            ControlAction::Delete
        } else {
            ControlAction::None
        }
    }
}

/// Counts controllers and open handles and says when the control device must be created or
/// deleted. All methods run at PASSIVE_LEVEL (AddDevice, device cleanup, file callbacks, the
/// deletion work item).
pub struct ControlDevice<P: Platform> {
    state: P::SpinLock<State>,
}

impl<P: Platform> ControlDevice<P> {
    /// No controller, no handle, no control device.
    pub fn new(platform: &P) -> Self {
        ControlDevice {
            state: platform.spin_lock(State::default()),
        }
    }

    /// A controller's filter device is being added. Returns `Create` when the control device
    /// does not exist (the caller creates it and reports the outcome with
    /// [`ControlDevice::created`]); an existing one — even one whose deletion is pending — is
    /// kept and reused.
    pub fn controller_adding(&self) -> ControlAction {
        let mut s = self.state.lock();
        if s.exists {
            s.controllers += 1;
            ControlAction::None
        } else {
            ControlAction::Create
        }
    }

    /// The outcome of a `Create`. On failure the controller's AddDevice fails and the
    /// controller does not count.
    pub fn created(&self, ok: bool) {
        if ok {
            let mut s = self.state.lock();
            s.exists = true;
            s.controllers += 1;
        }
    }

    /// A controller's filter device went away (its cleanup callback). `Delete`: call
    /// [`ControlDevice::delete_now`] and delete.
    pub fn controller_gone(&self) -> ControlAction {
        let mut s = self.state.lock();
        s.controllers = s.controllers.saturating_sub(1);
        s.delete_if_unused()
    }

    /// A handle was opened (`EvtDeviceFileCreate` accepted it).
    pub fn file_opened(&self) {
        self.state.lock().files += 1;
    }

    /// A handle's file object closed (`EvtFileClose`). `Delete`: queue the deletion, which
    /// confirms with [`ControlDevice::delete_now`].
    pub fn file_closed(&self) -> ControlAction {
        let mut s = self.state.lock();
        s.files = s.files.saturating_sub(1);
        s.delete_if_unused()
    }

    /// Right before deleting: whether the device is still unused (it is then marked gone and
    /// must be deleted), or something came back since the decision (it stays).
    pub fn delete_now(&self) -> bool {
        let mut s = self.state.lock();
        if s.exists && s.unused() {
            s.exists = false;
            true
        } else {
            false
        }
    }

    /// Whether the control device exists now (for diagnostics).
    pub fn exists(&self) -> bool {
        self.state.lock().exists
    }
}

/// Whether an IOCTL runs in `EvtIoInCallerContext` (it always completes inline) rather than
/// from the control device's queue (it may park, or its code is unknown).
pub fn runs_in_caller_context(code: u32) -> bool {
    Ioctl::from_code(code).is_some_and(|i| i.completion() == Completion::Inline)
}

#[cfg(test)]
mod tests {
    use super::*;
    use wv_abi::ioctl::*;
    use wv_host::HostPlatform;

    #[test]
    fn created_with_the_first_controller_deleted_after_the_last_user() {
        let p = HostPlatform::deterministic();
        let c = ControlDevice::new(&p);
        assert_eq!(c.controller_adding(), ControlAction::Create);
        c.created(true);
        assert!(c.exists());
        assert_eq!(c.controller_adding(), ControlAction::None);
        c.file_opened();
        assert_eq!(c.controller_gone(), ControlAction::None);
        assert_eq!(
            c.controller_gone(),
            ControlAction::None,
            "a handle is still open"
        );
        assert_eq!(c.file_closed(), ControlAction::Delete);
        assert!(c.delete_now());
        assert!(!c.exists());
        assert!(!c.delete_now(), "deleted once");
        // A new controller creates it again; its removal deletes it at once.
        assert_eq!(c.controller_adding(), ControlAction::Create);
        c.created(true);
        assert_eq!(c.controller_gone(), ControlAction::Delete);
        assert!(c.delete_now());
    }

    #[test]
    fn a_pending_deletion_is_cancelled_by_a_returning_user() {
        let p = HostPlatform::deterministic();
        let c = ControlDevice::new(&p);
        assert_eq!(c.controller_adding(), ControlAction::Create);
        c.created(true);
        c.file_opened();
        assert_eq!(c.controller_gone(), ControlAction::None);
        // The last close decides; before the deletion runs, a controller arrives and reuses
        // the device instead of creating a second one with the same name.
        assert_eq!(c.file_closed(), ControlAction::Delete);
        assert_eq!(c.controller_adding(), ControlAction::None);
        assert!(!c.delete_now(), "the device is in use again");
        assert!(c.exists());
        // Likewise a handle opened in between.
        assert_eq!(c.controller_gone(), ControlAction::Delete);
        c.file_opened();
        assert!(!c.delete_now());
        assert_eq!(c.file_closed(), ControlAction::Delete);
        assert!(c.delete_now());
    }

    #[test]
    fn a_failed_creation_fails_that_controller_only() {
        let p = HostPlatform::deterministic();
        let c = ControlDevice::new(&p);
        assert_eq!(c.controller_adding(), ControlAction::Create);
        c.created(false);
        assert!(!c.exists());
        // The next controller tries again; nothing is deleted that was never created.
        assert_eq!(c.controller_adding(), ControlAction::Create);
        c.created(true);
        assert_eq!(c.controller_gone(), ControlAction::Delete);
        assert!(c.delete_now());
        assert_eq!(c.controller_gone(), ControlAction::None);
    }

    #[test]
    fn caller_context_is_for_the_inline_ioctls() {
        for code in [
            WV_IOCTL_DEVICE_OPEN,
            WV_IOCTL_MEMORY_REGISTER,
            WV_IOCTL_CQ_CREATE,
            WV_IOCTL_QP_CREATE,
            WV_IOCTL_SRQ_CREATE,
            WV_IOCTL_PD_ALLOCATE,
        ] {
            assert!(runs_in_caller_context(code), "{code:#x}");
        }
        for code in [
            WV_IOCTL_CQ_NOTIFY,
            WV_IOCTL_DEVICE_NOTIFY,
            WV_IOCTL_SRQ_NOTIFY,
            WV_IOCTL_QP_MODIFY,
            0x1234_5678,
        ] {
            assert!(!runs_in_caller_context(code), "{code:#x}");
        }
    }
}
