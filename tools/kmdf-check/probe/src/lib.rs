//! kmdf-check probe: a small KMDF upper filter driver shaped like the WinVerbs glue.
//!
//! It exists to be type-checked and linted for `x86_64-pc-windows-msvc` on Linux, against the
//! real `wdk`, `wdk-alloc`, `wdk-panic` and `wdk-macros` crates and the kmdf-check `wdk-sys`
//! shim, before the real glue is written. It has never been linked or loaded. Its shape
//! follows the toaster sideband filter sample:
//!
//! - `DriverEntry` creates the WDF driver; `EvtDriverDeviceAdd` attaches a filter device to
//!   each device stack (`WdfFdoInitSetFilter`), queries a bus interface from the stack, and
//!   sets up a spin lock, a work item, a DPC and the WDM primitives the glue will use;
//! - the first filter device creates a named control device (the sideband channel) with a
//!   parallel default queue for IOCTLs and a manual queue where requests wait; the last one to
//!   go deletes it (`control.rs`);
//! - `deferred.rs` holds the work-item, DPC and WDM work-item/DPC/event code.
//!
//! Every DDI the glue needs is called at least once, through `call_unsafe_wdf_function_binding!`
//! for WDF and `wdk_sys::ntddk` for WDM, so that a signature mismatch in the WDF subset or in
//! mingw's headers shows up here.

#![no_std]

extern crate wdk_panic;

// The WDF helpers are the driver's own (`driver/wdf/`), shared by path so the probe checks the
// very files the glue uses.
#[path = "../../../../driver/wdf/context.rs"]
mod context;
mod control;
mod deferred;
#[path = "../../../../driver/wdf/string.rs"]
mod string;
#[path = "../../../../driver/wdf/wdf_init.rs"]
pub mod wdf_init;

use core::{
    cell::UnsafeCell,
    ptr::null_mut,
    sync::atomic::{AtomicPtr, AtomicU32, Ordering},
};

use wdk::{nt_success, paged_code};
use wdk_alloc::WdkAllocator;
use wdk_sys::{
    _WDF_POWER_DEVICE_STATE, DRIVER_OBJECT, GUID, INTERFACE, KDPC, KEVENT, KSPIN_LOCK, NTSTATUS,
    PCUNICODE_STRING, PDEVICE_OBJECT, PDRIVER_OBJECT, PWDFDEVICE_INIT, SIZE_T, STATUS_SUCCESS,
    ULONG, USHORT, WDF_OBJECT_ATTRIBUTES, WDF_POWER_DEVICE_STATE, WDFDEVICE, WDFDEVICE__, WDFDPC,
    WDFDPC__, WDFDRIVER, WDFOBJECT, WDFSPINLOCK, WDFSPINLOCK__, WDFWORKITEM, WDFWORKITEM__,
    call_unsafe_wdf_function_binding,
};

use crate::{context::ContextType, wdf_init::wdf_object_attributes_init_context_type};

#[global_allocator]
static GLOBAL_ALLOCATOR: WdkAllocator = WdkAllocator;

/// Pool tag of the probe's own allocations ("KcPr" in a pool dump).
const POOL_TAG: ULONG = u32::from_le_bytes(*b"KcPr");

/// The interface the filter queries from the device stack below it. In WinVerbs this is the
/// HCA's verbs interface; here a made-up GUID and version with the same call shape.
const PROBE_INTERFACE_GUID: GUID = GUID {
    Data1: 0x6b5d_3c21,
    Data2: 0x8f0a,
    Data3: 0x4e7b,
    Data4: [0x9d, 0x1e, 0x52, 0x6a, 0x0b, 0x33, 0xc4, 0x17],
};
const PROBE_INTERFACE_VERSION: USHORT = 1;

/// What the bus driver fills in: the standard `INTERFACE` header, then its routines.
#[repr(C)]
struct ProbeInterface {
    header: INTERFACE,
    query_capabilities: Option<unsafe extern "C" fn(context: *mut core::ffi::c_void) -> ULONG>,
}

