//! IRPs and [`HostRequest`], the driver's owned handle to one.
//!
//! The [`Irp`] is the I/O manager's record (shared with the caller's [`crate::Io`]); the
//! [`HostRequest`] is the WDFREQUEST the driver owns. Completion is decided by setting the
//! IRP's write-once result, so the second completer of an IRP is always caught.
//!
//! Completing an IRP costs what `IoCompleteRequest` costs a thread that nobody waits on: no
//! lock, no copy of the system buffer (it is moved), and no wake-up except of a thread blocked
//! in [`crate::Io::wait`] — exactly that one thread, through its own park token (a futex on
//! Linux), as the I/O manager signals the one event an OVERLAPPED names.

use std::sync::OnceLock;
use std::thread::ThreadId;

use wv_abi::NtStatus;
use wv_hal::{IoRequest, Irql};

use crate::deferred::Task;
use crate::irql;
use crate::low_resources;
use crate::platform::Shared;
use crate::probe;
use crate::queue::QueueInner;
use crate::sync::{Arc, AtomicBool, Mutex, Ordering, Weak};
use crate::verifier::Counted;
use crate::wait_word::{WaitWord, Waited};

/// The final status of an I/O request, as `GetOverlappedResult` would show it (spec §2.1):
/// the HAL's type, shared with the user-mode transports.
pub use wv_hal::IoStatus;

/// Cancel state of an IRP: `Irp->Cancel` and the queue it is parked in, under one lock.
#[derive(Default)]
pub(crate) struct CancelState {
    pub cancelled: bool,
    pub parked_in: Option<Weak<QueueInner>>,
    /// The queue that last handed the request to the driver (`WdfIoQueueRetrieveNextRequest`):
    /// KMDF's verifier refuses to forward a request to that same queue.
    pub delivered_by: Option<Weak<QueueInner>>,
}

/// A file-object reference an IRP holds (`Irp->Tail.Overlay.OriginalFileObject`).
pub(crate) trait FileReference: Send {
    /// Gives the reference up. Returns the file object itself when this was its last
    /// reference: dropping that runs the driver's `file_close`, which the caller must do at
    /// PASSIVE_LEVEL.
    fn release(self: Box<Self>) -> Option<Box<dyn Send>>;
}

impl<T: Send + Sync + 'static> FileReference for Arc<T> {
    fn release(self: Box<Self>) -> Option<Box<dyn Send>> {
        // Exactly one of the holders that release this way gets the value back, so the last
        // release is never missed and never run twice, whichever threads race here.
        Arc::into_inner(*self).map(|last| Box::new(last) as Box<dyn Send>)
    }
}

/// The I/O manager's record of one IRP.
pub(crate) struct Irp {
    pub id: u64,
    pub shared: Arc<Shared>,
    pub file_id: u64,
    /// The final status, set exactly once (the first completer wins; a second is a violation).
    result: OnceLock<IoStatus>,
    /// The per-request wait word: the completion wakes exactly the threads parked in
    /// [`Irp::wait`], and publishes `result` to them.
    wait_word: WaitWord,
    /// The event-path time stamps of the completion (benchmarks only).
    trace: probe::IrpTrace,
    pub cancel: Mutex<CancelState>,
    /// The file object reference the IRP holds; released when it completes.
    file_ref: Mutex<Option<Box<dyn FileReference>>>,
    dispatch_thread: ThreadId,
    pub dispatching: AtomicBool,
    pub ever_parked: AtomicBool,
    inline: AtomicBool,
}

impl Irp {
    pub(crate) fn new(
        shared: Arc<Shared>,
        file_id: u64,
        file_ref: Box<dyn FileReference>,
    ) -> Arc<Irp> {
        shared.verifier.created(Counted::Request);
        Arc::new(Irp {
            id: shared.next_id(),
            shared,
            file_id,
            result: OnceLock::new(),
            wait_word: WaitWord::new(),
            trace: probe::IrpTrace::default(),
            cancel: Mutex::new(CancelState::default()),
            file_ref: Mutex::new(Some(file_ref)),
            dispatch_thread: std::thread::current().id(),
            dispatching: AtomicBool::new(true),
            ever_parked: AtomicBool::new(false),
            inline: AtomicBool::new(false),
        })
    }

