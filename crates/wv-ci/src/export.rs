//! [`CiExport`]: any `wv_hal::Verbs` implementation as an `RDMA_INTERFACE_VERBS` table of
//! `extern "system"` functions — what an RDMA controller's driver hands an upper filter. The
//! soft HCA presents itself to the driver through this (its "C face"), exactly as a Windows
//! soft-HCA driver would, so the filter's lower edge ([`crate::import::CiVerbs`]) is exercised
//! through real C calls, pointers and callbacks.
//!
//! The table behaves as OFW's HCA drivers do:
//! * `p_hca_obj` is the device's own open (`open_ca`), made when the export is created; its
//!   asynchronous events go to every handler registered with `register_event_handler`, linked
//!   through the handler's own `LIST_ENTRY` (registration cannot fail and allocates nothing);
//! * every handle is the address of a heap object owning the Rust handle, freed by the destroy
//!   call; vendor bytes travel as `ci_umv_buf_t`;
//! * `query_ca` lays out `ib_ca_attr_t`, the page-size table, the port attributes and each
//!   port's GID and P_Key tables in the caller's buffer, and answers `IB_INSUFFICIENT_MEMORY`
//!   with the size when it is too small;
//! * `InterfaceReference`/`InterfaceDereference` count references on the export; each
//!   [`CiExport::interface`] hands out one, as a query does.
//!
//! Verbs WinVerbs does not use are left null (the consumer checks for them).

use alloc::sync::Arc;
use core::cell::UnsafeCell;
use core::ffi::c_void;
use core::mem::ManuallyDrop;
use core::ptr;

use spin::Mutex;
use wv_hal::{
    AllocError, CaEvent, CaEventSink, CqEventSink, KArc, MemoryRegion, QpCreate, QpEvent,
    QpEventSink, SrqEvent, SrqEventSink, SrqModifyMask, Umv, Verbs, VerbsError,
};

use crate::base::{KPROCESSOR_MODE, LIST_ENTRY, boolean_t, net32_t};
use crate::ci::*;
use crate::convention::{self, Convention};
use crate::convert;
use crate::ib_types::*;
use crate::import::{CiError, CiVerbs};
use crate::pinned::Pinned;
use crate::status::{result_to_ib, to_ib};

/// A Rust handle owned by C: the object and the verbs it belongs to.
struct Held<V, T> {
    obj: T,
    verbs: Arc<V>,
}

/// Moves a handle to the heap for C. When no memory is left for that, `undo` destroys the
/// Rust object again and the call fails with `IB_INSUFFICIENT_MEMORY`.
fn give<V: Verbs, T, H>(
    verbs: &Arc<V>,
    obj: T,
    undo: impl FnOnce(&V, T),
) -> Result<*mut H, ib_api_status_t> {
    let held = Held {
        obj,
        verbs: Arc::clone(verbs),
    };
    match Pinned::new(held) {
        Ok(p) => Ok(p.into_raw().cast()),
        Err(held) => {
            undo(&held.verbs, held.obj);
            Err(IB_INSUFFICIENT_MEMORY)
        }
    }
}

/// The object behind a handle C passes back.
///
/// # Safety
/// `h` is null or a handle [`give`] made for a `Held<V, T>` that has not been taken back.
unsafe fn held<'a, V, T, H>(h: *mut H) -> Option<&'a Held<V, T>> {
    // SAFETY: the caller's promise.
    unsafe { h.cast::<Held<V, T>>().as_ref() }
}

/// Takes a handle back from C (its destroy call).
///
/// # Safety
/// As [`held`], and no other call uses the handle after this one.
unsafe fn take<V, T, H>(h: *mut H) -> Option<Held<V, T>> {
    if h.is_null() {
        return None;
    }
    // SAFETY: the caller's promise: `h` came from `Pinned::into_raw` in `give`, taken once.
    Some(unsafe { Pinned::from_raw(h.cast::<Held<V, T>>()) }.into_inner())
}

/// A destroy entry point: takes the handle back and hands its object to `destroy`; `invalid`
/// for a null handle.
///
/// # Safety
/// As [`take`].
unsafe fn destroyed<V, T, H>(
    h: *mut H,
    invalid: ib_api_status_t,
    destroy: impl FnOnce(&V, T),
) -> ib_api_status_t {
    // SAFETY: the caller's promise.
    match unsafe { take::<V, T, H>(h) } {
        Some(held) => {
            destroy(&held.verbs, held.obj);
            IB_SUCCESS
        }
        None => invalid,
    }
}