/// Per filter device state (the device's WDF context; see `context.rs` for the rules).
struct FilterContext {
    /// The WDM device object of this filter, for `IoAllocateWorkItem`.
    wdm_device: AtomicPtr<wdk_sys::DEVICE_OBJECT>,
    /// WDF spin lock the work item takes to sample what the DPCs produced.
    lock: AtomicPtr<WDFSPINLOCK__>,
    work_item: AtomicPtr<WDFWORKITEM__>,
    dpc: AtomicPtr<WDFDPC__>,
    /// The bus interface as the bus driver filled it in (its header carries the context and
    /// the dereference routine), kept until self-managed I/O cleanup gives it back.
    interface: UnsafeCell<ProbeInterface>,
    /// WDM primitives the glue uses outside WDF objects. All-zero is their initial state
    /// (a zero KSPIN_LOCK is an initialised, free lock on x64).
    wdm_dpc: UnsafeCell<KDPC>,
    wdm_lock: UnsafeCell<KSPIN_LOCK>,
    idle_event: UnsafeCell<KEVENT>,
    /// Times the WDM DPC ran; read by the work item.
    dpc_runs: AtomicU32,
}

static FILTER_CONTEXT: ContextType<FilterContext> =
    ContextType::new(c"FilterContext", &raw const FILTER_CONTEXT);

/// Filter devices alive; the control device lives while there is at least one.
static FILTER_DEVICES: AtomicU32 = AtomicU32::new(0);
/// The control device (null while none exists).
static CONTROL_DEVICE: AtomicPtr<WDFDEVICE__> = AtomicPtr::new(null_mut());

/// The filter context of `device`.
///
/// # Safety
///
/// `device` must be a live filter device created by [`evt_driver_device_add`], and the
/// returned reference must not be used after the device's cleanup callback returned.
unsafe fn filter_context<'device>(device: WDFDEVICE) -> &'device FilterContext {
    // SAFETY: forwarded from the caller; filter devices are created with FILTER_CONTEXT.
    let context = unsafe { FILTER_CONTEXT.get(device.cast()) };
    // The device is created with this context: no answer is a bug of this driver.
    context.expect("the filter device has its context")
}

/// The entry point WDF's `FxDriverEntry` stub calls.
///
/// # Safety
///
/// Called once by the system with a valid driver object and registry path.
#[unsafe(export_name = "DriverEntry")]
pub unsafe extern "system" fn driver_entry(
    driver: &mut DRIVER_OBJECT,
    registry_path: PCUNICODE_STRING,
) -> NTSTATUS {
    let driver_object: PDRIVER_OBJECT = driver;
    let mut config = wdf_init::wdf_driver_config_init(Some(evt_driver_device_add));
    // Never DriverObject->DriverUnload: KMDF owns it for PnP drivers.
    config.EvtDriverUnload = Some(evt_driver_unload);
    let mut wdf_driver: WDFDRIVER = null_mut();

    // SAFETY: DriverEntry runs at PASSIVE_LEVEL with the system's driver object and registry
    // path; `config` and `wdf_driver` outlive the call.
    let status = unsafe {
        call_unsafe_wdf_function_binding!(
            WdfDriverCreate,
            driver_object,
            registry_path,
            wdk_sys::WDF_NO_OBJECT_ATTRIBUTES,
            &mut config,
            &mut wdf_driver,
        )
    };
    if !nt_success(status) {
        return status;
    }

    // SAFETY: `wdf_driver` was just created and lives until unload.
    let wdm_driver =
        unsafe { call_unsafe_wdf_function_binding!(WdfDriverWdmGetDriverObject, wdf_driver) };
    debug_assert_eq!(wdm_driver, driver_object);
    wdk::println!("kmdf-check probe loaded");
    STATUS_SUCCESS
}

