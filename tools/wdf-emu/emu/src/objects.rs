//! The framework's object tree: handles, parents and children, typed contexts, tagged
//! references, and deletion as KMDF does it (`fxobjectstatemachine.cpp`):
//!
//! * deleting an object disposes its children first, depth first, so every child's
//!   `EvtCleanupCallback` has returned before its parent's is called;
//! * an object keeps its memory (and its handle stays valid) while references are held; when
//!   the last one goes, `EvtDestroyCallback` runs and the contexts are freed;
//! * an object whose disposal must happen at PASSIVE_LEVEL (a device, anything with the
//!   passive execution level) that is deleted at DISPATCH_LEVEL is disposed later by a system
//!   work item;
//! * the driver may delete only what it may delete: not a PnP device, not the driver object, not
//!   a request the framework delivered, not a file object (KMDF's `NoDeleteDDI`).
//!
//! Handles are never reused, so a handle used after its object is gone is recognised, and the
//! message says what happened to it (the "graveyard").

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

use wdk_sys::{
    LONG, NTSTATUS, PCCH, PCUNICODE_STRING, PCWDF_OBJECT_CONTEXT_TYPE_INFO, PDRIVER_OBJECT,
    PFN_WDF_DRIVER_DEVICE_ADD, PFN_WDF_DRIVER_UNLOAD, PFN_WDF_OBJECT_CONTEXT_CLEANUP,
    PFN_WDF_OBJECT_CONTEXT_DESTROY, PVOID, PWDF_DRIVER_CONFIG, PWDF_OBJECT_ATTRIBUTES,
    WDF_DRIVER_CONFIG, WDF_OBJECT_ATTRIBUTES, WDF_OBJECT_CONTEXT_TYPE_INFO, WDFDRIVER, WDFOBJECT,
    WDFWAITLOCK,
};
use wv_ci::Convention;
use wv_hal::Irql;
use wv_host::kernel;

use crate::devices::{DeviceInit, DeviceObj, WdmDevice};
use crate::io::QueueObj;
use crate::machine::Inner;
use crate::requests::RequestObj;
use crate::verifier::{WDF_VIOLATION, status};

/// A framework handle value.
pub type Handle = usize;

/// The driver object's data.
#[derive(Clone, Copy)]
pub(crate) struct DriverObj {
    pub device_add: PFN_WDF_DRIVER_DEVICE_ADD,
    pub unload: PFN_WDF_DRIVER_UNLOAD,
}

/// What an object is.
pub(crate) enum Kind {
    Driver(DriverObj),
    Device(Box<DeviceObj>),
    Queue(Box<QueueObj>),
    Request(Box<RequestObj>),
    File,
    /// A wait lock: the thread number holding it (0 when free).
    WaitLock(u64),
}

impl Kind {
    /// The handle type's name, for messages.
    pub fn name(&self) -> &'static str {
        match self {
            Kind::Driver(_) => "WDFDRIVER",
            Kind::Device(_) => "WDFDEVICE",
            Kind::Queue(_) => "WDFQUEUE",
            Kind::Request(_) => "WDFREQUEST",
            Kind::File => "WDFFILEOBJECT",
            Kind::WaitLock(_) => "WDFWAITLOCK",
        }
    }
}

/// Where an object is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Life {
    Live,
    /// Deleted; its disposal has not finished (it may wait for a PASSIVE_LEVEL worker, or for
    /// the last handle of a control device).
    Deleting,
    /// Cleanup done; the memory stays while references are held.
    Disposed,
}

/// A typed context: zero-filled memory of the context type's size, 16-byte aligned
/// (`MEMORY_ALLOCATION_ALIGNMENT`).
pub(crate) struct Context {
    unique: usize,
    memory: Box<[u128]>,
}

/// A tagged reference (`WdfObjectReferenceActual`).
#[derive(Clone, Debug)]
pub(crate) struct Tag {
    pub tag: usize,
    pub line: i32,
    pub file: String,
}

