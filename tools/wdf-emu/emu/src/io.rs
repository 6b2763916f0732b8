//! I/O queues and how requests move between the framework and the driver, as KMDF does it
//! (`fxioqueue.cpp`, `fxpkgio.cpp`):
//!
//! * a request waiting in a queue belongs to the framework and is cancellable: a cancel
//!   completes it with `STATUS_CANCELLED` (the queues here have no `EvtIoCanceledOnQueue`);
//! * a parallel queue presents each request to its `EvtIoDeviceControl` at once, in the
//!   caller's thread when that thread may run the queue's callbacks, from a system work item
//!   when the queue's execution level is PASSIVE_LEVEL and the caller is above it; it presents
//!   at most `NumberOfPresentedRequests` at a time (0 presents nothing);
//! * a presented or retrieved request belongs to the driver and is not cancellable;
//! * `WdfDeviceEnqueueRequest` takes a request from `EvtIoInCallerContext` to the device's
//!   queue for its type; `WdfRequestForwardToIoQueue` moves a request delivered by one queue
//!   into another of the same device (refused into a queue that no longer accepts requests);
//! * `WdfIoQueueRetrieveNextRequest` takes the oldest request out of a manual queue;
//!   `WdfIoQueuePurge` stops a queue and cancels what waits in it.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use wdk_sys::{
    NTSTATUS, PFN_WDF_IO_QUEUE_IO_DEVICE_CONTROL, PFN_WDF_IO_QUEUE_STATE, PULONG,
    PWDF_IO_QUEUE_CONFIG, PWDF_OBJECT_ATTRIBUTES, ULONG, WDF_IO_QUEUE_STATE, WDFCONTEXT, WDFDEVICE,
    WDFQUEUE, WDFREQUEST,
};
use wv_ci::Convention;
use wv_hal::Irql;
use wv_host::kernel;

use crate::callbacks;
use crate::devices::{self, device_mut};
use crate::machine::Inner;
use crate::objects::{self, Fx, Handle, Kind, Life};
use crate::requests::{self, Owner};
use crate::verifier::{WDF_VIOLATION, status};

/// How a queue delivers requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Dispatch {
    Sequential,
    Parallel,
    Manual,
}

impl Dispatch {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Dispatch::Sequential => "sequential",
            Dispatch::Parallel => "parallel",
            Dispatch::Manual => "manual",
        }
    }
}

/// A queue's data.
pub(crate) struct QueueObj {
    pub device: Handle,
    pub dispatch: Dispatch,
    pub default: bool,
    pub power_managed: bool,
    pub device_control: PFN_WDF_IO_QUEUE_IO_DEVICE_CONTROL,
    /// At most this many requests presented and not completed (`ULONG::MAX`: no limit).
    pub max_presented: ULONG,
    pub accepting: bool,
    pub dispatching: bool,
    /// Requests waiting in the queue, oldest first.
    pub pending: VecDeque<Handle>,
    /// Requests this queue delivered that the driver has not completed or handed on.
    pub driver_owned: usize,
    /// Purge callbacks waiting for `driver_owned` to reach zero.
    pub purge_waiters: Vec<(PFN_WDF_IO_QUEUE_STATE, usize)>,
    /// A system work item is on its way to present requests at PASSIVE_LEVEL.
    pub deferred: bool,
}

kind_data! {
    /// The queue data of `handle` (which must be a queue).
    fn queue_mut -> Queue(QueueObj)
}

/// The live queue behind `queue`, or a bug check.
fn with_queue<R>(
    m: &Inner,
    ddi: &str,
    queue: WDFQUEUE,
    f: impl FnOnce(&mut Fx, Handle) -> R,
) -> Option<R> {
    let handle = queue as Handle;
    let mut fx = m.fx.lock();
    if queue_mut(&mut fx, handle).is_some() {
        Some(f(&mut fx, handle))
    } else {
        m.invalid_handle(fx, ddi, handle, "WDFQUEUE");
        None
    }
}

