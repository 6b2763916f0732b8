//! The filter device on each RDMA controller's stack: attach (`WdfFdoInitSetFilter`), take the
//! controller's verbs and CM interfaces whenever its self-managed I/O starts and give them back
//! whenever it stops, as `wv_core::filter::Controller` decides:
//!
//! * `EvtDeviceSelfManagedIoInit` (first start) and `EvtDeviceSelfManagedIoRestart` (every
//!   return to D0 after a suspend): take both interfaces and hand them to the core; a controller
//!   that has no verbs interface for us, or a start that cannot attach, leaves a pass-through
//!   filter, logged, and the start succeeds;
//! * `EvtDeviceSelfManagedIoSuspend` (before every power-down: sleep, hibernation, a stop for
//!   rebalancing, removal), `EvtDeviceSurpriseRemoval` and `EvtDeviceSelfManagedIoCleanup`:
//!   the core removes the device — every request parked on it ends, every verbs handle is
//!   destroyed — and both interfaces go back, so the controller's driver can power down (WinOFED's
//!   mlx4_bus waits in its D0Exit, without a timeout, until every interface reference it handed
//!   out is back). Applications see their device removed across a sleep, as with OFW, and open
//!   it again after the wake.

use core::mem::size_of;

use wdk::{nt_success, paged_code};
use wdk_sys::{NTSTATUS, PWDFDEVICE_INIT, STATUS_SUCCESS, WDFDEVICE, WDFDRIVER, WDFOBJECT};
use wv_abi::NtStatus;
use wv_ci::{CiCm, CiError, CiVerbs, INFINIBAND_INTERFACE_CM, RDMA_INTERFACE_VERBS};
use wv_core::control::ControlAction;
use wv_core::filter::{Controller, PassThrough, SUSPEND_WAIT_SLICE_NS, Start, suspend_wait_logged};

use crate::control;
use crate::entry::{Globals, globals};
use crate::wdf::context::ContextType;
use crate::wdf::device::Device;
use crate::wdf::device_init::FilterDeviceInit;
use crate::wdf::{wdf_init, work};

/// A filter device's context: its hold on the controller. WDF zero-fills it and frees it
/// without dropping; all-zero bytes are `Controller::new()` (two atomics, nothing to drop).
static CONTROLLER: ContextType<Controller> =
    ContextType::new(c"WinVerbsController", &raw const CONTROLLER);

// `Controller` promises to stay two atomics; a field added to it would show here first.
const _: () = assert!(size_of::<Controller>() == 16);

/// The controller hold of `device` (every filter device is created with one; `None` would
/// mean a device of another kind).
///
/// # Safety
/// `device` is a live filter device this driver created; the reference is not used after its
/// cleanup callback.
unsafe fn controller<'a>(device: Device) -> Option<&'a Controller> {
    // SAFETY: the caller's promise; filter devices are created with the CONTROLLER context.
    unsafe { CONTROLLER.get(device.raw().cast()) }
}

/// `EvtDriverDeviceAdd` (PASSIVE_LEVEL): a filter device on a new controller's stack; the
/// first one also creates the control device, and if that fails this AddDevice fails without a
/// device (spec §7.1-k). KMDF turns a filter's failure into success — the controller's stack
/// builds and starts without this filter — so the failure is logged here, where it happens.
pub extern "C" fn evt_driver_device_add(
    driver: WDFDRIVER,
    device_init: PWDFDEVICE_INIT,
) -> NTSTATUS {
    paged_code!();
    let Some(g) = globals() else {
        return wdk_sys::STATUS_DEVICE_NOT_READY;
    };
    // SAFETY: the structure the framework passed to this callback.
    let mut init = unsafe { FilterDeviceInit::new(device_init) };
    let mut pnp = wdf_init::wdf_pnppower_event_callbacks_init();
    pnp.EvtDeviceSelfManagedIoInit = Some(evt_self_managed_io_start);
    pnp.EvtDeviceSelfManagedIoRestart = Some(evt_self_managed_io_start);
    pnp.EvtDeviceSelfManagedIoSuspend = Some(evt_self_managed_io_suspend);
    pnp.EvtDeviceSurpriseRemoval = Some(evt_surprise_removal);
    pnp.EvtDeviceSelfManagedIoCleanup = Some(evt_self_managed_io_cleanup);
    init.set_pnp_power_callbacks(&mut pnp);

    let status = join_control_device(g, driver);
    if !nt_success(status) {
        wdk::println!(
            "WinVerbs: no control device ({status:#010x}); the filter does not attach to this \
             controller"
        );
        return status;
    }
    let mut attributes = wdf_init::wdf_object_attributes_init_context_type(CONTROLLER.info());
    attributes.EvtCleanupCallback = Some(evt_filter_cleanup);
    match init.create(&mut attributes) {
        Ok(_) => STATUS_SUCCESS,
        Err(status) => {
            wdk::println!(
                "WinVerbs: the filter device could not be created ({status:#010x}); the filter \
                 does not attach to this controller"
            );
            // No device, so no cleanup callback: give the controller's count back here.
            leave_control_device(g);
            status
        }
    }
}

/// Counts a new controller for the control device, creating it if it does not exist.
fn join_control_device(g: &Globals, driver: WDFDRIVER) -> NTSTATUS {
    let _serialised = g.lock.lock();
    if g.control.controller_adding() != ControlAction::Create {
        return STATUS_SUCCESS;
    }
    let status = control::create(driver);
    g.control.created(nt_success(status));
    status
}