/// The vendor bytes a `ci_umv_buf_t` describes, as a [`Umv`] for the call; the vendor status
/// goes back into the C struct afterwards.
///
/// # Safety
/// `p` is null or a valid `ci_umv_buf_t` whose `p_inout_buf` (if not 0) addresses at least
/// `max(input_size, output_size)` bytes writable for the call.
unsafe fn with_umv<R>(p: *mut ci_umv_buf_t, call: impl FnOnce(&mut Umv<'_>) -> R) -> R {
    // SAFETY: the caller's promise.
    let Some(c) = (unsafe { p.as_mut() }) else {
        return call(&mut Umv::none());
    };
    let len = c.input_size.max(c.output_size) as usize;
    let buf: &mut [u8] = if c.p_inout_buf == 0 || len == 0 {
        &mut []
    } else {
        let data = ptr::with_exposed_provenance_mut::<u8>(c.p_inout_buf as usize);
        // SAFETY: the caller's promise: `len` bytes at `data`, writable, for the call.
        unsafe { core::slice::from_raw_parts_mut(data, len) }
    };
    let mut umv = Umv::new(
        c.command,
        c.input_size as usize,
        c.output_size as usize,
        buf,
    );
    let r = call(&mut umv);
    c.status = umv.status;
    r
}

/// Writes `value` through an output pointer C passed, if it is not null.
///
/// # Safety
/// `p` is null or valid for a write of `T`.
unsafe fn put<T>(p: *mut T, value: T) {
    if !p.is_null() {
        // SAFETY: the caller's promise.
        unsafe { p.write(value) };
    }
}

/// The registered event handlers of the device, linked through their own `LIST_ENTRY`: one
/// list per [`Convention`], the convention of the consumers that registered them.
struct Handlers {
    lock: Mutex<()>,
    heads: [UnsafeCell<LIST_ENTRY>; Convention::COUNT],
}

// SAFETY: the list is only read or changed with `lock` held; the records belong to the
// registrants, who keep them alive until they unregister.
unsafe impl Send for Handlers {}
// SAFETY: as above.
unsafe impl Sync for Handlers {}

impl Handlers {
    fn new() -> Result<KArc<Handlers>, AllocError> {
        let h = KArc::try_new(Handlers {
            lock: Mutex::new(()),
            heads: [const { UnsafeCell::new(LIST_ENTRY::zeroed()) }; Convention::COUNT],
        })?;
        for cell in &h.heads {
            let head = cell.get();
            // SAFETY: `head` is inside the `KArc`, which never moves it; nobody else sees it
            // yet.
            unsafe {
                head.write(LIST_ENTRY {
                    Flink: head,
                    Blink: head,
                })
            };
        }
        Ok(h)
    }

    /// Links `entry` at the tail of the list of `convention`.
    ///
    /// # Safety
    /// `entry` is a live record's link, not linked yet, alive until [`Handlers::remove`].
    unsafe fn insert(&self, entry: *mut LIST_ENTRY, convention: Convention) {
        let _g = self.lock.lock();
        let head = self.heads[convention.index()].get();
        // SAFETY: the head is initialised and the list is consistent under the lock.
        let tail = unsafe { (*head).Blink };
        // SAFETY: the caller's promise that `entry` is writable.
        unsafe {
            entry.write(LIST_ENTRY {
                Flink: head,
                Blink: tail,
            })
        };
        // SAFETY: `tail` is the head or a linked live record.
        unsafe { (*tail).Flink = entry };
        // SAFETY: the head lives as long as `self`.
        unsafe { (*head).Blink = entry };
    }

    /// Unlinks `entry`.
    ///
    /// # Safety
    /// `entry` was linked by [`Handlers::insert`] and not removed since.
    unsafe fn remove(&self, entry: *mut LIST_ENTRY) {
        let _g = self.lock.lock();
        // SAFETY: a linked record: its links are valid.
        let LIST_ENTRY { Flink, Blink } = unsafe { entry.read() };
        // SAFETY: the neighbours are linked (the head or live records).
        unsafe { (*Blink).Flink = Flink };
        // SAFETY: as above.
        unsafe { (*Flink).Blink = Blink };
    }
}

impl CaEventSink for Handlers {
    /// Calls every registered handler with a record whose context is the handler, as the
    /// controller's DPC does, each with its registrant's convention. DISPATCH_LEVEL.
    fn on_event(&self, event: CaEvent) {
        let _g = self.lock.lock();
        for &convention in Convention::ALL {
            let head = self.heads[convention.index()].get();
            // SAFETY: the list is consistent under the lock.
            let mut at = unsafe { (*head).Flink };
            while at != head {
                let reg = at.cast::<ci_event_handler_t>();
                // SAFETY: every linked entry is the first field of a live
                // `ci_event_handler_t`.
                let cb = unsafe { (*reg).pfn_async_event_cb };
                // SAFETY: as above; read before the callback, which may unregister nothing (it
                // runs under the list lock) but is the registrant's code.
                let next = unsafe { (*at).Flink };
                let mut rec = ib_event_rec_t::zeroed();
                rec.context = reg.cast();
                rec.r#type = convert::ca_event_to_ib(event.kind);
                rec.port_number = event.port;
                if let Some(cb) = cb {
                    // SAFETY: the registrant's callback, of the list's convention, called with
                    // a record valid for the call.
                    unsafe { convention::async_event(convention, cb, &mut rec) };
                }
                at = next;
            }
        }
    }
}

/// Events of a user-mode open: dropped, as the device's events reach the registered handlers.
struct NoEvents;

impl CaEventSink for NoEvents {
    fn on_event(&self, _event: CaEvent) {}
}

/// A C callback and its context, as a Rust sink; the callbacks are of `convention`.
struct CSink {
    context: *const c_void,
    event: ci_async_event_cb_t,
    completion: ci_completion_cb_t,
    convention: Convention,
}

// SAFETY: the controller's callbacks may be called from any processor at DISPATCH_LEVEL; the
// context is the registrant's, which it keeps alive until the object's destroy returns.
unsafe impl Send for CSink {}
// SAFETY: as above.
unsafe impl Sync for CSink {}

impl CSink {
    fn raise(&self, kind: ib_async_event_t) {
        let mut rec = ib_event_rec_t::zeroed();
        rec.context = self.context.cast_mut();
        rec.r#type = kind;
        if let Some(cb) = self.event {
            // SAFETY: the callback the consumer registered, of its convention, with a record
            // valid for the call.
            unsafe { convention::async_event(self.convention, cb, &mut rec) };
        }
    }
}

impl CqEventSink for CSink {
    fn on_completion(&self) {
        if let Some(cb) = self.completion {
            // SAFETY: the consumer's completion callback, of its convention, with its own
            // context.
            unsafe { convention::completion(self.convention, cb, self.context.cast_mut()) };
        }
    }
    fn on_error(&self) {
        self.raise(IB_AE_CQ_ERROR);
    }
}

impl SrqEventSink for CSink {
    fn on_event(&self, event: SrqEvent) {
        self.raise(convert::srq_event_to_ib(event));
    }
}

impl QpEventSink for CSink {
    fn on_event(&self, event: QpEvent) {
        self.raise(convert::qp_event_to_ib(event));
    }
}

/// The device behind `p_hca_obj` and the interface's `Context`.
struct Device<V: Verbs> {
    verbs: Arc<V>,
    handlers: KArc<Handlers>,
    /// The device's own open, whose events feed the handlers; closed when the last reference
    /// goes.
    own: Mutex<Option<V::Ca>>,
    no_events: KArc<dyn CaEventSink>,
}

impl<V: Verbs> Drop for Device<V> {
    fn drop(&mut self) {
        if let Some(ca) = self.own.get_mut().take() {
            self.verbs.close_ca(ca);
        }
    }
}

/// An RDMA controller presented as an `RDMA_INTERFACE_VERBS` table.
pub struct CiExport<V: Verbs> {
    device: KArc<Device<V>>,
}

impl<V: Verbs> core::fmt::Debug for CiExport<V> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("CiExport")
            .field("guid", &self.device.verbs.guid())
            .finish()
    }
}

impl<V: Verbs> CiExport<V> {
    /// Opens `verbs` for its own event delivery and presents it as a table.
    ///
    /// # Errors
    /// The device's open failed, or no memory was left.
    pub fn new(verbs: Arc<V>) -> Result<Self, VerbsError> {
        let no_memory = |_| VerbsError::InsufficientMemory;
        let handlers = Handlers::new().map_err(no_memory)?;
        let no_events = KArc::try_new(NoEvents).map_err(no_memory)?.into();
        // Reserved before the open, so nothing can fail once the device is open.
        let slot = KArc::<Device<V>>::try_reserve().map_err(no_memory)?;
        let own = verbs.open_ca(&mut Umv::none(), handlers.clone().into())?;
        Ok(CiExport {
            device: slot.write(Device {
                verbs,
                handlers,
                own: Mutex::new(Some(own)),
                no_events,
            }),
        })
    }

    /// The interface a query for `GUID_RDMA_INTERFACE_VERBS` returns, holding one reference
    /// on the export (released by its `InterfaceDereference`), for a consumer compiled for
    /// this target.
    pub fn interface(&self) -> RDMA_INTERFACE_VERBS {
        self.interface_in(Convention::System)
    }

    /// [`CiExport::interface`] for a consumer of `convention`: every entry (and
    /// `InterfaceReference`/`InterfaceDereference`) is the one of that convention, and the
    /// callbacks the consumer registers through it are called with it.
    pub fn interface_in(&self, convention: Convention) -> RDMA_INTERFACE_VERBS {
        let mut verbs = table::<V>(convention);
        verbs.guid = self.device.verbs.guid();
        verbs.p_hca_obj = KArc::as_ptr(&self.device).cast_mut().cast();
        let name = self.device.verbs.library_name().as_bytes();
        let n = name.len().min(MAX_LIB_NAME - 1);
        verbs.libname[..n].copy_from_slice(&name[..n]);
        verbs.version = VERBS_VERSION;
        RDMA_INTERFACE_VERBS {
            InterfaceHeader: convention::exported_header::<RDMA_INTERFACE_VERBS, _>(
                RDMA_INTERFACE_VERBS_VERSION,
                &self.device,
                convention,
                [reference::entry::<V>, dereference::entry::<V>],
            ),
            Verbs: verbs,
            post_event: None,
        }
    }

    /// The filter's lower edge over this table: what the driver makes of a queried interface.
    ///
    /// # Errors
    /// Never for a table this export made; the check is [`CiVerbs::new`]'s.
    pub fn open(&self) -> Result<CiVerbs, CiError> {
        // SAFETY: `interface` returns a complete table of this export's functions over its
        // live device, carrying one reference — what `CiVerbs::new` requires.
        unsafe { CiVerbs::new(self.interface()) }
    }