/// `WdfIoQueueCreate`.
///
/// # Safety
/// The DDI's contract.
pub(crate) unsafe fn queue_create(
    m: &Arc<Inner>,
    device: WDFDEVICE,
    config: PWDF_IO_QUEUE_CONFIG,
    attributes: PWDF_OBJECT_ATTRIBUTES,
    queue: *mut WDFQUEUE,
) -> NTSTATUS {
    const DDI: &str = "WdfIoQueueCreate";
    // SAFETY: the driver's configuration (or null), copied.
    let config = match unsafe { m.read_sized(DDI, "Config", config) } {
        Ok(c) => c,
        Err(status) => return status,
    };
    use wdk_sys::_WDF_IO_QUEUE_DISPATCH_TYPE as D;
    let dispatch = match config.DispatchType {
        D::WdfIoQueueDispatchSequential => Dispatch::Sequential,
        D::WdfIoQueueDispatchParallel => Dispatch::Parallel,
        D::WdfIoQueueDispatchManual => Dispatch::Manual,
        other => {
            m.violation(format!("verifier: {DDI}: DispatchType {other} is invalid"));
            return wdk_sys::STATUS_INVALID_PARAMETER;
        }
    };
    let has_handler = config.EvtIoDefault.is_some()
        || config.EvtIoRead.is_some()
        || config.EvtIoWrite.is_some()
        || config.EvtIoDeviceControl.is_some()
        || config.EvtIoInternalDeviceControl.is_some();
    if dispatch != Dispatch::Manual && !has_handler {
        return status::WDF_NO_CALLBACK;
    }
    if dispatch == Dispatch::Manual && has_handler {
        return wdk_sys::STATUS_INVALID_PARAMETER;
    }
    // SAFETY: `Parallel` is the settings union's only member.
    let presented = unsafe { config.Settings.Parallel.NumberOfPresentedRequests };
    if dispatch != Dispatch::Parallel && presented != 0 {
        return wdk_sys::STATUS_INVALID_PARAMETER;
    }
    // SAFETY: the driver's attributes (or null).
    let attributes = match unsafe { objects::read_attributes(m, DDI, attributes) } {
        Ok(a) => a,
        Err(status) => return status,
    };
    if attributes.parent.is_some_and(|p| p != device as Handle) {
        return status::WDF_PARENT_ASSIGNMENT_NOT_ALLOWED;
    }
    if m.faults.fail(DDI) {
        return wdk_sys::STATUS_INSUFFICIENT_RESOURCES;
    }
    let created = devices::with_device(m, DDI, device, |fx, handle| {
        let d = device_mut(fx, handle).expect("a device");
        if config.DefaultQueue != 0 && d.default_queue.is_some() {
            return Err(wdk_sys::STATUS_INVALID_DEVICE_STATE);
        }
        let legacy = d.control;
        use wdk_sys::_WDF_TRI_STATE as T;
        let power_managed = !legacy
            && match config.PowerManaged {
                T::WdfTrue => true,
                T::WdfFalse => false,
                _ => !d.filter,
            };
        if fx.get(handle).is_some_and(|o| o.life != Life::Live) {
            return Err(wdk_sys::STATUS_DELETE_PENDING);
        }
        let q = fx.insert(
            Kind::Queue(Box::new(QueueObj {
                device: handle,
                dispatch,
                default: config.DefaultQueue != 0,
                power_managed,
                device_control: config.EvtIoDeviceControl,
                max_presented: presented,
                accepting: true,
                dispatching: true,
                pending: VecDeque::new(),
                driver_owned: 0,
                purge_waiters: Vec::new(),
                deferred: false,
            })),
            &attributes,
            Some(handle),
        );
        let d = device_mut(fx, handle).expect("a device");
        d.queues.push(q);
        if config.DefaultQueue != 0 {
            d.default_queue = Some(q);
        }
        Ok(q)
    });
    match created {
        Some(Ok(q)) => {
            if let Some(out) = std::ptr::NonNull::new(queue) {
                // SAFETY: the driver's optional out-parameter.
                unsafe { out.as_ptr().write(q as WDFQUEUE) };
            }
            wdk_sys::STATUS_SUCCESS
        }
        Some(Err(status)) => status,
        None => wdk_sys::STATUS_INVALID_PARAMETER,
    }
}

/// Why a request cannot enter a queue.
enum Refused {
    /// The queue no longer accepts requests (`STATUS_WDF_BUSY`); the caller keeps it.
    Busy,
}

