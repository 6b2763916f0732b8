//! Devices: the `WDFDEVICE_INIT` of a filter FDO (handed to `EvtDriverDeviceAdd`) and of a
//! control device (`WdfControlDeviceInitAllocate`), `WdfDeviceCreate`, the device's WDM device
//! object, its name and symbolic link, `WdfControlFinishInitializing`, and
//! `WdfFdoQueryForInterface` (an `IRP_MN_QUERY_INTERFACE` to the stack below, answered by the
//! controller's lower device).
//!
//! A control device deleted while handles are open is deleted as KMDF deletes it
//! (`FxDevice::DeleteObject` for a legacy device): its WDM device object is deleted at once
//! (its name leaves the namespace and new opens fail with `STATUS_NO_SUCH_DEVICE`), and the
//! framework object — with its queues and its symbolic link — goes when the last handle closes.

use std::sync::Arc;

use wdk_sys::{
    BOOLEAN, DEVICE_OBJECT, LPCGUID, NTSTATUS, PCUNICODE_STRING, PDEVICE_OBJECT,
    PFN_WDF_IO_IN_CALLER_CONTEXT, PINTERFACE, PVOID, PWDF_FILEOBJECT_CONFIG,
    PWDF_OBJECT_ATTRIBUTES, PWDF_PNPPOWER_EVENT_CALLBACKS, PWDFDEVICE_INIT, UNICODE_STRING, USHORT,
    WDF_DEVICE_IO_TYPE, WDF_FILEOBJECT_CONFIG, WDF_PNPPOWER_EVENT_CALLBACKS, WDFDEVICE, WDFDRIVER,
};

use crate::machine::Inner;
use crate::objects::{self, Attributes, Fx, Handle, Kind, Life, Object};
use crate::pnp::{ControllerId, Guid, InterfaceQuery};
use crate::verifier::WDF_VIOLATION;

/// A `WDFDEVICE_INIT`.
pub(crate) struct DeviceInit {
    /// Allocated by the driver for a control device (else handed to `EvtDriverDeviceAdd`).
    pub control: bool,
    /// `WdfFdoInitSetFilter` was called.
    pub filter: bool,
    /// Calls made on it before `WdfFdoInitSetFilter` (which must come first).
    pub calls: usize,
    pub pnp: Option<WDF_PNPPOWER_EVENT_CALLBACKS>,
    pub io_type: WDF_DEVICE_IO_TYPE,
    pub exclusive: bool,
    pub name: Option<String>,
    pub sddl: Option<String>,
    pub file_config: Option<(WDF_FILEOBJECT_CONFIG, Attributes)>,
    pub in_caller: PFN_WDF_IO_IN_CALLER_CONTEXT,
    /// The controller below a PnP device.
    pub pdo: Option<ControllerId>,
    /// The device created from it.
    pub created: Option<Handle>,
}

impl DeviceInit {
    pub(crate) fn new(control: bool, pdo: Option<ControllerId>) -> Self {
        DeviceInit {
            control,
            filter: false,
            calls: 0,
            pnp: None,
            io_type: wdk_sys::_WDF_DEVICE_IO_TYPE::WdfDeviceIoBuffered,
            exclusive: false,
            name: None,
            sddl: None,
            file_config: None,
            in_caller: None,
            pdo,
            created: None,
        }
    }
}