    /// References on the export held by consumers' interfaces (for tests and leak checks).
    pub fn consumers(&self) -> usize {
        KArc::strong_count(&self.device) - 1
    }
}

entry_points! {
    /// `InterfaceReference`: one more reference on the export.
    ///
    /// # Safety
    /// The caller keeps the C contract of the table entry:
    /// * `context` is the `Context` of an interface this export made, on which the caller holds a
    ///   reference.
    unsafe extern "both" fn reference<V: Verbs>(context: *mut c_void) {
        // SAFETY: `context` is the `KArc<Device<V>>` pointer `interface` gave up, still referenced
        // by the caller: borrowing that reference for a clone leaves it as it was.
        let held = ManuallyDrop::new(unsafe { KArc::from_raw(context.cast::<Device<V>>()) });
        // The new reference the caller now holds as well.
        let _ = KArc::into_raw(KArc::clone(&held));
    }
}

entry_points! {
    /// `InterfaceDereference`: releases one reference on the export (the last frees it).
    ///
    /// # Safety
    /// The caller keeps the C contract of the table entry:
    /// * `context` is the `Context` of an interface this export made, and the caller gives up one
    ///   reference it holds (taken by the query or by `InterfaceReference`).
    unsafe extern "both" fn dereference<V: Verbs>(context: *mut c_void) {
        // SAFETY: drops one of the references `interface`/`reference` gave up.
        drop(unsafe { KArc::from_raw(context.cast::<Device<V>>()) });
    }
}

/// The device behind `p_hca_obj`.
///
/// # Safety
/// `h_ca` is the `p_hca_obj` of a live interface of a `CiExport<V>`.
unsafe fn device<'a, V: Verbs>(h_ca: ib_ca_handle_t) -> Option<&'a Device<V>> {
    // SAFETY: the caller's promise.
    unsafe { h_ca.cast::<Device<V>>().as_ref() }
}

/// The verbs table of `V` for a consumer of `convention`.
fn table<V: Verbs>(convention: Convention) -> ci_interface_t {
    let mut t = ci_interface_t::zeroed();
    t.um_open_ca = Some(um_open_ca::entry::<V>(convention));
    t.um_close_ca = Some(um_close_ca::entry::<V>(convention));
    t.query_ca = Some(query_ca::entry::<V>(convention));
    t.register_event_handler = Some(register_event_handler::entry::<V>(convention));
    t.unregister_event_handler = Some(unregister_event_handler::entry::<V>(convention));
    t.allocate_pd = Some(allocate_pd::entry::<V>(convention));
    t.deallocate_pd = Some(deallocate_pd::entry::<V>(convention));
    t.create_av = Some(create_av::entry::<V>(convention));
    t.destroy_av = Some(destroy_av::entry::<V>(convention));
    t.create_srq = Some(create_srq::entry::<V>(convention));
    t.modify_srq = Some(modify_srq::entry::<V>(convention));
    t.query_srq = Some(query_srq::entry::<V>(convention));
    t.destroy_srq = Some(destroy_srq::entry::<V>(convention));
    t.create_qp = Some(create_qp::entry::<V>(convention));
    t.query_qp = Some(query_qp::entry::<V>(convention));
    t.destroy_qp = Some(destroy_qp::entry::<V>(convention));
    t.ndi_modify_qp = Some(ndi_modify_qp::entry::<V>(convention));
    t.create_cq = Some(create_cq::entry::<V>(convention));
    t.resize_cq = Some(resize_cq::entry::<V>(convention));
    t.destroy_cq = Some(destroy_cq::entry::<V>(convention));
    t.register_mr = Some(register_mr::entry::<V>(convention));
    t.deregister_mr = Some(deregister_mr::entry::<V>(convention));
    t.create_mw = Some(create_mw::entry::<V>(convention));
    t.destroy_mw = Some(destroy_mw::entry::<V>(convention));
    t.attach_mcast = Some(attach_mcast::entry::<V>(convention));
    t.detach_mcast = Some(detach_mcast::entry::<V>(convention));
    t
}

/// The status of a creation that produced `obj`: stores its handle at `out`.
///
/// # Safety
/// `out` is null or writable.
unsafe fn created<V: Verbs, T, H>(
    verbs: &Arc<V>,
    result: Result<T, VerbsError>,
    out: *mut *mut H,
    undo: impl FnOnce(&V, T),
) -> ib_api_status_t {
    match result {
        Ok(obj) => match give::<V, T, H>(verbs, obj, undo) {
            Ok(h) => {
                // SAFETY: the caller's promise.
                unsafe { put(out, h) };
                IB_SUCCESS
            }
            Err(status) => status,
        },
        Err(e) => to_ib(e),
    }
}

entry_points! {
    /// `um_open_ca`: a user-mode open of the device (its events are dropped: the device's own
    /// open feeds the registered handlers).
    ///
    /// # Safety
    /// The caller keeps the C contract of the table entry:
    /// * `h_ca` is null or the `p_hca_obj` of a live interface this export made;
    /// * `p_umv_buf` is null or a valid `ci_umv_buf_t` whose `p_inout_buf`, unless 0, addresses
    ///   `max(input_size, output_size)` bytes writable for the call;
    /// * `ph_um_ca` is null or valid for a write.
    unsafe extern "both" fn um_open_ca<V: Verbs>(
        h_ca: ib_ca_handle_t,
        _mode: KPROCESSOR_MODE,
        p_umv_buf: *mut ci_umv_buf_t,
        ph_um_ca: *mut ib_ca_handle_t,
    ) -> ib_api_status_t {
        // SAFETY: `h_ca` is this export's `p_hca_obj`.
        let Some(dev) = (unsafe { device::<V>(h_ca) }) else {
            return IB_INVALID_CA_HANDLE;
        };
        // SAFETY: the consumer's vendor bytes, valid for the call.
        let r = unsafe {
            with_umv(p_umv_buf, |umv| {
                dev.verbs.open_ca(umv, dev.no_events.clone())
            })
        };
        // SAFETY: `ph_um_ca` is the consumer's output.
        unsafe { created(&dev.verbs, r, ph_um_ca, |v, ca| v.close_ca(ca)) }
    }
}

entry_points! {
    /// `um_close_ca`: closes a user-mode open.
    ///
    /// # Safety
    /// The caller keeps the C contract of the table entry:
    /// * `h_um_ca` is null or a handle this table's `um_open_ca` returned, not destroyed before; no
    ///   other call uses it during or after this one.
    unsafe extern "both" fn um_close_ca<V: Verbs>(_h_ca: ib_ca_handle_t, h_um_ca: ib_ca_handle_t) {
        // SAFETY: a handle `um_open_ca` made, closed once.
        if let Some(ca) = unsafe { take::<V, V::Ca, _>(h_um_ca) } {
            ca.verbs.close_ca(ca.obj);
        }
    }
}

entry_points! {
    /// `register_event_handler`: links the consumer's record into the device's handler list.
    ///
    /// # Safety
    /// The caller keeps the C contract of the table entry:
    /// * `h_ca` is null or the `p_hca_obj` of a live interface this export made;
    /// * `p_reg` is null or a `ci_event_handler_t` not registered yet, which the consumer keeps
    ///   alive and unmoved until it unregisters it.
    unsafe extern "both" fn register_event_handler<V: Verbs>(
        h_ca: ib_ca_handle_t,
        p_reg: *mut ci_event_handler_t,
    ) [convention] {
        // SAFETY: `h_ca` is this export's `p_hca_obj`.
        if let Some(dev) = unsafe { device::<V>(h_ca) }
            && !p_reg.is_null()
        {
            // SAFETY: the consumer keeps the record alive and unmoved until it unregisters; its
            // `entry` is the record's first field.
            unsafe { dev.handlers.insert(p_reg.cast(), convention) };
        }
    }
}