/// Puts request `r` (owned by the driver or just arrived) into queue `q`. An IRP already
/// cancelled is completed with `STATUS_CANCELLED` at once (its cancel routine runs as soon as
/// it is cancellable), which counts as accepted.
fn insert(m: &Arc<Inner>, q: Handle, r: Handle) -> Result<(), Refused> {
    let cancelled_now = {
        let mut fx = m.fx.lock();
        let Some(queue) = queue_mut(&mut fx, q) else {
            return Err(Refused::Busy);
        };
        if !queue.accepting {
            return Err(Refused::Busy);
        }
        let Some(request) = requests::request_mut(&mut fx, r) else {
            return Err(Refused::Busy);
        };
        request.irp.marked_pending.store(true, Ordering::SeqCst);
        if queue_mut(&mut fx, q).is_some_and(|queue| queue.dispatch == Dispatch::Manual)
            && let Some(request) = requests::request_mut(&mut fx, r)
        {
            request.irp.parked.store(true, Ordering::SeqCst);
        }
        let Some(request) = requests::request_mut(&mut fx, r) else {
            return Err(Refused::Busy);
        };
        if request.irp.cancel.load(Ordering::SeqCst) {
            request.owner = Owner::Framework;
            true
        } else {
            request.owner = Owner::Queue(q);
            queue_mut(&mut fx, q).expect("checked").pending.push_back(r);
            false
        }
    };
    if cancelled_now {
        requests::complete_by_framework(m, r, wdk_sys::STATUS_CANCELLED);
    }
    Ok(())
}

/// Inserts `r` into `q` and presents what the queue may present now.
fn insert_and_dispatch(m: &Arc<Inner>, q: Handle, r: Handle) -> Result<(), Refused> {
    insert(m, q, r)?;
    dispatch(m, q);
    Ok(())
}

/// Presents what waits in a parallel queue to its `EvtIoDeviceControl`, in this thread if it
/// may run the queue's callbacks, else from a system work item.
pub(crate) fn dispatch(m: &Arc<Inner>, q: Handle) {
    loop {
        let (callback, request, irp, passive) = {
            let mut fx = m.fx.lock();
            let passive = fx.get(q).is_some_and(|o| o.passive);
            let Some(queue) = queue_mut(&mut fx, q) else {
                return;
            };
            if queue.dispatch == Dispatch::Manual || !queue.dispatching {
                return;
            }
            if passive && kernel::irql() != Irql::Passive {
                // What waits in the queue now waits for a worker.
                let waiting: Vec<Handle> = queue.pending.iter().copied().collect();
                for r in waiting {
                    if let Some(request) = requests::request_mut(&mut fx, r) {
                        request.irp.parked.store(true, Ordering::SeqCst);
                    }
                }
                let queue = queue_mut(&mut fx, q).expect("checked above");
                if !queue.deferred {
                    queue.deferred = true;
                    let machine = Arc::clone(m);
                    m.count("deferred presentations");
                    callbacks::queue_system_work(m, "deferred queue dispatch", move || {
                        if let Some(queue) = queue_mut(&mut machine.fx.lock(), q) {
                            queue.deferred = false;
                        }
                        dispatch(&machine, q);
                    });
                }
                return;
            }
            if queue.max_presented != ULONG::MAX
                && queue.driver_owned >= queue.max_presented as usize
            {
                return;
            }
            if queue.dispatch == Dispatch::Sequential && queue.driver_owned > 0 {
                return;
            }
            let Some(r) = queue.pending.pop_front() else {
                return;
            };
            queue.driver_owned += 1;
            let callback = queue.device_control;
            let request = requests::request_mut(&mut fx, r).expect("queued requests are live");
            request.owner = Owner::Driver;
            request.delivered_by = Some(q);
            (callback, r, Arc::clone(&request.irp), passive)
        };
        let Some(callback) = callback else {
            // No handler for this type: the framework fails it.
            requests::complete_by_framework(m, request, wdk_sys::STATUS_INVALID_DEVICE_REQUEST);
            continue;
        };
        m.count("requests presented");
        let at = if passive {
            Irql::Passive
        } else {
            kernel::irql()
        };
        queue_event(m, "EvtIoDeviceControl", at, q, |convention, queue| {
            // SAFETY: the queue's handler, with a request the driver now owns and the IRP's
            // parameters.
            unsafe {
                callbacks::io_device_control(
                    convention,
                    callback,
                    queue,
                    request as WDFREQUEST,
                    irp.output_len,
                    irp.input_len,
                    irp.code,
                )
            }
        });
    }
}

