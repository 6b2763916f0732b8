//! The Windows x64 face of the export tables, as a Windows image mapped into this process
//! (tools/sys-loader) uses it: every entry called with the Windows x64 convention, and every
//! callback handed through such a table — a CQ's completion and error callbacks, a CA event
//! handler, a CM id's callback — called back with it, while a consumer of the system table on
//! the same device keeps getting its own. The entries of the two tables are distinct functions
//! from one definition each.
#![cfg(all(target_arch = "x86_64", not(miri)))]

use std::ffi::c_void;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use wv_ci::base::NTSTATUS;
use wv_ci::ci::*;
use wv_ci::cm::*;
use wv_ci::ib_types::*;
use wv_ci::{CiCmExport, CiExport, Convention};
use wv_hal::CaEventKind;
use wv_host::HostPlatform;
use wv_host::fake_cm::{FakeCm, FakeCmEvent};
use wv_host::fake_verbs::{FakeConfig, FakeVerbs, ObjectKind};

/// A table entry (an `Option<unsafe extern "system" fn(…)>` slot) as the Windows x64 function
/// it is in a table made for `Convention::Win64`.
macro_rules! win64 {
    ($slot:expr; ($($t:ty),*) $(-> $r:ty)?) => {{
        let f: unsafe extern "system" fn($($t),*) $(-> $r)? = $slot.expect("the entry is present");
        // SAFETY: the table was made for a Windows x64 consumer: the slot holds an
        // `extern "win64"` function of this signature.
        unsafe {
            std::mem::transmute::<
                unsafe extern "system" fn($($t),*) $(-> $r)?,
                unsafe extern "win64" fn($($t),*) $(-> $r)?,
            >(f)
        }
    }};
}

static COMPLETIONS: AtomicUsize = AtomicUsize::new(0);
static LAST_CONTEXT: AtomicUsize = AtomicUsize::new(0);
static CQ_ERRORS: AtomicUsize = AtomicUsize::new(0);
static CA_EVENTS_WIN64: AtomicUsize = AtomicUsize::new(0);
static CA_EVENTS_SYSTEM: AtomicUsize = AtomicUsize::new(0);
static CM_EVENTS: AtomicUsize = AtomicUsize::new(0);
static LAST_CM_TYPE: AtomicUsize = AtomicUsize::new(usize::MAX);

/// Checks what each callback recorded (a count, or the last value it saw) once the platform
/// has run them.
fn assert_recorded(expected: &[(&AtomicUsize, usize, &str)]) {
    for &(recorded, value, what) in expected {
        assert_eq!(recorded.load(Ordering::SeqCst), value, "{what}");
    }
}

unsafe extern "win64" fn on_completion(context: *mut c_void) {
    COMPLETIONS.fetch_add(1, Ordering::SeqCst);
    LAST_CONTEXT.store(context as usize, Ordering::SeqCst);
}

unsafe extern "win64" fn on_cq_event(record: *mut ib_event_rec_t) {
    // SAFETY: the export passes a record valid for the call.
    if unsafe { (*record).r#type } == IB_AE_CQ_ERROR {
        CQ_ERRORS.fetch_add(1, Ordering::SeqCst);
    }
}

unsafe extern "win64" fn on_ca_event_win64(_record: *mut ib_event_rec_t) {
    CA_EVENTS_WIN64.fetch_add(1, Ordering::SeqCst);
}

unsafe extern "system" fn on_ca_event_system(_record: *mut ib_event_rec_t) {
    CA_EVENTS_SYSTEM.fetch_add(1, Ordering::SeqCst);
}