entry_points! {
    /// `unregister_event_handler`: unlinks a record `register_event_handler` linked.
    ///
    /// # Safety
    /// The caller keeps the C contract of the table entry:
    /// * `h_ca` is null or the `p_hca_obj` of a live interface this export made;
    /// * `p_reg` is null or a record registered with this device and not unregistered since.
    unsafe extern "both" fn unregister_event_handler<V: Verbs>(
        h_ca: ib_ca_handle_t,
        p_reg: *mut ci_event_handler_t,
    ) {
        // SAFETY: `h_ca` is this export's `p_hca_obj`.
        if let Some(dev) = unsafe { device::<V>(h_ca) }
            && !p_reg.is_null()
        {
            // SAFETY: a record `register_event_handler` linked.
            unsafe { dev.handlers.remove(p_reg.cast()) };
        }
    }
}

/// The `query_ca` layout: where each part goes, in bytes from the start of the buffer.
struct CaLayout {
    pages: usize,
    n_pages: usize,
    ports: usize,
    size: usize,
}

fn align8(n: usize) -> usize {
    n.next_multiple_of(8)
}

/// A caller buffer that is written in bounds only.
struct Out {
    base: *mut u8,
    len: usize,
}

impl Out {
    /// Writes `value` at byte `offset`, if it fits.
    fn put<T>(&self, offset: usize, value: T) {
        if offset
            .checked_add(size_of::<T>())
            .is_some_and(|end| end <= self.len)
        {
            let at = self.base.wrapping_add(offset).cast::<T>();
            // SAFETY: `Out` is made over `len` writable bytes (see `query_ca`), and the write
            // is in bounds; unaligned writes need no alignment.
            unsafe { at.write_unaligned(value) };
        }
    }

    /// The address of byte `offset` of the buffer (as the table pointers C reads).
    fn at<T>(&self, offset: usize) -> *mut T {
        self.base.wrapping_add(offset).cast()
    }
}

fn ca_layout<V: Verbs>(v: &V, ca: &wv_hal::CaAttributes) -> Result<CaLayout, VerbsError> {
    let n_pages = convert::page_sizes(ca.page_size_capability).count();
    let pages = size_of::<ib_ca_attr_t>();
    let ports = align8(pages + n_pages * 4);
    let mut size = ports + usize::from(ca.port_count) * size_of::<ib_port_attr_t>();
    for port in 1..=ca.port_count {
        let p = v.query_port(port)?;
        size = align8(size + p.gid_table_len as usize * size_of::<ib_gid_t>());
        size = align8(size + usize::from(p.pkey_table_len) * 2);
    }
    Ok(CaLayout {
        pages,
        n_pages,
        ports,
        size,
    })
}

entry_points! {
    /// `query_ca`: lays out `ib_ca_attr_t` and its tables in the caller's buffer, or answers the
    /// size it needs.
    ///
    /// # Safety
    /// The caller keeps the C contract of the table entry:
    /// * `h_ca` is null or the `p_hca_obj` of a live interface this export made;
    /// * `p_size` is null or valid for a read and a write;
    /// * `p_ca_attr` is null or addresses at least `*p_size` bytes writable for the call, aligned
    ///   for `ib_ca_attr_t`.
    unsafe extern "both" fn query_ca<V: Verbs>(
        h_ca: ib_ca_handle_t,
        p_ca_attr: *mut ib_ca_attr_t,
        p_size: *mut u32,
        _p_umv_buf: *mut ci_umv_buf_t,
    ) -> ib_api_status_t {
        // SAFETY: `h_ca` is this export's `p_hca_obj`.
        let Some(dev) = (unsafe { device::<V>(h_ca) }) else {
            return IB_INVALID_CA_HANDLE;
        };
        if p_size.is_null() {
            return IB_INVALID_PARAMETER;
        }
        let v = &*dev.verbs;
        let ca = match v.query_ca() {
            Ok(ca) => ca,
            Err(e) => return to_ib(e),
        };
        let layout = match ca_layout(v, &ca) {
            Ok(l) => l,
            Err(e) => return to_ib(e),
        };
        // SAFETY: `p_size` is the caller's in/out size, checked not null.
        let room = unsafe { p_size.read() } as usize;
        let size = u32::try_from(layout.size).unwrap_or(u32::MAX);
        // SAFETY: as above.
        unsafe { p_size.write(size) };
        if p_ca_attr.is_null() || room < layout.size {
            return IB_INSUFFICIENT_MEMORY;
        }
        let out = Out {
            base: p_ca_attr.cast(),
            len: layout.size,
        };
        // SAFETY: the caller gave `room >= layout.size` writable bytes at `p_ca_attr`.
        unsafe { out.base.write_bytes(0, layout.size) };
        let mut head = convert::ca_attr_to_ib(&ca);
        head.size = size;
        head.num_page_sizes = layout.n_pages as u32;
        head.p_page_size = out.at(layout.pages);
        head.p_port_attr = out.at(layout.ports);
        out.put(0, head);
        for (i, page) in convert::page_sizes(ca.page_size_capability).enumerate() {
            out.put(layout.pages + i * 4, page);
        }
        let mut tables = layout.ports + usize::from(ca.port_count) * size_of::<ib_port_attr_t>();
        for port in 1..=ca.port_count {
            let Ok(p) = v.query_port(port) else {
                return IB_ERROR;
            };
            let mut attr = convert::port_attr_to_ib(port, &p);
            let gids = tables;
            let pkeys = align8(gids + p.gid_table_len as usize * size_of::<ib_gid_t>());
            tables = align8(pkeys + usize::from(p.pkey_table_len) * 2);
            attr.p_gid_table = out.at(gids);
            attr.p_pkey_table = out.at(pkeys);
            out.put(
                layout.ports + usize::from(port - 1) * size_of::<ib_port_attr_t>(),
                attr,
            );
            for i in 0..p.gid_table_len {
                let gid = v.query_gid(port, i).unwrap_or([0; 16]);
                out.put(gids + i as usize * size_of::<ib_gid_t>(), gid);
            }
            for i in 0..p.pkey_table_len {
                let pkey = v.query_pkey(port, i).unwrap_or(0);
                out.put(pkeys + usize::from(i) * 2, pkey);
            }
        }
        IB_SUCCESS
    }
}

entry_points! {
    /// `allocate_pd`.
    ///
    /// # Safety
    /// The caller keeps the C contract of the table entry:
    /// * `h_ca` is null or a handle this table's `um_open_ca` returned that no destroy call has
    ///   taken back;
    /// * `p_umv_buf` is null or a valid `ci_umv_buf_t` whose `p_inout_buf`, unless 0, addresses
    ///   `max(input_size, output_size)` bytes writable for the call;
    /// * `ph_pd` is null or valid for a write.
    unsafe extern "both" fn allocate_pd<V: Verbs>(
        h_ca: ib_ca_handle_t,
        _type: ib_pd_type_t,
        ph_pd: *mut ib_pd_handle_t,
        p_umv_buf: *mut ci_umv_buf_t,
    ) -> ib_api_status_t {
        // SAFETY: `h_ca` is a user-mode open this export made.
        let Some(ca) = (unsafe { held::<V, V::Ca, _>(h_ca) }) else {
            return IB_INVALID_CA_HANDLE;
        };
        // SAFETY: the consumer's vendor bytes, valid for the call.
        let r = unsafe { with_umv(p_umv_buf, |umv| ca.verbs.allocate_pd(&ca.obj, umv)) };
        // SAFETY: `ph_pd` is the consumer's output.
        unsafe { created(&ca.verbs, r, ph_pd, |v, pd| v.deallocate_pd(pd)) }
    }
}

