//! Work at PASSIVE_LEVEL on a system worker thread (`IoQueueWorkItem(DelayedWorkQueue)`).
//!
//! * [`IoWorkItem`]: one `IoAllocateWorkItem` item, owned while it is not queued and freed when
//!   the value drops; [`IoWorkItem::queue`] hands it to its routine, which gets it back and
//!   owns it. [`WorkItemSlot`] keeps one such item between uses (the control device's deletion
//!   item, allocated with the device so that a deletion never waits for pool).
//! * [`queue_work`]: the core's work items, one system work item per call, freed after the
//!   work ran.
//!
//! A queued work item holds a reference on the device object it was allocated for, so the
//! driver cannot unload while one is queued or running.

use core::ffi::c_void;
use core::ptr::{NonNull, null_mut};
use core::sync::atomic::{AtomicPtr, Ordering};

use wdk_sys::ntddk::{IoAllocateWorkItem, IoFreeWorkItem, IoQueueWorkItem};
use wdk_sys::{
    _IO_WORKITEM, _WORK_QUEUE_TYPE, PDEVICE_OBJECT, PIO_WORKITEM, PIO_WORKITEM_ROUTINE, PVOID,
};
use wv_abi::NtStatus;
use wv_hal::{KArc, WorkItem};

use super::pool::PoolBox;
use super::sync::KEvent;

/// A system work item the driver owns and has not queued.
pub struct IoWorkItem(NonNull<_IO_WORKITEM>);

// SAFETY: a work item may be queued or freed from any thread at IRQL <= DISPATCH_LEVEL.
unsafe impl Send for IoWorkItem {}

/// A routine run by [`IoWorkItem::queue`] (PASSIVE_LEVEL, a system worker thread), with the
/// item it was queued on, which it now owns (to free, or to keep for the next time).
pub trait ItemRoutine {
    /// The work. `device` is the device object the item was allocated for.
    fn run(device: PDEVICE_OBJECT, item: IoWorkItem);
}

impl IoWorkItem {
    /// `IoAllocateWorkItem`; `None` when out of pool. IRQL <= DISPATCH_LEVEL.
    ///
    /// # Safety
    /// `device` is a live device object of this driver.
    pub unsafe fn allocate(device: PDEVICE_OBJECT) -> Option<IoWorkItem> {
        // SAFETY: the caller's promise.
        NonNull::new(unsafe { IoAllocateWorkItem(device) }).map(IoWorkItem)
    }

    /// Queues `R::run` with this item as its context. IRQL <= DISPATCH_LEVEL.
    pub fn queue<R: ItemRoutine>(self) {
        let item = self.into_raw();
        // SAFETY: an item this value owned and nobody queued; the routine takes it back from
        // the context exactly once.
        unsafe { queue_raw(item, Some(item_routine::<R>), item.cast()) };
    }

    fn as_raw(&self) -> PIO_WORKITEM {
        self.0.as_ptr()
    }

    /// Gives the item away (to a queue, or to a slot).
    fn into_raw(self) -> PIO_WORKITEM {
        let item = self.as_raw();
        core::mem::forget(self);
        item
    }

    /// Takes back an item [`IoWorkItem::into_raw`] gave away.
    ///
    /// # Safety
    /// `item` came from `into_raw` and is neither queued nor owned by anyone else.
    unsafe fn from_raw(item: PIO_WORKITEM) -> Option<IoWorkItem> {
        NonNull::new(item).map(IoWorkItem)
    }
}

impl Drop for IoWorkItem {
    fn drop(&mut self) {
        // SAFETY: an item this value owns: not queued (queueing consumes the value), not
        // running; freed once.
        unsafe { IoFreeWorkItem(self.as_raw()) };
    }
}

/// `IoQueueWorkItem` on the delayed work queue.
///
/// # Safety
/// `item` is an allocated, unqueued work item; `routine` matches `IO_WORKITEM_ROUTINE` and
/// takes ownership of `context` (and, through it, of the item).
unsafe fn queue_raw(item: PIO_WORKITEM, routine: PIO_WORKITEM_ROUTINE, context: PVOID) {
    // SAFETY: the caller's promise.
    unsafe { IoQueueWorkItem(item, routine, _WORK_QUEUE_TYPE::DelayedWorkQueue, context) };
}

/// `IO_WORKITEM_ROUTINE` of [`IoWorkItem::queue`].
unsafe extern "C" fn item_routine<R: ItemRoutine>(device: PDEVICE_OBJECT, context: PVOID) {
    // SAFETY: the context is the item `queue` gave away, taken back once.
    if let Some(item) = unsafe { IoWorkItem::from_raw(context.cast()) } {
        R::run(device, item);
    }
}

/// A place for one [`IoWorkItem`] between uses; empty while the item is queued or its routine
/// runs (the routine owns it then). Dropping the slot's contents is the caller's business:
/// take the item out before the slot is forgotten.
pub struct WorkItemSlot(AtomicPtr<c_void>);

impl WorkItemSlot {
    /// An empty slot.
    pub const fn new() -> WorkItemSlot {
        WorkItemSlot(AtomicPtr::new(null_mut()))
    }