    /// Whether the driver completed the IRP inside its dispatch routine, on the dispatching
    /// thread, without ever parking it (the caller then sees no STATUS_PENDING).
    pub(crate) fn completed_inline(&self) -> bool {
        self.inline.load(Ordering::SeqCst)
    }

    pub(crate) fn result(&self) -> Option<IoStatus> {
        self.result.get().cloned()
    }

    /// Blocks the calling thread until the IRP completes (or `timeout` passes), on the IRP's
    /// wait word.
    pub(crate) fn wait(&self, timeout: Option<std::time::Duration>) -> Option<IoStatus> {
        if let Some(done) = self.result.get() {
            return Some(done.clone());
        }
        let deadline = timeout.map(|t| std::time::Instant::now() + t);
        if let Waited::Done { slept: true } = self.wait_word.wait(deadline) {
            self.trace.woken();
        }
        self.result()
    }

    /// `IoCompleteRequest`: records the status and the output (the system buffer, moved),
    /// wakes the threads waiting for it and releases the file reference. The second completion
    /// of an IRP is a violation.
    pub(crate) fn complete(&self, status: NtStatus, information: usize, mut buffer: Vec<u8>) {
        let verifier = &self.shared.verifier;
        if self.result.get().is_some() {
            verifier.fail(format!("verifier: request {:#x} completed twice", self.id));
        }
        self.trace.completing();
        if status.is_error() {
            buffer = Vec::new();
        } else {
            buffer.truncate(information);
        }
        let inline = self.dispatching.load(Ordering::SeqCst)
            && std::thread::current().id() == self.dispatch_thread
            && !self.ever_parked.load(Ordering::SeqCst);
        self.inline.store(inline, Ordering::SeqCst);
        let status_block = IoStatus {
            status: status.0,
            information,
            output: buffer,
        };
        if self.result.set(status_block).is_err() {
            verifier.fail(format!("verifier: request {:#x} completed twice", self.id));
        }
        // The result (and `inline`) are visible to whoever the wait word wakes.
        self.wait_word.set_done();
        self.trace.wake_issued();
        verifier.destroyed(Counted::Request);
        let file_ref = self.file_ref.lock().take();
        if let Some(last) = file_ref.and_then(|r| r.release()) {
            // The last file reference runs the driver's file_close at PASSIVE_LEVEL; on
            // Windows the I/O completion APC drops it, never the completing DPC. Any other
            // reference is simply given up here, as IoCompleteRequest dereferences the file
            // object, without waking a thread.
            self.shared
                .push(Task::Internal("file_close", Box::new(move || drop(last))));
        }
        if status == NtStatus::PENDING {
            verifier.fail(format!(
                "verifier: request {:#x} completed with STATUS_PENDING",
                self.id
            ));
        }
    }

    /// CancelIoEx on this IRP: sets `Irp->Cancel`, and if the IRP is parked in a queue, takes
    /// it out and completes it with STATUS_CANCELLED. Returns whether it did.
    pub(crate) fn cancel(&self) -> bool {
        let queue = {
            let mut cancel = self.cancel.lock();
            cancel.cancelled = true;
            cancel.parked_in.clone()
        };
        let Some(queue) = queue.and_then(|q| q.upgrade()) else {
            return false;
        };
        match queue.take(self.id) {
            Some(request) => {
                request.complete_by_platform(NtStatus::CANCELLED);
                true
            }
            None => false,
        }
    }
}

/// One pended METHOD_BUFFERED IOCTL request, owned by the driver (`WDFREQUEST`).
///
/// The system buffer is `max(input_len, output_len)` bytes starting with a copy of the input.
/// The rest is zero-filled here; Windows leaves it uninitialised (pool memory), so a driver
/// must never rely on it reading zero.
///
/// Verifier: dropping a request without completing it ("verifier: request 0x… never completed
/// (dropped)"; the IRP is then completed with STATUS_UNSUCCESSFUL so the caller does not hang),
/// completing above DISPATCH_LEVEL, and an `information` larger than the output length
/// ("verifier: Information N > output length M"; the copy-back is clamped).
pub struct HostRequest {
    pub(crate) irp: Arc<Irp>,
    code: u32,
    input_len: usize,
    output_len: usize,
    buffer: Vec<u8>,
    done: bool,
}

impl HostRequest {
    pub(crate) fn new(irp: Arc<Irp>, code: u32, input: &[u8], output_len: usize) -> Self {
        let mut buffer = vec![0; input.len().max(output_len)];
        buffer[..input.len()].copy_from_slice(input);
        HostRequest {
            irp,
            code,
            input_len: input.len(),
            output_len,
            buffer,
            done: false,
        }
    }