entry_points! {
    /// `deallocate_pd`.
    ///
    /// # Safety
    /// The caller keeps the C contract of the table entry:
    /// * `h_pd` is null or a handle this table's `allocate_pd` returned, not destroyed before; no
    ///   other call uses it during or after this one.
    unsafe extern "both" fn deallocate_pd<V: Verbs>(h_pd: ib_pd_handle_t) -> ib_api_status_t {
        // SAFETY: a PD this export made, freed once.
        unsafe {
            destroyed::<V, V::Pd, _>(h_pd, IB_INVALID_PD_HANDLE, |v, obj| v.deallocate_pd(obj))
        }
    }
}

entry_points! {
    /// `create_av`: an address handle.
    ///
    /// # Safety
    /// The caller keeps the C contract of the table entry:
    /// * `h_pd` is null or a handle this table's `allocate_pd` returned that no destroy call has
    ///   taken back;
    /// * `p_av_attr` is null or valid for a read;
    /// * `p_umv_buf` is null or a valid `ci_umv_buf_t` whose `p_inout_buf`, unless 0, addresses
    ///   `max(input_size, output_size)` bytes writable for the call;
    /// * `ph_av` is null or valid for a write.
    unsafe extern "both" fn create_av<V: Verbs>(
        h_pd: ib_pd_handle_t,
        p_av_attr: *const ib_av_attr_t,
        ph_av: *mut ib_av_handle_t,
        p_umv_buf: *mut ci_umv_buf_t,
    ) -> ib_api_status_t {
        // SAFETY: `h_pd` is a PD this export made.
        let Some(pd) = (unsafe { held::<V, V::Pd, _>(h_pd) }) else {
            return IB_INVALID_PD_HANDLE;
        };
        // SAFETY: the consumer's attributes, valid for the call, or null.
        let Some(attr) = (unsafe { p_av_attr.as_ref() }) else {
            return IB_INVALID_PARAMETER;
        };
        let av = convert::path_from_ib(attr).av;
        // SAFETY: the consumer's vendor bytes, valid for the call.
        let r = unsafe { with_umv(p_umv_buf, |umv| pd.verbs.create_ah(&pd.obj, &av, umv)) };
        // SAFETY: `ph_av` is the consumer's output.
        unsafe { created(&pd.verbs, r, ph_av, |v, ah| v.destroy_ah(ah)) }
    }
}

entry_points! {
    /// `destroy_av`.
    ///
    /// # Safety
    /// The caller keeps the C contract of the table entry:
    /// * `h_av` is null or a handle this table's `create_av` returned, not destroyed before; no
    ///   other call uses it during or after this one.
    unsafe extern "both" fn destroy_av<V: Verbs>(h_av: ib_av_handle_t) -> ib_api_status_t {
        // SAFETY: an AV this export made, destroyed once.
        unsafe { destroyed::<V, V::Ah, _>(h_av, IB_INVALID_AV_HANDLE, |v, obj| v.destroy_ah(obj)) }
    }
}

/// The C callbacks of a new object as a Rust sink.
fn c_sink(
    context: *const c_void,
    event: ci_async_event_cb_t,
    completion: ci_completion_cb_t,
    convention: Convention,
) -> Result<KArc<CSink>, AllocError> {
    KArc::try_new(CSink {
        context,
        event,
        completion,
        convention,
    })
}

entry_points! {
    /// `create_srq`: its events go to `pfn_async_event_cb` with `srq_context`.
    ///
    /// # Safety
    /// The caller keeps the C contract of the table entry:
    /// * `h_pd` is null or a handle this table's `allocate_pd` returned that no destroy call has
    ///   taken back;
    /// * `p_srq_attr` is null or valid for a read;
    /// * `p_umv_buf` is null or a valid `ci_umv_buf_t` whose `p_inout_buf`, unless 0, addresses
    ///   `max(input_size, output_size)` bytes writable for the call;
    /// * `ph_srq` is null or valid for a write;
    /// * `pfn_async_event_cb`, if not null, may be called with `srq_context` from any processor at
    ///   DISPATCH_LEVEL until `destroy_srq` returns.
    unsafe extern "both" fn create_srq<V: Verbs>(
        h_pd: ib_pd_handle_t,
        srq_context: *const c_void,
        pfn_async_event_cb: ci_async_event_cb_t,
        p_srq_attr: *const ib_srq_attr_t,
        ph_srq: *mut ib_srq_handle_t,
        p_umv_buf: *mut ci_umv_buf_t,
    ) -> ib_api_status_t [convention] {
        // SAFETY: `h_pd` is a PD this export made.
        let Some(pd) = (unsafe { held::<V, V::Pd, _>(h_pd) }) else {
            return IB_INVALID_PD_HANDLE;
        };
        // SAFETY: the consumer's attributes, valid for the call, or null.
        let Some(attr) = (unsafe { p_srq_attr.as_ref() }) else {
            return IB_INVALID_PARAMETER;
        };
        let attr = convert::srq_attr_from_ib(attr);
        let Ok(sink) = c_sink(srq_context, pfn_async_event_cb, None, convention) else {
            return IB_INSUFFICIENT_MEMORY;
        };
        // SAFETY: the consumer's vendor bytes, valid for the call.
        let r = unsafe {
            with_umv(p_umv_buf, |umv| {
                pd.verbs.create_srq(&pd.obj, &attr, sink.into(), umv)
            })
        };
        // SAFETY: `ph_srq` is the consumer's output.
        unsafe { created(&pd.verbs, r, ph_srq, |v, srq| v.destroy_srq(srq)) }
    }
}

entry_points! {
    /// `modify_srq`.
    ///
    /// # Safety
    /// The caller keeps the C contract of the table entry:
    /// * `h_srq` is null or a handle this table's `create_srq` returned that no destroy call has
    ///   taken back;
    /// * `p_srq_attr` is null or valid for a read;
    /// * `p_umv_buf` is null or a valid `ci_umv_buf_t` whose `p_inout_buf`, unless 0, addresses
    ///   `max(input_size, output_size)` bytes writable for the call.
    unsafe extern "both" fn modify_srq<V: Verbs>(
        h_srq: ib_srq_handle_t,
        p_srq_attr: *const ib_srq_attr_t,
        srq_attr_mask: ib_srq_attr_mask_t,
        p_umv_buf: *mut ci_umv_buf_t,
    ) -> ib_api_status_t {
        // SAFETY: `h_srq` is an SRQ this export made.
        let Some(srq) = (unsafe { held::<V, V::Srq, _>(h_srq) }) else {
            return IB_INVALID_SRQ_HANDLE;
        };
        // SAFETY: the consumer's attributes, valid for the call, or null.
        let Some(attr) = (unsafe { p_srq_attr.as_ref() }) else {
            return IB_INVALID_PARAMETER;
        };
        let attr = convert::srq_attr_from_ib(attr);
        let mask = SrqModifyMask {
            max_wr: srq_attr_mask & IB_SRQ_MAX_WR != 0,
            limit: srq_attr_mask & IB_SRQ_LIMIT != 0,
        };
        // SAFETY: the consumer's vendor bytes, valid for the call.
        result_to_ib(unsafe {
            with_umv(p_umv_buf, |umv| {
                srq.verbs.modify_srq(&srq.obj, &attr, mask, umv)
            })
        })
    }
}

