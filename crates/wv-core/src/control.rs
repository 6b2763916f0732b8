//! The control device's lifetime and its requests: rules the WDF glue follows, kept here so they
//! are tested with the rest of the core.
//!
//! * **Lifetime** ([`ControlDevice`]): `\Device\WinVerbs` exists while at least one RDMA
//!   controller is below the filter or one handle to it is open. The first controller's
//!   AddDevice creates it, and if that creation fails the AddDevice fails without creating the
//!   filter device (OFW ignored the failure and later passed a null device to every queue
//!   creation, spec §7.1-k). KMDF turns a filter's failed AddDevice into success: the stack
//!   builds and starts without WinVerbs on that controller (the glue logs it), and the next
//!   controller's AddDevice tries to create the control device again. It is
//!   deleted when the last controller has gone and the last handle has closed, whichever comes
//!   last — never under an open handle, whose cleanup still needs the device's queues. A
//!   deletion decided at the last close runs later, from a work item (not inside the device's
//!   own close callback); [`ControlDevice::delete_now`] confirms it then, so a controller or a
//!   handle that arrived in between keeps the device. A handle being opened counts before
//!   anything is created for it ([`ControlDevice::open_file`]), under the lock the
//!   confirmation takes, so a deletion decided meanwhile keeps the device and a create that
//!   comes after a confirmed deletion is refused. The glue serialises the decisions with the
//!   creation and deletion themselves (one PASSIVE_LEVEL lock), so a new controller never
//!   tries to create the device while the old one is still being deleted.
//! * **Caller context** ([`runs_in_caller_context`], [`in_caller_context`]): the IOCTLs that
//!   always complete inline (device open, MR registration, CQ/QP/SRQ creation: the verbs that
//!   pin or map the caller's memory, and every other inline one) run in
//!   `EvtIoInCallerContext`, in the calling thread, whatever queue the framework would have
//!   used (spec §7.1-l). They need a user-mode caller at PASSIVE_LEVEL: their handlers may wait,
//!   and the memory they pin or map is the calling process's. A kernel-mode sender, or one at
//!   a raised IRQL, is refused (`STATUS_INVALID_DEVICE_REQUEST`) rather than run on a system
//!   worker thread, where the user addresses it passed would be the System process's. A request
//!   with no file object (a kernel-mode `IoBuildDeviceIoControlRequest`) has no WinVerbs
//!   provider and is refused the same way. Requests that may park go through the control
//!   device's queue, because only a request the framework has delivered from a queue can be
//!   forwarded to another.
//! * **Buffers** ([`request_buffer`]): which buffer of an IOCTL the glue takes from the
//!   framework, and how many of its bytes the core sees.

use wv_abi::NtStatus;
use wv_abi::ioctl::{Completion, Ioctl, METHOD_BUFFERED};
use wv_hal::{Irql, Platform, SpinLock};

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

    /// The outcome of a `Create`. On failure the controller's AddDevice fails (the filter does
    /// not attach to it: KMDF does not let a filter fail its stack) and the controller does
    /// not count.
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

    /// A handle is being opened (`EvtDeviceFileCreate`): `create` makes its state. The open
    /// counts first, atomically with the check that the device still exists, and `create` runs
    /// only then; so a deletion confirmed later ([`ControlDevice::delete_now`]) sees the handle
    /// and keeps the device, and a create that comes after a confirmed deletion is refused with
    /// `STATUS_NO_SUCH_DEVICE` (what the I/O manager answers an open of a device being deleted)
    /// without `create` being called. A failed `create` uncounts the open again; the action
    /// says whether that left the device unused (`Delete`: queue the deletion, as after a close).
    pub fn open_file<T>(
        &self,
        create: impl FnOnce() -> Result<T, NtStatus>,
    ) -> (Result<T, NtStatus>, ControlAction) {
        {
            let mut s = self.state.lock();
            if !s.exists {
                return (Err(NtStatus::NO_SUCH_DEVICE), ControlAction::None);
            }
            s.files += 1;
        }
        match create() {
            Ok(file) => (Ok(file), ControlAction::None),
            Err(status) => (Err(status), self.file_closed()),
        }
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

/// Whether an IOCTL belongs in the caller's context (it always completes inline) rather than
/// in the control device's queue (it may park, or its code is unknown). The one list the glue
/// and the tests use.
pub fn runs_in_caller_context(code: u32) -> bool {
    Ioctl::from_code(code).is_some_and(|i| i.completion() == Completion::Inline)
}

/// Who sent a request (`WdfRequestGetRequestorMode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Requestor {
    /// An application (`UserMode`).
    User,
    /// A kernel-mode component (`KernelMode`).
    Kernel,
}

/// What `EvtIoInCallerContext` does with a request ([`in_caller_context`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use]
pub enum CallerContext {
    /// Dispatch it here, in the sender's thread (an inline IOCTL of an application at
    /// PASSIVE_LEVEL).
    Dispatch,
    /// Hand it to the control device's queue (`WdfDeviceEnqueueRequest`).
    Enqueue,
    /// Complete it at once with this status.
    Refuse(NtStatus),
}