/// Uncounts a controller; the last user takes the control device with it.
fn leave_control_device(g: &Globals) {
    if g.control.controller_gone() == ControlAction::Delete {
        control::delete_if_unused(g);
    }
}

/// `EvtCleanupCallback` of a filter device (PASSIVE_LEVEL): the framework has deleted it.
extern "C" fn evt_filter_cleanup(_object: WDFOBJECT) {
    if let Some(g) = globals() {
        leave_control_device(g);
    }
}

/// `EvtDeviceSelfManagedIoInit` and `EvtDeviceSelfManagedIoRestart` (PASSIVE_LEVEL): take the
/// controller's interfaces and hand them to the core. Never fails the start.
extern "C" fn evt_self_managed_io_start(device: WDFDEVICE) -> NTSTATUS {
    paged_code!();
    let Some(g) = globals() else {
        // Cannot happen (no callback runs before DriverEntry or after unload); a pass-through.
        return STATUS_SUCCESS;
    };
    // SAFETY: the framework passes a live filter device of this driver to the callback.
    let device = unsafe { Device::from_raw(device) };
    // SAFETY: as above.
    let Some(controller) = (unsafe { controller(device) }) else {
        return STATUS_SUCCESS;
    };
    let start = controller.start(&g.core, || query_verbs(device), || query_cm(device));
    if let Start::PassThrough(reason) = start {
        wdk::println!("WinVerbs: the filter passes its controller through: {reason}");
    }
    start.status().0 as NTSTATUS
}

/// The controller's verbs interface (`GUID_RDMA_INTERFACE_VERBS`), in the adapter that owns
/// its reference.
fn query_verbs(device: Device) -> Result<CiVerbs, PassThrough<CiError>> {
    let table = device
        .query_interface::<RDMA_INTERFACE_VERBS>()
        .map_err(|status| PassThrough::query_failed(NtStatus(status as u32)))?;
    // SAFETY: the controller's driver filled `table` in answer to the query, with one
    // reference that `CiVerbs` now owns (and releases if it refuses the table).
    unsafe { CiVerbs::new(table) }.map_err(PassThrough::Refused)
}

/// The CM interface (answered by ibbus below the filter), if there is a usable one: without it
/// the verbs still work and the endpoint IOCTLs have no connection manager through this
/// controller.
fn query_cm(device: Device) -> Option<CiCm> {
    let table = device.query_interface::<INFINIBAND_INTERFACE_CM>().ok()?;
    // SAFETY: filled in by the CM's provider with one reference, now owned by `CiCm` (which
    // releases it if it refuses the table).
    match unsafe { CiCm::new(table) } {
        Ok(cm) => Some(cm),
        Err(reason) => {
            wdk::println!("WinVerbs: unusable CM interface ({reason}); no endpoints through it");
            None
        }
    }
}

/// The controller's self-managed I/O stops: the core ends everything on it and the
/// interfaces go back. The first of suspend, surprise removal and cleanup does it.
fn stop(device: WDFDEVICE) {
    if let Some(g) = globals() {
        // SAFETY: the framework passes a live filter device of this driver to the callbacks
        // that call this.
        let device = unsafe { Device::from_raw(device) };
        // SAFETY: as above.
        if let Some(controller) = unsafe { controller(device) } {
            let _ = controller.stop(&g.core);
        }
    }
}

/// `EvtDeviceSelfManagedIoSuspend` (PASSIVE_LEVEL, before every power-down and at removal).
/// Never fails: a failure would take the controller's stack down. The stop runs on a system
/// work item while the suspend waits for it in bounded slices and logs a wait that lasts (see
/// `wv_core::filter::SUSPEND_WAIT_SLICE_NS`), so a controller that never finishes a command
/// is in the debugger log instead of being a silent power-transition hang.
extern "C" fn evt_self_managed_io_suspend(device: WDFDEVICE) -> NTSTATUS {
    paged_code!();
    // SAFETY: the framework passes its live filter device to the callback.
    let wdm = unsafe { Device::from_raw(device) }.wdm_device_object();
    // The handle as a number: the job runs on another thread while this one waits.
    let handle = device as usize;
    let job = move || stop(handle as WDFDEVICE);
    // SAFETY: the filter device's live WDM device object.
    unsafe {
        work::run_watched(wdm, &job, SUSPEND_WAIT_SLICE_NS, |slices| {
            if suspend_wait_logged(slices) {
                let seconds = slices * SUSPEND_WAIT_SLICE_NS / 1_000_000_000;
                wdk::println!(
                    "WinVerbs: the suspend has waited {seconds} s for the controller's objects to \
                     go (a command in flight); still waiting"
                );
            }
        });
    }
    STATUS_SUCCESS
}

/// `EvtDeviceSurpriseRemoval` (PASSIVE_LEVEL): the hardware is gone; end every request parked on
/// it now rather than at cleanup (spec §7.1-e).
extern "C" fn evt_surprise_removal(device: WDFDEVICE) {
    paged_code!();
    stop(device);
}

/// `EvtDeviceSelfManagedIoCleanup` (PASSIVE_LEVEL, removal).
extern "C" fn evt_self_managed_io_cleanup(device: WDFDEVICE) {
    paged_code!();
    stop(device);
}