entry_points! {
    /// `query_srq`.
    ///
    /// # Safety
    /// The caller keeps the C contract of the table entry:
    /// * `h_srq` is null or a handle this table's `create_srq` returned that no destroy call has
    ///   taken back;
    /// * `p_srq_attr` is null or valid for a write;
    /// * `p_umv_buf` is null or a valid `ci_umv_buf_t` whose `p_inout_buf`, unless 0, addresses
    ///   `max(input_size, output_size)` bytes writable for the call.
    unsafe extern "both" fn query_srq<V: Verbs>(
        h_srq: ib_srq_handle_t,
        p_srq_attr: *mut ib_srq_attr_t,
        p_umv_buf: *mut ci_umv_buf_t,
    ) -> ib_api_status_t {
        // SAFETY: `h_srq` is an SRQ this export made.
        let Some(srq) = (unsafe { held::<V, V::Srq, _>(h_srq) }) else {
            return IB_INVALID_SRQ_HANDLE;
        };
        // SAFETY: the consumer's vendor bytes, valid for the call.
        match unsafe { with_umv(p_umv_buf, |umv| srq.verbs.query_srq(&srq.obj, umv)) } {
            Ok(attr) => {
                // SAFETY: the consumer's output.
                unsafe { put(p_srq_attr, convert::srq_attr_to_ib(&attr)) };
                IB_SUCCESS
            }
            Err(e) => to_ib(e),
        }
    }
}

entry_points! {
    /// `destroy_srq`.
    ///
    /// # Safety
    /// The caller keeps the C contract of the table entry:
    /// * `h_srq` is null or a handle this table's `create_srq` returned, not destroyed before; no
    ///   other call uses it during or after this one.
    unsafe extern "both" fn destroy_srq<V: Verbs>(h_srq: ib_srq_handle_t) -> ib_api_status_t {
        // SAFETY: an SRQ this export made, destroyed once.
        unsafe {
            destroyed::<V, V::Srq, _>(h_srq, IB_INVALID_SRQ_HANDLE, |v, obj| v.destroy_srq(obj))
        }
    }
}

entry_points! {
    /// `create_cq`: completions go to `completion_cb`, errors to `pfn_async_event_cb`, both
    /// with `cq_context`; the size granted goes back in `*p_size`.
    ///
    /// # Safety
    /// The caller keeps the C contract of the table entry:
    /// * `h_ca` is null or a handle this table's `um_open_ca` returned that no destroy call has
    ///   taken back;
    /// * `p_size` is null or valid for a read and a write;
    /// * `p_umv_buf` is null or a valid `ci_umv_buf_t` whose `p_inout_buf`, unless 0, addresses
    ///   `max(input_size, output_size)` bytes writable for the call;
    /// * `ph_cq` is null or valid for a write;
    /// * the callbacks, where not null, may be called with `cq_context` from any processor at
    ///   DISPATCH_LEVEL until `destroy_cq` returns.
    unsafe extern "both" fn create_cq<V: Verbs>(
        h_ca: ib_ca_handle_t,
        cq_context: *const c_void,
        pfn_async_event_cb: ci_async_event_cb_t,
        completion_cb: ci_completion_cb_t,
        p_size: *mut u32,
        ph_cq: *mut ib_cq_handle_t,
        p_umv_buf: *mut ci_umv_buf_t,
    ) -> ib_api_status_t [convention] {
        // SAFETY: `h_ca` is a user-mode open this export made.
        let Some(ca) = (unsafe { held::<V, V::Ca, _>(h_ca) }) else {
            return IB_INVALID_CA_HANDLE;
        };
        // SAFETY: the consumer's in/out size, or null.
        let Some(size) = (unsafe { p_size.as_mut() }) else {
            return IB_INVALID_PARAMETER;
        };
        let Ok(sink) = c_sink(cq_context, pfn_async_event_cb, completion_cb, convention) else {
            return IB_INSUFFICIENT_MEMORY;
        };
        // SAFETY: the consumer's vendor bytes, valid for the call.
        let r = unsafe {
            with_umv(p_umv_buf, |umv| {
                ca.verbs.create_cq(&ca.obj, *size, sink.into(), umv)
            })
        };
        let r = r.map(|(cq, actual)| {
            *size = actual;
            cq
        });
        // SAFETY: `ph_cq` is the consumer's output.
        unsafe { created(&ca.verbs, r, ph_cq, |v, cq| v.destroy_cq(cq)) }
    }
}

entry_points! {
    /// `resize_cq`: the size granted goes back in `*p_size`.
    ///
    /// # Safety
    /// The caller keeps the C contract of the table entry:
    /// * `h_cq` is null or a handle this table's `create_cq` returned that no destroy call has
    ///   taken back;
    /// * `p_size` is null or valid for a read and a write;
    /// * `p_umv_buf` is null or a valid `ci_umv_buf_t` whose `p_inout_buf`, unless 0, addresses
    ///   `max(input_size, output_size)` bytes writable for the call.
    unsafe extern "both" fn resize_cq<V: Verbs>(
        h_cq: ib_cq_handle_t,
        p_size: *mut u32,
        p_umv_buf: *mut ci_umv_buf_t,
    ) -> ib_api_status_t {
        // SAFETY: `h_cq` is a CQ this export made.
        let Some(cq) = (unsafe { held::<V, V::Cq, _>(h_cq) }) else {
            return IB_INVALID_CQ_HANDLE;
        };
        // SAFETY: the consumer's in/out size, or null.
        let Some(size) = (unsafe { p_size.as_mut() }) else {
            return IB_INVALID_PARAMETER;
        };
        // SAFETY: the consumer's vendor bytes, valid for the call.
        match unsafe { with_umv(p_umv_buf, |umv| cq.verbs.resize_cq(&cq.obj, *size, umv)) } {
            Ok(actual) => {
                *size = actual;
                IB_SUCCESS
            }
            Err(e) => to_ib(e),
        }
    }
}

entry_points! {
    /// `destroy_cq`.
    ///
    /// # Safety
    /// The caller keeps the C contract of the table entry:
    /// * `h_cq` is null or a handle this table's `create_cq` returned, not destroyed before; no
    ///   other call uses it during or after this one.
    unsafe extern "both" fn destroy_cq<V: Verbs>(h_cq: ib_cq_handle_t) -> ib_api_status_t {
        // SAFETY: a CQ this export made, destroyed once.
        unsafe { destroyed::<V, V::Cq, _>(h_cq, IB_INVALID_CQ_HANDLE, |v, obj| v.destroy_cq(obj)) }
    }
}