/// A device's data.
pub(crate) struct DeviceObj {
    pub control: bool,
    pub filter: bool,
    pub pnp: WDF_PNPPOWER_EVENT_CALLBACKS,
    pub io_type: WDF_DEVICE_IO_TYPE,
    pub exclusive: bool,
    pub name: Option<String>,
    pub sddl: Option<String>,
    pub link: Option<String>,
    pub file_config: Option<(WDF_FILEOBJECT_CONFIG, Attributes)>,
    pub in_caller: PFN_WDF_IO_IN_CALLER_CONTEXT,
    pub pdo: Option<ControllerId>,
    /// Its WDM device object's address.
    pub wdm: usize,
    /// `DO_DEVICE_INITIALIZING` (a control device until `WdfControlFinishInitializing`).
    pub initializing: bool,
    /// Its queues, default first when it has one.
    pub default_queue: Option<Handle>,
    pub queues: Vec<Handle>,
    /// Handles open (creates in progress count from their start, as KMDF's open count does).
    pub open_handles: usize,
    /// Deleted by the driver while handles were open: destroyed at the last close.
    pub delete_pending: bool,
}

/// A WDM `DEVICE_OBJECT`: its memory lives until it is deleted and unreferenced.
pub(crate) struct WdmDevice {
    memory: Box<DEVICE_OBJECT>,
    /// References taken by work items allocated for it (`IoAllocateWorkItem`).
    pub refs: usize,
    pub deleted: bool,
    pub name: String,
}

impl WdmDevice {
    fn new(name: String) -> Self {
        // SAFETY: DEVICE_OBJECT is plain data for which all-zero bytes are valid.
        let mut memory: Box<DEVICE_OBJECT> = Box::new(unsafe { std::mem::zeroed() });
        memory.Type = 3; // IO_TYPE_DEVICE
        memory.Size = u16::try_from(size_of::<DEVICE_OBJECT>()).unwrap_or(u16::MAX);
        WdmDevice {
            memory,
            refs: 0,
            deleted: false,
            name,
        }
    }

    pub fn address(&self) -> usize {
        std::ptr::from_ref(&*self.memory) as usize
    }
}

/// A counted string as Rust text.
///
/// # Safety
/// `s` is null or a valid `UNICODE_STRING`.
pub(crate) unsafe fn read_unicode(s: *const UNICODE_STRING) -> Option<String> {
    // SAFETY: the caller's promise.
    let s = unsafe { s.as_ref() }?;
    if s.Buffer.is_null() {
        return Some(String::new());
    }
    // SAFETY: `Length` bytes of UTF-16 at `Buffer` (the UNICODE_STRING contract).
    let units = unsafe { std::slice::from_raw_parts(s.Buffer, usize::from(s.Length) / 2) };
    Some(String::from_utf16_lossy(units))
}

/// Runs `f` on the init structure behind `init`, with the checks every `WdfDeviceInit…` call
/// has: a valid, unconsumed structure.
fn with_init<R>(
    m: &Inner,
    ddi: &str,
    init: PWDFDEVICE_INIT,
    f: impl FnOnce(&mut DeviceInit) -> R,
) -> Option<R> {
    let mut fx = m.fx.lock();
    let Some(record) = fx.inits.get_mut(&(init as usize)) else {
        drop(fx);
        if init.is_null() {
            m.null_parameter(ddi, "DeviceInit");
        } else {
            m.bug_check(
                WDF_VIOLATION,
                format!(
                    "{ddi}: DeviceInit {init:p} is not a live WDFDEVICE_INIT (freed, or used \
                     after WdfDeviceCreate consumed it)"
                ),
            );
        }
        return None;
    };
    if record.created.is_some() {
        drop(fx);
        m.violation(format!(
            "verifier: {ddi} on a WDFDEVICE_INIT that WdfDeviceCreate already consumed"
        ));
        return None;
    }
    record.calls += 1;
    Some(f(record))
}

/// `WdfFdoInitSetFilter`.
///
/// # Safety
/// The DDI's contract.
pub(crate) unsafe fn fdo_init_set_filter(m: &Arc<Inner>, init: PWDFDEVICE_INIT) {
    const DDI: &str = "WdfFdoInitSetFilter";
    let outcome = with_init(m, DDI, init, |i| {
        if i.control {
            return Err("a control device's WDFDEVICE_INIT is not an FDO's");
        }
        i.filter = true;
        Ok(())
    });
    if let Some(Err(why)) = outcome {
        m.violation(format!("verifier: {DDI}: {why}"));
    }
}