/// `EvtDriverUnload`: by now every device, and with the last one the control device, is gone.
extern "C" fn evt_driver_unload(_driver: WDFDRIVER) {
    paged_code!();
    debug_assert!(CONTROL_DEVICE.load(Ordering::Acquire).is_null());
}

/// `EvtDriverDeviceAdd`: attach a filter device object to the stack being built.
extern "C" fn evt_driver_device_add(driver: WDFDRIVER, device_init: PWDFDEVICE_INIT) -> NTSTATUS {
    paged_code!();
    let mut device_init = device_init;

    // SAFETY: `device_init` is the framework's, valid until WdfDeviceCreate succeeds; this is
    // the first call on it, as the DDI requires.
    unsafe { call_unsafe_wdf_function_binding!(WdfFdoInitSetFilter, device_init) };

    let mut pnp_power = wdf_init::wdf_pnppower_event_callbacks_init();
    pnp_power.EvtDeviceD0Entry = Some(evt_device_d0_entry);
    pnp_power.EvtDeviceD0Exit = Some(evt_device_d0_exit);
    pnp_power.EvtDeviceSelfManagedIoInit = Some(evt_device_self_managed_io_init);
    pnp_power.EvtDeviceSelfManagedIoSuspend = Some(evt_device_self_managed_io_suspend);
    pnp_power.EvtDeviceSelfManagedIoRestart = Some(evt_device_self_managed_io_restart);
    pnp_power.EvtDeviceSelfManagedIoCleanup = Some(evt_device_self_managed_io_cleanup);
    pnp_power.EvtDeviceSurpriseRemoval = Some(evt_device_surprise_removal);
    // SAFETY: as above; the framework copies the callbacks before returning.
    unsafe {
        call_unsafe_wdf_function_binding!(
            WdfDeviceInitSetPnpPowerEventCallbacks,
            device_init,
            &mut pnp_power,
        );
    };

    let mut attributes = wdf_object_attributes_init_context_type(FILTER_CONTEXT.info());
    attributes.EvtCleanupCallback = Some(evt_filter_device_cleanup);
    // SAFETY: `device_init` is still ours; on failure the framework frees it for a PnP device.
    let device = match unsafe { wdf_device_create(&mut device_init, &mut attributes) } {
        Ok(device) => device,
        Err(status) => return status,
    };
    // Counted as soon as it exists: if anything below fails, the framework deletes the device
    // and its cleanup callback uncounts it.
    let first_filter_device = FILTER_DEVICES.fetch_add(1, Ordering::AcqRel) == 0;

    // SAFETY: `device` was just created with FILTER_CONTEXT and lives past this callback.
    let context = unsafe { filter_context(device) };
    // SAFETY: `device` is a live device object.
    let wdm_device: PDEVICE_OBJECT =
        unsafe { call_unsafe_wdf_function_binding!(WdfDeviceWdmGetDeviceObject, device) };
    context.wdm_device.store(wdm_device, Ordering::Release);

    let status = create_filter_objects(device, context);
    if !nt_success(status) {
        return status;
    }
    let status = deferred::init_wdm_primitives(context);
    if !nt_success(status) {
        return status;
    }

    if first_filter_device {
        // The sideband sample's rule: the control device exists while any filter does. A
        // failure here only loses the sideband channel; the filter keeps working.
        let status = control::create_control_device(driver);
        if !nt_success(status) {
            wdk::println!("kmdf-check probe: no control device: {status:#x}");
        }
    }
    STATUS_SUCCESS
}

/// `WdfDeviceCreate` with `attributes`: the new device, or the framework's status. On success
/// the framework owns `*device_init` (and sets it to null).
///
/// # Safety
/// `*device_init` is a live device init structure the caller owns; PASSIVE_LEVEL.
unsafe fn wdf_device_create(
    device_init: &mut PWDFDEVICE_INIT,
    attributes: &mut WDF_OBJECT_ATTRIBUTES,
) -> Result<WDFDEVICE, NTSTATUS> {
    let mut device: WDFDEVICE = null_mut();
    // SAFETY: the caller's promise; the framework copies the attributes.
    let status = unsafe {
        call_unsafe_wdf_function_binding!(WdfDeviceCreate, device_init, attributes, &mut device)
    };
    if nt_success(status) {
        Ok(device)
    } else {
        Err(status)
    }
}