/// The decision of `EvtIoInCallerContext`, which runs in the sender's thread at `irql` (a
/// user-mode sender is at PASSIVE_LEVEL; a kernel-mode one may be at up to DISPATCH_LEVEL):
/// * no file object (`has_file == false`): no WinVerbs provider to run it for — refused;
/// * an inline IOCTL ([`runs_in_caller_context`]): dispatched here for an application at
///   PASSIVE_LEVEL; refused for a kernel-mode sender or a raised IRQL, where its handler could
///   not wait and the buffers it pins or maps would not be an application's;
/// * anything else (it may park, or its code is unknown): enqueued.
pub fn in_caller_context(
    code: u32,
    irql: Irql,
    requestor: Requestor,
    has_file: bool,
) -> CallerContext {
    if !has_file {
        return CallerContext::Refuse(NtStatus::INVALID_DEVICE_REQUEST);
    }
    if !runs_in_caller_context(code) {
        return CallerContext::Enqueue;
    }
    if requestor == Requestor::User && irql == Irql::Passive {
        CallerContext::Dispatch
    } else {
        CallerContext::Refuse(NtStatus::INVALID_DEVICE_REQUEST)
    }
}

/// Which buffer of an IOCTL the glue retrieves from the framework, and how many of its bytes
/// the core sees ([`request_buffer`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RequestBuffer {
    /// None: the request carries no bytes, or its transfer method is not METHOD_BUFFERED.
    None,
    /// The buffer `WdfRequestRetrieveInputBuffer` returns, `len` bytes of it.
    Input {
        /// Bytes the core may read and write.
        len: usize,
    },
    /// The buffer `WdfRequestRetrieveOutputBuffer` returns, `len` bytes of it.
    Output {
        /// Bytes the core may read and write.
        len: usize,
    },
}

