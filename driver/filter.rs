//! The filter device on each RDMA controller's stack: attach (`WdfFdoInitSetFilter`), take the
//! controller's verbs and CM interfaces when its self-managed I/O starts, hand both to the
//! driver core, and tell the core when the controller goes (orderly or surprise
//! removal). A controller that answers `STATUS_NOT_SUPPORTED` (no IB ports) or hands out a
//! table the adapter refuses keeps a pass-through filter: the framework forwards all of its I/O
//! and nothing else happens.
//!
//! Sleep: the interfaces are taken in `EvtDeviceSelfManagedIoInit` (first start only) and given
//! back in `EvtDeviceSelfManagedIoCleanup` (removal), not in D0Entry/D0Exit as OFW did. OFW
//! tore every application's objects down on each sleep transition (spec §7.1-e); here they
//! survive a Dx transition of the controller, whose driver owns restoring its hardware state.

use core::mem::size_of;
use core::ptr::null_mut;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use wdk::{nt_success, paged_code};
use wdk_sys::{
    GUID, INTERFACE, NTSTATUS, PWDFDEVICE_INIT, STATUS_INSUFFICIENT_RESOURCES,
    STATUS_NOT_SUPPORTED, STATUS_SUCCESS, WDFDEVICE, WDFDRIVER, WDFOBJECT,
    call_unsafe_wdf_function_binding,
};
use wv_ci::{
    CiCm, CiVerbs, GUID_INFINIBAND_INTERFACE_CM, GUID_RDMA_INTERFACE_VERBS,
    INFINIBAND_INTERFACE_CM, INFINIBAND_INTERFACE_CM_VERSION, RDMA_INTERFACE_VERBS,
    RDMA_INTERFACE_VERBS_VERSION,
};
use wv_core::control::ControlAction;
use wv_hal::{FilterDriver, KArc, Verbs};

use crate::control;
use crate::entry::{Globals, globals};
use crate::wdf::context::ContextType;
use crate::wdf::wdf_init;

/// What a filter device keeps (its WDF context: zero-valid, freed without drop).
struct FilterState {
    /// The controller's node GUID, valid while `arrived`.
    guid: AtomicU64,
    /// The core knows the controller.
    arrived: AtomicBool,
}

static FILTER_STATE: ContextType<FilterState> =
    ContextType::new(c"WinVerbsFilter", &raw const FILTER_STATE);

/// The filter state of `device`.
///
/// # Safety
/// `device` is a live filter device this driver created; the reference is not used after its
/// cleanup callback.
unsafe fn state<'a>(device: WDFDEVICE) -> &'a FilterState {
    // SAFETY: the caller's promise; filter devices are created with FILTER_STATE.
    unsafe { FILTER_STATE.get(device.cast()) }
}

fn guid(g: wv_ci::GUID) -> GUID {
    GUID {
        Data1: g.Data1,
        Data2: g.Data2,
        Data3: g.Data3,
        Data4: g.Data4,
    }
}