entry_points! {
    /// `create_qp`: its events go to `pfn_async_event_cb` with `qp_context`.
    ///
    /// # Safety
    /// The caller keeps the C contract of the table entry:
    /// * `h_pd` is null or a handle this table's `allocate_pd` returned that no destroy call has
    ///   taken back;
    /// * `p_create_attr` is null or valid for a read, and its `h_sq_cq`, `h_rq_cq` and `h_srq` are
    ///   each null or live handles of this table's `create_cq` / `create_srq`;
    /// * `p_qp_attr` and `ph_qp` are each null or valid for a write;
    /// * `p_umv_buf` is null or a valid `ci_umv_buf_t` whose `p_inout_buf`, unless 0, addresses
    ///   `max(input_size, output_size)` bytes writable for the call;
    /// * `pfn_async_event_cb`, if not null, may be called with `qp_context` from any processor at
    ///   DISPATCH_LEVEL until `destroy_qp` returns.
    unsafe extern "both" fn create_qp<V: Verbs>(
        h_pd: ib_pd_handle_t,
        qp_context: *const c_void,
        pfn_async_event_cb: ci_async_event_cb_t,
        p_create_attr: *mut ib_qp_create_t,
        p_qp_attr: *mut ib_qp_attr_t,
        ph_qp: *mut ib_qp_handle_t,
        p_umv_buf: *mut ci_umv_buf_t,
    ) -> ib_api_status_t [convention] {
        // SAFETY: `h_pd` is a PD this export made.
        let Some(pd) = (unsafe { held::<V, V::Pd, _>(h_pd) }) else {
            return IB_INVALID_PD_HANDLE;
        };
        // SAFETY: the consumer's creation attributes, valid for the call, or null.
        let Some(c) = (unsafe { p_create_attr.as_ref() }) else {
            return IB_INVALID_PARAMETER;
        };
        let Some(qp_type) = convert::qp_type_from_ib(c.qp_type) else {
            return IB_INVALID_SERVICE_TYPE;
        };
        // SAFETY: a CQ handle this export made (or null, refused).
        let scq = unsafe { held::<V, V::Cq, _>(c.h_sq_cq) };
        // SAFETY: as above.
        let rcq = unsafe { held::<V, V::Cq, _>(c.h_rq_cq) };
        let (Some(scq), Some(rcq)) = (scq, rcq) else {
            return IB_INVALID_CQ_HANDLE;
        };
        // SAFETY: an SRQ handle this export made, or null for none.
        let srq = unsafe { held::<V, V::Srq, _>(c.h_srq) };
        let create = QpCreate {
            qp_type,
            sq_depth: c.sq_depth,
            rq_depth: c.rq_depth,
            sq_sge: c.sq_sge,
            rq_sge: c.rq_sge,
            sq_max_inline: c.sq_max_inline,
            sq_signaled: c.sq_signaled != 0,
            send_cq: &scq.obj,
            recv_cq: &rcq.obj,
            srq: srq.map(|s| &s.obj),
        };
        let Ok(sink) = c_sink(qp_context, pfn_async_event_cb, None, convention) else {
            return IB_INSUFFICIENT_MEMORY;
        };
        // SAFETY: the consumer's vendor bytes, valid for the call.
        let r = unsafe {
            with_umv(p_umv_buf, |umv| {
                pd.verbs.create_qp(&pd.obj, &create, sink.into(), umv)
            })
        };
        let r = r.map(|(qp, info)| {
            let mut attr = ib_qp_attr_t::zeroed();
            attr.h_pd = h_pd;
            attr.qp_type = c.qp_type;
            attr.sq_max_inline = info.sq_max_inline;
            attr.sq_depth = info.sq_depth;
            attr.rq_depth = info.rq_depth;
            attr.sq_sge = info.sq_sge;
            attr.rq_sge = info.rq_sge;
            attr.h_sq_cq = c.h_sq_cq;
            attr.h_rq_cq = c.h_rq_cq;
            attr.h_srq = c.h_srq;
            attr.sq_signaled = c.sq_signaled;
            attr.state = IB_QPS_RESET;
            attr.num = info.qpn.to_be();
            // SAFETY: the consumer's output.
            unsafe { put(p_qp_attr, attr) };
            qp
        });
        // SAFETY: `ph_qp` is the consumer's output.
        unsafe { created(&pd.verbs, r, ph_qp, |v, qp| v.destroy_qp(qp)) }
    }
}

entry_points! {
    /// `query_qp`.
    ///
    /// # Safety
    /// The caller keeps the C contract of the table entry:
    /// * `h_qp` is null or a handle this table's `create_qp` returned that no destroy call has
    ///   taken back;
    /// * `p_qp_attr` is null or valid for a write.
    unsafe extern "both" fn query_qp<V: Verbs>(
        h_qp: ib_qp_handle_t,
        p_qp_attr: *mut ib_qp_attr_t,
        _p_umv_buf: *mut ci_umv_buf_t,
    ) -> ib_api_status_t {
        // SAFETY: `h_qp` is a QP this export made.
        let Some(qp) = (unsafe { held::<V, V::Qp, _>(h_qp) }) else {
            return IB_INVALID_QP_HANDLE;
        };
        match qp.verbs.query_qp(&qp.obj) {
            Ok(attr) => {
                // SAFETY: the consumer's output.
                unsafe { put(p_qp_attr, convert::qp_attr_to_ib(&attr)) };
                IB_SUCCESS
            }
            Err(e) => to_ib(e),
        }
    }
}

entry_points! {
    /// `ndi_modify_qp`: the modify WinVerbs calls, with the vendor output buffer.
    ///
    /// # Safety
    /// The caller keeps the C contract of the table entry:
    /// * `h_qp` is null or a handle this table's `create_qp` returned that no destroy call has
    ///   taken back;
    /// * `p_modify_attr` is null or valid for a read;
    /// * `p_qp_attr` is null or valid for a write;
    /// * `p_outbuf` is null or addresses `buf_size` bytes writable for the call.
    unsafe extern "both" fn ndi_modify_qp<V: Verbs>(
        h_qp: ib_qp_handle_t,
        p_modify_attr: *const ib_qp_mod_t,
        p_qp_attr: *mut ib_qp_attr_t,
        buf_size: u32,
        p_outbuf: *mut u8,
    ) -> ib_api_status_t {
        // SAFETY: `h_qp` is a QP this export made.
        let Some(qp) = (unsafe { held::<V, V::Qp, _>(h_qp) }) else {
            return IB_INVALID_QP_HANDLE;
        };
        // SAFETY: the consumer's modification, valid for the call, or null.
        let Some(m) = (unsafe { p_modify_attr.as_ref() }) else {
            return IB_INVALID_PARAMETER;
        };
        let m = match convert::qp_mod_from_ib(m) {
            Ok(m) => m,
            Err(e) => return to_ib(e),
        };
        let out: &mut [u8] = if p_outbuf.is_null() || buf_size == 0 {
            &mut []
        } else {
            // SAFETY: the consumer's output buffer of `buf_size` bytes, valid for the call.
            unsafe { core::slice::from_raw_parts_mut(p_outbuf, buf_size as usize) }
        };
        if let Err(e) = qp.verbs.modify_qp(&qp.obj, &m, out) {
            return to_ib(e);
        }
        if !p_qp_attr.is_null() {
            match qp.verbs.query_qp(&qp.obj) {
                // SAFETY: the consumer's output, checked not null.
                Ok(attr) => unsafe { put(p_qp_attr, convert::qp_attr_to_ib(&attr)) },
                Err(e) => return to_ib(e),
            }
        }
        IB_SUCCESS
    }
}

entry_points! {
    /// `destroy_qp`.
    ///
    /// # Safety
    /// The caller keeps the C contract of the table entry:
    /// * `h_qp` is null or a handle this table's `create_qp` returned, not destroyed before; no
    ///   other call uses it during or after this one.
    unsafe extern "both" fn destroy_qp<V: Verbs>(
        h_qp: ib_qp_handle_t,
        _timewait: u64,
    ) -> ib_api_status_t {
        // SAFETY: a QP this export made, destroyed once.
        unsafe { destroyed::<V, V::Qp, _>(h_qp, IB_INVALID_QP_HANDLE, |v, obj| v.destroy_qp(obj)) }
    }
}