/// `WdfDeviceInitSetPnpPowerEventCallbacks`.
///
/// # Safety
/// The DDI's contract.
pub(crate) unsafe fn init_set_pnp_power_callbacks(
    m: &Arc<Inner>,
    init: PWDFDEVICE_INIT,
    callbacks: PWDF_PNPPOWER_EVENT_CALLBACKS,
) {
    const DDI: &str = "WdfDeviceInitSetPnpPowerEventCallbacks";
    // SAFETY: the driver's structure (or null), copied here.
    let Ok(callbacks) = (unsafe { m.read_sized(DDI, "PnpPowerEventCallbacks", callbacks) }) else {
        return;
    };
    let _ = with_init(m, DDI, init, |i| i.pnp = Some(callbacks));
}

/// `WdfControlDeviceInitAllocate`.
///
/// # Safety
/// The DDI's contract.
pub(crate) unsafe fn control_device_init_allocate(
    m: &Arc<Inner>,
    driver: WDFDRIVER,
    sddl: *const UNICODE_STRING,
) -> PWDFDEVICE_INIT {
    const DDI: &str = "WdfControlDeviceInitAllocate";
    if m.fx.lock().driver != Some(driver as Handle) {
        m.bug_check(
            WDF_VIOLATION,
            format!("{DDI}: Driver {driver:p} is not this driver's WDFDRIVER"),
        );
        return std::ptr::null_mut();
    }
    // SAFETY: the driver's SDDL string (or null).
    let Some(sddl) = (unsafe { read_unicode(sddl) }) else {
        m.null_parameter(DDI, "SDDLString");
        return std::ptr::null_mut();
    };
    if !sddl.starts_with("D:") {
        m.violation(format!("verifier: {DDI}: {sddl:?} is not an SDDL string"));
        return std::ptr::null_mut();
    }
    if m.faults.fail(DDI) {
        return std::ptr::null_mut();
    }
    let mut fx = m.fx.lock();
    let value = fx.next_handle();
    let mut init = DeviceInit::new(true, None);
    init.sddl = Some(sddl);
    fx.inits.insert(value, init);
    value as PWDFDEVICE_INIT
}

/// `WdfDeviceInitFree`.
///
/// # Safety
/// The DDI's contract.
pub(crate) unsafe fn init_free(m: &Arc<Inner>, init: PWDFDEVICE_INIT) {
    const DDI: &str = "WdfDeviceInitFree";
    let mut fx = m.fx.lock();
    match fx.inits.get(&(init as usize)) {
        Some(record) if record.control && record.created.is_none() => {
            fx.inits.remove(&(init as usize));
        }
        Some(_) => {
            drop(fx);
            m.violation(format!(
                "verifier: {DDI}: only a control device's WDFDEVICE_INIT that no device was \
                 created from is freed by the driver"
            ));
        }
        None => {
            drop(fx);
            m.bug_check(
                WDF_VIOLATION,
                format!("{DDI}: {init:p} is not a live WDFDEVICE_INIT (freed twice?)"),
            );
        }
    }
}

/// `WdfDeviceInitSetExclusive`.
///
/// # Safety
/// The DDI's contract.
pub(crate) unsafe fn init_set_exclusive(m: &Arc<Inner>, init: PWDFDEVICE_INIT, exclusive: BOOLEAN) {
    let _ = with_init(m, "WdfDeviceInitSetExclusive", init, |i| {
        i.exclusive = exclusive != 0
    });
}

/// `WdfDeviceInitSetIoType`.
///
/// # Safety
/// The DDI's contract.
pub(crate) unsafe fn init_set_io_type(
    m: &Arc<Inner>,
    init: PWDFDEVICE_INIT,
    io_type: WDF_DEVICE_IO_TYPE,
) {
    let _ = with_init(m, "WdfDeviceInitSetIoType", init, |i| i.io_type = io_type);
}

