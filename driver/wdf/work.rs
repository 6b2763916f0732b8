//! Work at PASSIVE_LEVEL on a system worker thread: one `IoAllocateWorkItem` per call, queued
//! with `IoQueueWorkItem(DelayedWorkQueue)` and freed by its own routine. The work item holds
//! a reference on the device object it was allocated for, so the driver cannot unload while one
//! is queued or running.

use wdk_sys::ntddk::{IoAllocateWorkItem, IoFreeWorkItem, IoQueueWorkItem};
use wdk_sys::{_WORK_QUEUE_TYPE, PDEVICE_OBJECT, PIO_WORKITEM, PVOID};
use wv_abi::NtStatus;
use wv_hal::{KArc, WorkItem};

use super::pool::PoolBox;

/// What the routine receives.
struct Queued {
    item: PIO_WORKITEM,
    work: KArc<dyn WorkItem>,
}

/// Queues `work` to run once at PASSIVE_LEVEL. IRQL <= DISPATCH_LEVEL.
///
/// # Errors
/// `STATUS_INSUFFICIENT_RESOURCES` when there is no device object to queue on, or no work item
/// or context can be allocated; `work` is dropped and never runs.
///
/// # Safety
/// `device` is null or a live device object of this driver.
pub unsafe fn queue_work(device: PDEVICE_OBJECT, work: KArc<dyn WorkItem>) -> Result<(), NtStatus> {
    if device.is_null() {
        return Err(NtStatus::INSUFFICIENT_RESOURCES);
    }
    // SAFETY: the caller's promise: a live device object of this driver.
    let item = unsafe { IoAllocateWorkItem(device) };
    if item.is_null() {
        return Err(NtStatus::INSUFFICIENT_RESOURCES);
    }
    let queued = match PoolBox::try_new(Queued { item, work }) {
        Ok(q) => q,
        Err(q) => {
            // SAFETY: allocated above, never queued.
            unsafe { IoFreeWorkItem(q.item) };
            return Err(NtStatus::INSUFFICIENT_RESOURCES);
        }
    };
    let context = queued.into_raw();
    // SAFETY: `item` is a fresh work item; the routine matches IO_WORKITEM_ROUTINE and takes
    // `context` back exactly once.
    unsafe {
        IoQueueWorkItem(
            item,
            Some(routine),
            _WORK_QUEUE_TYPE::DelayedWorkQueue,
            context.cast(),
        )
    };
    Ok(())
}

/// `IO_WORKITEM_ROUTINE`: PASSIVE_LEVEL on a system worker thread.
unsafe extern "C" fn routine(_device: PDEVICE_OBJECT, context: PVOID) {
    // SAFETY: `context` is the `Queued` that `queue_work` gave away, taken back once.
    let Some(queued) = (unsafe { PoolBox::from_raw(context.cast::<Queued>()) }) else {
        return;
    };
    let Queued { item, work } = queued.into_inner();
    work.run();
    drop(work);
    // SAFETY: this routine's own work item; the I/O manager is done with it once it runs.
    unsafe { IoFreeWorkItem(item) };
}
