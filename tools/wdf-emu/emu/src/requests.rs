//! Requests: the I/O manager's IRP and the framework's `WDFREQUEST` over it.
//!
//! A request has one owner at a time — the framework (arriving, or in a queue) or the driver
//! (in `EvtIoInCallerContext`, presented by a queue, retrieved from one) — and only the driver
//! may complete it, once. The verifier checks every hand-over and every completion, and a
//! handle used after its request completed names what happened to it.
//!
//! The IRP is METHOD_BUFFERED as every WinVerbs code is: one system buffer of
//! `max(input, output)` bytes, starting with a copy of the input; at completion the I/O manager
//! copies `Information` bytes of it back to the caller for a success or warning status, none
//! for an error.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use wdk_sys::{
    KPROCESSOR_MODE, NTSTATUS, PVOID, PWDF_REQUEST_PARAMETERS, ULONG_PTR, WDF_REQUEST_PARAMETERS,
    WDFFILEOBJECT, WDFREQUEST,
};
use wv_client::raw::IoStatus;

use crate::file::FileCore;
use crate::machine::Inner;
use crate::objects::{self, Attributes, Fate, Fx, Handle, Kind, Life, Object};
use crate::verifier::WDF_VIOLATION;

/// What an IRP asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Major {
    Create,
    DeviceControl,
}

/// The I/O manager's record of one request.
pub(crate) struct Irp {
    pub id: u64,
    pub major: Major,
    pub code: u32,
    pub input_len: usize,
    pub output_len: usize,
    /// The system buffer (null when both lengths are 0 or the method is not buffered).
    buffer: *mut u8,
    buffer_len: usize,
    /// `RequestorMode == KernelMode`.
    pub kernel_mode: bool,
    /// The file object, referenced until the IRP completes.
    pub file: Mutex<Option<Arc<FileCore>>>,
    file_handle: Option<Handle>,
    pub device: Handle,
    state: Mutex<Option<IoStatus>>,
    done: Condvar,
    /// `Irp->Cancel`.
    pub cancel: AtomicBool,
    /// IoMarkIrpPending: the request entered a queue, so the dispatch routine returned
    /// `STATUS_PENDING` whatever happened next.
    pub marked_pending: AtomicBool,
    /// The dispatch to the driver is running, on this thread.
    pub dispatching: AtomicBool,
    dispatch_thread: std::thread::ThreadId,
    /// The request waited somewhere for later: a manual queue, a deferred presentation.
    pub parked: AtomicBool,
    /// Completed inside the dispatch, on its thread, without ever waiting anywhere.
    pub completed_in_dispatch: AtomicBool,
    machine: Weak<Inner>,
}

// SAFETY: the system buffer is owned by the IRP and only written by the driver that owns the
// request (one owner at a time) and read by the I/O manager after completion.
unsafe impl Send for Irp {}
// SAFETY: as above; everything else is behind locks or atomics.
unsafe impl Sync for Irp {}