/// One framework object.
pub(crate) struct Object {
    pub kind: Kind,
    pub parent: Option<Handle>,
    pub children: Vec<Handle>,
    pub life: Life,
    /// The creation reference (until disposal), tagged references, and the framework's own.
    pub refs: usize,
    pub tags: Vec<Tag>,
    pub contexts: Vec<Context>,
    pub cleanup: PFN_WDF_OBJECT_CONTEXT_CLEANUP,
    pub destroy: PFN_WDF_OBJECT_CONTEXT_DESTROY,
    /// Its execution level is PASSIVE_LEVEL: it is disposed at PASSIVE_LEVEL.
    pub passive: bool,
    /// The driver may not `WdfObjectDelete` it.
    pub no_delete: bool,
}

/// Parsed `WDF_OBJECT_ATTRIBUTES`.
#[derive(Clone, Copy, Default)]
pub(crate) struct Attributes {
    pub cleanup: PFN_WDF_OBJECT_CONTEXT_CLEANUP,
    pub destroy: PFN_WDF_OBJECT_CONTEXT_DESTROY,
    /// `Some(true)` passive, `Some(false)` dispatch, `None` inherit.
    pub passive: Option<bool>,
    pub parent: Option<Handle>,
    pub context: Option<(usize, usize)>,
}

/// The object table's hasher. Handles are distinct multiples of 16 from one counter (never
/// reused), so a multiply spreads them well, where the default SipHash would cost a hundred
/// instructions on every DDI's handle lookup.
#[derive(Default)]
pub(crate) struct HandleHasher(u64);

impl Hasher for HandleHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(byte)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }

    fn write_usize(&mut self, value: usize) {
        // Folded so that both ends carry the handle's counter: hashbrown takes the bucket from
        // the low bits and the tag from the top seven.
        let product = (value as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        self.0 = product ^ (product >> 32);
    }
}

/// [`HandleHasher`] for the maps keyed by handle.
pub(crate) type Handles = BuildHasherDefault<HandleHasher>;

/// What became of an object, as the graveyard keeps it (text only when a message needs it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fate {
    Disposed,
    ReleasedByLastReference,
    CompletedByTheFramework,
    /// Completed by the driver through this DDI.
    CompletedBy(&'static str),
}

impl std::fmt::Display for Fate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Fate::Disposed => f.write_str("disposed"),
            Fate::ReleasedByLastReference => f.write_str("released by its last reference"),
            Fate::CompletedByTheFramework => f.write_str("completed by the framework"),
            Fate::CompletedBy(ddi) => write!(f, "completed by {ddi}"),
        }
    }
}

/// A handle that no longer exists: its object's kind and fate.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Grave {
    pub kind: &'static str,
    pub fate: Fate,
}

impl std::fmt::Display for Grave {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "this {} was {}", self.kind, self.fate)
    }
}

/// The framework's state.
#[derive(Default)]
pub(crate) struct Fx {
    pub objects: HashMap<Handle, Object, Handles>,
    next: usize,
    pub driver: Option<Handle>,
    /// `PWDFDEVICE_INIT` values handed out and not consumed.
    pub inits: HashMap<usize, DeviceInit>,
    /// The object namespace: device names (`\Device\X`) → device.
    pub names: HashMap<String, Handle>,
    /// Symbolic links (`\DosDevices\X`) → device.
    pub links: HashMap<String, Handle>,
    /// WDM device objects by address.
    pub wdm_devices: HashMap<usize, WdmDevice>,
    /// What became of handles that no longer exist.
    pub graveyard: HashMap<Handle, Grave, Handles>,
}

impl Fx {
    /// A fresh handle value (never 0, never reused, aligned like a pool pointer).
    pub fn next_handle(&mut self) -> Handle {
        self.next += 1;
        0x0000_7e00_0000_0000 + self.next * 0x10
    }

    /// Adds an object.
    pub fn insert(
        &mut self,
        kind: Kind,
        attributes: &Attributes,
        parent: Option<Handle>,
    ) -> Handle {
        let handle = self.next_handle();
        self.insert_at(handle, kind, attributes, parent);
        handle
    }