unsafe extern "win64" fn on_cm_event(_id: *mut iba_cm_id, event: *mut iba_cm_event) -> NTSTATUS {
    CM_EVENTS.fetch_add(1, Ordering::SeqCst);
    // SAFETY: the export passes an event valid for the call.
    LAST_CM_TYPE.store(unsafe { (*event).r#type } as usize, Ordering::SeqCst);
    0
}

/// Stores a Windows x64 callback in a callback slot of a table made for such a consumer.
fn slot<F>(f: F) -> Option<F> {
    Some(f)
}

#[test]
fn the_verbs_table_serves_and_calls_back_a_windows_x64_consumer() {
    let p = HostPlatform::deterministic();
    let fake = FakeVerbs::new(&p, FakeConfig::default());
    let export = CiExport::new(Arc::clone(&fake)).expect("export");
    let system = export.interface();
    let windows = export.interface_in(Convention::Win64);
    assert_eq!(export.consumers(), 2);
    let (s, w) = (&system.Verbs, &windows.Verbs);
    assert_ne!(
        s.create_cq.map(|f| f as usize),
        w.create_cq.map(|f| f as usize),
        "each convention has its own entry points"
    );
    assert_eq!(s.p_hca_obj, w.p_hca_obj, "one device behind both");

    // A handler registered through each table.
    let mut reg_w = ci_event_handler_t::zeroed();
    // SAFETY: the registrant implements the callback with the Windows x64 convention.
    reg_w.pfn_async_event_cb = slot(unsafe {
        std::mem::transmute::<
            unsafe extern "win64" fn(*mut ib_event_rec_t),
            unsafe extern "system" fn(*mut ib_event_rec_t),
        >(on_ca_event_win64)
    });
    let mut reg_s = ci_event_handler_t::zeroed();
    reg_s.pfn_async_event_cb = Some(on_ca_event_system);
    let register_w = win64!(w.register_event_handler; (ib_ca_handle_t, *mut ci_event_handler_t));
    // SAFETY: the table's device, a record that stays in place until unregistered.
    unsafe { register_w(w.p_hca_obj.cast(), &mut reg_w) };
    let register_s = s.register_event_handler.expect("entry");
    // SAFETY: as above, through the system table.
    unsafe { register_s(s.p_hca_obj.cast(), &mut reg_s) };

    let open = win64!(w.um_open_ca;
        (ib_ca_handle_t, wv_ci::base::KPROCESSOR_MODE, *mut ci_umv_buf_t, *mut ib_ca_handle_t)
        -> ib_api_status_t);
    let mut ca: ib_ca_handle_t = std::ptr::null_mut();
    // SAFETY: the table's device, no vendor bytes, an output.
    let status = unsafe { open(w.p_hca_obj.cast(), 0, std::ptr::null_mut(), &mut ca) };
    assert_eq!(status, IB_SUCCESS);

    let create_cq = win64!(w.create_cq;
        (ib_ca_handle_t, *const c_void, ci_async_event_cb_t, ci_completion_cb_t, *mut u32,
         *mut ib_cq_handle_t, *mut ci_umv_buf_t) -> ib_api_status_t);
    let context = 0x5EED_usize as *const c_void;
    let mut size = 16u32;
    let mut cq: ib_cq_handle_t = std::ptr::null_mut();
    // SAFETY: the consumer's callbacks are Windows x64 functions, as the table expects.
    let event_cb = unsafe {
        std::mem::transmute::<
            unsafe extern "win64" fn(*mut ib_event_rec_t),
            unsafe extern "system" fn(*mut ib_event_rec_t),
        >(on_cq_event)
    };
    // SAFETY: as above.
    let completion_cb = unsafe {
        std::mem::transmute::<
            unsafe extern "win64" fn(*mut c_void),
            unsafe extern "system" fn(*mut c_void),
        >(on_completion)
    };
    // SAFETY: an open of this table, callbacks valid until the CQ is destroyed, outputs.
    let status = unsafe {
        create_cq(
            ca,
            context,
            Some(event_cb),
            Some(completion_cb),
            &mut size,
            &mut cq,
            std::ptr::null_mut(),
        )
    };
    assert_eq!(status, IB_SUCCESS);
    assert!(size >= 16);

    let cq_id = fake
        .live_objects()
        .iter()
        .find(|(_, k)| *k == ObjectKind::Cq)
        .expect("a CQ")
        .0;
    assert!(fake.cq_completion(cq_id));
    assert!(fake.cq_error(cq_id));
    assert!(fake.port_event(1, CaEventKind::PortActive));
    p.run_until_idle();
    assert_recorded(&[
        (&COMPLETIONS, 1, "the completion callback, Windows x64"),
        (&LAST_CONTEXT, 0x5EED, "with its context"),
        (&CQ_ERRORS, 1, "the CQ's event callback, Windows x64"),
        (&CA_EVENTS_WIN64, 1, "the Windows x64 handler"),
        (&CA_EVENTS_SYSTEM, 1, "the system handler"),
    ]);

    let destroy_cq = win64!(w.destroy_cq; (ib_cq_handle_t) -> ib_api_status_t);
    // SAFETY: the CQ made above, destroyed once.
    assert_eq!(unsafe { destroy_cq(cq) }, IB_SUCCESS);
    let close = win64!(w.um_close_ca; (ib_ca_handle_t, ib_ca_handle_t));
    // SAFETY: the open made above, closed once.
    unsafe { close(w.p_hca_obj.cast(), ca) };
    let unregister_w =
        win64!(w.unregister_event_handler; (ib_ca_handle_t, *mut ci_event_handler_t));
    // SAFETY: the record registered above.
    unsafe { unregister_w(w.p_hca_obj.cast(), &mut reg_w) };
    let unregister_s = s.unregister_event_handler.expect("entry");
    // SAFETY: as above.
    unsafe { unregister_s(s.p_hca_obj.cast(), &mut reg_s) };

    let reference = win64!(windows.InterfaceHeader.InterfaceReference; (*mut c_void));
    let dereference = win64!(windows.InterfaceHeader.InterfaceDereference; (*mut c_void));
    // SAFETY: the interface's context, whose reference this test holds.
    unsafe { reference(windows.InterfaceHeader.Context) };
    assert_eq!(export.consumers(), 3);
    // SAFETY: the two references on the Windows x64 interface, given back.
    unsafe { dereference(windows.InterfaceHeader.Context) };
    // SAFETY: as above.
    unsafe { dereference(windows.InterfaceHeader.Context) };
    let system_dereference = system.InterfaceHeader.InterfaceDereference.expect("entry");
    // SAFETY: the system interface's reference, given back.
    unsafe { system_dereference(system.InterfaceHeader.Context) };
    assert_eq!(export.consumers(), 0);
    drop(export);
    assert_eq!(fake.live_objects(), Vec::new(), "every object destroyed");
}

#[test]
fn the_cm_table_serves_and_calls_back_a_windows_x64_consumer() {
    let p = HostPlatform::deterministic();
    let fake = FakeCm::new(&p);
    let export = CiCmExport::new(Arc::clone(&fake)).expect("a free export slot");
    let windows = export.interface_in(Convention::Win64);
    let system = export.interface();
    assert_ne!(
        windows.CM.create_id.map(|f| f as usize),
        system.CM.create_id.map(|f| f as usize)
    );
    let create_id = win64!(windows.CM.create_id;
        (iba_cm_callback, *mut c_void, *mut *mut iba_cm_id) -> NTSTATUS);
    // SAFETY: the consumer's callback is a Windows x64 function, as the table expects.
    let callback = unsafe {
        std::mem::transmute::<
            unsafe extern "win64" fn(*mut iba_cm_id, *mut iba_cm_event) -> NTSTATUS,
            unsafe extern "system" fn(*mut iba_cm_id, *mut iba_cm_event) -> NTSTATUS,
        >(on_cm_event)
    };
    let mut id: *mut iba_cm_id = std::ptr::null_mut();
    // SAFETY: a callback valid until the id is destroyed, an output.
    let status = unsafe { create_id(Some(callback), std::ptr::null_mut(), &mut id) };
    assert_eq!(status, 0);
    let cm_id = *fake.live_ids().last().expect("the id");
    fake.event(cm_id, FakeCmEvent::DreqError);
    p.run_until_idle();
    assert_recorded(&[
        (&CM_EVENTS, 1, "the id's callback, Windows x64"),
        (
            &LAST_CM_TYPE,
            iba_cm_dreq_error as usize,
            "with the DREQ error's type",
        ),
    ]);
    let destroy_id = win64!(windows.CM.destroy_id; (*mut iba_cm_id));
    // SAFETY: the id made above, destroyed once.
    unsafe { destroy_id(id) };
    let dereference_w = win64!(windows.InterfaceHeader.InterfaceDereference; (*mut c_void));
    // SAFETY: the Windows x64 interface's reference, given back.
    unsafe { dereference_w(windows.InterfaceHeader.Context) };
    let dereference_s = system.InterfaceHeader.InterfaceDereference.expect("entry");
    // SAFETY: the system interface's reference, given back.
    unsafe { dereference_s(system.InterfaceHeader.Context) };
    assert_eq!(export.consumers(), 0);
    p.run_until_idle();
    assert_eq!(fake.live_ids(), Vec::<u64>::new(), "every id destroyed");
}