/// `EvtDriverDeviceAdd` (PASSIVE_LEVEL): a filter device on a new controller's stack; the
/// first one also creates the control device, and if that fails this AddDevice fails
/// (spec §7.1-k).
pub extern "C" fn evt_driver_device_add(
    driver: WDFDRIVER,
    device_init: PWDFDEVICE_INIT,
) -> NTSTATUS {
    paged_code!();
    let Some(g) = globals() else {
        return wdk_sys::STATUS_DEVICE_NOT_READY;
    };
    let mut device_init = device_init;
    // SAFETY: the framework's init structure, valid until WdfDeviceCreate succeeds; the first
    // call on it, as the DDI requires.
    unsafe { call_unsafe_wdf_function_binding!(WdfFdoInitSetFilter, device_init) };

    let mut pnp = wdf_init::wdf_pnppower_event_callbacks_init();
    pnp.EvtDeviceSelfManagedIoInit = Some(evt_self_managed_io_init);
    pnp.EvtDeviceSelfManagedIoCleanup = Some(evt_self_managed_io_cleanup);
    pnp.EvtDeviceSurpriseRemoval = Some(evt_surprise_removal);
    // SAFETY: as above; the callbacks are copied.
    unsafe {
        call_unsafe_wdf_function_binding!(
            WdfDeviceInitSetPnpPowerEventCallbacks,
            device_init,
            &mut pnp,
        )
    };

    let status = join_control_device(g, driver);
    if !nt_success(status) {
        return status;
    }
    let mut attributes = wdf_init::wdf_object_attributes_init_context_type(FILTER_STATE.info());
    attributes.EvtCleanupCallback = Some(evt_filter_cleanup);
    let mut device: WDFDEVICE = null_mut();
    // SAFETY: as above; on success the framework takes the init structure over, on failure it
    // frees it (a PnP device).
    let status = unsafe {
        call_unsafe_wdf_function_binding!(
            WdfDeviceCreate,
            &mut device_init,
            &mut attributes,
            &mut device,
        )
    };
    if !nt_success(status) {
        // No device, so no cleanup callback: give the controller's count back here.
        leave_control_device(g);
    }
    status
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

/// `EvtDeviceSelfManagedIoInit` (PASSIVE_LEVEL, first start): take the controller's
/// interfaces and hand them to the core.
extern "C" fn evt_self_managed_io_init(device: WDFDEVICE) -> NTSTATUS {
    paged_code!();
    let Some(g) = globals() else {
        return wdk_sys::STATUS_DEVICE_NOT_READY;
    };
    // SAFETY: the framework passes a live filter device.
    let st = unsafe { state(device) };
    let mut verbs = RDMA_INTERFACE_VERBS::zeroed();
    let interface_guid = guid(GUID_RDMA_INTERFACE_VERBS);
    // SAFETY: a live filter device; `verbs` is writable, as large as the size given, and
    // begins with an INTERFACE header (IRP_MN_QUERY_INTERFACE fills it in).
    let status = unsafe {
        call_unsafe_wdf_function_binding!(
            WdfFdoQueryForInterface,
            device,
            &interface_guid,
            (&raw mut verbs).cast::<INTERFACE>(),
            size_of::<RDMA_INTERFACE_VERBS>() as u16,
            RDMA_INTERFACE_VERBS_VERSION,
            null_mut(),
        )
    };
    if status == STATUS_NOT_SUPPORTED {
        // A controller without IB ports (spec §3.2): a pass-through filter.
        return STATUS_SUCCESS;
    }
    if !nt_success(status) {
        return status;
    }
    // SAFETY: the controller's driver filled `verbs` in answer to the query, with one
    // reference that `CiVerbs` now owns (and releases if it refuses the table).
    let lower = match unsafe { CiVerbs::new(verbs) } {
        Ok(lower) => lower,
        Err(e) => {
            wdk::println!("WinVerbs: unusable verbs interface ({e}); the filter passes through");
            return STATUS_SUCCESS;
        }
    };
    let node_guid = lower.guid();
    let Ok(lower) = KArc::try_new(lower) else {
        // Out of pool: dropping the adapter gives the table's reference back; the start fails.
        return STATUS_INSUFFICIENT_RESOURCES;
    };
    // A CM whose cell cannot be allocated is released again (its reference goes back): the
    // controller still works without endpoints.
    let cm = take_cm(device).and_then(|cm| KArc::try_new(cm).ok());
    if let Err(status) = g.core.device_arrival(lower, cm) {
        return status.0 as NTSTATUS;
    }
    st.guid.store(node_guid, Ordering::Release);
    st.arrived.store(true, Ordering::Release);
    STATUS_SUCCESS
}

/// Takes the CM interface (answered by ibbus below the filter), if there is one: without it
/// the verbs still work and the endpoint IOCTLs have no connection manager through this
/// controller. The core owns it from here and drops it (releasing the interface's reference)
/// when the controller goes.
fn take_cm(device: WDFDEVICE) -> Option<CiCm> {
    let mut cm = INFINIBAND_INTERFACE_CM::zeroed();
    let interface_guid = guid(GUID_INFINIBAND_INTERFACE_CM);
    // SAFETY: as for the verbs query.
    let status = unsafe {
        call_unsafe_wdf_function_binding!(
            WdfFdoQueryForInterface,
            device,
            &interface_guid,
            (&raw mut cm).cast::<INTERFACE>(),
            size_of::<INFINIBAND_INTERFACE_CM>() as u16,
            INFINIBAND_INTERFACE_CM_VERSION,
            null_mut(),
        )
    };
    if !nt_success(status) {
        return None;
    }
    // SAFETY: filled in by the CM's provider with one reference, now owned by `CiCm`.
    unsafe { CiCm::new(cm) }.ok()
}

/// The controller is going: the core ends everything on it, then the interfaces go back.
fn controller_gone(st: &FilterState) {
    if st.arrived.swap(false, Ordering::AcqRel)
        && let Some(g) = globals()
    {
        // The core drops the verbs and CM interfaces it holds (their references) on return.
        g.core.device_removal(st.guid.load(Ordering::Acquire));
    }
}

/// `EvtDeviceSelfManagedIoCleanup` (PASSIVE_LEVEL, removal).
extern "C" fn evt_self_managed_io_cleanup(device: WDFDEVICE) {
    paged_code!();
    // SAFETY: the framework passes a live filter device.
    controller_gone(unsafe { state(device) });
}

/// `EvtDeviceSurpriseRemoval` (PASSIVE_LEVEL): the hardware is gone; end every request parked on
/// it now rather than at cleanup (spec §7.1-e).
extern "C" fn evt_surprise_removal(device: WDFDEVICE) {
    paged_code!();
    // SAFETY: the framework passes a live filter device.
    controller_gone(unsafe { state(device) });
}