    /// Adds an object under a handle from [`Fx::next_handle`].
    pub fn insert_at(
        &mut self,
        handle: Handle,
        kind: Kind,
        attributes: &Attributes,
        parent: Option<Handle>,
    ) {
        let inherited = parent
            .and_then(|p| self.objects.get(&p))
            .is_some_and(|p| p.passive);
        let passive = attributes.passive.unwrap_or(inherited);
        let contexts = attributes
            .context
            .map(|(unique, size)| Context {
                unique,
                memory: vec![0u128; size.div_ceil(16).max(1)].into_boxed_slice(),
            })
            .into_iter()
            .collect();
        let no_delete = match &kind {
            Kind::Driver(_) | Kind::File => true,
            Kind::Device(d) => !d.control,
            Kind::Request(_) => true,
            Kind::Queue(_) | Kind::WaitLock(_) => false,
        };
        self.objects.insert(
            handle,
            Object {
                kind,
                parent,
                children: Vec::new(),
                life: Life::Live,
                refs: 1,
                tags: Vec::new(),
                contexts,
                cleanup: attributes.cleanup,
                destroy: attributes.destroy,
                passive,
                no_delete,
            },
        );
        if let Some(parent) = parent
            && let Some(p) = self.objects.get_mut(&parent)
        {
            p.children.push(handle);
        }
    }

    /// The object, if its handle is valid.
    pub fn get(&self, handle: Handle) -> Option<&Object> {
        self.objects.get(&handle)
    }

    /// The object, if its handle is valid.
    pub fn get_mut(&mut self, handle: Handle) -> Option<&mut Object> {
        self.objects.get_mut(&handle)
    }

    /// Why `handle` is not a valid object: a message for the bug check.
    pub fn invalid(&self, handle: Handle, expected: &str) -> String {
        if handle == 0 {
            return format!("the {expected} handle is NULL (FxPointerNotNull)");
        }
        match (self.objects.get(&handle), self.graveyard.get(&handle)) {
            (Some(object), _) => format!(
                "handle {handle:#x} is a {}, not a {expected} (FxObjectHandleGetPtr)",
                object.kind.name()
            ),
            (None, Some(grave)) => format!("{expected} {handle:#x} no longer exists: {grave}"),
            (None, None) => format!("{handle:#x} is not a handle of this driver ({expected})"),
        }
    }

    /// The handles of every object still in the table, with their kinds.
    pub fn census(&self) -> Vec<(Handle, &'static str, Life, usize)> {
        let mut all: Vec<_> = self
            .objects
            .iter()
            .map(|(h, o)| (*h, o.kind.name(), o.life, o.refs))
            .collect();
        all.sort_unstable();
        all
    }

    /// Whether `handle` or any object below it must be disposed at PASSIVE_LEVEL.
    fn needs_passive(&self, handle: Handle) -> bool {
        let Some(object) = self.objects.get(&handle) else {
            return false;
        };
        object.passive
            || matches!(object.kind, Kind::Device(_) | Kind::Driver(_))
            || object.children.iter().any(|c| self.needs_passive(*c))
    }
}

/// Reads `WDF_OBJECT_ATTRIBUTES` the way `FxValidateObjectAttributes` checks them.
///
/// # Safety
/// `attributes` is null or points to a readable `WDF_OBJECT_ATTRIBUTES`.
pub(crate) unsafe fn read_attributes(
    m: &Inner,
    ddi: &str,
    attributes: *const WDF_OBJECT_ATTRIBUTES,
) -> Result<Attributes, NTSTATUS> {
    // SAFETY: the caller's promise.
    let Some(a) = (unsafe { attributes.as_ref() }) else {
        return Ok(Attributes::default());
    };
    if m.wrong_size(ddi, a, " (WDF_OBJECT_ATTRIBUTES_INIT not used?)") {
        return Err(wdk_sys::STATUS_INFO_LENGTH_MISMATCH);
    }
    use wdk_sys::_WDF_EXECUTION_LEVEL as L;
    use wdk_sys::_WDF_SYNCHRONIZATION_SCOPE as S;
    let passive = match a.ExecutionLevel {
        L::WdfExecutionLevelInheritFromParent => None,
        L::WdfExecutionLevelPassive => Some(true),
        L::WdfExecutionLevelDispatch => Some(false),
        other => {
            m.violation(format!(
                "verifier: {ddi}: ExecutionLevel {other} is invalid (a zero-filled \
                 WDF_OBJECT_ATTRIBUTES: WDF_OBJECT_ATTRIBUTES_INIT sets InheritFromParent)"
            ));
            return Err(status::WDF_OBJECT_ATTRIBUTES_INVALID);
        }
    };
    if !(S::WdfSynchronizationScopeInheritFromParent..=S::WdfSynchronizationScopeNone)
        .contains(&a.SynchronizationScope)
    {
        m.violation(format!(
            "verifier: {ddi}: SynchronizationScope {} is invalid (a zero-filled \
             WDF_OBJECT_ATTRIBUTES)",
            a.SynchronizationScope
        ));
        return Err(status::WDF_OBJECT_ATTRIBUTES_INVALID);
    }
    // SAFETY: the caller's promise covers the type info the attributes point to (a static of
    // the driver).
    let info: Option<&WDF_OBJECT_CONTEXT_TYPE_INFO> = unsafe { a.ContextTypeInfo.as_ref() };
    let context = info.map(|info| {
        let unique = if info.UniqueType.is_null() {
            std::ptr::from_ref(info) as usize
        } else {
            info.UniqueType as usize
        };
        (unique, info.ContextSize.max(a.ContextSizeOverride))
    });
    Ok(Attributes {
        cleanup: a.EvtCleanupCallback,
        destroy: a.EvtDestroyCallback,
        passive,
        parent: (!a.ParentObject.is_null()).then_some(a.ParentObject as Handle),
        context,
    })
}

