//! The PnP and power managers, and the framework's PnP/power state machine as far as a filter
//! sees it (`fxdriverkm.cpp`, `pnpstatemachine.cpp`):
//!
//! * AddDevice: `EvtDriverDeviceAdd` with a `WDFDEVICE_INIT`; a filter that fails it without
//!   creating a device does not fail the stack — KMDF turns the status into success and the
//!   filter simply does not attach (the emulation records that it did);
//! * start: `EvtDeviceD0Entry`, then `EvtDeviceSelfManagedIoInit`;
//! * sleep (Sx, or a stop): `EvtDeviceSelfManagedIoSuspend`, `EvtDeviceD0Exit`; wake:
//!   `EvtDeviceD0Entry`, `EvtDeviceSelfManagedIoRestart`;
//! * surprise removal: `EvtDeviceSurpriseRemoval`, then the power-down (`…Suspend`,
//!   `EvtDeviceD0Exit(D3Final)`) and `EvtDeviceSelfManagedIoFlush`;
//! * removal: (the power-down unless surprise-removed) `EvtDeviceSelfManagedIoCleanup`, then the
//!   device is deleted — its children first, then its `EvtCleanupCallback`.
//!
//! Below each filter is a [`LowerStack`]: the controller's function driver, which answers
//! `IRP_MN_QUERY_INTERFACE` and counts the references its interfaces hold. After a removal
//! every reference the filter took must be back.

use std::sync::Arc;

use wdk_sys::{GUID, NTSTATUS, PVOID, WDF_POWER_DEVICE_STATE, WDFDEVICE, WDFDRIVER};
use wv_ci::Convention;
use wv_hal::Irql;

use crate::devices::{DeviceInit, device_mut};
use crate::machine::{Inner, Machine};
use crate::objects::{self, Handle, Kind, Object};

/// A GUID as the lower stack compares it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Guid {
    /// `Data1`.
    pub data1: u32,
    /// `Data2`.
    pub data2: u16,
    /// `Data3`.
    pub data3: u16,
    /// `Data4`.
    pub data4: [u8; 8],
}

impl From<&GUID> for Guid {
    fn from(g: &GUID) -> Self {
        Guid {
            data1: g.Data1,
            data2: g.Data2,
            data3: g.Data3,
            data4: g.Data4,
        }
    }
}

/// An `IRP_MN_QUERY_INTERFACE`: its stack location's `Parameters.QueryInterface`, and the
/// calling convention of the driver that sends it.
#[derive(Debug)]
pub struct InterfaceQuery {
    /// `InterfaceType`.
    pub guid: Guid,
    /// `Size`: the bytes at `interface`.
    pub size: u16,
    /// `Version`.
    pub version: u16,
    /// `Interface`: where the interface goes, an `INTERFACE` header first.
    pub interface: *mut u8,
    /// `InterfaceSpecificData`.
    pub specific: PVOID,
    /// The asking driver's convention: the interface's routines are the ones of it, and so are
    /// the callbacks the driver will hand them.
    pub convention: Convention,
}

/// The device stack below a filter: the controller's function driver.
pub trait LowerStack: Send + Sync {
    /// `IRP_MN_QUERY_INTERFACE`: fills `query.interface` with the interface `query.guid` at
    /// `query.version`, taking one reference for the caller, or fails (`STATUS_NOT_SUPPORTED`
    /// when nobody below has it).
    ///
    /// # Safety
    /// `query.interface` is `query.size` writable bytes.
    unsafe fn query_interface(&self, query: &InterfaceQuery) -> NTSTATUS;
    /// References on this stack's interfaces that their holders have not given back.
    fn references(&self) -> usize;
    /// A name for messages.
    fn name(&self) -> String;
}

/// A controller the PnP manager enumerated (an index into the machine's list).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ControllerId(pub usize);

/// Where a controller's stack is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PnpState {
    /// The filter did not attach (AddDevice created no device); the status it returned.
    NotAttached(NTSTATUS),
    /// The stack failed to build or start (the status).
    Failed(NTSTATUS),
    /// Started, in D0.
    Started,
    /// In a sleep state (self-managed I/O suspended, D3).
    Sleeping,
    /// Surprise-removed, waiting for the removal.
    SurpriseRemoved,
    /// Removed.
    Removed,
}

struct Controller {
    lower: Arc<dyn LowerStack>,
    device: Option<Handle>,
    state: PnpState,
}