/// `WdfDeviceInitAssignName`.
///
/// # Safety
/// The DDI's contract.
pub(crate) unsafe fn init_assign_name(
    m: &Arc<Inner>,
    init: PWDFDEVICE_INIT,
    name: PCUNICODE_STRING,
) -> NTSTATUS {
    const DDI: &str = "WdfDeviceInitAssignName";
    // SAFETY: the driver's name (or null, which removes a name).
    let name = unsafe { read_unicode(name) };
    if m.faults.fail(DDI) {
        return wdk_sys::STATUS_INSUFFICIENT_RESOURCES;
    }
    with_init(m, DDI, init, |i| {
        i.name = name;
        wdk_sys::STATUS_SUCCESS
    })
    .unwrap_or(wdk_sys::STATUS_INVALID_DEVICE_REQUEST)
}

/// `WdfDeviceInitSetFileObjectConfig`.
///
/// # Safety
/// The DDI's contract.
pub(crate) unsafe fn init_set_file_object_config(
    m: &Arc<Inner>,
    init: PWDFDEVICE_INIT,
    config: PWDF_FILEOBJECT_CONFIG,
    attributes: PWDF_OBJECT_ATTRIBUTES,
) {
    const DDI: &str = "WdfDeviceInitSetFileObjectConfig";
    // SAFETY: the driver's configuration (or null), copied.
    let Ok(config) = (unsafe { m.read_sized(DDI, "FileObjectConfig", config) }) else {
        return;
    };
    use wdk_sys::_WDF_FILEOBJECT_CLASS as C;
    let class = config.FileObjectClass & !C::WdfFileObjectCanBeOptional;
    if !(C::WdfFileObjectNotRequired..=C::WdfFileObjectWdfCannotUseFsContexts).contains(&class) {
        m.violation(format!(
            "verifier: {DDI}: FileObjectClass {} is invalid",
            config.FileObjectClass
        ));
        return;
    }
    // SAFETY: the driver's attributes (or null).
    let attributes = match unsafe { objects::read_attributes(m, DDI, attributes) } {
        Ok(a) => a,
        Err(_) => return,
    };
    let _ = with_init(m, DDI, init, |i| i.file_config = Some((config, attributes)));
}

/// `WdfDeviceInitSetIoInCallerContextCallback`.
///
/// # Safety
/// The DDI's contract.
pub(crate) unsafe fn init_set_io_in_caller_context(
    m: &Arc<Inner>,
    init: PWDFDEVICE_INIT,
    callback: PFN_WDF_IO_IN_CALLER_CONTEXT,
) {
    const DDI: &str = "WdfDeviceInitSetIoInCallerContextCallback";
    if callback.is_none() {
        m.null_parameter(DDI, "EvtIoInCallerContext");
        return;
    }
    let _ = with_init(m, DDI, init, |i| i.in_caller = callback);
}