    /// The IRP's id, as the verifier's messages show it.
    pub fn id(&self) -> u64 {
        self.irp.id
    }

    /// Whether the I/O manager has asked to cancel this request (`WdfRequestIsCanceled`).
    pub fn is_cancelled(&self) -> bool {
        self.irp.cancel.lock().cancelled
    }

    /// Gives up the typed, complete-once ownership and returns the raw IRP, which can be
    /// completed any number of times. Exists to show the IRP layer's double-completion check
    /// (the typed API cannot express the bug); not for driver code.
    pub fn into_raw_irp(mut self) -> RawIrp {
        let _host = low_resources::host_scope();
        self.done = true;
        RawIrp {
            irp: Arc::clone(&self.irp),
            buffer: Arc::new(Mutex::new(std::mem::take(&mut self.buffer))),
        }
    }

    /// Completion by the platform itself (cancel, purge): no driver-rule checks.
    pub(crate) fn complete_by_platform(mut self, status: NtStatus) {
        self.done = true;
        self.irp
            .complete(status, 0, std::mem::take(&mut self.buffer));
    }
}

/// The [`IoRequest`] accessors of a request that keeps its IOCTL code, lengths and system
/// buffer in fields `code`, `input_len`, `output_len` and `buffer` (the host's requests and the
/// loom model's).
macro_rules! request_fields {
    () => {
        fn ioctl_code(&self) -> u32 {
            self.code
        }
        fn input_len(&self) -> usize {
            self.input_len
        }
        fn output_len(&self) -> usize {
            self.output_len
        }
        fn buffer(&self) -> &[u8] {
            &self.buffer
        }
        fn buffer_mut(&mut self) -> &mut [u8] {
            &mut self.buffer
        }
    };
}
#[cfg_attr(not(loom), allow(unused_imports))]
pub(crate) use request_fields;

impl IoRequest for HostRequest {
    request_fields!();

    fn complete(mut self, status: NtStatus, information: usize) {
        let _host = low_resources::host_scope();
        self.done = true;
        let level = irql::current();
        let mut problem = None;
        if level > Irql::Dispatch {
            problem = Some(format!(
                "verifier: request {:#x} completed at {}",
                self.irp.id,
                level.name()
            ));
        }
        if information > self.output_len {
            problem = Some(format!(
                "verifier: Information {information} > output length {} (request {:#x})",
                self.output_len, self.irp.id
            ));
        }
        let information = information.min(self.output_len);
        self.irp
            .complete(status, information, std::mem::take(&mut self.buffer));
        if let Some(message) = problem {
            self.irp.shared.verifier.fail(message);
        }
    }
}

impl Drop for HostRequest {
    fn drop(&mut self) {
        let _host = low_resources::host_scope();
        if self.done {
            return;
        }
        self.done = true;
        let message = format!(
            "verifier: request {:#x} never completed (dropped)",
            self.irp.id
        );
        self.irp.shared.verifier.report(message.clone());
        self.irp.complete(NtStatus::UNSUCCESSFUL, 0, Vec::new());
        if !std::thread::panicking() {
            panic!("{message}");
        }
    }
}

impl std::fmt::Debug for HostRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostRequest")
            .field("id", &self.irp.id)
            .field("code", &format_args!("{:#x}", self.code))
            .field("input_len", &self.input_len)
            .field("output_len", &self.output_len)
            .finish()
    }
}

/// A raw IRP pointer, as WDM code holds it: copyable, so nothing stops a second completion
/// except the I/O manager's check. See [`HostRequest::into_raw_irp`].
#[derive(Clone)]
pub struct RawIrp {
    irp: Arc<Irp>,
    buffer: Arc<Mutex<Vec<u8>>>,
}

impl RawIrp {
    /// `IoCompleteRequest` on the raw IRP. Verifier: "verifier: request 0x… completed twice"
    /// on the second call.
    pub fn complete(&self, status: NtStatus, information: usize) {
        let _host = low_resources::host_scope();
        let buffer = self.buffer.lock().clone();
        self.irp.complete(status, information, buffer);
    }
}

impl std::fmt::Debug for RawIrp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RawIrp").field("id", &self.irp.id).finish()
    }
}
