//! The emulated framework's object model, driven through its own function table as a driver
//! would call it: cleanup callbacks children first, destruction when the last reference goes,
//! disposal deferred to PASSIVE_LEVEL, typed contexts, and the bug checks that must not abort
//! the test process.

use std::ptr::null_mut;
use std::sync::Mutex;

use wdf_emu::table::{WdfDriverGlobals, c};
use wdf_emu::{Machine, MachineConfig};
use wdk_sys::{
    _WDF_EXECUTION_LEVEL, _WDF_SYNCHRONIZATION_SCOPE, NTSTATUS, WDF_DRIVER_CONFIG,
    WDF_OBJECT_ATTRIBUTES, WDF_OBJECT_CONTEXT_TYPE_INFO, WDFDRIVER, WDFOBJECT, WDFWAITLOCK,
};
use wv_hal::Irql;

static EVENTS: Mutex<Vec<(&'static str, usize)>> = Mutex::new(Vec::new());

extern "C" fn cleanup(object: WDFOBJECT) {
    EVENTS.lock().unwrap().push(("cleanup", object as usize));
}

extern "C" fn destroy(object: WDFOBJECT) {
    EVENTS.lock().unwrap().push(("destroy", object as usize));
}

fn globals() -> wdk_sys::PWDF_DRIVER_GLOBALS {
    // SAFETY: read of the pointer the emulation set up; no DDI is changing it.
    unsafe { WdfDriverGlobals }
}

fn load(machine: &Machine) {
    let status = machine.load(wdf_emu::DriverEntry::host(|driver, path| {
        // SAFETY: plain data; zero, then the size.
        let mut config: WDF_DRIVER_CONFIG = unsafe { std::mem::zeroed() };
        config.Size = size_of::<WDF_DRIVER_CONFIG>() as u32;
        let mut handle: WDFDRIVER = null_mut();
        // SAFETY: DriverEntry's arguments, a local configuration.
        unsafe {
            c::WdfDriverCreate(
                globals(),
                driver,
                path,
                null_mut(),
                &mut config,
                &mut handle,
            )
        }
    }));
    assert_eq!(status, 0);
}

fn attributes(parent: WDFOBJECT) -> WDF_OBJECT_ATTRIBUTES {
    // SAFETY: plain data; zero, then what WDF_OBJECT_ATTRIBUTES_INIT sets.
    let mut a: WDF_OBJECT_ATTRIBUTES = unsafe { std::mem::zeroed() };
    a.Size = size_of::<WDF_OBJECT_ATTRIBUTES>() as u32;
    a.ExecutionLevel = _WDF_EXECUTION_LEVEL::WdfExecutionLevelInheritFromParent;
    a.SynchronizationScope = _WDF_SYNCHRONIZATION_SCOPE::WdfSynchronizationScopeInheritFromParent;
    a.ParentObject = parent;
    a.EvtCleanupCallback = Some(cleanup);
    a.EvtDestroyCallback = Some(destroy);
    a
}

fn lock(parent: WDFOBJECT, configure: impl FnOnce(&mut WDF_OBJECT_ATTRIBUTES)) -> WDFOBJECT {
    let mut a = attributes(parent);
    configure(&mut a);
    let mut lock: WDFWAITLOCK = null_mut();
    // SAFETY: initialised attributes, an out-parameter.
    let status: NTSTATUS = unsafe { c::WdfWaitLockCreate(globals(), &mut a, &mut lock) };
    assert_eq!(status, 0);
    lock.cast()
}

#[test]
fn children_are_cleaned_up_first_and_destroyed_at_their_last_reference() {
    let machine = Machine::boot(MachineConfig::default());
    load(&machine);
    EVENTS.lock().unwrap().clear();
    let a = lock(null_mut(), |_| {});
    let b = lock(a, |_| {});
    let c = lock(b, |_| {});
    let tag = 0x5447_4154usize as *mut std::ffi::c_void;
    // SAFETY: a live object; the tag and file name are static.
    unsafe { c::WdfObjectReferenceActual(globals(), b, tag, 1, c"t".as_ptr()) };
    // SAFETY: a live object the test created.
    unsafe { c::WdfObjectDelete(globals(), a) };
    let (a, b, c) = (a as usize, b as usize, c as usize);
    assert_eq!(
        *EVENTS.lock().unwrap(),
        vec![
            ("cleanup", c),
            ("destroy", c),
            ("cleanup", b),
            ("cleanup", a),
            ("destroy", a),
        ],
        "children's cleanup before their parent's; b stays while referenced"
    );
    // SAFETY: the reference taken above, released with its tag.
    unsafe { c::WdfObjectDereferenceActual(globals(), b as WDFOBJECT, tag, 2, c"t".as_ptr()) };
    assert_eq!(EVENTS.lock().unwrap().last(), Some(&("destroy", b)));
    machine.unload().assert_clean();
}

#[test]
fn a_passive_object_deleted_at_dispatch_level_is_disposed_later_at_passive_level() {
    // One thread: on a threaded machine a worker may dispose of the object before this thread
    // looks, so "not yet" could not be observed without a race.
    let machine = Machine::boot(MachineConfig::deterministic());
    load(&machine);
    EVENTS.lock().unwrap().clear();
    let passive = lock(null_mut(), |a| {
        a.ExecutionLevel = _WDF_EXECUTION_LEVEL::WdfExecutionLevelPassive;
    });
    let old = wv_host::kernel::raise_irql(Irql::Dispatch);
    // SAFETY: a live object; WdfObjectDelete may be called at DISPATCH_LEVEL.
    unsafe { c::WdfObjectDelete(globals(), passive) };
    let during = EVENTS.lock().unwrap().len();
    wv_host::kernel::lower_irql(old);
    machine.run_until_idle();
    assert_eq!(during, 0, "nothing disposed at DISPATCH_LEVEL");
    assert_eq!(
        *EVENTS.lock().unwrap(),
        vec![("cleanup", passive as usize), ("destroy", passive as usize)]
    );
    assert_eq!(machine.stat("deferred disposals"), 1);
    machine.unload().assert_clean();
}

/// A context type descriptor in a static (the pointers in it are to statics).
#[repr(transparent)]
struct TypeInfo(WDF_OBJECT_CONTEXT_TYPE_INFO);

// SAFETY: immutable after initialisation; its pointers are to a static string and to itself.
unsafe impl Sync for TypeInfo {}

impl TypeInfo {
    /// The descriptor of a context type `name` of `size` bytes, for a static at `this`: as
    /// `WDF_DECLARE_CONTEXT_TYPE` makes it, the descriptor itself is the type's identity.
    const fn new(name: &'static std::ffi::CStr, size: usize, this: *const TypeInfo) -> Self {
        TypeInfo(WDF_OBJECT_CONTEXT_TYPE_INFO {
            Size: size_of::<WDF_OBJECT_CONTEXT_TYPE_INFO>() as u32,
            ContextName: name.as_ptr(),
            ContextSize: size,
            UniqueType: this.cast(),
            EvtDriverGetUniqueContextType: None,
        })
    }
}

#[test]
fn typed_contexts_and_the_null_handle_bug_check() {
    static MINE: TypeInfo = TypeInfo::new(c"Mine", 24, &raw const MINE);
    static OTHER: TypeInfo = TypeInfo::new(c"Other", 8, &raw const OTHER);
    let mine = &raw const MINE.0;
    let other_type = &raw const OTHER.0;
    let machine = Machine::boot(MachineConfig::default());
    load(&machine);
    let object = lock(null_mut(), |a| a.ContextTypeInfo = mine);
    // SAFETY: a live object and a static type descriptor.
    let context = unsafe { c::WdfObjectGetTypedContextWorker(globals(), object, mine) };
    assert!(
        !context.is_null() && (context as usize).is_multiple_of(16),
        "aligned, present"
    );
    // SAFETY: the context's 24 bytes, alive with the object.
    let bytes = unsafe { std::slice::from_raw_parts(context.cast::<u8>(), 24) };
    assert_eq!(bytes, &[0; 24], "zero-filled");
    // SAFETY: as above, another type.
    let other = unsafe { c::WdfObjectGetTypedContextWorker(globals(), object, other_type) };
    assert!(other.is_null(), "NULL for a type the object does not have");
    assert!(!machine.is_dead());
    // SAFETY: a NULL handle: KMDF's FxPointerNotNull bug check, recorded, not an abort.
    let inert = unsafe { c::WdfObjectGetTypedContextWorker(globals(), null_mut(), mine) };
    assert!(
        !inert.is_null(),
        "an inert block, so the caller does not fault"
    );
    assert!(machine.is_dead());
    let violations = machine.take_violations();
    assert!(
        violations
            .iter()
            .any(|v| v.contains("bug check 0x10d (WDF_VIOLATION)")
                && v.contains("WdfObjectGetTypedContextWorker: Handle is NULL (FxPointerNotNull)")),
        "{violations:?}"
    );
    // SAFETY: a live object.
    unsafe { c::WdfObjectDelete(globals(), object) };
    machine.unload().assert_clean();
}

#[test]
fn an_unimplemented_entry_traps_with_its_index() {
    let machine = Machine::boot(MachineConfig::default());
    load(&machine);
    assert!(!wdf_emu::table::is_implemented(0));
    let entry = wdf_emu::table::C_TABLE[0].expect("every entry is a function");
    // SAFETY: a trap takes no arguments it reads.
    unsafe { entry() };
    let violations = machine.take_violations();
    assert!(
        violations
            .iter()
            .any(|v| v.contains("WdfFunctions_01031[0]") && v.contains("table index 0")),
        "{violations:?}"
    );
    machine.unload().assert_clean();
}