/// Delivers a new request to `device`'s queue for its type (the I/O manager's dispatch
/// through `FxPkgIo`, after `EvtIoInCallerContext` when the device has none): the framework
/// fails it when the device has no queue for it.
pub(crate) fn deliver_to_default_queue(m: &Arc<Inner>, device: Handle, r: Handle) {
    let q = device_mut(&mut m.fx.lock(), device).and_then(|d| d.default_queue);
    let Some(q) = q else {
        requests::complete_by_framework(m, r, wdk_sys::STATUS_INVALID_DEVICE_REQUEST);
        return;
    };
    if let Err(Refused::Busy) = insert_and_dispatch(m, q, r) {
        requests::complete_by_framework(m, r, status::WDF_BUSY);
    }
}

/// What a DDI finds wrong with the objects the driver hands it, found under the framework lock
/// and reported once the lock is released.
enum Misuse {
    /// KMDF bug-checks (`WDF_VIOLATION`); the DDI returns the status if the machine goes on.
    BugCheck(String, NTSTATUS),
    /// Against a rule the verifier checks; the DDI fails with `STATUS_INVALID_DEVICE_REQUEST`.
    Rule(String),
}

impl Misuse {
    /// `handle`, given to `ddi`, is not a live object of the `expected` kind.
    fn invalid_handle(fx: &Fx, ddi: &str, handle: Handle, expected: &str) -> Self {
        Misuse::BugCheck(
            format!("{ddi}: {}", fx.invalid(handle, expected)),
            wdk_sys::STATUS_INVALID_PARAMETER,
        )
    }

    /// Records the misuse; the status the DDI returns.
    fn report(self, m: &Inner) -> NTSTATUS {
        match self {
            Misuse::BugCheck(what, status) => {
                m.bug_check(WDF_VIOLATION, what);
                status
            }
            Misuse::Rule(what) => {
                m.violation(format!("verifier: {what}"));
                wdk_sys::STATUS_INVALID_DEVICE_REQUEST
            }
        }
    }
}

/// Request `r`, which the driver handed to `ddi`: a live request the driver owns.
fn driver_request<'f>(
    fx: &'f mut Fx,
    ddi: &str,
    r: Handle,
) -> Result<&'f mut requests::RequestObj, Misuse> {
    if requests::request_mut(fx, r).is_none() {
        return Err(Misuse::invalid_handle(fx, ddi, r, "WDFREQUEST"));
    }
    let req = requests::request_mut(fx, r).expect("checked above");
    match requests::owned_by_driver(req) {
        Ok(()) => Ok(req),
        Err(why) => Err(Misuse::BugCheck(
            format!("{ddi}: WDFREQUEST {r:#x} {why}"),
            wdk_sys::STATUS_INVALID_DEVICE_REQUEST,
        )),
    }
}

/// `WdfDeviceEnqueueRequest`.
///
/// # Safety
/// The DDI's contract.
pub(crate) unsafe fn device_enqueue_request(
    m: &Arc<Inner>,
    device: WDFDEVICE,
    request: WDFREQUEST,
) -> NTSTATUS {
    const DDI: &str = "WdfDeviceEnqueueRequest";
    let r = request as Handle;
    let q = {
        let mut fx = m.fx.lock();
        let checked = driver_request(&mut fx, DDI, r).and_then(|req| {
            if req.delivered_by.is_some() || !req.in_caller_context {
                Err(Misuse::Rule(format!(
                    "{DDI}: WDFREQUEST {r:#x} was not received by EvtIoInCallerContext (only \
                     such a request is enqueued; a queue's request is forwarded)"
                )))
            } else if req.device != device as Handle {
                Err(Misuse::Rule(format!(
                    "{DDI}: WDFREQUEST {r:#x} was sent to another device"
                )))
            } else {
                Ok(())
            }
        });
        if let Err(misuse) = checked {
            drop(fx);
            return misuse.report(m);
        }
        device_mut(&mut fx, device as Handle).and_then(|d| d.default_queue)
    };
    let Some(q) = q else {
        // "No queue configured": the request goes back to the driver.
        return wdk_sys::STATUS_INVALID_DEVICE_REQUEST;
    };
    if m.faults.fail(DDI) {
        return wdk_sys::STATUS_INSUFFICIENT_RESOURCES;
    }
    if let Some(req) = requests::request_mut(&mut m.fx.lock(), r) {
        req.in_caller_context = false;
    }
    match insert_and_dispatch(m, q, r) {
        Ok(()) => wdk_sys::STATUS_SUCCESS,
        Err(Refused::Busy) => {
            if let Some(req) = requests::request_mut(&mut m.fx.lock(), r) {
                req.in_caller_context = true;
            }
            status::WDF_BUSY
        }
    }
}