/// `WdfDeviceCreate`.
///
/// # Safety
/// The DDI's contract.
pub(crate) unsafe fn device_create(
    m: &Arc<Inner>,
    init: *mut PWDFDEVICE_INIT,
    attributes: PWDF_OBJECT_ATTRIBUTES,
    device: *mut WDFDEVICE,
) -> NTSTATUS {
    const DDI: &str = "WdfDeviceCreate";
    if init.is_null() || device.is_null() {
        m.null_parameter(DDI, "DeviceInit or Device");
        return wdk_sys::STATUS_INVALID_PARAMETER;
    }
    // SAFETY: the driver's in/out pointer to its init structure.
    let init_value = unsafe { init.read() };
    // SAFETY: the driver's attributes (or null).
    let attributes = match unsafe { objects::read_attributes(m, DDI, attributes) } {
        Ok(a) => a,
        Err(status) => return status,
    };
    if attributes.parent.is_some() {
        m.violation(format!(
            "verifier: {DDI}: a device's parent is always the driver (ParentObject must be NULL)"
        ));
        return crate::verifier::status::WDF_PARENT_ASSIGNMENT_NOT_ALLOWED;
    }
    let fx = m.fx.lock();
    let Some(record) = fx.inits.get(&(init_value as usize)) else {
        drop(fx);
        m.bug_check(
            WDF_VIOLATION,
            format!("{DDI}: *DeviceInit {init_value:p} is not a live WDFDEVICE_INIT"),
        );
        return wdk_sys::STATUS_INVALID_PARAMETER;
    };
    if record.created.is_some() {
        drop(fx);
        m.violation(format!(
            "verifier: {DDI}: this WDFDEVICE_INIT already created a device"
        ));
        return wdk_sys::STATUS_INVALID_DEVICE_STATE;
    }
    if !record.control && record.filter && record.calls > 0 && record.pnp.is_some() {
        // Fine: WdfFdoInitSetFilter counted as the first call below.
    }
    if let Some(name) = &record.name
        && fx.names.contains_key(name)
    {
        drop(fx);
        return wdk_sys::STATUS_OBJECT_NAME_COLLISION;
    }
    drop(fx);
    if m.faults.fail(DDI) {
        return wdk_sys::STATUS_INSUFFICIENT_RESOURCES;
    }
    let mut fx = m.fx.lock();
    let Some(driver) = fx.driver else {
        drop(fx);
        m.violation(format!("verifier: {DDI} before WdfDriverCreate"));
        return wdk_sys::STATUS_INVALID_DEVICE_STATE;
    };
    let record = fx.inits.get(&(init_value as usize)).expect("checked above");
    let control = record.control;
    let object = DeviceObj {
        control,
        filter: record.filter,
        pnp: record.pnp.unwrap_or_else(|| {
            // SAFETY: the callbacks structure is a size and optional function pointers:
            // all-zero bytes are "no callbacks".
            unsafe { std::mem::zeroed() }
        }),
        io_type: record.io_type,
        exclusive: record.exclusive,
        name: record.name.clone(),
        sddl: record.sddl.clone(),
        link: None,
        file_config: record.file_config,
        in_caller: record.in_caller,
        pdo: record.pdo,
        wdm: 0,
        initializing: control,
        default_queue: None,
        queues: Vec::new(),
        open_handles: 0,
        delete_pending: false,
    };
    let name = object.name.clone();
    // Every device is disposed at PASSIVE_LEVEL; its execution level is what its children
    // (queues, file objects) inherit.
    let handle = fx.insert(Kind::Device(Box::new(object)), &attributes, Some(driver));
    let wdm = WdmDevice::new(name.clone().unwrap_or_default());
    let address = wdm.address();
    fx.wdm_devices.insert(address, wdm);
    if let Some(Object {
        kind: Kind::Device(d),
        ..
    }) = fx.get_mut(handle)
    {
        d.wdm = address;
    }
    if let Some(name) = name {
        fx.names.insert(name, handle);
    }
    if let Some(record) = fx.inits.get_mut(&(init_value as usize)) {
        record.created = Some(handle);
    }
    if control {
        // The driver's structure is the framework's now; the driver's pointer is cleared.
        fx.inits.remove(&(init_value as usize));
    }
    drop(fx);
    // SAFETY: the driver's in/out pointer: the framework owns the structure now.
    unsafe { init.write(std::ptr::null_mut()) };
    // SAFETY: the driver's out-parameter.
    unsafe { device.write(handle as WDFDEVICE) };
    wdk_sys::STATUS_SUCCESS
}