impl Irp {
    /// A new IRP; the file object (if any) is referenced until completion.
    #[allow(
        clippy::too_many_arguments,
        reason = "the fields of an IRP's first stack location"
    )]
    pub(crate) fn new(
        m: &Arc<Inner>,
        major: Major,
        device: Handle,
        code: u32,
        input: &[u8],
        output_len: usize,
        kernel_mode: bool,
        file: Option<Arc<FileCore>>,
    ) -> Arc<Irp> {
        let buffered = major == Major::DeviceControl && code & 3 == 0;
        let len = if buffered {
            input.len().max(output_len)
        } else {
            0
        };
        let (buffer, buffer_len) = if len == 0 {
            (std::ptr::null_mut(), 0)
        } else {
            // Pool memory is not zeroed on Windows; the input bytes are copied, the rest is a
            // pattern so that a driver relying on zeros is noticed.
            let mut bytes = vec![0xA5u8; len].into_boxed_slice();
            bytes[..input.len()].copy_from_slice(input);
            (Box::into_raw(bytes).cast::<u8>(), len)
        };
        if let Some(file) = &file {
            file.add_ref();
        }
        m.count("irps");
        Arc::new(Irp {
            id: crate::verifier::next_id(),
            major,
            code,
            input_len: input.len(),
            output_len,
            buffer,
            buffer_len,
            kernel_mode,
            file_handle: file.as_ref().map(|f| f.handle),
            file: Mutex::new(file),
            device,
            state: Mutex::new(None),
            done: Condvar::new(),
            cancel: AtomicBool::new(false),
            marked_pending: AtomicBool::new(false),
            dispatching: AtomicBool::new(false),
            dispatch_thread: std::thread::current().id(),
            parked: AtomicBool::new(false),
            completed_in_dispatch: AtomicBool::new(false),
            machine: Arc::downgrade(m),
        })
    }

    /// The framework file object the IRP was sent on.
    pub(crate) fn file_handle(&self) -> Option<Handle> {
        self.file_handle
    }

    /// The system buffer and its length.
    pub(crate) fn system_buffer(&self) -> (*mut u8, usize) {
        (self.buffer, self.buffer_len)
    }

    /// The final status, if completed.
    pub(crate) fn result(&self) -> Option<IoStatus> {
        self.state.lock().clone()
    }

    /// `IoCompleteRequest`: records the status and the output, wakes the waiter, and gives up
    /// the file object's reference (its last one sends the close).
    pub(crate) fn complete(&self, status: NTSTATUS, information: usize) {
        let error = (status as u32) >> 30 == 3;
        let output = if error || self.buffer.is_null() || self.major != Major::DeviceControl {
            Vec::new()
        } else {
            let n = information.min(self.buffer_len);
            // SAFETY: `n` bytes of the system buffer, which nobody writes after completion.
            unsafe { std::slice::from_raw_parts(self.buffer, n) }.to_vec()
        };
        {
            let mut state = self.state.lock();
            if state.is_some() {
                drop(state);
                if let Some(m) = self.machine.upgrade() {
                    m.bug_check(
                        crate::verifier::DRIVER_VERIFIER_DETECTED_VIOLATION,
                        format!("IoCompleteRequest: IRP {:#x} completed twice", self.id),
                    );
                }
                return;
            }
            *state = Some(IoStatus {
                status: status as u32,
                information,
                output,
            });
            let inline = self.dispatching.load(Ordering::SeqCst)
                && std::thread::current().id() == self.dispatch_thread
                && !self.parked.load(Ordering::SeqCst);
            self.completed_in_dispatch.store(inline, Ordering::SeqCst);
        }
        self.done.notify_all();
        let file = self.file.lock().take();
        if let Some(file) = file {
            file.release();
        }
    }

    /// Waits until the IRP completes: deterministic machines run their deferred work; threaded
    /// ones block, at most `timeout`.
    pub(crate) fn wait(&self, m: &Inner, timeout: Duration) -> Option<IoStatus> {
        if m.is_deterministic() {
            m.run_until_idle();
            return self.result();
        }
        let deadline = Instant::now() + timeout;
        let mut state = self.state.lock();
        while state.is_none() {
            if self.done.wait_until(&mut state, deadline).timed_out() {
                break;
            }
        }
        state.clone()
    }
}

impl Drop for Irp {
    fn drop(&mut self) {
        if !self.buffer.is_null() {
            let slice = std::ptr::slice_from_raw_parts_mut(self.buffer, self.buffer_len);
            // SAFETY: the buffer `new` leaked from a boxed slice of this length, freed once.
            drop(unsafe { Box::from_raw(slice) });
        }
    }
}

/// Who owns a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Owner {
    /// The framework: arriving, being cancelled, being failed by the framework.
    Framework,
    /// The driver.
    Driver,
    /// A queue (the framework, on the queue's behalf): cancellable.
    Queue(Handle),
    /// Completed.
    Completed,
}

/// A request's data.
pub(crate) struct RequestObj {
    pub irp: Arc<Irp>,
    pub owner: Owner,
    /// The queue that presented it or from which it was retrieved.
    pub delivered_by: Option<Handle>,
    /// Received by `EvtIoInCallerContext` and not yet enqueued.
    pub in_caller_context: bool,
    pub device: Handle,
}