/// `WdfRequestForwardToIoQueue`.
///
/// # Safety
/// The DDI's contract.
pub(crate) unsafe fn request_forward_to_queue(
    m: &Arc<Inner>,
    request: WDFREQUEST,
    queue: WDFQUEUE,
) -> NTSTATUS {
    const DDI: &str = "WdfRequestForwardToIoQueue";
    let (r, q) = (request as Handle, queue as Handle);
    {
        let mut fx = m.fx.lock();
        let checked = match queue_mut(&mut fx, q).map(|queue| queue.device) {
            None => Err(Misuse::invalid_handle(&fx, DDI, q, "WDFQUEUE")),
            Some(destination) => driver_request(&mut fx, DDI, r).and_then(|req| {
                match req.delivered_by {
                    None => Err(format!(
                        "WDFREQUEST {r:#x} was not delivered by a queue (a request from \
                         EvtIoInCallerContext is enqueued with WdfDeviceEnqueueRequest first)"
                    )),
                    Some(source) if source == q => Err(format!(
                        "WDFREQUEST {r:#x} forwarded to the queue it came from \
                         (WdfRequestRequeue is the call for that)"
                    )),
                    Some(_) if req.device != destination => {
                        Err("the queue belongs to another device".to_owned())
                    }
                    Some(_) => Ok(()),
                }
                .map_err(|why| Misuse::Rule(format!("{DDI}: {why}")))
            }),
        };
        if let Err(misuse) = checked {
            drop(fx);
            return misuse.report(m);
        }
        let accepting = queue_mut(&mut fx, q).is_some_and(|queue| queue.accepting);
        if !accepting {
            return status::WDF_BUSY;
        }
    }
    if m.faults.fail(DDI) {
        return status::WDF_BUSY;
    }
    // Ownership moves: the source queue no longer counts it as the driver's.
    let source = {
        let mut fx = m.fx.lock();
        let req = requests::request_mut(&mut fx, r).expect("checked");
        let source = req.delivered_by.take();
        if let Some(source) = source
            && let Some(sq) = queue_mut(&mut fx, source)
        {
            sq.driver_owned = sq.driver_owned.saturating_sub(1);
        }
        source
    };
    if let Some(source) = source {
        purge_progress(m, source);
    }
    match insert_and_dispatch(m, q, r) {
        Ok(()) => wdk_sys::STATUS_SUCCESS,
        Err(Refused::Busy) => {
            // Raced with a purge: the request is the driver's again.
            if let Some(req) = requests::request_mut(&mut m.fx.lock(), r) {
                req.owner = Owner::Driver;
                req.delivered_by = source;
            }
            if let Some(source) = source
                && let Some(sq) = queue_mut(&mut m.fx.lock(), source)
            {
                sq.driver_owned += 1;
            }
            status::WDF_BUSY
        }
    }
}

