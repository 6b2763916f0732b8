//! The operating-system services the driver core uses: the [`Platform`] trait and its parts.
//!
//! `Platform` holds exactly what WDF/WDM offer a filter driver, at the IRQL each method states,
//! and nothing a real driver could not do: `driver/` implements every method with KMDF/WDM
//! calls (each method's doc says which), and the host model (`wv-host`) implements the same
//! contract and fails the run when a caller breaks an IRQL rule. What only a device model
//! needs — raising an interrupt, queueing a DPC from DIRQL — is in
//! [`crate::device_model`], which the core never uses: a real controller driver owns its
//! `WDFINTERRUPT` and `KDPC`.

use crate::KArc;
use core::ops::DerefMut;

use crate::Irql;
use wv_abi::NtStatus;

/// How a request ended, as the caller sees it through `GetOverlappedResult` and the
/// OVERLAPPED's `Internal` / `InternalHigh` fields. One type for every transport (the host
/// model of KMDF and each user-mode transport), so a status passes from one to the other as is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IoStatus {
    /// The NTSTATUS the driver completed the request with (`OVERLAPPED.Internal`).
    pub status: u32,
    /// `IoStatus.Information` as the driver set it (`OVERLAPPED.InternalHigh`), also on error;
    /// for a success or warning status, how many output bytes came back.
    pub information: usize,
    /// The bytes the I/O manager copied back to the caller's output buffer: the first
    /// `information` bytes of the system buffer when the status is success or warning, nothing
    /// for an error-severity status (METHOD_BUFFERED).
    pub output: alloc::vec::Vec<u8>,
}

impl IoStatus {
    /// The status as an [`NtStatus`].
    pub fn nt_status(&self) -> NtStatus {
        NtStatus(self.status)
    }
}

/// One IOCTL request (an IRP with METHOD_BUFFERED transfer), owned by whoever holds the value.
///
/// Not `Clone`: completing consumes the request, so a request cannot be completed twice through
/// this interface. Dropping a request without completing it is a bug that the host verifier
/// reports ("request never completed"); on Windows it would hang the caller for ever.
///
/// WDF counterpart: `WDFREQUEST`.
pub trait IoRequest: Send + 'static {
    /// The IOCTL code (`IoStackLocation->Parameters.DeviceIoControl.IoControlCode`).
    /// WDF: the `IoControlCode` argument of `EvtIoDeviceControl`. Any IRQL.
    fn ioctl_code(&self) -> u32;
    /// The caller's input length (`nInBufferSize`). Any IRQL.
    fn input_len(&self) -> usize;
    /// The caller's output length (`nOutBufferSize`). Any IRQL.
    fn output_len(&self) -> usize;
    /// The METHOD_BUFFERED system buffer: `max(input_len, output_len)` bytes that start as a
    /// copy of the input. Input and output alias: handlers read the input, then write the
    /// output over the same bytes. WDF: `WdfRequestRetrieveInputBuffer` /
    /// `WdfRequestRetrieveOutputBuffer` (both return `Irp->AssociatedIrp.SystemBuffer`).
    /// IRQL <= DISPATCH_LEVEL (the buffer is nonpaged).
    fn buffer(&self) -> &[u8];
    /// Mutable access to the system buffer; see [`IoRequest::buffer`].
    fn buffer_mut(&mut self) -> &mut [u8];
    /// Completes the request. The I/O manager copies `information` bytes of the system buffer
    /// back to the caller only when `status` is a success or warning status; `information`
    /// must not exceed [`IoRequest::output_len`] (the host verifier checks it).
    ///
    /// WDF: `WdfRequestCompleteWithInformation`. IRQL <= DISPATCH_LEVEL.
    fn complete(self, status: NtStatus, information: usize);
}