/// The request data of `handle`, if it is a live request.
pub(crate) fn request_mut(fx: &mut Fx, handle: Handle) -> Option<&mut RequestObj> {
    match fx.get_mut(handle) {
        Some(Object {
            kind: Kind::Request(r),
            life: Life::Live,
            ..
        }) => Some(r),
        _ => None,
    }
}

/// Whether the driver may act on the request: `Err` says why not.
pub(crate) fn owned_by_driver(r: &RequestObj) -> Result<(), String> {
    match r.owner {
        Owner::Driver => Ok(()),
        Owner::Queue(q) => Err(format!(
            "is in WDFQUEUE {q:#x}: the framework owns it (the driver does not own a request it \
             handed to a queue)"
        )),
        Owner::Framework => Err("is owned by the framework".into()),
        Owner::Completed => Err("was already completed".into()),
    }
}

/// A new request object over `irp` (the framework owns it).
pub(crate) fn create(m: &Arc<Inner>, irp: &Arc<Irp>) -> Handle {
    let mut fx = m.fx.lock();
    fx.insert(
        Kind::Request(Box::new(RequestObj {
            irp: Arc::clone(irp),
            owner: Owner::Framework,
            delivered_by: None,
            in_caller_context: false,
            device: irp.device,
        })),
        &Attributes::default(),
        None,
    )
}

/// The framework completes request `r` itself (cancellation, a purge, no queue for it).
pub(crate) fn complete_by_framework(m: &Arc<Inner>, r: Handle, status: NTSTATUS) {
    finish(m, r, status, 0, Fate::CompletedByTheFramework);
}

/// Completion, by the driver or the framework: the owner becomes `Completed`, the queue that
/// delivered it stops counting it, the IRP completes, and the object goes (unless the driver
/// holds a reference).
fn finish(m: &Arc<Inner>, r: Handle, status: NTSTATUS, information: usize, fate: Fate) {
    let (irp, queue) = {
        let mut fx = m.fx.lock();
        let Some(req) = request_mut(&mut fx, r) else {
            return;
        };
        req.owner = Owner::Completed;
        let queue = req.delivered_by.take();
        let irp = Arc::clone(&req.irp);
        if let Some(q) = queue
            && let Some(Object {
                kind: Kind::Queue(queue),
                ..
            }) = fx.get_mut(q)
        {
            queue.driver_owned = queue.driver_owned.saturating_sub(1);
        }
        if let Some(object) = fx.get_mut(r) {
            object.life = Life::Disposed;
        }
        (irp, queue)
    };
    irp.complete(status, information);
    objects::release(m, r, fate);
    if let Some(q) = queue {
        crate::io::purge_progress(m, q);
        // A parallel queue with a presentation limit may present the next one now.
        crate::io::dispatch(m, q);
    }
}

/// Looks up `request` for a request DDI, with the bug checks of a bad handle.
fn with_request<R>(
    m: &Inner,
    ddi: &str,
    request: WDFREQUEST,
    f: impl FnOnce(&mut RequestObj) -> R,
) -> Option<R> {
    let handle = request as Handle;
    let mut fx = m.fx.lock();
    match request_mut(&mut fx, handle) {
        Some(r) => Some(f(r)),
        None => {
            let message = match fx.get(handle) {
                Some(Object {
                    kind: Kind::Request(_),
                    ..
                }) => format!(
                    "WDFREQUEST {handle:#x} was already completed (it is only kept by a \
                     reference): a request is completed exactly once"
                ),
                _ => match fx.graveyard.get(&handle) {
                    Some(grave) if grave.kind == "WDFREQUEST" => format!(
                        "WDFREQUEST {handle:#x} was already completed (was {}): a request is \
                         completed exactly once, by its owner",
                        grave.fate
                    ),
                    _ => fx.invalid(handle, "WDFREQUEST"),
                },
            };
            drop(fx);
            m.bug_check(WDF_VIOLATION, format!("{ddi}: {message}"));
            None
        }
    }
}