/// The PnP manager's list.
#[derive(Default)]
pub(crate) struct Controllers {
    list: Vec<Controller>,
}

/// The lower stack of controller `id`.
pub(crate) fn lower_of(m: &Inner, id: ControllerId) -> Option<Arc<dyn LowerStack>> {
    m.controllers
        .lock()
        .list
        .get(id.0)
        .map(|c| Arc::clone(&c.lower))
}

fn set_state(m: &Inner, id: ControllerId, state: PnpState) {
    if let Some(c) = m.controllers.lock().list.get_mut(id.0) {
        c.state = state;
    }
}

fn device_of(m: &Inner, id: ControllerId) -> Option<Handle> {
    m.controllers.lock().list.get(id.0).and_then(|c| c.device)
}

/// Calls a `WDFDEVICE → NTSTATUS` PnP callback if the driver registered it.
fn call_status(
    m: &Arc<Inner>,
    device: Handle,
    name: &str,
    pick: impl Fn(
        &wdk_sys::WDF_PNPPOWER_EVENT_CALLBACKS,
    ) -> wdk_sys::PFN_WDF_DEVICE_SELF_MANAGED_IO_INIT,
) -> NTSTATUS {
    let callback = device_mut(&mut m.fx.lock(), device).and_then(|d| pick(&d.pnp));
    let Some(callback) = callback else {
        return wdk_sys::STATUS_SUCCESS;
    };
    crate::callbacks::frame(m, name, Irql::Passive, || {
        // SAFETY: the driver's PnP callback with its live device.
        unsafe { crate::callbacks::device_status(m.convention(), callback, device as WDFDEVICE) }
    })
    .0
}

/// Calls a `WDFDEVICE → VOID` PnP callback if the driver registered it.
fn call_void(
    m: &Arc<Inner>,
    device: Handle,
    name: &str,
    pick: impl Fn(&wdk_sys::WDF_PNPPOWER_EVENT_CALLBACKS) -> wdk_sys::PFN_WDF_DEVICE_SURPRISE_REMOVAL,
) {
    let callback = device_mut(&mut m.fx.lock(), device).and_then(|d| pick(&d.pnp));
    if let Some(callback) = callback {
        crate::callbacks::frame(m, name, Irql::Passive, || {
            // SAFETY: the driver's PnP callback with its live device.
            unsafe { crate::callbacks::device_void(m.convention(), callback, device as WDFDEVICE) }
        });
    }
}

/// Calls `EvtDeviceD0Entry` or `EvtDeviceD0Exit` if the driver registered it.
fn call_power(
    m: &Arc<Inner>,
    device: Handle,
    exit: bool,
    state: WDF_POWER_DEVICE_STATE,
) -> NTSTATUS {
    let callback = device_mut(&mut m.fx.lock(), device).and_then(|d| {
        if exit {
            d.pnp.EvtDeviceD0Exit
        } else {
            d.pnp.EvtDeviceD0Entry
        }
    });
    let Some(callback) = callback else {
        return wdk_sys::STATUS_SUCCESS;
    };
    let name = if exit {
        "EvtDeviceD0Exit"
    } else {
        "EvtDeviceD0Entry"
    };
    crate::callbacks::frame(m, name, Irql::Passive, || {
        // SAFETY: the driver's power callback with its live device.
        unsafe {
            crate::callbacks::device_power(m.convention(), callback, device as WDFDEVICE, state)
        }
    })
    .0
}

use wdk_sys::_WDF_POWER_DEVICE_STATE as P;

impl Machine {
    /// A controller arrives (PnP enumeration): the filter's AddDevice, then the stack's start.
    /// Returns its id whatever happened; [`Machine::controller_state`] says.
    pub fn add_controller(&self, lower: Arc<dyn LowerStack>) -> ControllerId {
        let m = self.inner();
        let id = {
            let mut controllers = m.controllers.lock();
            controllers.list.push(Controller {
                lower,
                device: None,
                state: PnpState::Failed(wdk_sys::STATUS_UNSUCCESSFUL),
            });
            ControllerId(controllers.list.len() - 1)
        };
        add_device(m, id);
        if device_of(m, id).is_some() {
            start(m, id);
        }
        id
    }

    /// Where controller `id`'s stack is.
    pub fn controller_state(&self, id: ControllerId) -> Option<PnpState> {
        self.inner()
            .controllers
            .lock()
            .list
            .get(id.0)
            .map(|c| c.state)
    }