/// The live device behind `device`, or a bug check.
pub(crate) fn with_device<R>(
    m: &Inner,
    ddi: &str,
    device: WDFDEVICE,
    f: impl FnOnce(&mut Fx, Handle) -> R,
) -> Option<R> {
    let handle = device as Handle;
    let mut fx = m.fx.lock();
    match fx.get(handle) {
        Some(Object {
            kind: Kind::Device(_),
            ..
        }) => Some(f(&mut fx, handle)),
        _ => {
            m.invalid_handle(fx, ddi, handle, "WDFDEVICE");
            None
        }
    }
}

kind_data! {
    /// The device data of `handle` (which must be a device).
    pub(crate) fn device_mut -> Device(DeviceObj)
}

/// `WdfDeviceCreateSymbolicLink`.
///
/// # Safety
/// The DDI's contract.
pub(crate) unsafe fn create_symbolic_link(
    m: &Arc<Inner>,
    device: WDFDEVICE,
    name: PCUNICODE_STRING,
) -> NTSTATUS {
    const DDI: &str = "WdfDeviceCreateSymbolicLink";
    // SAFETY: the driver's link name.
    let Some(link) = (unsafe { read_unicode(name) }) else {
        m.null_parameter(DDI, "SymbolicLinkName");
        return wdk_sys::STATUS_INVALID_PARAMETER;
    };
    if link.is_empty() {
        return wdk_sys::STATUS_INVALID_DEVICE_REQUEST;
    }
    if m.faults.fail(DDI) {
        return wdk_sys::STATUS_INSUFFICIENT_RESOURCES;
    }
    with_device(m, DDI, device, |fx, handle| {
        let d = device_mut(fx, handle).expect("a device");
        if d.name.is_none() {
            // IoCreateSymbolicLink to a device without a name.
            return wdk_sys::STATUS_INVALID_DEVICE_STATE;
        }
        if d.link.is_some() {
            return wdk_sys::STATUS_INVALID_DEVICE_REQUEST;
        }
        let key = link.to_ascii_lowercase();
        if fx.links.contains_key(&key) {
            return wdk_sys::STATUS_OBJECT_NAME_COLLISION;
        }
        fx.links.insert(key, handle);
        device_mut(fx, handle).expect("a device").link = Some(link);
        wdk_sys::STATUS_SUCCESS
    })
    .unwrap_or(wdk_sys::STATUS_INVALID_PARAMETER)
}

/// `WdfDeviceWdmGetDeviceObject`.
///
/// # Safety
/// The DDI's contract.
pub(crate) unsafe fn wdm_get_device_object(m: &Arc<Inner>, device: WDFDEVICE) -> PDEVICE_OBJECT {
    with_device(m, "WdfDeviceWdmGetDeviceObject", device, |fx, handle| {
        device_mut(fx, handle).expect("a device").wdm as PDEVICE_OBJECT
    })
    .unwrap_or(std::ptr::null_mut())
}

/// `WdfControlFinishInitializing`.
///
/// # Safety
/// The DDI's contract.
pub(crate) unsafe fn control_finish_initializing(m: &Arc<Inner>, device: WDFDEVICE) {
    const DDI: &str = "WdfControlFinishInitializing";
    let problem = with_device(m, DDI, device, |fx, handle| {
        let d = device_mut(fx, handle).expect("a device");
        if !d.control {
            return Some("the device is not a control device");
        }
        d.initializing = false;
        None
    })
    .flatten();
    if let Some(problem) = problem {
        m.violation(format!("verifier: {DDI}: {problem}"));
    }
}