/// A queue where pended requests are parked until an event, an explicit cancel or a teardown
/// ends them, with the semantics of a WDF manual queue.
///
/// While parked, a request belongs to the queue and is cancellable: if the I/O manager cancels
/// it (CancelIoEx, thread exit, handle close), the platform completes it with
/// `STATUS_CANCELLED` exactly once and it is never returned by [`RequestQueue::retrieve_next`].
/// A request taken out of the queue is owned by the caller and no longer cancellable, so a
/// request is never both driver-owned and cancellable (the pattern of spec §3.7).
///
/// WDF counterpart: a `WdfIoQueueDispatchManual` queue of the control device created with no
/// `EvtIoCanceledOnQueue` (the framework then completes a request cancelled while queued with
/// `STATUS_CANCELLED` itself), deleted with `WdfObjectDelete` when the value drops.
pub trait RequestQueue<R: IoRequest>: Send + Sync {
    /// Parks a request. On failure (the queue was purged) the request comes back with the
    /// status to complete it with.
    ///
    /// WDF: `WdfRequestForwardToIoQueue`. IRQL <= DISPATCH_LEVEL.
    fn park(&self, request: R) -> Result<(), (R, NtStatus)>;
    /// Takes the oldest parked request (FIFO), if any.
    ///
    /// WDF: `WdfIoQueueRetrieveNextRequest`. IRQL <= DISPATCH_LEVEL.
    fn retrieve_next(&self) -> Option<R>;
    /// Completes every parked request with `STATUS_CANCELLED` and refuses later
    /// [`RequestQueue::park`] calls. Used on teardown, before the queue is dropped; dropping a
    /// queue that still holds requests is a bug the host verifier reports.
    ///
    /// WDF: `WdfIoQueuePurge(queue, NULL, NULL)` (IRQL <= DISPATCH_LEVEL): it cancels the
    /// parked requests and makes later forwards fail, which `park` maps to
    /// `STATUS_CANCELLED`. Not `WdfIoQueuePurgeSynchronously`, which needs PASSIVE_LEVEL.
    fn purge(&self);
    /// How many requests are parked now (racy by nature; for diagnostics and tests).
    ///
    /// WDF: `WdfIoQueueGetState(queue, &count, NULL)`. IRQL <= DISPATCH_LEVEL.
    fn parked(&self) -> usize;
}

/// A spin lock protecting a `T`, usable at IRQL <= DISPATCH_LEVEL. Holding it raises the IRQL
/// to DISPATCH_LEVEL: the holder must not block, wait, or touch pageable memory, and must
/// release it before returning to PASSIVE_LEVEL code.
///
/// WDF counterpart: a `KSPIN_LOCK` beside the data (see [`Platform::spin_lock`]); a
/// `WDFSPINLOCK` would need a framework object per lock and could fail to be created.
pub trait SpinLock<T>: Send + Sync {
    /// The guard; releasing happens on drop and restores the previous IRQL.
    type Guard<'a>: DerefMut<Target = T>
    where
        Self: 'a,
        T: 'a;
    /// Acquires the lock. IRQL <= DISPATCH_LEVEL.
    fn lock(&self) -> Self::Guard<'_>;
}

/// A notification event: once set it stays set and releases every waiter.
///
/// WDF counterpart: a boxed `KEVENT` of type `NotificationEvent` (`KeSetEvent(e, 0, FALSE)`,
/// `KeReadStateEvent`, `KeWaitForSingleObject(e, Executive, KernelMode, FALSE, NULL)`).
pub trait Event: Send + Sync {
    /// Sets the event. IRQL <= DISPATCH_LEVEL.
    fn set(&self);
    /// Whether the event is set (`KeReadStateEvent`). IRQL <= DISPATCH_LEVEL.
    fn is_set(&self) -> bool;
    /// Waits until the event is set. PASSIVE_LEVEL only (a wait at DISPATCH_LEVEL is the bug
    /// the verifier reports as "wait at DISPATCH_LEVEL").
    fn wait(&self);
}