/// The buffer rule. METHOD_BUFFERED (every WinVerbs code): the I/O manager gives the request
/// one system buffer of `max(input_len, output_len)` bytes, holding the input and receiving
/// the output, and both retrieval calls return that buffer (with their own lengths); the input
/// call is used when there is input (it refuses a request without any), the output call
/// otherwise. Any other method: no buffer. No WinVerbs code uses one, so the core answers the
/// code as unknown without reading a byte, and a direct or neither buffer (an MDL, or a user
/// address valid only in the sender's process) never reaches it.
pub fn request_buffer(code: u32, input_len: usize, output_len: usize) -> RequestBuffer {
    if code & 3 != METHOD_BUFFERED {
        return RequestBuffer::None;
    }
    let len = input_len.max(output_len);
    if input_len > 0 {
        RequestBuffer::Input { len }
    } else if output_len > 0 {
        RequestBuffer::Output { len }
    } else {
        RequestBuffer::None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wv_abi::ioctl::*;
    use wv_hal::Irql;
    use wv_host::HostPlatform;

    /// A control device its first controller asked for and the glue created.
    fn created_with_a_controller() -> ControlDevice<HostPlatform> {
        let c = ControlDevice::new(&HostPlatform::deterministic());
        assert_eq!(c.controller_adding(), ControlAction::Create);
        c.created(true);
        c
    }

    #[test]
    fn created_with_the_first_controller_deleted_after_the_last_user() {
        let c = created_with_a_controller();
        assert!(c.exists());
        assert_eq!(c.controller_adding(), ControlAction::None);
        assert!(c.open_file(|| Ok(())).0.is_ok());
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
        let c = created_with_a_controller();
        assert!(c.open_file(|| Ok(())).0.is_ok());
        assert_eq!(c.controller_gone(), ControlAction::None);
        // The last close decides; before the deletion runs, a controller arrives and reuses
        // the device instead of creating a second one with the same name.
        assert_eq!(c.file_closed(), ControlAction::Delete);
        assert_eq!(c.controller_adding(), ControlAction::None);
        assert!(!c.delete_now(), "the device is in use again");
        assert!(c.exists());
        // Likewise a handle opened in between.
        assert_eq!(c.controller_gone(), ControlAction::Delete);
        assert!(c.open_file(|| Ok(())).0.is_ok());
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
    fn an_open_racing_the_last_controllers_deletion_keeps_the_device_or_is_refused() {
        let c = created_with_a_controller();
        // The last controller goes while a CreateFile is in `EvtDeviceFileCreate`: its cleanup
        // decides the deletion and confirms it under the glue's lock, which the create does not
        // take. The confirmation lands while the core is still making the handle's state.
        assert_eq!(c.controller_gone(), ControlAction::Delete);
        let (opened, then) = c.open_file(|| {
            assert!(
                !c.delete_now(),
                "the device was deleted under a handle being opened"
            );
            Ok(7)
        });
        assert_eq!((opened, then), (Ok(7), ControlAction::None));
        assert!(c.exists());
        // The handle closes: now the device goes.
        assert_eq!(c.file_closed(), ControlAction::Delete);
        assert!(c.delete_now());
        // A create that reaches the callback after the confirmed deletion is refused before
        // anything is made for it, and does not count.
        let (refused, then) = c.open_file(|| -> Result<(), NtStatus> {
            panic!("state made for a handle on a deleted device")
        });
        assert_eq!(refused, Err(NtStatus::NO_SUCH_DEVICE));
        assert_eq!(then, ControlAction::None);
        assert_eq!(
            c.controller_adding(),
            ControlAction::Create,
            "no phantom handle"
        );
    }

    #[test]
    fn a_failed_open_uncounts_and_may_leave_the_device_unused() {
        let c = created_with_a_controller();
        let (first, _) = c.open_file(|| Ok(()));
        assert!(first.is_ok());
        assert_eq!(c.controller_gone(), ControlAction::None, "a handle is open");
        let (failed, then) = c.open_file(|| -> Result<(), NtStatus> { Err(NtStatus::NO_MEMORY) });
        assert_eq!(failed, Err(NtStatus::NO_MEMORY));
        assert_eq!(then, ControlAction::None, "the first handle is still open");
        assert_eq!(c.file_closed(), ControlAction::Delete);
        assert!(c.delete_now());
    }

    #[test]
    fn the_last_failed_open_asks_for_the_deletion() {
        let c = created_with_a_controller();
        // The controller's removal and an open that then fails: nothing else uses the device.
        let (failed, then) = c.open_file(|| -> Result<(), NtStatus> {
            assert_eq!(c.controller_gone(), ControlAction::None, "the open counts");
            Err(NtStatus::NO_MEMORY)
        });
        assert_eq!(failed, Err(NtStatus::NO_MEMORY));
        assert_eq!(then, ControlAction::Delete);
        assert!(c.delete_now());
    }

    #[test]
    fn caller_context_dispatch_needs_an_application_at_passive_level() {
        use CallerContext::*;
        const REFUSED: CallerContext = Refuse(NtStatus::INVALID_DEVICE_REQUEST);
        let mr = WV_IOCTL_MEMORY_REGISTER;
        assert_eq!(
            in_caller_context(mr, Irql::Passive, Requestor::User, true),
            Dispatch
        );
        for irql in [Irql::Apc, Irql::Dispatch] {
            assert_eq!(in_caller_context(mr, irql, Requestor::User, true), REFUSED);
            assert_eq!(
                in_caller_context(mr, irql, Requestor::Kernel, true),
                REFUSED
            );
        }
        assert_eq!(
            in_caller_context(mr, Irql::Passive, Requestor::Kernel, true),
            REFUSED
        );
        // Requests that park are queued, whoever sends them, at any IRQL.
        for irql in [Irql::Passive, Irql::Apc, Irql::Dispatch] {
            for who in [Requestor::User, Requestor::Kernel] {
                assert_eq!(
                    in_caller_context(WV_IOCTL_CQ_NOTIFY, irql, who, true),
                    Enqueue
                );
                assert_eq!(in_caller_context(0x1234_5678, irql, who, true), Enqueue);
            }
        }
        // Every inline IOCTL, and only those, in the caller's thread.
        for ioctl in Ioctl::ALL {
            let inline = ioctl.completion() == Completion::Inline;
            assert_eq!(
                in_caller_context(ioctl.code(), Irql::Passive, Requestor::User, true),
                if inline { Dispatch } else { Enqueue },
                "{}",
                ioctl.name()
            );
            // No file object, no provider: refused, whatever the code.
            assert_eq!(
                in_caller_context(ioctl.code(), Irql::Passive, Requestor::Kernel, false),
                REFUSED
            );
        }
    }

    #[test]
    fn buffered_requests_see_the_whole_system_buffer_and_no_other_method_any() {
        let code = WV_IOCTL_QP_CREATE;
        assert_eq!(code & 3, METHOD_BUFFERED);
        // (code, input length, output length, what the handler sees)
        for (code, input, output, seen) in [
            (code, 72, 72, RequestBuffer::Input { len: 72 }),
            // Output longer than input: the system buffer has the larger length.
            (
                WV_IOCTL_DEVICE_QUERY,
                8,
                152,
                RequestBuffer::Input { len: 152 },
            ),
            (WV_IOCTL_QP_MODIFY, 80, 8, RequestBuffer::Input { len: 80 }),
            // No input: the output call retrieves it.
            (
                WV_IOCTL_GUID_QUERY,
                0,
                24,
                RequestBuffer::Output { len: 24 },
            ),
            (code, 0, 0, RequestBuffer::None),
        ] {
            assert_eq!(request_buffer(code, input, output), seen, "{code:#x}");
        }
        // METHOD_IN_DIRECT, METHOD_OUT_DIRECT, METHOD_NEITHER of the same function.
        for method in 1..=3 {
            assert_eq!(
                request_buffer((code & !3) | method, 72, 72),
                RequestBuffer::None,
                "method {method}"
            );
        }
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