entry_points! {
    /// `register_mr`: the keys go back in `*p_lkey` and `*p_rkey`.
    ///
    /// # Safety
    /// The caller keeps the C contract of the table entry:
    /// * `h_pd` is null or a handle this table's `allocate_pd` returned that no destroy call has
    ///   taken back;
    /// * `p_mr_create` is null or valid for a read (the range it names is only a request: the
    ///   verbs implementation decides what it may pin);
    /// * `p_lkey`, `p_rkey` and `ph_mr` are each null or valid for a write.
    unsafe extern "both" fn register_mr<V: Verbs>(
        h_pd: ib_pd_handle_t,
        p_mr_create: *const ib_mr_create_t,
        p_lkey: *mut net32_t,
        p_rkey: *mut net32_t,
        ph_mr: *mut ib_mr_handle_t,
        _um_call: boolean_t,
    ) -> ib_api_status_t {
        // SAFETY: `h_pd` is a PD this export made.
        let Some(pd) = (unsafe { held::<V, V::Pd, _>(h_pd) }) else {
            return IB_INVALID_PD_HANDLE;
        };
        // SAFETY: the consumer's request, valid for the call, or null.
        let Some(c) = (unsafe { p_mr_create.as_ref() }) else {
            return IB_INVALID_PARAMETER;
        };
        let region = MemoryRegion {
            address: c.vaddr.addr() as u64,
            length: c.length,
            access: c.access_ctrl,
        };
        let r = pd.verbs.register_mr(&pd.obj, &region).map(|(mr, keys)| {
            // SAFETY: the consumer's outputs.
            unsafe { put(p_lkey, keys.lkey) };
            // SAFETY: as above.
            unsafe { put(p_rkey, keys.rkey) };
            // Deregistration can fail and leave the region registered under the same handle, so
            // the handle owns an optional MR.
            Mutex::new(Some(mr))
        });
        // SAFETY: `ph_mr` is the consumer's output.
        unsafe {
            created(&pd.verbs, r, ph_mr, |v, mr: Mutex<Option<V::Mr>>| {
                if let Some(mr) = mr.into_inner() {
                    let _ = v.deregister_mr(mr);
                }
            })
        }
    }
}

entry_points! {
    /// `deregister_mr`: a refused deregistration leaves the handle valid (as OFW's drivers do).
    ///
    /// # Safety
    /// The caller keeps the C contract of the table entry:
    /// * `h_mr` is null or a handle this table's `register_mr` returned that no successful
    ///   `deregister_mr` has taken back; no other call uses it during this one, nor after it succeeds.
    unsafe extern "both" fn deregister_mr<V: Verbs>(h_mr: ib_mr_handle_t) -> ib_api_status_t {
        // SAFETY: an MR handle this export made.
        let Some(mr) = (unsafe { held::<V, Mutex<Option<V::Mr>>, _>(h_mr) }) else {
            return IB_INVALID_MR_HANDLE;
        };
        let Some(obj) = mr.obj.lock().take() else {
            return IB_INVALID_MR_HANDLE;
        };
        match mr.verbs.deregister_mr(obj) {
            Ok(()) => {
                // SAFETY: deregistered: the handle is dead and taken back once.
                drop(unsafe { take::<V, Mutex<Option<V::Mr>>, _>(h_mr) });
                IB_SUCCESS
            }
            Err((obj, e)) => {
                // Still registered under the same handle.
                *mr.obj.lock() = Some(obj);
                to_ib(e)
            }
        }
    }
}

entry_points! {
    /// `create_mw`: the window's key goes back in `*p_rkey`.
    ///
    /// # Safety
    /// The caller keeps the C contract of the table entry:
    /// * `h_pd` is null or a handle this table's `allocate_pd` returned that no destroy call has
    ///   taken back;
    /// * `p_umv_buf` is null or a valid `ci_umv_buf_t` whose `p_inout_buf`, unless 0, addresses
    ///   `max(input_size, output_size)` bytes writable for the call;
    /// * `p_rkey` and `ph_mw` are each null or valid for a write.
    unsafe extern "both" fn create_mw<V: Verbs>(
        h_pd: ib_pd_handle_t,
        p_rkey: *mut net32_t,
        ph_mw: *mut ib_mw_handle_t,
        p_umv_buf: *mut ci_umv_buf_t,
    ) -> ib_api_status_t {
        // SAFETY: `h_pd` is a PD this export made.
        let Some(pd) = (unsafe { held::<V, V::Pd, _>(h_pd) }) else {
            return IB_INVALID_PD_HANDLE;
        };
        // SAFETY: the consumer's vendor bytes, valid for the call.
        let r = unsafe { with_umv(p_umv_buf, |umv| pd.verbs.create_mw(&pd.obj, umv)) };
        let r = r.map(|(mw, rkey)| {
            // SAFETY: the consumer's output.
            unsafe { put(p_rkey, rkey) };
            mw
        });
        // SAFETY: `ph_mw` is the consumer's output.
        unsafe { created(&pd.verbs, r, ph_mw, |v, mw| v.destroy_mw(mw)) }
    }
}

entry_points! {
    /// `destroy_mw`.
    ///
    /// # Safety
    /// The caller keeps the C contract of the table entry:
    /// * `h_mw` is null or a handle this table's `create_mw` returned, not destroyed before; no
    ///   other call uses it during or after this one.
    unsafe extern "both" fn destroy_mw<V: Verbs>(h_mw: ib_mw_handle_t) -> ib_api_status_t {
        // SAFETY: a window this export made, destroyed once.
        unsafe { destroyed::<V, V::Mw, _>(h_mw, IB_INVALID_MW_HANDLE, |v, obj| v.destroy_mw(obj)) }
    }
}

entry_points! {
    /// `attach_mcast`.
    ///
    /// # Safety
    /// The caller keeps the C contract of the table entry:
    /// * `h_qp` is null or a handle this table's `create_qp` returned that no destroy call has
    ///   taken back;
    /// * `p_mcast_gid` is null or valid for a read;
    /// * `ph_mcast` is null or valid for a write.
    unsafe extern "both" fn attach_mcast<V: Verbs>(
        h_qp: ib_qp_handle_t,
        p_mcast_gid: *const ib_gid_t,
        mcast_lid: ib_net16_t,
        ph_mcast: *mut ib_mcast_handle_t,
        _p_umv_buf: *mut ci_umv_buf_t,
    ) -> ib_api_status_t {
        // SAFETY: `h_qp` is a QP this export made.
        let Some(qp) = (unsafe { held::<V, V::Qp, _>(h_qp) }) else {
            return IB_INVALID_QP_HANDLE;
        };
        // SAFETY: the consumer's GID, valid for the call, or null.
        let Some(gid) = (unsafe { p_mcast_gid.as_ref() }) else {
            return IB_INVALID_PARAMETER;
        };
        // SAFETY: every view of the GID union is 16 plain bytes.
        let gid = unsafe { gid.raw };
        let r = qp
            .verbs
            .attach_mcast(&qp.obj, &gid, u16::from_be(mcast_lid));
        // SAFETY: `ph_mcast` is the consumer's output.
        unsafe { created(&qp.verbs, r, ph_mcast, |v, m| v.detach_mcast(m)) }
    }
}

entry_points! {
    /// `detach_mcast`.
    ///
    /// # Safety
    /// The caller keeps the C contract of the table entry:
    /// * `h_mcast` is null or a handle this table's `attach_mcast` returned, not destroyed before; no
    ///   other call uses it during or after this one.
    unsafe extern "both" fn detach_mcast<V: Verbs>(h_mcast: ib_mcast_handle_t) -> ib_api_status_t {
        // SAFETY: an attachment this export made, detached once.
        unsafe {
            destroyed::<V, V::Mcast, _>(h_mcast, IB_INVALID_MCAST_HANDLE, |v, m| v.detach_mcast(m))
        }
    }
}