    /// The filter device on controller `id`, if the filter attached and it still exists.
    pub fn filter_device(&self, id: ControllerId) -> Option<WDFDEVICE> {
        device_of(self.inner(), id).map(|d| d as WDFDEVICE)
    }

    /// References the controller's lower stack counts as held.
    pub fn lower_references(&self, id: ControllerId) -> usize {
        lower_of(self.inner(), id).map_or(0, |l| l.references())
    }

    /// The filter device on controller `id` while the controller is in `state` (a power
    /// transition applies only from the one state it leaves).
    fn device_in(&self, id: ControllerId, state: PnpState) -> Option<Handle> {
        let device = device_of(self.inner(), id)?;
        (self.controller_state(id) == Some(state)).then_some(device)
    }

    /// The system sleeps (or the stack stops): self-managed I/O suspends, the device leaves D0.
    pub fn sleep(&self, id: ControllerId) {
        let m = self.inner();
        let Some(device) = self.device_in(id, PnpState::Started) else {
            return;
        };
        power_down(m, device, P::WdfPowerDeviceD3);
        set_state(m, id, PnpState::Sleeping);
    }

    /// The system wakes: the device enters D0, self-managed I/O restarts.
    pub fn wake(&self, id: ControllerId) {
        let m = self.inner();
        let Some(device) = self.device_in(id, PnpState::Sleeping) else {
            return;
        };
        let status = call_power(m, device, false, P::WdfPowerDeviceD3);
        let status = if wdk_sys::NT_SUCCESS(status) {
            call_status(m, device, "EvtDeviceSelfManagedIoRestart", |p| {
                p.EvtDeviceSelfManagedIoRestart
            })
        } else {
            status
        };
        set_state(
            m,
            id,
            if wdk_sys::NT_SUCCESS(status) {
                PnpState::Started
            } else {
                PnpState::Failed(status)
            },
        );
    }

    /// `IRP_MN_SURPRISE_REMOVAL`: the hardware is gone (the caller makes the lower device stop
    /// first, as a real controller stops answering).
    pub fn surprise_remove(&self, id: ControllerId) {
        let m = self.inner();
        let state = self.controller_state(id);
        let Some(device) = device_of(m, id) else {
            set_state(m, id, PnpState::SurpriseRemoved);
            return;
        };
        if !matches!(state, Some(PnpState::Started | PnpState::Sleeping)) {
            return;
        }
        call_void(m, device, "EvtDeviceSurpriseRemoval", |p| {
            p.EvtDeviceSurpriseRemoval
        });
        if state == Some(PnpState::Started) {
            power_down(m, device, P::WdfPowerDeviceD3Final);
        }
        call_void(m, device, "EvtDeviceSelfManagedIoFlush", |p| {
            p.EvtDeviceSelfManagedIoFlush
        });
        set_state(m, id, PnpState::SurpriseRemoved);
    }

    /// `IRP_MN_REMOVE_DEVICE` (after a query-remove, or after a surprise removal).
    pub fn remove(&self, id: ControllerId) {
        remove(self.inner(), id);
    }
}

/// `EvtDeviceSelfManagedIoSuspend`, then `EvtDeviceD0Exit(target)`.
fn power_down(m: &Arc<Inner>, device: Handle, target: WDF_POWER_DEVICE_STATE) {
    call_status(m, device, "EvtDeviceSelfManagedIoSuspend", |p| {
        p.EvtDeviceSelfManagedIoSuspend
    });
    call_power(m, device, true, target);
}