/// `WdfFdoQueryForInterface`: `IRP_MN_QUERY_INTERFACE` to the stack below the filter.
///
/// # Safety
/// The DDI's contract.
pub(crate) unsafe fn fdo_query_for_interface(
    m: &Arc<Inner>,
    fdo: WDFDEVICE,
    interface_type: LPCGUID,
    interface: PINTERFACE,
    size: USHORT,
    version: USHORT,
    specific: PVOID,
) -> NTSTATUS {
    const DDI: &str = "WdfFdoQueryForInterface";
    if interface_type.is_null() || interface.is_null() {
        m.null_parameter(DDI, "InterfaceType or Interface");
        return wdk_sys::STATUS_INVALID_PARAMETER;
    }
    let pdo = with_device(m, DDI, fdo, |fx, handle| {
        let d = device_mut(fx, handle).expect("a device");
        if d.control { None } else { d.pdo }
    });
    let Some(pdo) = pdo else {
        return wdk_sys::STATUS_INVALID_PARAMETER;
    };
    let Some(pdo) = pdo else {
        m.violation(format!(
            "verifier: {DDI} on a device that is not an FDO (a control device has no stack)"
        ));
        return wdk_sys::STATUS_INVALID_DEVICE_REQUEST;
    };
    if m.faults.fail(DDI) {
        // The query IRP could not be allocated.
        return wdk_sys::STATUS_INSUFFICIENT_RESOURCES;
    }
    // SAFETY: checked non-null; the driver's GUID.
    let guid = Guid::from(unsafe { &*interface_type });
    let Some(lower) = crate::pnp::lower_of(m, pdo) else {
        return wdk_sys::STATUS_NO_SUCH_DEVICE;
    };
    m.count("interface queries");
    let query = InterfaceQuery {
        guid,
        size,
        version,
        interface: interface.cast(),
        specific,
        convention: m.convention(),
    };
    // SAFETY: `interface` is `size` writable bytes beginning with an INTERFACE header (the
    // DDI's contract).
    unsafe { lower.query_interface(&query) }
}

/// What a device does when it is disposed: a queue stops and cancels what waits in it; a
/// device deletes its WDM device object (its name leaves the namespace) and its symbolic link.
pub(crate) fn dispose_kind(m: &Arc<Inner>, handle: Handle) {
    let held = matches!(
        m.fx.lock().get(handle),
        Some(Object {
            kind: Kind::WaitLock(owner),
            ..
        }) if *owner != 0
    );
    if held {
        m.violation(format!(
            "verifier: WDFWAITLOCK {handle:#x} deleted while a thread holds it"
        ));
        return;
    }
    let is_queue = matches!(
        m.fx.lock().get(handle),
        Some(Object {
            kind: Kind::Queue(_),
            ..
        })
    );
    if is_queue {
        crate::io::dispose_queue(m, handle);
        return;
    }
    let mut fx = m.fx.lock();
    let Some(d) = device_mut(&mut fx, handle) else {
        return;
    };
    let (name, link, wdm) = (d.name.take(), d.link.take(), d.wdm);
    if let Some(name) = name
        && fx.names.get(&name) == Some(&handle)
    {
        fx.names.remove(&name);
    }
    if let Some(link) = link {
        fx.links.remove(&link.to_ascii_lowercase());
    }
    delete_wdm_device(&mut fx, wdm);
}

/// `IoDeleteDevice`: the device object goes once nothing references it.
pub(crate) fn delete_wdm_device(fx: &mut Fx, address: usize) {
    if let Some(wdm) = fx.wdm_devices.get_mut(&address) {
        wdm.deleted = true;
        if wdm.refs == 0 {
            fx.wdm_devices.remove(&address);
        }
    }
}

/// What goes with an object's memory: nothing the framework keeps for it may outlive it.
pub(crate) fn destroy_kind(fx: &mut Fx, handle: Handle, object: &Object) {
    if let Kind::Device(d) = &object.kind {
        if let Some(name) = &d.name
            && fx.names.get(name) == Some(&handle)
        {
            fx.names.remove(name);
        }
        if let Some(link) = &d.link {
            fx.links.remove(&link.to_ascii_lowercase());
        }
        delete_wdm_device(fx, d.wdm);
    }
}