/// `WdfIoQueueRetrieveNextRequest`.
///
/// # Safety
/// The DDI's contract.
pub(crate) unsafe fn queue_retrieve_next(
    m: &Arc<Inner>,
    queue: WDFQUEUE,
    out_request: *mut WDFREQUEST,
) -> NTSTATUS {
    const DDI: &str = "WdfIoQueueRetrieveNextRequest";
    if out_request.is_null() {
        m.null_parameter(DDI, "OutRequest");
        return wdk_sys::STATUS_INVALID_PARAMETER;
    }
    // SAFETY: the driver's out-parameter.
    unsafe { out_request.write(std::ptr::null_mut()) };
    let outcome = with_queue(m, DDI, queue, |fx, q| {
        let queue = queue_mut(fx, q).expect("a queue");
        if queue.dispatch == Dispatch::Parallel {
            return Err(wdk_sys::STATUS_INVALID_DEVICE_STATE);
        }
        if !queue.dispatching {
            return Err(status::WDF_PAUSED);
        }
        let Some(r) = queue.pending.pop_front() else {
            return Err(wdk_sys::STATUS_NO_MORE_ENTRIES);
        };
        queue.driver_owned += 1;
        let request = requests::request_mut(fx, r).expect("queued requests are live");
        request.owner = Owner::Driver;
        request.delivered_by = Some(q);
        Ok(r)
    });
    match outcome {
        Some(Ok(r)) => {
            // SAFETY: as above.
            unsafe { out_request.write(r as WDFREQUEST) };
            wdk_sys::STATUS_SUCCESS
        }
        Some(Err(status)) => status,
        None => wdk_sys::STATUS_INVALID_PARAMETER,
    }
}

/// `WdfIoQueuePurge`.
///
/// # Safety
/// The DDI's contract.
pub(crate) unsafe fn queue_purge(
    m: &Arc<Inner>,
    queue: WDFQUEUE,
    purge_complete: PFN_WDF_IO_QUEUE_STATE,
    context: WDFCONTEXT,
) {
    const DDI: &str = "WdfIoQueuePurge";
    let cancelled = with_queue(m, DDI, queue, |fx, q| {
        let queue = queue_mut(fx, q).expect("a queue");
        queue.accepting = false;
        queue.dispatching = false;
        if purge_complete.is_some() {
            queue.purge_waiters.push((purge_complete, context as usize));
        }
        queue.pending.drain(..).collect::<Vec<_>>()
    });
    let Some(cancelled) = cancelled else {
        return;
    };
    m.count("queue purges");
    for r in cancelled {
        if let Some(req) = requests::request_mut(&mut m.fx.lock(), r) {
            req.owner = Owner::Framework;
        }
        requests::complete_by_framework(m, r, wdk_sys::STATUS_CANCELLED);
    }
    purge_progress(m, queue as Handle);
}

/// Runs `call` (a callback of queue `q`, handed the machine's convention and the queue's handle)
/// in a callback frame at `at`, as the framework runs every queue event.
fn queue_event(
    m: &Arc<Inner>,
    name: &str,
    at: Irql,
    q: Handle,
    call: impl FnOnce(Convention, WDFQUEUE),
) {
    callbacks::frame(m, name, at, || call(m.convention(), q as WDFQUEUE));
}

/// Calls the purge callbacks of `q` once none of its requests is the driver's any more.
pub(crate) fn purge_progress(m: &Arc<Inner>, q: Handle) {
    let waiters = {
        let mut fx = m.fx.lock();
        let Some(queue) = queue_mut(&mut fx, q) else {
            return;
        };
        if queue.driver_owned > 0 || queue.dispatching {
            return;
        }
        std::mem::take(&mut queue.purge_waiters)
    };
    for (callback, context) in waiters {
        if let Some(callback) = callback {
            let at = kernel::irql();
            queue_event(
                m,
                "EvtIoQueueState (purge complete)",
                at,
                q,
                |convention, queue| {
                    // SAFETY: the callback and context the driver gave `WdfIoQueuePurge`.
                    unsafe {
                        callbacks::queue_state(convention, callback, queue, context as WDFCONTEXT)
                    }
                },
            );
        }
    }
}

/// `WdfIoQueueGetState`.
///
/// # Safety
/// The DDI's contract.
pub(crate) unsafe fn queue_get_state(
    m: &Arc<Inner>,
    queue: WDFQUEUE,
    queued: PULONG,
    driver: PULONG,
) -> WDF_IO_QUEUE_STATE {
    use wdk_sys::_WDF_IO_QUEUE_STATE as S;
    let state = with_queue(m, "WdfIoQueueGetState", queue, |fx, q| {
        let queue = queue_mut(fx, q).expect("a queue");
        let mut state = 0;
        if queue.accepting {
            state |= S::WdfIoQueueAcceptRequests;
        }
        if queue.dispatching {
            state |= S::WdfIoQueueDispatchRequests;
        }
        if queue.pending.is_empty() {
            state |= S::WdfIoQueueNoRequests;
        }
        if queue.driver_owned == 0 {
            state |= S::WdfIoQueueDriverNoRequests;
        }
        (state, queue.pending.len(), queue.driver_owned)
    });
    let Some((state, pending, owned)) = state else {
        return 0;
    };
    if let Some(out) = std::ptr::NonNull::new(queued) {
        // SAFETY: the driver's optional out-parameter.
        unsafe {
            out.as_ptr()
                .write(ULONG::try_from(pending).unwrap_or(ULONG::MAX))
        };
    }
    if let Some(out) = std::ptr::NonNull::new(driver) {
        // SAFETY: the driver's optional out-parameter.
        unsafe {
            out.as_ptr()
                .write(ULONG::try_from(owned).unwrap_or(ULONG::MAX))
        };
    }
    state
}