// ---------------------------------------------------------------------------------------------
// WdfDriverCreate and the driver object

/// `WdfDriverCreate`.
///
/// # Safety
/// The DDI's contract.
pub(crate) unsafe fn driver_create(
    m: &Arc<Inner>,
    driver_object: PDRIVER_OBJECT,
    registry_path: PCUNICODE_STRING,
    attributes: PWDF_OBJECT_ATTRIBUTES,
    config: PWDF_DRIVER_CONFIG,
    driver: *mut WDFDRIVER,
) -> NTSTATUS {
    const DDI: &str = "WdfDriverCreate";
    if driver_object.is_null() || registry_path.is_null() || config.is_null() {
        m.null_parameter(DDI, "DriverObject, RegistryPath or DriverConfig");
        return wdk_sys::STATUS_INVALID_PARAMETER;
    }
    if driver_object != m.driver_object() {
        m.violation(format!(
            "verifier: {DDI}: DriverObject {driver_object:p} is not the one DriverEntry received"
        ));
        return wdk_sys::STATUS_INVALID_PARAMETER;
    }
    // SAFETY: checked non-null; the driver's configuration.
    let config: &WDF_DRIVER_CONFIG = unsafe { &*config };
    if m.wrong_size(DDI, config, "") {
        return wdk_sys::STATUS_INFO_LENGTH_MISMATCH;
    }
    if m.faults.fail(DDI) {
        return wdk_sys::STATUS_INSUFFICIENT_RESOURCES;
    }
    // SAFETY: the driver's attributes (or null).
    let attributes = match unsafe { read_attributes(m, DDI, attributes) } {
        Ok(a) => a,
        Err(status) => return status,
    };
    let mut fx = m.fx.lock();
    if fx.driver.is_some() {
        drop(fx);
        m.violation(format!("verifier: {DDI} called twice"));
        return wdk_sys::STATUS_INVALID_DEVICE_STATE;
    }
    let handle = fx.insert(
        Kind::Driver(DriverObj {
            device_add: config.EvtDriverDeviceAdd,
            unload: config.EvtDriverUnload,
        }),
        &Attributes {
            passive: Some(true),
            ..attributes
        },
        None,
    );
    fx.driver = Some(handle);
    drop(fx);
    crate::table::set_driver(handle);
    // KMDF (`FxDriver::Initialize` and `WdfDriverCreate`): a PnP driver, or one with an
    // EvtDriverUnload, gets the framework's unload routine in its driver object, and its
    // globals ask the FxDriverEntry stub to put its own in front of it (DisplaceDriverUnload);
    // the stub's runs the framework's, then unbinds.
    let legacy = config.DriverInitFlags
        & (wdk_sys::_WDF_DRIVER_INIT_FLAGS::WdfDriverInitNonPnpDriver as u32
            | wdk_sys::_WDF_DRIVER_INIT_FLAGS::WdfDriverInitNoDispatchOverride as u32)
        != 0;
    let displace = !legacy || config.EvtDriverUnload.is_some();
    crate::table::set_displace_driver_unload(displace);
    if displace {
        // SAFETY: the machine's driver object (checked above); DriverEntry is running on this
        // thread and nothing else touches the object.
        unsafe { (*driver_object).DriverUnload = framework_unload_routine(m.convention()) };
    }
    if let Some(out) = std::ptr::NonNull::new(driver) {
        // SAFETY: the driver's out-parameter (optional in the DDI).
        unsafe { out.as_ptr().write(handle as WDFDRIVER) };
    }
    wdk_sys::STATUS_SUCCESS
}