/// `WdfObjectDelete` of a control device with handles open (KMDF's legacy-device path): the
/// WDM device object is deleted now (no new opens), the framework object at the last close.
/// Returns whether the deletion was deferred.
pub(crate) fn control_device_delete_deferred(m: &Arc<Inner>, handle: Handle) -> bool {
    let mut fx = m.fx.lock();
    let Some(d) = device_mut(&mut fx, handle) else {
        return false;
    };
    if !d.control || d.open_handles == 0 || d.delete_pending {
        return d.delete_pending;
    }
    d.delete_pending = true;
    let (name, wdm) = (d.name.clone(), d.wdm);
    if let Some(name) = name
        && fx.names.get(&name) == Some(&handle)
    {
        fx.names.remove(&name);
    }
    if let Some(w) = fx.wdm_devices.get_mut(&wdm) {
        w.deleted = true;
    }
    drop(fx);
    m.count("control device deletions deferred to the last close");
    true
}

/// A handle of a control device closed (or a create failed): the last one completes a
/// deletion the driver asked for while handles were open.
pub(crate) fn handle_closed(m: &Arc<Inner>, device: Handle) {
    let destroy = {
        let mut fx = m.fx.lock();
        let Some(d) = device_mut(&mut fx, device) else {
            return;
        };
        d.open_handles = d.open_handles.saturating_sub(1);
        d.open_handles == 0 && d.delete_pending
    };
    if destroy {
        objects::delete(m, device);
    }
}

/// Whether `device` is live and accepting opens, and the state opens need.
pub(crate) fn live(fx: &Fx, handle: Handle) -> bool {
    fx.get(handle).is_some_and(|o| o.life == Life::Live)
}

/// What a test can see of a device the driver created.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    /// The `WDFDEVICE`.
    pub handle: usize,
    /// A control device (else a filter FDO).
    pub control: bool,
    /// `WdfFdoInitSetFilter` was called.
    pub filter: bool,
    /// Its name (`\Device\…`), while it is in the namespace.
    pub name: Option<String>,
    /// Its symbolic link.
    pub link: Option<String>,
    /// The SDDL string of a control device.
    pub sddl: Option<String>,
    /// `WdfDeviceInitSetExclusive`.
    pub exclusive: bool,
    /// `WdfDeviceInitSetIoType`'s value.
    pub io_type: i32,
    /// The file-object class of `WdfDeviceInitSetFileObjectConfig`, if any.
    pub file_object_class: Option<i32>,
    /// Whether it has `EvtIoInCallerContext`.
    pub in_caller_context: bool,
    /// Its queues: (default, dispatch type, power-managed).
    pub queues: Vec<(bool, &'static str, bool)>,
    /// Handles open on it.
    pub open_handles: usize,
    /// Deleted by the driver, waiting for its last handle.
    pub delete_pending: bool,
    /// The WDM device object's address.
    pub wdm: usize,
}

/// Every device the driver has now.
pub(crate) fn devices(m: &Inner) -> Vec<DeviceInfo> {
    let fx = m.fx.lock();
    let mut all: Vec<DeviceInfo> = fx
        .objects
        .iter()
        .filter_map(|(h, o)| match &o.kind {
            Kind::Device(d) => Some(DeviceInfo {
                handle: *h,
                control: d.control,
                filter: d.filter,
                name: d.name.clone(),
                link: d.link.clone(),
                sddl: d.sddl.clone(),
                exclusive: d.exclusive,
                io_type: d.io_type,
                file_object_class: d.file_config.map(|(c, _)| c.FileObjectClass),
                in_caller_context: d.in_caller.is_some(),
                queues: d
                    .queues
                    .iter()
                    .filter_map(|q| match fx.get(*q).map(|o| &o.kind) {
                        Some(Kind::Queue(q)) => {
                            Some((q.default, q.dispatch.name(), q.power_managed))
                        }
                        _ => None,
                    })
                    .collect(),
                open_handles: d.open_handles,
                delete_pending: d.delete_pending,
                wdm: d.wdm,
            }),
            _ => None,
        })
        .collect();
    all.sort_by_key(|d| d.handle);
    all
}