/// A queue being disposed (deleted, or its device going): it stops, and what waits in it is
/// cancelled.
pub(crate) fn dispose_queue(m: &Arc<Inner>, q: Handle) {
    let cancelled = {
        let mut fx = m.fx.lock();
        let Some(queue) = queue_mut(&mut fx, q) else {
            return;
        };
        queue.accepting = false;
        queue.dispatching = false;
        let device = queue.device;
        let pending: Vec<_> = queue.pending.drain(..).collect();
        if let Some(d) = device_mut(&mut fx, device) {
            d.queues.retain(|x| *x != q);
            if d.default_queue == Some(q) {
                d.default_queue = None;
            }
        }
        pending
    };
    for r in cancelled {
        if let Some(req) = requests::request_mut(&mut m.fx.lock(), r) {
            req.owner = Owner::Framework;
        }
        requests::complete_by_framework(m, r, wdk_sys::STATUS_CANCELLED);
    }
}

/// The I/O manager cancels request `r` (CancelIoEx, a closing handle's flush): if it waits in
/// a queue, the framework completes it with `STATUS_CANCELLED`; if the driver owns it, it is
/// only marked (`Irp->Cancel`). Returns whether it was cancelled.
pub(crate) fn cancel(m: &Arc<Inner>, r: Handle) -> bool {
    let taken = {
        let mut fx = m.fx.lock();
        let Some(req) = requests::request_mut(&mut fx, r) else {
            return false;
        };
        req.irp.cancel.store(true, Ordering::SeqCst);
        let Owner::Queue(q) = req.owner else {
            return false;
        };
        req.owner = Owner::Framework;
        if let Some(queue) = queue_mut(&mut fx, q) {
            queue.pending.retain(|x| *x != r);
        }
        true
    };
    if taken {
        m.count("requests cancelled in a queue");
        requests::complete_by_framework(m, r, wdk_sys::STATUS_CANCELLED);
    }
    taken
}

/// `FlushAllQueuesByFileObject`: after `EvtFileCleanup`, every request of the closing file
/// that still waits in one of the device's queues is cancelled.
pub(crate) fn flush_by_file(m: &Arc<Inner>, device: Handle, file: Handle) {
    let waiting: Vec<Handle> = {
        let mut fx = m.fx.lock();
        let queues = device_mut(&mut fx, device)
            .map(|d| d.queues.clone())
            .unwrap_or_default();
        let mut waiting = Vec::new();
        for q in queues {
            if let Some(queue) = queue_mut(&mut fx, q) {
                waiting.extend(queue.pending.iter().copied());
            }
        }
        waiting
            .into_iter()
            .filter(|r| {
                requests::request_mut(&mut fx, *r)
                    .is_some_and(|req| req.irp.file_handle() == Some(file))
            })
            .collect()
    };
    for r in waiting {
        cancel(m, r);
    }
}

/// `CancelIoEx` of one IRP: the request over it, cancelled as [`cancel`] does.
pub(crate) fn cancel_irp(m: &Arc<Inner>, irp: &Arc<crate::requests::Irp>) -> bool {
    let request = {
        let fx = m.fx.lock();
        fx.objects.iter().find_map(|(h, o)| match &o.kind {
            Kind::Request(r) if Arc::ptr_eq(&r.irp, irp) && o.life == Life::Live => Some(*h),
            _ => None,
        })
    };
    match request {
        Some(r) => cancel(m, r),
        None => {
            irp.cancel.store(true, Ordering::SeqCst);
            false
        }
    }
}