/// The framework's `DRIVER_UNLOAD` routine (KMDF's `FxDriver::Unload`) for a driver of
/// `convention`.
fn framework_unload_routine(convention: Convention) -> wdk_sys::PDRIVER_UNLOAD {
    match convention {
        Convention::System => Some(framework_unload_c),
        Convention::Win64 => Some(
            // SAFETY: only the convention of the pointer's type changes; the I/O manager
            // (`Machine::unload`) calls it back with the driver's, which is the Windows one.
            unsafe {
                std::mem::transmute::<
                    unsafe extern "win64" fn(PDRIVER_OBJECT),
                    unsafe extern "C" fn(PDRIVER_OBJECT),
                >(framework_unload_win64)
            },
        ),
    }
}

/// The framework's unload routine, C convention.
///
/// # Safety
/// Called by the I/O manager (or a stub in front of it) once, at unload.
unsafe extern "C" fn framework_unload_c(_driver: PDRIVER_OBJECT) {
    framework_unload();
}

/// The framework's unload routine, Windows x64 convention.
///
/// # Safety
/// As [`framework_unload_c`].
unsafe extern "win64" fn framework_unload_win64(_driver: PDRIVER_OBJECT) {
    framework_unload();
}

/// `EvtDriverUnload`, then the driver object's deletion (what `FxDriver::Unload` does).
fn framework_unload() {
    let _host = wv_host::kernel::host_scope();
    match crate::machine::current() {
        Some(m) => crate::verifier::unload(&m),
        None => eprintln!("wdf-emu: the framework's unload routine called with no machine"),
    }
}

/// Deletes the framework driver object and everything parented to it (after a failed
/// DriverEntry, and after EvtDriverUnload).
pub(crate) fn delete_driver_object(m: &Arc<Inner>) {
    let driver = m.fx.lock().driver;
    if let Some(driver) = driver {
        delete(m, driver);
        m.fx.lock().driver = None;
    }
    crate::table::set_driver(0);
}

// ---------------------------------------------------------------------------------------------
// Deletion

/// `WdfObjectDelete`.
///
/// # Safety
/// The DDI's contract.
pub(crate) unsafe fn object_delete(m: &Arc<Inner>, object: WDFOBJECT) {
    const DDI: &str = "WdfObjectDelete";
    let handle = object as Handle;
    let fx = m.fx.lock();
    let Some(o) = fx.get(handle) else {
        m.invalid_handle(fx, DDI, handle, "WDFOBJECT");
        return;
    };
    if o.no_delete {
        let name = o.kind.name();
        drop(fx);
        m.bug_check(
            WDF_VIOLATION,
            format!(
                "{DDI}: the driver may not delete this {name} {handle:#x} (the framework owns its \
                 lifetime: NoDeleteDDI)"
            ),
        );
        return;
    }
    let irql = kernel::irql();
    if matches!(o.kind, Kind::Device(_)) && irql != Irql::Passive {
        drop(fx);
        m.violation(format!(
            "verifier: {DDI} of a WDFDEVICE at {}; a device is deleted at PASSIVE_LEVEL",
            irql.name()
        ));
        return;
    }
    drop(fx);
    if crate::devices::control_device_delete_deferred(m, handle) {
        return;
    }
    delete(m, handle);
}

/// Deletes `handle` (the framework's side of `WdfObjectDelete`, or its own deletion of a
/// parent's children, a device's removal, the driver's unload). A second deletion of an object
/// is ignored, as KMDF ignores it.
pub(crate) fn delete(m: &Arc<Inner>, handle: Handle) {
    let mut fx = m.fx.lock();
    let Some(object) = fx.get_mut(handle) else {
        return;
    };
    if object.life != Life::Live {
        return;
    }
    object.life = Life::Deleting;
    let passive = fx.needs_passive(handle);
    drop(fx);
    if passive && kernel::irql() != Irql::Passive {
        m.count("deferred disposals");
        let machine = Arc::clone(m);
        crate::callbacks::queue_system_work(m, "deferred disposal", move || {
            dispose_tree(&machine, handle);
        });
        return;
    }
    dispose_tree(m, handle);
}

