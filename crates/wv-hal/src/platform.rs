//! The operating-system services the driver core uses: the [`Platform`] trait and its parts.
//!
//! Each method names its WDF counterpart, so that `driver/` can implement it with KMDF objects
//! and nothing more, at the IRQL stated here. The host model (`wv-host`) implements the same
//! contract and fails the run when a caller breaks an IRQL rule.

use alloc::sync::Arc;
use core::ops::DerefMut;

use crate::Irql;
use wv_abi::NtStatus;

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
/// WDF counterpart: a `WdfIoQueueDispatchManual` queue created with no `EvtIoCanceledOnQueue`,
/// parented to the control device.
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
    /// WDF: `WdfIoQueuePurgeSynchronously` (PASSIVE_LEVEL) or `WdfIoQueuePurge` with no
    /// callback (IRQL <= DISPATCH_LEVEL); this contract is the latter.
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
/// WDF counterpart: `WDFSPINLOCK` (`WdfSpinLockAcquire` / `WdfSpinLockRelease`) or a
/// `KSPIN_LOCK` beside the data.
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
/// WDF counterpart: `KEVENT` of type `NotificationEvent` (`KeSetEvent`, `KeWaitForSingleObject`).
pub trait Event: Send + Sync {
    /// Sets the event. IRQL <= DISPATCH_LEVEL.
    fn set(&self);
    /// Whether the event is set. Any IRQL.
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

/// Work run at DISPATCH_LEVEL soon after an interrupt.
pub trait Dpc: Send + Sync {
    /// Runs the deferred procedure. Called at DISPATCH_LEVEL.
    fn run(&self);
}

/// An interrupt service routine of a (soft) device.
pub trait InterruptService: Send + Sync {
    /// Services the interrupt at device IRQL; returns whether the device had raised it.
    /// It may only read and acknowledge device state and queue a DPC.
    fn service(&self) -> bool;
}

/// The operating-system services the driver core and the soft HCA use.
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

    /// Creates a spin lock around `value`. WDF: a `KSPIN_LOCK` (`KeInitializeSpinLock`) or
    /// `WdfSpinLockCreate`. Any IRQL <= DISPATCH_LEVEL.
    fn spin_lock<T: Send>(&self, value: T) -> Self::SpinLock<T>;

    /// Creates a notification event, not set. WDF: `KeInitializeEvent(NotificationEvent)`.
    fn event(&self) -> Self::Event;

    /// Queues `work` to run once at PASSIVE_LEVEL on a system worker thread. Items queued from
    /// one thread may run in parallel on different workers; ordering is the caller's business.
    ///
    /// WDF: `IoAllocateWorkItem` + `IoQueueWorkItem(DelayedWorkQueue)` (or a `WDFWORKITEM`).
    /// IRQL <= DISPATCH_LEVEL.
    ///
    /// # Errors
    /// `STATUS_INSUFFICIENT_RESOURCES` when no work item can be allocated.
    fn queue_work(&self, work: Arc<dyn WorkItem>) -> Result<(), NtStatus>;

    /// Queues `dpc` to run at DISPATCH_LEVEL. Returns `false` if that DPC object was already
    /// queued and has not started yet (it then runs once for both requests).
    ///
    /// WDF: `WdfDpcEnqueue` / `KeInsertQueueDpc`. Any IRQL, DIRQL included.
    fn queue_dpc(&self, dpc: &Arc<dyn Dpc>) -> bool;

    /// Delivers an interrupt: runs `isr` at device IRQL on the current processor, as the
    /// interrupt controller would when the (soft) device raises its line.
    ///
    /// WDF: none — on Windows the hardware does this and calls `EvtInterruptIsr`. The soft HCA
    /// uses it to model its MSI-X vectors.
    fn interrupt(&self, isr: &dyn InterruptService) -> bool;

    /// The current IRQL. WDF: `KeGetCurrentIrql`. Any IRQL.
    fn irql(&self) -> Irql;

    /// Asserts that the caller may touch pageable code or data (IRQL <= APC_LEVEL).
    /// WDF: `PAGED_CODE()`.
    fn paged_code(&self);

    /// Monotonic time in nanoseconds. Injected in the host model's deterministic mode.
    /// WDF: `KeQueryInterruptTimePrecise` × 100. Any IRQL.
    fn now_ns(&self) -> u64;
}