fn complete_checked(
    m: &Arc<Inner>,
    ddi: &'static str,
    request: WDFREQUEST,
    status: NTSTATUS,
    information: usize,
) {
    let r = request as Handle;
    let checked = with_request(m, ddi, request, |req| {
        owned_by_driver(req)?;
        Ok::<_, String>((req.irp.major, req.irp.output_len))
    });
    let (major, output_len) = match checked {
        None => return,
        Some(Err(why)) => {
            m.bug_check(
                WDF_VIOLATION,
                format!("{ddi}: WDFREQUEST {r:#x} {why}; only its owner may complete it"),
            );
            return;
        }
        Some(Ok(x)) => x,
    };
    if status == wdk_sys::STATUS_PENDING {
        m.bug_check(
            crate::verifier::DRIVER_VERIFIER_DETECTED_VIOLATION,
            format!("{ddi}: WDFREQUEST {r:#x} completed with STATUS_PENDING"),
        );
    }
    let mut information = information;
    if major == Major::DeviceControl && information > output_len && (status as u32) >> 30 != 3 {
        m.violation(format!(
            "verifier: {ddi}: WDFREQUEST {r:#x}: Information {information} is larger than the \
             output buffer ({output_len} bytes): the I/O manager would copy past it"
        ));
        information = output_len;
    }
    m.count("requests completed by the driver");
    finish(m, r, status, information, Fate::CompletedBy(ddi));
}

/// `WdfRequestCompleteWithInformation`.
///
/// # Safety
/// The DDI's contract.
pub(crate) unsafe fn complete_with_information(
    m: &Arc<Inner>,
    request: WDFREQUEST,
    status: NTSTATUS,
    information: ULONG_PTR,
) {
    complete_checked(
        m,
        "WdfRequestCompleteWithInformation",
        request,
        status,
        information as usize,
    );
}

/// `WdfRequestComplete`.
///
/// # Safety
/// The DDI's contract.
pub(crate) unsafe fn complete(m: &Arc<Inner>, request: WDFREQUEST, status: NTSTATUS) {
    complete_checked(m, "WdfRequestComplete", request, status, 0);
}

/// `WdfRequestGetParameters`.
///
/// # Safety
/// The DDI's contract.
pub(crate) unsafe fn get_parameters(
    m: &Arc<Inner>,
    request: WDFREQUEST,
    parameters: PWDF_REQUEST_PARAMETERS,
) {
    const DDI: &str = "WdfRequestGetParameters";
    if parameters.is_null() {
        m.null_parameter(DDI, "Parameters");
        return;
    }
    // SAFETY: the driver's structure; only its Size is read before the check.
    let size = unsafe { (*parameters).Size };
    if usize::from(size) != size_of::<WDF_REQUEST_PARAMETERS>() {
        m.bug_check(
            WDF_VIOLATION,
            format!(
                "{DDI}: Parameters->Size is {size}, expected {} (WDF_REQUEST_PARAMETERS_INIT not \
                 used?)",
                size_of::<WDF_REQUEST_PARAMETERS>()
            ),
        );
        return;
    }
    let Some((major, code, input, output)) = with_request(m, DDI, request, |r| {
        (r.irp.major, r.irp.code, r.irp.input_len, r.irp.output_len)
    }) else {
        return;
    };
    // SAFETY: the parameters structure is plain data; zero is its cleared state.
    let mut p: WDF_REQUEST_PARAMETERS = unsafe { std::mem::zeroed() };
    p.Size = size;
    use wdk_sys::_WDF_REQUEST_TYPE as T;
    match major {
        Major::Create => p.Type = T::WdfRequestTypeCreate,
        Major::DeviceControl => {
            p.Type = T::WdfRequestTypeDeviceControl;
            p.Parameters.DeviceIoControl.IoControlCode = code;
            p.Parameters.DeviceIoControl.InputBufferLength = input;
            p.Parameters.DeviceIoControl.OutputBufferLength = output;
        }
    }
    // SAFETY: the driver's structure, of the size checked above.
    unsafe { parameters.write(p) };
}