/// The spin lock, work item and DPC of a filter device, all parented to it so that WDF deletes
/// them with the device.
fn create_filter_objects(device: WDFDEVICE, context: &FilterContext) -> NTSTATUS {
    let parent: WDFOBJECT = device.cast();

    let mut attributes = wdf_init::wdf_object_attributes_init();
    attributes.ParentObject = parent;
    let mut lock: WDFSPINLOCK = null_mut();
    // SAFETY: `attributes` names a live parent; `lock` receives the handle.
    let status =
        unsafe { call_unsafe_wdf_function_binding!(WdfSpinLockCreate, &mut attributes, &mut lock) };
    if !nt_success(status) {
        return status;
    }
    context.lock.store(lock, Ordering::Release);

    // No automatic serialization: the device's execution level is not passive.
    let mut work_config = wdf_init::wdf_workitem_config_init(Some(deferred::evt_work_item));
    work_config.AutomaticSerialization = 0;
    let mut work_item: WDFWORKITEM = null_mut();
    // SAFETY: as above; the work item may only be enqueued once created.
    let status = unsafe {
        call_unsafe_wdf_function_binding!(
            WdfWorkItemCreate,
            &mut work_config,
            &mut attributes,
            &mut work_item,
        )
    };
    if !nt_success(status) {
        return status;
    }
    context.work_item.store(work_item, Ordering::Release);

    let mut dpc_config = wdf_init::wdf_dpc_config_init(Some(deferred::evt_dpc));
    dpc_config.AutomaticSerialization = 0;
    let mut dpc: WDFDPC = null_mut();
    // SAFETY: as above.
    let status = unsafe {
        call_unsafe_wdf_function_binding!(WdfDpcCreate, &mut dpc_config, &mut attributes, &mut dpc)
    };
    if !nt_success(status) {
        return status;
    }
    context.dpc.store(dpc, Ordering::Release);
    STATUS_SUCCESS
}

/// `EvtDeviceD0Entry`: nothing to power up in a filter; the DPC reports in.
extern "C" fn evt_device_d0_entry(
    device: WDFDEVICE,
    _previous_state: WDF_POWER_DEVICE_STATE,
) -> NTSTATUS {
    // SAFETY: the framework passes a live filter device.
    let context = unsafe { filter_context(device) };
    let dpc = context.dpc.load(Ordering::Acquire);
    // SAFETY: the DPC was created with the device and is deleted with it.
    let queued = unsafe { call_unsafe_wdf_function_binding!(WdfDpcEnqueue, dpc) };
    // FALSE only means it was already queued.
    let _ = queued;
    STATUS_SUCCESS
}

/// `EvtDeviceD0Exit`: leaving D0; wait for the work item's signal when going to D3 final.
extern "C" fn evt_device_d0_exit(
    device: WDFDEVICE,
    target_state: WDF_POWER_DEVICE_STATE,
) -> NTSTATUS {
    if target_state == _WDF_POWER_DEVICE_STATE::WdfPowerDeviceD3Final {
        // SAFETY: the framework passes a live filter device.
        let context = unsafe { filter_context(device) };
        return deferred::wait_until_idle(context);
    }
    STATUS_SUCCESS
}

