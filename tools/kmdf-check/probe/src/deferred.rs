//! Deferred work of a filter device: the WDF work item and DPC, and the WDM work item, DPC,
//! spin lock and event the glue uses where a WDF object does not fit (for example a DPC the
//! HCA's completion path queues directly).

use core::{ffi::c_void, ptr::null_mut, sync::atomic::Ordering};

use wdk::{nt_success, paged_code};
use wdk_sys::{
    _DPFLTR_TYPE, _EVENT_TYPE, _KDPC, _KWAIT_REASON, _MODE, _WORK_QUEUE_TYPE, DISPATCH_LEVEL,
    DPFLTR_INFO_LEVEL, LARGE_INTEGER, NTSTATUS, PDEVICE_OBJECT, PIO_WORKITEM, PVOID,
    STATUS_INSUFFICIENT_RESOURCES, STATUS_SUCCESS, ULONG, WDFDEVICE, WDFDPC, WDFWORKITEM,
    call_unsafe_wdf_function_binding,
    ntddk::{
        DbgPrintEx, IoAllocateWorkItem, IoFreeWorkItem, IoQueueWorkItem,
        KeAcquireSpinLockRaiseToDpc, KeClearEvent, KeGetCurrentIrql, KeInitializeDpc,
        KeInitializeEvent, KeInsertQueueDpc, KeQueryInterruptTimePrecise, KeReadStateEvent,
        KeReleaseSpinLock, KeSetEvent, KeStallExecutionProcessor, KeWaitForSingleObject,
    },
};

use crate::{FilterContext, control, filter_context, with_scratch_buffer};

/// How long D0 exit waits for the work item, in 100 ns units; negative means relative.
const IDLE_WAIT_TIMEOUT: i64 = -10 * 1000 * 1000 * 10;

/// Initialises the WDM DPC and event of a new filter device and queues a one-shot WDM work
/// item (PASSIVE_LEVEL, from EvtDriverDeviceAdd).
pub fn init_wdm_primitives(context: &FilterContext) -> NTSTATUS {
    let context_pointer: PVOID = core::ptr::from_ref(context).cast_mut().cast();
    // SAFETY: the KDPC lives in the device context, which outlives every queued DPC (the
    // device is removed only after the framework's DPCs and work items are flushed, and
    // EvtDeviceD0Exit waits for ours).
    unsafe {
        KeInitializeDpc(
            context.wdm_dpc.get(),
            Some(wdm_dpc_routine),
            context_pointer,
        )
    };
    // SAFETY: the KEVENT lives in the device context; nothing waits on it yet.
    unsafe { KeInitializeEvent(context.idle_event.get(), _EVENT_TYPE::NotificationEvent, 0) };
    // SAFETY: as above; clearing an initialised event is always allowed.
    unsafe { KeClearEvent(context.idle_event.get()) };

    let wdm_device: PDEVICE_OBJECT = context.wdm_device.load(Ordering::Acquire);
    // SAFETY: `wdm_device` is this filter's device object, alive while the device is.
    let work_item: PIO_WORKITEM = unsafe { IoAllocateWorkItem(wdm_device) };
    if work_item.is_null() {
        return STATUS_INSUFFICIENT_RESOURCES;
    }
    // SAFETY: `work_item` was allocated for `wdm_device`; the routine frees it, so the
    // context handed over is the work item itself.
    unsafe {
        IoQueueWorkItem(
            work_item,
            Some(wdm_work_routine),
            _WORK_QUEUE_TYPE::DelayedWorkQueue,
            work_item.cast(),
        );
    };
    STATUS_SUCCESS
}

/// `IO_WORKITEM_ROUTINE`: runs once at PASSIVE_LEVEL and frees its own work item.
unsafe extern "C" fn wdm_work_routine(_device_object: PDEVICE_OBJECT, context: PVOID) {
    paged_code!();
    // SAFETY: `context` is the work item queued in `init_wdm_primitives`; the I/O manager is
    // done with it once the routine runs.
    unsafe { IoFreeWorkItem(context.cast()) };
}

/// `KDEFERRED_ROUTINE`: counts its runs under the WDM spin lock (DISPATCH_LEVEL).
unsafe extern "C" fn wdm_dpc_routine(
    _dpc: *mut _KDPC,
    deferred_context: PVOID,
    _system_argument1: PVOID,
    _system_argument2: PVOID,
) {
    // SAFETY: KeInitializeDpc was given the filter context, which outlives the DPC.
    let context = unsafe { &*deferred_context.cast::<FilterContext>().cast_const() };
    // SAFETY: reading the IRQL has no preconditions.
    let irql = unsafe { KeGetCurrentIrql() };
    debug_assert_eq!(ULONG::from(irql), DISPATCH_LEVEL);
    // SAFETY: the lock lives in the device context; a zero KSPIN_LOCK is a free lock.
    let old_irql = unsafe { KeAcquireSpinLockRaiseToDpc(context.wdm_lock.get()) };
    context.dpc_runs.fetch_add(1, Ordering::Relaxed);
    // SAFETY: acquired above, released with the IRQL it returned.
    unsafe { KeReleaseSpinLock(context.wdm_lock.get(), old_irql) };
}