/// `WdfRequestRetrieveInputBuffer` (`OUTPUT` false) and `WdfRequestRetrieveOutputBuffer`
/// (`OUTPUT` true): the two differ only in which of the IRP's lengths sizes the buffer.
///
/// # Safety
/// The DDI's contract.
pub(crate) unsafe fn retrieve_buffer<const OUTPUT: bool>(
    m: &Arc<Inner>,
    request: WDFREQUEST,
    minimum: usize,
    buffer: *mut PVOID,
    length: *mut usize,
) -> NTSTATUS {
    let ddi = if OUTPUT {
        "WdfRequestRetrieveOutputBuffer"
    } else {
        "WdfRequestRetrieveInputBuffer"
    };
    if buffer.is_null() {
        m.null_parameter(ddi, "Buffer");
        return wdk_sys::STATUS_INVALID_PARAMETER;
    }
    let Some(found) = with_request(m, ddi, request, |r| {
        owned_by_driver(r)?;
        let (pointer, _) = r.irp.system_buffer();
        let len = if OUTPUT {
            r.irp.output_len
        } else {
            r.irp.input_len
        };
        Ok::<_, String>((r.irp.major, r.irp.code, pointer, len))
    }) else {
        return wdk_sys::STATUS_INVALID_PARAMETER;
    };
    let (major, code, pointer, len) = match found {
        Ok(x) => x,
        Err(why) => {
            m.bug_check(
                WDF_VIOLATION,
                format!("{ddi}: WDFREQUEST {request:p} {why}"),
            );
            return wdk_sys::STATUS_INVALID_DEVICE_REQUEST;
        }
    };
    if major != Major::DeviceControl || code & 3 != 0 {
        return wdk_sys::STATUS_INVALID_DEVICE_REQUEST;
    }
    if len == 0 || len < minimum || pointer.is_null() {
        return wdk_sys::STATUS_BUFFER_TOO_SMALL;
    }
    // SAFETY: the driver's out-parameters.
    unsafe { buffer.write(pointer.cast()) };
    if let Some(out) = std::ptr::NonNull::new(length) {
        // SAFETY: as above (optional).
        unsafe { out.as_ptr().write(len) };
    }
    wdk_sys::STATUS_SUCCESS
}

/// `WdfRequestGetFileObject`: NULL for a request that came without a file object (a
/// kernel-mode sender's `IoBuildDeviceIoControlRequest`).
///
/// # Safety
/// The DDI's contract.
pub(crate) unsafe fn get_file_object(m: &Arc<Inner>, request: WDFREQUEST) -> WDFFILEOBJECT {
    with_request(m, "WdfRequestGetFileObject", request, |r| {
        r.irp.file_handle().unwrap_or(0) as WDFFILEOBJECT
    })
    .unwrap_or(std::ptr::null_mut())
}

/// `WdfRequestGetRequestorMode`.
///
/// # Safety
/// The DDI's contract.
pub(crate) unsafe fn get_requestor_mode(m: &Arc<Inner>, request: WDFREQUEST) -> KPROCESSOR_MODE {
    with_request(m, "WdfRequestGetRequestorMode", request, |r| {
        if r.irp.kernel_mode {
            wdk_sys::_MODE::KernelMode as KPROCESSOR_MODE
        } else {
            wdk_sys::_MODE::UserMode as KPROCESSOR_MODE
        }
    })
    .unwrap_or(0)
}

/// Marks whether the driver has the request in `EvtIoInCallerContext`.
pub(crate) fn hand_to_driver(m: &Inner, r: Handle, in_caller_context: bool) {
    if let Some(req) = request_mut(&mut m.fx.lock(), r) {
        req.owner = Owner::Driver;
        req.in_caller_context = in_caller_context;
    }
}

/// Whether request `r` still exists and is the driver's, not completed.
pub(crate) fn owner_of(m: &Inner, r: Handle) -> Option<Owner> {
    request_mut(&mut m.fx.lock(), r).map(|req| req.owner)
}