/// Disposes `handle` after its children, then drops its creation reference.
fn dispose_tree(m: &Arc<Inner>, handle: Handle) {
    let children = {
        let mut fx = m.fx.lock();
        let Some(object) = fx.get_mut(handle) else {
            return;
        };
        if object.life == Life::Disposed {
            return;
        }
        object.life = Life::Deleting;
        object.children.clone()
    };
    for child in children {
        dispose_tree(m, child);
    }
    // What the object itself does when it goes (a queue cancels what waits in it, a device
    // deletes its WDM device object).
    crate::devices::dispose_kind(m, handle);
    let cleanup = {
        let mut fx = m.fx.lock();
        fx.get_mut(handle).and_then(|o| o.cleanup.take())
    };
    if let Some(cleanup) = cleanup {
        let at = kernel::irql();
        crate::callbacks::frame(m, "EvtCleanupCallback", at, || {
            // SAFETY: the driver's cleanup callback for this object, called once with its
            // handle while the object is still valid.
            unsafe {
                crate::callbacks::object_callback(m.convention(), cleanup, handle as WDFOBJECT)
            }
        });
    }
    {
        let mut fx = m.fx.lock();
        if let Some(object) = fx.get_mut(handle) {
            object.life = Life::Disposed;
        }
    }
    release(m, handle, Fate::Disposed);
}

/// Drops one reference; the last one destroys the object.
pub(crate) fn release(m: &Arc<Inner>, handle: Handle, fate: Fate) {
    let (destroy, contexts) = {
        let mut fx = m.fx.lock();
        let Some(object) = fx.get_mut(handle) else {
            return;
        };
        object.refs = object.refs.saturating_sub(1);
        if object.refs > 0 || object.life != Life::Disposed {
            return;
        }
        let object = fx.objects.remove(&handle).expect("present above");
        if let Some(parent) = object.parent
            && let Some(p) = fx.get_mut(parent)
        {
            p.children.retain(|c| *c != handle);
        }
        fx.graveyard.insert(
            handle,
            Grave {
                kind: object.kind.name(),
                fate,
            },
        );
        crate::devices::destroy_kind(&mut fx, handle, &object);
        (object.destroy, object.contexts)
    };
    if let Some(destroy) = destroy {
        let at = kernel::irql();
        crate::callbacks::frame(m, "EvtDestroyCallback", at, || {
            // SAFETY: the driver's destroy callback, called once, before the contexts are
            // freed.
            unsafe {
                crate::callbacks::object_callback(m.convention(), destroy, handle as WDFOBJECT)
            }
        });
    }
    drop(contexts);
}

// ---------------------------------------------------------------------------------------------
// References and contexts

/// `WdfObjectReferenceActual`.
///
/// # Safety
/// The DDI's contract.
pub(crate) unsafe fn reference(
    m: &Arc<Inner>,
    object: WDFOBJECT,
    tag: PVOID,
    line: LONG,
    file: PCCH,
) {
    const DDI: &str = "WdfObjectReferenceActual";
    let handle = object as Handle;
    let file = if file.is_null() {
        String::new()
    } else {
        // SAFETY: the driver passes a NUL-terminated file name (or null).
        unsafe { std::ffi::CStr::from_ptr(file) }
            .to_string_lossy()
            .into_owned()
    };
    let mut fx = m.fx.lock();
    let Some(o) = fx.get_mut(handle) else {
        m.invalid_handle(fx, DDI, handle, "WDFOBJECT");
        return;
    };
    if o.life == Life::Disposed {
        drop(fx);
        m.violation(format!(
            "verifier: {DDI} on {handle:#x}, which is already disposed: a reference must be \
             taken while the object is alive"
        ));
        return;
    }
    o.refs += 1;
    o.tags.push(Tag {
        tag: tag as usize,
        line,
        file,
    });
}