/// Work run at PASSIVE_LEVEL on a system worker thread.
pub trait WorkItem: Send + Sync {
    /// Runs the work. Called at PASSIVE_LEVEL, in an arbitrary system thread.
    fn run(&self);
}

/// The operating-system services the driver core uses: what WDF offers a filter driver.
///
/// # IRQL
/// Each method states the IRQL it may be called at. The host model checks them.
pub trait Platform: Send + Sync + 'static {
    /// A pended IOCTL request.
    type Request: IoRequest;
    /// A manual request queue.
    type Queue: RequestQueue<Self::Request>;
    /// A spin lock around a `T`.
    type SpinLock<T: Send>: SpinLock<T>;
    /// A notification event.
    type Event: Event;

    /// Creates an empty manual queue.
    ///
    /// WDF: `WdfIoQueueCreate` (manual dispatch, parent = control device). IRQL <= DISPATCH_LEVEL.
    ///
    /// # Errors
    /// `STATUS_INSUFFICIENT_RESOURCES` (or the framework's status) when it cannot be created.
    fn create_queue(&self) -> Result<Self::Queue, NtStatus>;

    /// Creates a spin lock around `value`. Any IRQL <= DISPATCH_LEVEL; allocates nothing.
    ///
    /// WDF: a `KSPIN_LOCK` stored beside the value (`KeInitializeSpinLock` is a header inline
    /// that stores 0 on x64), taken with `KeAcquireSpinLockRaiseToDpc` and released with
    /// `KeReleaseSpinLock`, which restores the IRQL the guard saved. An unheld `KSPIN_LOCK` is
    /// a plain word and may move with its owner.
    fn spin_lock<T: Send>(&self, value: T) -> Self::SpinLock<T>;

    /// Creates a notification event, not set. IRQL <= DISPATCH_LEVEL.
    ///
    /// WDF: a `KEVENT` in nonpaged pool (`ExAllocatePool2(POOL_FLAG_NON_PAGED, …)`) initialised
    /// by `KeInitializeEvent(NotificationEvent, FALSE)`, freed on drop. It is boxed because an
    /// initialised `KEVENT` heads its own wait list and must never move, while the returned
    /// value may.
    ///
    /// # Errors
    /// `STATUS_INSUFFICIENT_RESOURCES` when pool is exhausted.
    fn event(&self) -> Result<Self::Event, NtStatus>;

    /// Queues `work` to run once at PASSIVE_LEVEL on a system worker thread. Items queued from
    /// one thread may run in parallel on different workers; ordering is the caller's business.
    /// IRQL <= DISPATCH_LEVEL.
    ///
    /// WDF: one `IoAllocateWorkItem(control device)` per call and
    /// `IoQueueWorkItem(item, routine, DelayedWorkQueue, context)`, where the context owns
    /// `work`; the routine runs `work`, then drops it and calls `IoFreeWorkItem` on its own
    /// item. The work item holds a reference on the control device object, so the driver cannot
    /// unload while one is queued or running.
    ///
    /// # Errors
    /// `STATUS_INSUFFICIENT_RESOURCES` when no work item (or its context) can be allocated;
    /// `work` is dropped and never runs.
    fn queue_work(&self, work: KArc<dyn WorkItem>) -> Result<(), NtStatus>;

    /// The current IRQL. Any IRQL. WDF: `KeGetCurrentIrql`.
    fn irql(&self) -> Irql;

    /// Asserts that the caller may touch pageable code or data (IRQL <= APC_LEVEL).
    /// WDF: `PAGED_CODE()` — in checked builds `NT_ASSERT(KeGetCurrentIrql() <= APC_LEVEL)`,
    /// nothing in free builds; the host model always checks.
    fn paged_code(&self);

    /// Monotonic time in nanoseconds. Any IRQL. Injected in the host model's deterministic
    /// mode. WDF: `KeQueryInterruptTimePrecise(&qpc)` (100 ns units) × 100.
    fn now_ns(&self) -> u64;
}