/// `EvtDpcFunc` of the filter's WDF DPC (DISPATCH_LEVEL): completes a held request, queues
/// the WDM DPC and hands the rest to the work item.
pub extern "C" fn evt_dpc(dpc: WDFDPC) {
    // SAFETY: the framework passes a live DPC object.
    let parent = unsafe { call_unsafe_wdf_function_binding!(WdfDpcGetParentObject, dpc) };
    let device: WDFDEVICE = parent.cast();
    // SAFETY: the DPC's parent is its filter device, alive while the DPC can run.
    let context = unsafe { filter_context(device) };

    control::complete_held_request();

    // SAFETY: the KDPC was initialised in EvtDriverDeviceAdd and lives in the context.
    let inserted = unsafe { KeInsertQueueDpc(context.wdm_dpc.get(), null_mut(), null_mut()) };
    // FALSE only means it was already queued.
    let _ = inserted;

    let work_item = context.work_item.load(Ordering::Acquire);
    // SAFETY: the work item belongs to the same device; enqueueing a queued one is a no-op.
    unsafe { call_unsafe_wdf_function_binding!(WdfWorkItemEnqueue, work_item) };
}

/// `EvtWorkItemFunc` of the filter's WDF work item (PASSIVE_LEVEL).
pub extern "C" fn evt_work_item(work_item: WDFWORKITEM) {
    paged_code!();
    // SAFETY: the framework passes a live work item.
    let parent =
        unsafe { call_unsafe_wdf_function_binding!(WdfWorkItemGetParentObject, work_item) };
    // SAFETY: the work item's parent is its filter device, alive while the item can run.
    let context = unsafe { filter_context(parent.cast()) };

    let lock = context.lock.load(Ordering::Acquire);
    // SAFETY: the WDF spin lock belongs to the same device.
    unsafe { call_unsafe_wdf_function_binding!(WdfSpinLockAcquire, lock) };
    let dpc_runs = context.dpc_runs.load(Ordering::Relaxed);
    // SAFETY: acquired above.
    unsafe { call_unsafe_wdf_function_binding!(WdfSpinLockRelease, lock) };

    // A short busy wait, as the glue does when polling hardware state.
    // SAFETY: stalling a few microseconds has no preconditions.
    unsafe { KeStallExecutionProcessor(10) };
    let mut performance_counter = 0u64;
    // SAFETY: the out-pointer refers to a local.
    let interrupt_time = unsafe { KeQueryInterruptTimePrecise(&mut performance_counter) };
    let status = with_scratch_buffer(64, 0x5a);

    // SAFETY: the format string is NUL-terminated and its conversions match the arguments
    // (%u: ULONG, %I64u: ULONG64, %08x: NTSTATUS as ULONG).
    unsafe {
        DbgPrintEx(
            _DPFLTR_TYPE::DPFLTR_IHVDRIVER_ID as ULONG,
            DPFLTR_INFO_LEVEL,
            c"kmdf-check probe: %u WDM DPC runs at %I64u, scratch %08x\n".as_ptr(),
            dpc_runs,
            interrupt_time,
            status,
        );
    };

    // SAFETY: the event lives in the device context and was initialised at device add.
    let was_signaled = unsafe { KeReadStateEvent(context.idle_event.get()) };
    if was_signaled == 0 {
        // SAFETY: as above; no wait follows (Wait = FALSE).
        unsafe { KeSetEvent(context.idle_event.get(), 0, 0) };
    }
}

/// Waits (PASSIVE_LEVEL) until the work item has signalled the idle event, at most
/// [`IDLE_WAIT_TIMEOUT`].
pub fn wait_until_idle(context: &FilterContext) -> NTSTATUS {
    paged_code!();
    let mut timeout = LARGE_INTEGER {
        QuadPart: IDLE_WAIT_TIMEOUT,
    };
    // SAFETY: the event lives in the device context for longer than the wait; kernel-mode,
    // non-alertable wait with a relative timeout at PASSIVE_LEVEL.
    let status = unsafe {
        KeWaitForSingleObject(
            context.idle_event.get().cast::<c_void>(),
            _KWAIT_REASON::Executive,
            _MODE::KernelMode as i8,
            0,
            &mut timeout,
        )
    };
    // STATUS_TIMEOUT is a success code: power-down goes on without the work item's signal.
    if nt_success(status) {
        STATUS_SUCCESS
    } else {
        status
    }
}