/// `WdfObjectDereferenceActual`.
///
/// # Safety
/// The DDI's contract.
pub(crate) unsafe fn dereference(
    m: &Arc<Inner>,
    object: WDFOBJECT,
    tag: PVOID,
    line: LONG,
    file: PCCH,
) {
    const DDI: &str = "WdfObjectDereferenceActual";
    let _ = (line, file);
    let handle = object as Handle;
    let mut fx = m.fx.lock();
    let Some(o) = fx.get_mut(handle) else {
        m.invalid_handle(fx, DDI, handle, "WDFOBJECT");
        return;
    };
    let Some(at) = o.tags.iter().position(|t| t.tag == tag as usize) else {
        drop(fx);
        m.bug_check(
            WDF_VIOLATION,
            format!(
                "{DDI}: tag {:p} was never referenced on {handle:#x} (a dereference without its \
                 reference: the object would be freed under its other users)",
                tag
            ),
        );
        return;
    };
    o.tags.remove(at);
    drop(fx);
    release(m, handle, Fate::ReleasedByLastReference);
}

/// What `WdfObjectGetTypedContextWorker` returns when it cannot answer: a zero-filled block
/// (the caller would otherwise dereference NULL; the machine is already marked dead).
pub(crate) fn inert_context() -> PVOID {
    static INERT: [u128; 1024] = [0; 1024];
    INERT.as_ptr().cast_mut().cast()
}

/// `WdfObjectGetTypedContextWorker`.
///
/// # Safety
/// The DDI's contract.
pub(crate) unsafe fn typed_context(
    m: &Arc<Inner>,
    object: WDFOBJECT,
    type_info: PCWDF_OBJECT_CONTEXT_TYPE_INFO,
) -> PVOID {
    const DDI: &str = "WdfObjectGetTypedContextWorker";
    let handle = object as Handle;
    if handle == 0 {
        m.null_parameter(DDI, "Handle");
        return inert_context();
    }
    // SAFETY: the driver's static type descriptor.
    let Some(info) = (unsafe { type_info.as_ref() }) else {
        m.null_parameter(DDI, "TypeInfo");
        return inert_context();
    };
    let unique = if info.UniqueType.is_null() {
        std::ptr::from_ref(info) as usize
    } else {
        info.UniqueType as usize
    };
    let mut fx = m.fx.lock();
    let Some(o) = fx.get_mut(handle) else {
        m.invalid_handle(fx, DDI, handle, "WDFOBJECT");
        return inert_context();
    };
    match o.contexts.iter_mut().find(|c| c.unique == unique) {
        Some(context) => context.memory.as_mut_ptr().cast(),
        // KMDF answers NULL for a context type the object does not have.
        None => std::ptr::null_mut(),
    }
}

// ---------------------------------------------------------------------------------------------
// Wait locks

/// `WdfWaitLockCreate`.
///
/// # Safety
/// The DDI's contract.
pub(crate) unsafe fn wait_lock_create(
    m: &Arc<Inner>,
    attributes: PWDF_OBJECT_ATTRIBUTES,
    lock: *mut WDFWAITLOCK,
) -> NTSTATUS {
    const DDI: &str = "WdfWaitLockCreate";
    if lock.is_null() {
        m.null_parameter(DDI, "Lock");
        return wdk_sys::STATUS_INVALID_PARAMETER;
    }
    // SAFETY: the driver's attributes (or null).
    let attributes = match unsafe { read_attributes(m, DDI, attributes) } {
        Ok(a) => a,
        Err(status) => return status,
    };
    if m.faults.fail(DDI) {
        return wdk_sys::STATUS_INSUFFICIENT_RESOURCES;
    }
    let mut fx = m.fx.lock();
    // Without a parent, the driver object is the parent.
    let Some(parent) = attributes.parent.or(fx.driver) else {
        drop(fx);
        m.violation(format!(
            "verifier: {DDI} before WdfDriverCreate (no parent for the lock)"
        ));
        return wdk_sys::STATUS_INVALID_DEVICE_STATE;
    };
    if fx.get(parent).is_none() {
        m.invalid_handle(fx, DDI, parent, "parent WDFOBJECT");
        return wdk_sys::STATUS_INVALID_PARAMETER;
    }
    let handle = fx.insert(Kind::WaitLock(0), &attributes, Some(parent));
    drop(fx);
    // SAFETY: the driver's out-parameter.
    unsafe { lock.write(handle as WDFWAITLOCK) };
    wdk_sys::STATUS_SUCCESS
}

kind_data! {
    /// The owner of the wait lock `handle` (which must be a wait lock).
    fn wait_lock_owner -> WaitLock(u64)
}