/// `EvtDeviceSelfManagedIoInit`: query the bus interface from the stack below (PASSIVE_LEVEL).
extern "C" fn evt_device_self_managed_io_init(device: WDFDEVICE) -> NTSTATUS {
    paged_code!();
    // SAFETY: the framework passes a live filter device.
    let context = unsafe { filter_context(device) };
    let interface = context.interface.get();
    #[allow(
        clippy::cast_possible_truncation,
        reason = "ProbeInterface is a few dozen bytes; the DDI takes the size as USHORT"
    )]
    let size = core::mem::size_of::<ProbeInterface>() as USHORT;
    // SAFETY: `interface` points at writable context memory at least `size` bytes long that
    // begins with an INTERFACE header; nothing else touches it before cleanup.
    let status = unsafe {
        call_unsafe_wdf_function_binding!(
            WdfFdoQueryForInterface,
            device,
            &PROBE_INTERFACE_GUID,
            interface.cast::<INTERFACE>(),
            size,
            PROBE_INTERFACE_VERSION,
            null_mut(),
        )
    };
    if nt_success(status) {
        // SAFETY: the bus driver filled the interface in; reading it is a plain copy.
        let query = unsafe { (*interface).query_capabilities };
        if let Some(query) = query {
            // SAFETY: the header's context is the one the bus driver expects back.
            let context_pointer = unsafe { (*interface).header.Context };
            // SAFETY: a routine the bus driver published, called with its own context.
            let capabilities = unsafe { query(context_pointer) };
            wdk::println!("kmdf-check probe: interface capabilities {capabilities:#x}");
        }
    }
    // The filter works without the interface; the glue decides what a failure means.
    STATUS_SUCCESS
}

/// `EvtDeviceSelfManagedIoSuspend`.
extern "C" fn evt_device_self_managed_io_suspend(_device: WDFDEVICE) -> NTSTATUS {
    STATUS_SUCCESS
}

/// `EvtDeviceSelfManagedIoRestart`.
extern "C" fn evt_device_self_managed_io_restart(_device: WDFDEVICE) -> NTSTATUS {
    STATUS_SUCCESS
}

/// `EvtDeviceSelfManagedIoCleanup`: give the interface back.
extern "C" fn evt_device_self_managed_io_cleanup(device: WDFDEVICE) {
    paged_code!();
    // SAFETY: the framework passes a live filter device.
    let context = unsafe { filter_context(device) };
    let interface = context.interface.get();
    // SAFETY: plain copies out of context memory no other callback writes at this point.
    let dereference = unsafe { (*interface).header.InterfaceDereference };
    if let Some(dereference) = dereference {
        // SAFETY: as above.
        let interface_context = unsafe { (*interface).header.Context };
        // SAFETY: the routine and context the bus driver handed out with the interface.
        unsafe { dereference(interface_context) };
    }
}

/// `EvtDeviceSurpriseRemoval`: the hardware is gone; nothing to stop in a filter that owns no
/// hardware state (the glue would fail the HCA's outstanding work here).
extern "C" fn evt_device_surprise_removal(_device: WDFDEVICE) {}

/// `EvtCleanupCallback` of a filter device: the last one takes the control device with it.
extern "C" fn evt_filter_device_cleanup(_object: WDFOBJECT) {
    if FILTER_DEVICES.fetch_sub(1, Ordering::AcqRel) == 1 {
        control::delete_control_device();
    }
}

/// Allocation and free with the probe's tag, as the glue does for buffers it owns.
fn with_scratch_buffer(bytes: usize, fill: u8) -> NTSTATUS {
    // SAFETY: non-paged allocation, valid at IRQL <= DISPATCH_LEVEL.
    let buffer = unsafe {
        wdk_sys::ntddk::ExAllocatePool2(wdk_sys::POOL_FLAG_NON_PAGED, bytes as SIZE_T, POOL_TAG)
    };
    if buffer.is_null() {
        return wdk_sys::STATUS_INSUFFICIENT_RESOURCES;
    }
    // SAFETY: `buffer` is a fresh allocation of `bytes` bytes.
    unsafe { core::ptr::write_bytes(buffer.cast::<u8>(), fill, bytes) };
    // SAFETY: allocated above with the same tag, not used afterwards.
    unsafe { wdk_sys::ntddk::ExFreePoolWithTag(buffer, POOL_TAG) };
    STATUS_SUCCESS
}