    /// Puts `item` in the slot; an item already there is freed (the slot holds one).
    pub fn put(&self, item: IoWorkItem) {
        let old = self.0.swap(item.into_raw().cast(), Ordering::AcqRel);
        // SAFETY: whatever the slot held was given to it by `put`, and the swap took it out.
        drop(unsafe { IoWorkItem::from_raw(old.cast()) });
    }

    /// Takes the item out, if the slot has one.
    pub fn take(&self) -> Option<IoWorkItem> {
        let item = self.0.swap(null_mut(), Ordering::AcqRel);
        // SAFETY: given to the slot by `put` and taken out by the swap, so owned by nobody else.
        unsafe { IoWorkItem::from_raw(item.cast()) }
    }
}

/// What the routine of [`queue_work`] receives.
struct Queued {
    item: IoWorkItem,
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
    let item = unsafe { IoWorkItem::allocate(device) }.ok_or(NtStatus::INSUFFICIENT_RESOURCES)?;
    let raw_item = item.as_raw();
    // On failure the value comes back and drops: the item is freed, never queued.
    let queued =
        PoolBox::try_new(Queued { item, work }).map_err(|_| NtStatus::INSUFFICIENT_RESOURCES)?;
    let context = queued.into_raw();
    // SAFETY: `raw_item` is the fresh, unqueued item that `Queued` owns; the routine matches
    // IO_WORKITEM_ROUTINE and takes `context` (and with it the item) back exactly once.
    unsafe { queue_raw(raw_item, Some(work_routine), context.cast()) };
    Ok(())
}

/// `IO_WORKITEM_ROUTINE` of [`queue_work`]: PASSIVE_LEVEL on a system worker thread.
unsafe extern "C" fn work_routine(_device: PDEVICE_OBJECT, context: PVOID) {
    // SAFETY: `context` is the `Queued` that `queue_work` gave away, taken back once.
    let Some(queued) = (unsafe { PoolBox::from_raw(context.cast::<Queued>()) }) else {
        return;
    };
    let Queued { item, work } = queued.into_inner();
    work.run();
    drop(work);
    // The I/O manager is done with the item once its routine runs: freed here.
    drop(item);
}

/// What the routine of [`run_watched`] receives: the job (on the waiting caller's stack) and
/// the event it sets when the job is done.
struct Watched {
    job: *const (dyn Fn() + Sync),
    done: *const KEvent,
}

/// Runs `job` on a system worker thread (an `IoAllocateWorkItem` item of `device`) while this
/// thread waits for it in slices of `slice_ns`, calling `waited(slices)` after each slice that
/// ends without the job done; returns when the job has. Without a work item or the pool for
/// the wait, the job runs here, unwatched. PASSIVE_LEVEL.
///
/// # Safety
/// `device` is a live device object of this driver.
pub unsafe fn run_watched(
    device: PDEVICE_OBJECT,
    job: &(dyn Fn() + Sync),
    slice_ns: u64,
    mut waited: impl FnMut(u64),
) {
    let Ok(done) = KEvent::new() else {
        return job();
    };
    // SAFETY: the caller's promise.
    let Some(item) = (unsafe { IoWorkItem::allocate(device) }) else {
        return job();
    };
    let raw_item = item.as_raw();
    // SAFETY: erasing the borrow's lifetime: the routine uses `job` and `done` only before it
    // sets `done`, and this function does not return (so they outlive it) until `done` is set.
    let job: *const (dyn Fn() + Sync) =
        unsafe { core::mem::transmute::<&(dyn Fn() + Sync), &'static (dyn Fn() + Sync)>(job) };
    let Ok(context) = PoolBox::try_new((
        Watched {
            job,
            done: &raw const done,
        },
        item,
    )) else {
        // SAFETY: the lifetime was only erased for the routine, which will not run.
        return unsafe { (*job)() };
    };
    let context = context.into_raw();
    // SAFETY: `raw_item` is the fresh, unqueued item the context owns; the routine takes the
    // context (and with it the item) back exactly once.
    unsafe { queue_raw(raw_item, Some(watched_routine), context.cast()) };
    let mut slices = 0;
    while !done.wait_for(slice_ns) {
        slices += 1;
        waited(slices);
    }
}

/// `IO_WORKITEM_ROUTINE` of [`run_watched`]: PASSIVE_LEVEL on a system worker thread.
unsafe extern "C" fn watched_routine(_device: PDEVICE_OBJECT, context: PVOID) {
    // SAFETY: the context `run_watched` gave away, taken back once.
    let Some(context) = (unsafe { PoolBox::from_raw(context.cast::<(Watched, IoWorkItem)>()) })
    else {
        return;
    };
    let (watched, item) = context.into_inner();
    // SAFETY: the job and event of a `run_watched` call that waits until the event is set.
    unsafe { (*watched.job)() };
    // The item goes before the event: once it is set, the waiter may return and the driver
    // may unload; the I/O manager is done with an item once its routine runs.
    drop(item);
    // SAFETY: as above; setting the event is the routine's last use of the caller's memory.
    wv_hal::Event::set(unsafe { &*watched.done });
}