fn add_device(m: &Arc<Inner>, id: ControllerId) {
    let (driver, device_add) = {
        let fx = m.fx.lock();
        let Some(driver) = fx.driver else {
            drop(fx);
            set_state(m, id, PnpState::Failed(wdk_sys::STATUS_DEVICE_NOT_READY));
            return;
        };
        match fx.get(driver) {
            Some(Object {
                kind: Kind::Driver(d),
                ..
            }) => (driver, d.device_add),
            _ => return,
        }
    };
    let Some(device_add) = device_add else {
        set_state(m, id, PnpState::NotAttached(wdk_sys::STATUS_SUCCESS));
        return;
    };
    let init = {
        let mut fx = m.fx.lock();
        let init = fx.next_handle();
        fx.inits.insert(init, DeviceInit::new(false, Some(id)));
        init
    };
    let (status, _) = crate::callbacks::frame(m, "EvtDriverDeviceAdd", Irql::Passive, || {
        // SAFETY: the driver's AddDevice with its driver object and an init structure valid for
        // the call.
        unsafe {
            crate::callbacks::driver_device_add(
                m.convention(),
                device_add,
                driver as WDFDRIVER,
                init as wdk_sys::PWDFDEVICE_INIT,
            )
        }
    });
    let record = m.fx.lock().inits.remove(&init);
    let (filter, created) = record.map_or((false, None), |r| (r.filter, r.created));
    match created {
        None => {
            if filter && !wdk_sys::NT_SUCCESS(status) {
                // "We do not let filters affect the building of the rest of the stack."
                m.count("filter AddDevice failures turned into success");
                set_state(m, id, PnpState::NotAttached(status));
            } else if wdk_sys::NT_SUCCESS(status) {
                set_state(m, id, PnpState::NotAttached(status));
            } else {
                set_state(m, id, PnpState::Failed(status));
            }
        }
        Some(device) => {
            if wdk_sys::NT_SUCCESS(status) {
                if let Some(c) = m.controllers.lock().list.get_mut(id.0) {
                    c.device = Some(device);
                }
            } else {
                // A device created and a failure returned: the framework deletes it and the
                // stack fails.
                objects::delete(m, device);
                set_state(m, id, PnpState::Failed(status));
            }
        }
    }
}

fn start(m: &Arc<Inner>, id: ControllerId) {
    let Some(device) = device_of(m, id) else {
        return;
    };
    let mut status = call_power(m, device, false, P::WdfPowerDeviceD3Final);
    if wdk_sys::NT_SUCCESS(status) {
        status = call_status(m, device, "EvtDeviceSelfManagedIoInit", |p| {
            p.EvtDeviceSelfManagedIoInit
        });
    }
    if wdk_sys::NT_SUCCESS(status) {
        set_state(m, id, PnpState::Started);
    } else {
        // A failed start: the stack is torn down.
        set_state(m, id, PnpState::Failed(status));
        finish_removal(m, id, device);
    }
}

/// Removal of controller `id`'s stack.
pub(crate) fn remove(m: &Arc<Inner>, id: ControllerId) {
    let state = m.controllers.lock().list.get(id.0).map(|c| c.state);
    let device = device_of(m, id);
    match (state, device) {
        (Some(PnpState::Removed) | None, _) => {}
        (_, None) => set_state(m, id, PnpState::Removed),
        (Some(state), Some(device)) => {
            if state == PnpState::Started {
                power_down(m, device, P::WdfPowerDeviceD3Final);
            }
            if matches!(state, PnpState::Started | PnpState::Sleeping) {
                call_void(m, device, "EvtDeviceSelfManagedIoFlush", |p| {
                    p.EvtDeviceSelfManagedIoFlush
                });
            }
            finish_removal(m, id, device);
        }
    }
}

/// Self-managed I/O cleanup, the device's deletion, and the check that the filter gave back
/// every interface reference it took from the stack below.
fn finish_removal(m: &Arc<Inner>, id: ControllerId, device: Handle) {
    call_void(m, device, "EvtDeviceSelfManagedIoCleanup", |p| {
        p.EvtDeviceSelfManagedIoCleanup
    });
    objects::delete(m, device);
    m.run_until_idle();
    let lower = {
        let mut controllers = m.controllers.lock();
        let Some(c) = controllers.list.get_mut(id.0) else {
            return;
        };
        c.device = None;
        if !matches!(c.state, PnpState::Failed(_)) {
            c.state = PnpState::Removed;
        }
        Arc::clone(&c.lower)
    };
    let held = lower.references();
    if held != 0 {
        m.violation(format!(
            "verifier: the filter's device on {} was removed holding {held} interface \
             reference(s): the controller's driver waits for them before it can power down or \
             unload",
            lower.name()
        ));
    }
}

/// Removes every controller still present (before an unload).
pub(crate) fn remove_all(m: &Arc<Inner>) {
    let count = m.controllers.lock().list.len();
    for i in 0..count {
        remove(m, ControllerId(i));
    }
}

/// Every controller's name and the interface references still held on it.
pub(crate) fn references(m: &Inner) -> Vec<(String, usize)> {
    m.controllers
        .lock()
        .list
        .iter()
        .map(|c| (c.lower.name(), c.lower.references()))
        .collect()
}