/// `WdfWaitLockAcquire`: the lock is taken inside a critical region, as the framework does.
///
/// # Safety
/// The DDI's contract.
pub(crate) unsafe fn wait_lock_acquire(
    m: &Arc<Inner>,
    lock: WDFWAITLOCK,
    timeout: *mut i64,
) -> NTSTATUS {
    const DDI: &str = "WdfWaitLockAcquire";
    let handle = lock as Handle;
    // SAFETY: the driver's optional timeout (relative, 100 ns units, when negative).
    let timeout = unsafe { timeout.as_ref() }.copied();
    let irql = kernel::irql();
    if irql != Irql::Passive && timeout != Some(0) {
        m.violation(format!(
            "verifier: {DDI} at {} with {}: only a zero timeout may be used above PASSIVE_LEVEL \
             (IRQL rule)",
            irql.name(),
            if timeout.is_some() {
                "a timeout"
            } else {
                "no timeout"
            }
        ));
        return wdk_sys::STATUS_INVALID_DEVICE_REQUEST;
    }
    let me = crate::wdm::thread_number();
    let limit =
        timeout.map(|t| std::time::Duration::from_nanos(t.unsigned_abs().saturating_mul(100)));
    let start = std::time::Instant::now();
    let mut guard = m.events.0.lock();
    loop {
        {
            let mut fx = m.fx.lock();
            let Some(owner) = wait_lock_owner(&mut fx, handle) else {
                let message = fx.invalid(handle, "WDFWAITLOCK");
                drop(fx);
                drop(guard);
                m.bug_check(WDF_VIOLATION, format!("{DDI}: {message}"));
                return wdk_sys::STATUS_INVALID_PARAMETER;
            };
            if *owner == me {
                drop(fx);
                drop(guard);
                m.bug_check(
                    crate::verifier::DRIVER_VERIFIER_DETECTED_VIOLATION,
                    format!("{DDI}: WDFWAITLOCK {handle:#x} acquired again by the thread that holds it (deadlock)"),
                );
                return wdk_sys::STATUS_TIMEOUT;
            }
            if *owner == 0 {
                *owner = me;
                crate::wdm::set_critical_regions(crate::wdm::critical_regions() + 1);
                m.count("wait lock acquisitions");
                return wdk_sys::STATUS_SUCCESS;
            }
        }
        if limit.is_some_and(|l| start.elapsed() >= l) {
            return wdk_sys::STATUS_TIMEOUT;
        }
        if m.is_deterministic() {
            drop(guard);
            if !m.platform.run_one() {
                m.bug_check(
                    crate::verifier::DRIVER_VERIFIER_DETECTED_VIOLATION,
                    format!("{DDI}: WDFWAITLOCK {handle:#x} is held and nothing queued can release it (deadlock)"),
                );
                return wdk_sys::STATUS_TIMEOUT;
            }
            guard = m.events.0.lock();
            continue;
        }
        if start.elapsed() > m.config.hang_timeout {
            drop(guard);
            m.bug_check(
                crate::verifier::DRIVER_VERIFIER_DETECTED_VIOLATION,
                format!("{DDI}: WDFWAITLOCK {handle:#x} still held by another thread after {:?} (a deadlock)", m.config.hang_timeout),
            );
            return wdk_sys::STATUS_TIMEOUT;
        }
        m.events
            .1
            .wait_for(&mut guard, std::time::Duration::from_millis(50));
    }
}

/// `WdfWaitLockRelease`.
///
/// # Safety
/// The DDI's contract.
pub(crate) unsafe fn wait_lock_release(m: &Arc<Inner>, lock: WDFWAITLOCK) {
    const DDI: &str = "WdfWaitLockRelease";
    let handle = lock as Handle;
    let me = crate::wdm::thread_number();
    {
        let mut fx = m.fx.lock();
        let Some(owner) = wait_lock_owner(&mut fx, handle) else {
            m.invalid_handle(fx, DDI, handle, "WDFWAITLOCK");
            return;
        };
        if *owner != me {
            drop(fx);
            m.bug_check(
                WDF_VIOLATION,
                format!(
                    "{DDI}: WDFWAITLOCK {handle:#x} released by a thread that does not hold it"
                ),
            );
            return;
        }
        *owner = 0;
    }
    crate::wdm::set_critical_regions(crate::wdm::critical_regions() - 1);
    let _guard = m.events.0.lock();
    m.events.1.notify_all();
}
