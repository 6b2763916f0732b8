//! [`CiCmExport`]: any `wv_hal::ConnectionManager` as an `INFINIBAND_INTERFACE_CM` table of
//! `extern "system"` functions — what ibbus answers `GUID_INFINIBAND_INTERFACE_CM` queries
//! with. The soft HCA's connection manager presents itself to the driver through this (the CM
//! half of its C face), so the filter's CM edge ([`crate::cm_import::CiCm`]) runs through real
//! C calls, ids and callbacks.
//!
//! The table behaves as AL's kernel CM (`core/al/kernel/al_cm.c`):
//! * an id is a heap `iba_cm_id` (the first field of a private record) whose `callback` and
//!   `context` the CM reads each time it reports an event, so a consumer may change them (OFW's
//!   WinVerbs did, after `get_request`: spec §7.1-h); `destroy_id` waits for the id's running
//!   callbacks, then frees the record;
//! * a listening id's callback gets a zeroed `iba_cm_req_received` event per queued request,
//!   which the consumer takes with `get_request` (the new id gets the listener's callback and
//!   context) or `get_request_ex` (the ones it passes);
//! * callbacks' return values are ignored (AL destroyed the id on a failure; WinVerbs never
//!   returned one);
//! * LAP/APR, SIDR, `migrate`, `established`, `cancel_listen` and the formatted-REP pair are
//!   left null: WinVerbs does not call them.
//!
//! `create_id` has no context argument — AL's CM is one global object — so each export takes
//! one of [`EXPORT_SLOTS`] process-wide slots, and its table's `create_id` is the entry
//! monomorphised for that slot.

use alloc::sync::Arc;
use core::cell::UnsafeCell;
use core::ffi::c_void;
use core::mem::ManuallyDrop;
use core::ptr;
use core::sync::atomic::{AtomicPtr, AtomicU32, Ordering};

use wv_abi::NtStatus;
use wv_hal::cm::{
    DREP_PRIVATE_DATA, DREQ_PRIVATE_DATA, MRA_PRIVATE_DATA, REJ_ARI, REJ_PRIVATE_DATA,
    REP_PRIVATE_DATA, REQ_PRIVATE_DATA, RTU_PRIVATE_DATA,
};
use wv_hal::{CmEvent, CmEventSink, CmRep, CmReq, ConnectionManager, KArc};

use crate::base::{NTSTATUS, net64_t};
use crate::cm::*;
use crate::cm_convert::{path_from_ib, rep_event_to_ib, req_event_to_ib, req_params_from_ib};
use crate::convention::{self, Convention};
use crate::convert::{qp_mod_to_ib, qp_state_from_ib, qp_type_from_ib};
use crate::ib_types::*;
use crate::pinned::Pinned;

/// How many exports may exist in one process at a time.
pub const EXPORT_SLOTS: usize = 64;

/// The export of each slot (a `*const Shared<C>` of the type that claimed it), or null.
static SLOTS: [AtomicPtr<()>; EXPORT_SLOTS] =
    [const { AtomicPtr::new(ptr::null_mut()) }; EXPORT_SLOTS];

/// What every id and the interface's `Context` share.
struct Shared<C: ConnectionManager> {
    cm: Arc<C>,
    slot: usize,
    next_cid: AtomicU32,
}

impl<C: ConnectionManager> Drop for Shared<C> {
    fn drop(&mut self) {
        // The last reference (export or interface) is gone: nothing can call this slot's
        // `create_id` any more.
        SLOTS[self.slot].store(ptr::null_mut(), Ordering::Release);
    }
}

/// A connection manager presented as an `INFINIBAND_INTERFACE_CM` table.
pub struct CiCmExport<C: ConnectionManager> {
    shared: KArc<Shared<C>>,
}

impl<C: ConnectionManager> core::fmt::Debug for CiCmExport<C> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("CiCmExport")
            .field("slot", &self.shared.slot)
            .finish()
    }
}

/// Why an export could not be made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExportError {
    /// Every one of the [`EXPORT_SLOTS`] slots is taken by a live export.
    NoSlot,
    /// No memory for the export.
    NoMemory,
}

impl<C: ConnectionManager> CiCmExport<C> {
    /// Presents `cm` as a table.
    ///
    /// # Errors
    /// Every one of the [`EXPORT_SLOTS`] slots is taken by a live export, or no memory.
    pub fn new(cm: Arc<C>) -> Result<Self, ExportError> {
        // Reserved first: a claimed slot is then always filled.
        let reserved = KArc::<Shared<C>>::try_reserve().map_err(|_| ExportError::NoMemory)?;
        for (slot, cell) in SLOTS.iter().enumerate() {
            // Claim the slot with a placeholder, then publish the real pointer.
            let placeholder = ptr::dangling_mut::<()>();
            if cell
                .compare_exchange(
                    ptr::null_mut(),
                    placeholder,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                )
                .is_ok()
            {
                let shared = reserved.write(Shared {
                    cm,
                    slot,
                    next_cid: AtomicU32::new(1),
                });
                cell.store(KArc::as_ptr(&shared).cast_mut().cast(), Ordering::Release);
                return Ok(CiCmExport { shared });
            }
        }
        Err(ExportError::NoSlot)
    }

    /// The interface a query for `GUID_INFINIBAND_INTERFACE_CM` returns, holding one reference
    /// on the export (released by its `InterfaceDereference`), for a consumer compiled for
    /// this target.
    pub fn interface(&self) -> INFINIBAND_INTERFACE_CM {
        self.interface_in(Convention::System)
    }

    /// [`CiCmExport::interface`] for a consumer of `convention`: every entry is the one of
    /// that convention, and the id callbacks the consumer passes are called with it.
    pub fn interface_in(&self, convention: Convention) -> INFINIBAND_INTERFACE_CM {
        INFINIBAND_INTERFACE_CM {
            InterfaceHeader: convention::exported_header::<INFINIBAND_INTERFACE_CM, _>(
                INFINIBAND_INTERFACE_CM_VERSION,
                &self.shared,
                convention,
                [reference::entry::<C>, dereference::entry::<C>],
            ),
            CM: table::<C>(self.shared.slot, convention),
        }
    }

    /// The filter's CM edge over this table: what the driver makes of a queried interface.
    ///
    /// # Errors
    /// Never for a table this export made; the check is [`crate::CiCm::new`]'s.
    pub fn open(&self) -> Result<crate::CiCm, crate::CiError> {
        // SAFETY: `interface` returns a complete table of this export's functions, carrying
        // one reference — what `CiCm::new` requires.
        unsafe { crate::CiCm::new(self.interface()) }
    }

    /// References on the export held by consumers' interfaces (for tests and leak checks).
    pub fn consumers(&self) -> usize {
        KArc::strong_count(&self.shared) - 1
    }
}

/// A new reference on the `Shared<C>` behind `raw` (a reference its caller holds).
///
/// # Safety
/// `raw` came from `KArc::into_raw` of a `KArc<Shared<C>>` whose reference is still held.
unsafe fn another<C: ConnectionManager>(raw: *const Shared<C>) -> KArc<Shared<C>> {
    // SAFETY: the caller's promise; borrowing its reference for a clone leaves it as it was.
    let held = ManuallyDrop::new(unsafe { KArc::from_raw(raw) });
    KArc::clone(&held)
}

entry_points! {
    /// `InterfaceReference`: one more reference on the export.
    ///
    /// # Safety
    /// The caller keeps the C contract of the table entry:
    /// * `context` is the `Context` of an interface this export made, on which the caller holds a
    ///   reference.
    unsafe extern "both" fn reference<C: ConnectionManager>(context: *mut c_void) {
        // SAFETY: `context` is the `KArc<Shared<C>>` pointer `interface` gave up, still referenced
        // by the caller.
        let new = unsafe { another::<C>(context.cast()) };
        // The new reference the caller now holds as well.
        let _ = KArc::into_raw(new);
    }
}

entry_points! {
    /// `InterfaceDereference`: releases one reference on the export.
    ///
    /// # Safety
    /// The caller keeps the C contract of the table entry:
    /// * `context` is the `Context` of an interface this export made, and the caller gives up one
    ///   reference it holds (taken by the query or by `InterfaceReference`).
    unsafe extern "both" fn dereference<C: ConnectionManager>(context: *mut c_void) {
        // SAFETY: drops one of the references `interface`/`reference` gave up.
        drop(unsafe { KArc::from_raw(context.cast::<Shared<C>>()) });
    }
}

/// One id: the C id first, so its address is the record's.
#[repr(C)]
struct ExportId<C: ConnectionManager> {
    c: UnsafeCell<iba_cm_id>,
    shared: KArc<Shared<C>>,
    /// The Rust id; written once before the record's address reaches C, read-only after.
    id: UnsafeCell<Option<C::Id>>,
}

impl<C: ConnectionManager> ExportId<C> {
    /// Where the Rust id of the record at `this` lives.
    fn id_slot(this: *const Self) -> *mut Option<C::Id> {
        let cell = this
            .cast::<u8>()
            .wrapping_add(core::mem::offset_of!(Self, id))
            .cast::<UnsafeCell<Option<C::Id>>>();
        UnsafeCell::raw_get(cell)
    }

    fn hal(&self) -> Option<&C::Id> {
        // SAFETY: written only before the record was published to C (see the field).
        unsafe { (*self.id.get()).as_ref() }
    }
}

/// The record behind an id C passes back.
///
/// # Safety
/// `p_id` is null or an id this export's `create_id`/`get_request*` made and `destroy_id` has
/// not freed.
unsafe fn record<'a, C: ConnectionManager>(p_id: *mut iba_cm_id) -> Option<&'a ExportId<C>> {
    // SAFETY: the caller's promise; the id is the record's first field.
    unsafe { p_id.cast::<ExportId<C>>().as_ref() }
}

/// The sink of a Rust id: reports to the C callback and context the id holds at the time,
/// with the convention of the consumer that created the id.
struct IdSink {
    id: *mut iba_cm_id,
    convention: Convention,
}

// SAFETY: the record outlives every callback (destroy_id waits for them before freeing it);
// the CM calls sinks from any processor.
unsafe impl Send for IdSink {}
// SAFETY: as above; the sink only reads the id's callback and context.
unsafe impl Sync for IdSink {}

impl CmEventSink for IdSink {
    fn on_event(&self, event: CmEvent<'_>) {
        // SAFETY: the record is alive (see the `Send` impl); the consumer owns `callback` and
        // `context` and may have changed them, so they are read now.
        let callback = unsafe { self.id.read() }.callback;
        let Some(callback) = callback else {
            return;
        };
        let mut c = iba_cm_event::zeroed();
        // Holds the REP while C reads its private data through the event.
        let rep;
        match event {
            CmEvent::ReqReceived => c.r#type = iba_cm_req_received,
            CmEvent::ReqError => c.r#type = iba_cm_req_error,
            CmEvent::RepReceived(r) => {
                rep = *r;
                c.r#type = iba_cm_rep_received;
                c.data.rep = rep_event_to_ib(&rep);
            }
            CmEvent::RepError => c.r#type = iba_cm_rep_error,
            CmEvent::RtuReceived { private_data } => {
                c.r#type = iba_cm_rtu_received;
                c.data.rtu = pdata(private_data, RTU_PRIVATE_DATA);
            }
            CmEvent::DreqReceived { private_data } => {
                c.r#type = iba_cm_dreq_received;
                c.data.dreq = pdata(private_data, DREQ_PRIVATE_DATA);
            }
            CmEvent::DreqError => c.r#type = iba_cm_dreq_error,
            CmEvent::DrepReceived { private_data } => {
                c.r#type = iba_cm_drep_received;
                c.data.drep = pdata(private_data, DREP_PRIVATE_DATA);
            }
            CmEvent::RejReceived {
                reason,
                ari,
                private_data,
            } => {
                c.r#type = iba_cm_rej_received;
                let ari = &ari[..ari.len().min(REJ_ARI)];
                let private_data = &private_data[..private_data.len().min(REJ_PRIVATE_DATA)];
                c.data.rej = iba_cm_rej_event {
                    ari: ari.as_ptr().cast_mut().cast(),
                    p_pdata: private_data.as_ptr().cast_mut().cast(),
                    reason: reason.to_be(),
                    ari_length: ari.len() as u8,
                    pdata_len: private_data.len() as u8,
                };
            }
            CmEvent::MraReceived {
                service_timeout,
                private_data,
            } => {
                c.r#type = iba_cm_mra_received;
                let private_data = &private_data[..private_data.len().min(MRA_PRIVATE_DATA)];
                c.data.mra = iba_cm_mra_event {
                    p_pdata: private_data.as_ptr().cast_mut().cast(),
                    pdata_len: private_data.len() as u8,
                    service_timeout,
                };
            }
            CmEvent::Other(kind) => c.r#type = kind,
        }
        // SAFETY: the consumer's callback, of its convention, with its live id and an event
        // whose data pointers (into `event` or `rep`) stay valid for the call.
        unsafe { convention::cm_event(self.convention, callback, self.id, &mut c) };
    }
}

/// `iba_cm_pdata` over borrowed bytes, bounded to the message's field.
fn pdata(data: &[u8], field: usize) -> iba_cm_pdata {
    let data = &data[..data.len().min(field)];
    iba_cm_pdata {
        p_pdata: data.as_ptr().cast_mut().cast(),
        pdata_len: data.len() as u8,
    }
}

/// A record not yet published, and the sink that reports to its C callback.
type NewRecord<C> = (Pinned<ExportId<C>>, KArc<dyn CmEventSink>);

/// A record for a new id, not yet published.
fn new_record<C: ConnectionManager>(
    shared: &KArc<Shared<C>>,
    callback: iba_cm_callback,
    context: *mut c_void,
    convention: Convention,
) -> Result<NewRecord<C>, NTSTATUS> {
    let cid = shared.next_cid.fetch_add(1, Ordering::Relaxed);
    let record = Pinned::new(ExportId {
        c: UnsafeCell::new(iba_cm_id {
            context,
            callback,
            cid: cid.to_be(),
        }),
        shared: KArc::clone(shared),
        id: UnsafeCell::new(None),
    })
    .map_err(|_| status(NtStatus::NO_MEMORY))?;
    let sink = KArc::try_new(IdSink {
        id: record.as_ptr().cast_mut().cast(),
        convention,
    })
    .map_err(|_| status(NtStatus::NO_MEMORY))?;
    Ok((record, sink.into()))
}

/// Publishes a record whose Rust id exists: C owns it from here, until `destroy_id`.
///
/// # Safety
/// `pp_id` is null or writable.
unsafe fn publish<C: ConnectionManager>(
    record: Pinned<ExportId<C>>,
    id: C::Id,
    pp_id: *mut *mut iba_cm_id,
) {
    let slot = ExportId::id_slot(record.as_ptr());
    // SAFETY: not yet published: nothing else reads the slot.
    unsafe { slot.write(Some(id)) };
    let p = record.into_raw().cast::<iba_cm_id>();
    if !pp_id.is_null() {
        // SAFETY: the caller's promise.
        unsafe { pp_id.write(p) };
    }
}

fn status(s: NtStatus) -> NTSTATUS {
    s.0 as NTSTATUS
}

fn result(r: Result<(), NtStatus>) -> NTSTATUS {
    match r {
        Ok(()) => 0,
        Err(s) => status(s),
    }
}

/// The CM table of `C` in `slot` for a consumer of `convention`.
fn table<C: ConnectionManager>(slot: usize, convention: Convention) -> iba_cm_interface {
    let mut t = iba_cm_interface::zeroed();
    t.create_id = create_fn::<C>(slot, convention);
    t.destroy_id = Some(destroy_id::entry::<C>(convention));
    t.listen = Some(listen::entry::<C>(convention));
    t.get_request = Some(get_request::entry::<C>(convention));
    t.send_req = Some(send_req::entry::<C>(convention));
    t.send_rep = Some(send_rep::entry::<C>(convention));
    t.send_rtu = Some(send_rtu::entry::<C>(convention));
    t.send_dreq = Some(send_dreq::entry::<C>(convention));
    t.send_drep = Some(send_drep::entry::<C>(convention));
    t.send_rej = Some(send_rej::entry::<C>(convention));
    t.send_mra = Some(send_mra::entry::<C>(convention));
    t.get_qp_attr = Some(get_qp_attr::entry::<C>(convention));
    t.get_request_ex = Some(get_request_ex::entry::<C>(convention));
    t
}

type CreateFn =
    unsafe extern "system" fn(iba_cm_callback, *mut c_void, *mut *mut iba_cm_id) -> NTSTATUS;

/// `create_id` of `slot`, for a consumer of `convention`.
fn create_fn<C: ConnectionManager>(slot: usize, convention: Convention) -> Option<CreateFn> {
    macro_rules! slots {
        ($($n:literal)*) => {
            match slot {
                $( $n => Some(create_id::entry::<C, $n>(convention) as CreateFn), )*
                _ => None,
            }
        };
    }
    slots!(
        0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31
        32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60
        61 62 63
    )
}

entry_points! {
    /// `create_id` of the export in slot `SLOT` (AL's CM takes no context: the slot is it).
    ///
    /// # Safety
    /// The caller keeps the C contract of the table entry:
    /// * the caller holds a reference on an interface whose table carries this function;
    /// * `callback`, if not null, may be called with the new id (whose `context` is `context`)
    ///   from the CM's DPC at DISPATCH_LEVEL until `destroy_id` of that id returns;
    /// * `pp_id` is null or valid for a write.
    unsafe extern "both" fn create_id<C: ConnectionManager; const SLOT: usize>(
        callback: iba_cm_callback,
        context: *mut c_void,
        pp_id: *mut *mut iba_cm_id,
    ) -> NTSTATUS [convention] {
        let raw = SLOTS[SLOT].load(Ordering::Acquire).cast::<Shared<C>>();
        if raw.is_null() || raw == ptr::dangling_mut() {
            return status(NtStatus::UNSUCCESSFUL);
        }
        // SAFETY: the slot holds the `Shared<C>` of the export whose table carries this
        // function, alive while the caller holds the interface's reference (the slot is cleared
        // when the last reference goes); the reference taken here keeps it for the call.
        let shared = unsafe { another::<C>(raw) };
        let (record, sink) = match new_record(&shared, callback, context, convention) {
            Ok(r) => r,
            Err(s) => return s,
        };
        match shared.cm.create_id(sink) {
            Ok(id) => {
                // SAFETY: `pp_id` is the consumer's output.
                unsafe { publish(record, id, pp_id) };
                0
            }
            Err(s) => status(s),
        }
    }
}

entry_points! {
    /// `destroy_id`: waits for the id's running callbacks, then frees it.
    ///
    /// # Safety
    /// The caller keeps the C contract of the table entry:
    /// * `p_id` is null or an id this table made, not destroyed before; no other call uses it
    ///   during or after this one.
    unsafe extern "both" fn destroy_id<C: ConnectionManager>(p_id: *mut iba_cm_id) {
        if p_id.is_null() {
            return;
        }
        let this = p_id.cast::<ExportId<C>>();
        let slot = ExportId::id_slot(this);
        // SAFETY: an id this export published, destroyed once: the consumer uses it no more, and
        // the CM (the only other reader, through the record) does not read this slot.
        let id = unsafe { slot.replace(None) };
        if let Some(id) = id {
            // SAFETY: the record is still allocated: the id's sink may read it until this returns.
            let shared = unsafe { &(*this).shared };
            // Waits until no callback of the id runs: after this nothing reads the record.
            shared.cm.destroy_id(id);
        }
        // SAFETY: the record `publish` gave to C, taken back once.
        drop(unsafe { Pinned::from_raw(this) });
    }
}

entry_points! {
    /// `listen`: by service id, with the IP-CM compare bytes.
    ///
    /// # Safety
    /// The caller keeps the C contract of the table entry:
    /// * `p_id` is null or an id this table's `create_id` or `get_request[_ex]` made that
    ///   `destroy_id` has not taken back;
    /// * `p_compare_buf` is null or valid for a read of `compare_len` bytes.
    unsafe extern "both" fn listen<C: ConnectionManager>(
        p_id: *mut iba_cm_id,
        service_id: net64_t,
        p_compare_buf: *mut c_void,
        compare_len: u8,
        compare_offset: u8,
    ) -> NTSTATUS {
        // SAFETY: a live id of this export.
        let Some(r) = (unsafe { record::<C>(p_id) }) else {
            return status(NtStatus::INVALID_PARAMETER);
        };
        let Some(id) = r.hal() else {
            return status(NtStatus::INVALID_PARAMETER);
        };
        let compare: &[u8] = if p_compare_buf.is_null() || compare_len == 0 {
            &[]
        } else {
            // SAFETY: the consumer's compare buffer of `compare_len` bytes, valid for the call.
            unsafe { core::slice::from_raw_parts(p_compare_buf.cast::<u8>(), usize::from(compare_len)) }
        };
        result(
            r.shared
                .cm
                .listen(id, u64::from_be(service_id), compare, compare_offset),
        )
    }
}

entry_points! {
    /// `get_request`: the new id reports to the listener's callback and context.
    ///
    /// # Safety
    /// The caller keeps the C contract of the table entry:
    /// * `p_listen_id` is null or a live id of this table, as for `listen`;
    /// * the listener's callback may be called for the new id as `callback` of `get_request_ex`;
    /// * `pp_id` and `p_event` are each null or valid for a write.
    unsafe extern "both" fn get_request<C: ConnectionManager>(
        p_listen_id: *mut iba_cm_id,
        pp_id: *mut *mut iba_cm_id,
        p_event: *mut iba_cm_event,
    ) -> NTSTATUS [convention] {
        // SAFETY: a live id of this export (or null, refused).
        let Some(r) = (unsafe { record::<C>(p_listen_id) }) else {
            return status(NtStatus::INVALID_PARAMETER);
        };
        // AL's `cm_get_request`: the new id reports to the listener's callback and context.
        // SAFETY: the id is alive; the consumer owns these fields and reads them only.
        let c = unsafe { r.c.get().read() };
        let (callback, context) = (c.callback, c.context);
        // SAFETY: the caller's arguments, passed on.
        unsafe { get_request_ex::<C>(convention, p_listen_id, callback, context, pp_id, p_event) }
    }
}

entry_points! {
    /// `get_request_ex`: the new id reports to `callback` and `context` from its creation on.
    /// IRQL <= DISPATCH_LEVEL, also from inside the listen id's own callback, as AL allows.
    ///
    /// # Safety
    /// The caller keeps the C contract of the table entry:
    /// * `p_listen_id` is null or a live id of this table, as for `listen`;
    /// * `callback`, if not null, may be called with the new id (whose `context` is `context`)
    ///   from the CM's DPC at DISPATCH_LEVEL until `destroy_id` of that id returns;
    /// * `pp_id` and `p_event` are each null or valid for a write.
    unsafe extern "both" fn get_request_ex<C: ConnectionManager>(
        p_listen_id: *mut iba_cm_id,
        callback: iba_cm_callback,
        context: *mut c_void,
        pp_id: *mut *mut iba_cm_id,
        p_event: *mut iba_cm_event,
    ) -> NTSTATUS [convention] {
        // SAFETY: a live id of this export (or null, refused).
        let Some(r) = (unsafe { record::<C>(p_listen_id) }) else {
            return status(NtStatus::INVALID_PARAMETER);
        };
        let Some(listen) = r.hal() else {
            return status(NtStatus::INVALID_PARAMETER);
        };
        let (record, sink) = match new_record(&r.shared, callback, context, convention) {
            Ok(x) => x,
            Err(s) => return s,
        };
        match r.shared.cm.get_request(listen, sink) {
            Ok((id, req)) => {
                if !p_event.is_null() {
                    let mut event = iba_cm_event::zeroed();
                    event.r#type = iba_cm_req_received;
                    event.data.req = req_event_to_ib(&req);
                    // SAFETY: the consumer's output.
                    unsafe { p_event.write(event) };
                }
                // SAFETY: the consumer's output.
                unsafe { publish(record, id, pp_id) };
                0
            }
            Err(s) => status(s),
        }
    }
}

/// The id and CM of a call on an id.
///
/// # Safety
/// As [`record`].
unsafe fn with_id<C: ConnectionManager>(
    p_id: *mut iba_cm_id,
    call: impl FnOnce(&C, &C::Id) -> Result<(), NtStatus>,
) -> NTSTATUS {
    // SAFETY: the caller's promise.
    let Some(r) = (unsafe { record::<C>(p_id) }) else {
        return status(NtStatus::INVALID_PARAMETER);
    };
    match r.hal() {
        Some(id) => result(call(&r.shared.cm, id)),
        None => status(NtStatus::INVALID_PARAMETER),
    }
}

/// `len` bytes at `p` (none when null).
///
/// # Safety
/// `p` is null or valid for `len` bytes for the call.
unsafe fn input<'a>(p: *const c_void, len: u8) -> &'a [u8] {
    if p.is_null() || len == 0 {
        &[]
    } else {
        // SAFETY: the caller's promise.
        unsafe { core::slice::from_raw_parts(p.cast::<u8>(), usize::from(len)) }
    }
}

entry_points! {
    /// `send_req`.
    ///
    /// # Safety
    /// The caller keeps the C contract of the table entry:
    /// * `p_id` is null or an id this table's `create_id` or `get_request[_ex]` made that
    ///   `destroy_id` has not taken back;
    /// * `p_req` is null or valid for a read; its `p_primary_path` is null or valid for a read,
    ///   and its `p_pdata` null or valid for a read of `pdata_len` bytes.
    unsafe extern "both" fn send_req<C: ConnectionManager>(
        p_id: *mut iba_cm_id,
        p_req: *mut iba_cm_req,
    ) -> NTSTATUS {
        // SAFETY: the consumer's request, valid for the call (or null, refused).
        let Some(c) = (unsafe { p_req.as_ref() }) else {
            return status(NtStatus::INVALID_PARAMETER);
        };
        // SAFETY: the request's path, valid for the call (or null, refused).
        let Some(path) = (unsafe { c.p_primary_path.as_ref() }) else {
            return status(NtStatus::INVALID_PARAMETER);
        };
        let Some(qp_type) = qp_type_from_ib(c.qp_type) else {
            return status(NtStatus::INVALID_PARAMETER);
        };
        if usize::from(c.pdata_len) > REQ_PRIVATE_DATA {
            return status(NtStatus::INVALID_PARAMETER);
        }
        let path = path_from_ib(path);
        // SAFETY: the request's private data, valid for the call.
        let private_data = unsafe { input(c.p_pdata, c.pdata_len) };
        let req = CmReq {
            service_id: u64::from_be(c.service_id),
            primary_path: &path,
            qpn: u32::from_be(c.qpn) & 0x00FF_FFFF,
            private_data,
            params: req_params_from_ib!(c, qp_type),
        };
        // SAFETY: a live id of this export.
        unsafe { with_id::<C>(p_id, |cm, id| cm.send_req(id, &req)) }
    }
}

entry_points! {
    /// `send_rep`.
    ///
    /// # Safety
    /// The caller keeps the C contract of the table entry:
    /// * `p_id` is null or an id this table's `create_id` or `get_request[_ex]` made that
    ///   `destroy_id` has not taken back;
    /// * `p_rep` is null or valid for a read, and its `p_pdata` null or valid for a read of
    ///   `pdata_len` bytes.
    unsafe extern "both" fn send_rep<C: ConnectionManager>(
        p_id: *mut iba_cm_id,
        p_rep: *mut iba_cm_rep,
    ) -> NTSTATUS {
        // SAFETY: the consumer's reply, valid for the call (or null, refused).
        let Some(c) = (unsafe { p_rep.as_ref() }) else {
            return status(NtStatus::INVALID_PARAMETER);
        };
        if usize::from(c.pdata_len) > REP_PRIVATE_DATA {
            return status(NtStatus::INVALID_PARAMETER);
        }
        // SAFETY: the reply's private data, valid for the call.
        let private_data = unsafe { input(c.p_pdata, c.pdata_len) };
        let rep = CmRep {
            qpn: u32::from_be(c.qpn) & 0x00FF_FFFF,
            starting_psn: u32::from_be(c.starting_psn) & 0x00FF_FFFF,
            private_data,
            failover_accepted: c.failover_accepted,
            responder_resources: c.resp_res,
            initiator_depth: c.init_depth,
            flow_control: c.flow_ctrl != 0,
            rnr_retry_count: c.rnr_retry_cnt,
            srq: c.srq != 0,
        };
        // SAFETY: a live id of this export.
        unsafe { with_id::<C>(p_id, |cm, id| cm.send_rep(id, &rep)) }
    }
}

/// The private data of a `send_rtu`/`send_dreq`/`send_drep`, bounded by the message's field.
///
/// # Safety
/// As [`input`].
unsafe fn bounded<'a>(p: *const c_void, len: u8, field: usize) -> Result<&'a [u8], NTSTATUS> {
    if usize::from(len) > field {
        return Err(status(NtStatus::INVALID_PARAMETER));
    }
    // SAFETY: the caller's promise.
    Ok(unsafe { input(p, len) })
}

entry_points! {
    /// `send_rtu`.
    ///
    /// # Safety
    /// The caller keeps the C contract of the table entry:
    /// * `p_id` is null or an id this table's `create_id` or `get_request[_ex]` made that
    ///   `destroy_id` has not taken back;
    /// * `p_pdata` is null or valid for a read of `pdata_len` bytes.
    unsafe extern "both" fn send_rtu<C: ConnectionManager>(
        p_id: *mut iba_cm_id,
        p_pdata: *const c_void,
        pdata_len: u8,
    ) -> NTSTATUS {
        // SAFETY: the consumer's private data, valid for the call.
        match unsafe { bounded(p_pdata, pdata_len, RTU_PRIVATE_DATA) } {
            // SAFETY: a live id of this export.
            Ok(data) => unsafe { with_id::<C>(p_id, |cm, id| cm.send_rtu(id, data)) },
            Err(s) => s,
        }
    }
}

entry_points! {
    /// `send_dreq`.
    ///
    /// # Safety
    /// The caller keeps the C contract of the table entry:
    /// * `p_id` is null or an id this table's `create_id` or `get_request[_ex]` made that
    ///   `destroy_id` has not taken back;
    /// * `p_pdata` is null or valid for a read of `pdata_len` bytes.
    unsafe extern "both" fn send_dreq<C: ConnectionManager>(
        p_id: *mut iba_cm_id,
        p_pdata: *const c_void,
        pdata_len: u8,
    ) -> NTSTATUS {
        // SAFETY: the consumer's private data, valid for the call.
        match unsafe { bounded(p_pdata, pdata_len, DREQ_PRIVATE_DATA) } {
            // SAFETY: a live id of this export.
            Ok(data) => unsafe { with_id::<C>(p_id, |cm, id| cm.send_dreq(id, data)) },
            Err(s) => s,
        }
    }
}

entry_points! {
    /// `send_drep`.
    ///
    /// # Safety
    /// The caller keeps the C contract of the table entry:
    /// * `p_id` is null or an id this table's `create_id` or `get_request[_ex]` made that
    ///   `destroy_id` has not taken back;
    /// * `p_pdata` is null or valid for a read of `pdata_len` bytes.
    unsafe extern "both" fn send_drep<C: ConnectionManager>(
        p_id: *mut iba_cm_id,
        p_pdata: *const c_void,
        pdata_len: u8,
    ) -> NTSTATUS {
        // SAFETY: the consumer's private data, valid for the call.
        match unsafe { bounded(p_pdata, pdata_len, DREP_PRIVATE_DATA) } {
            // SAFETY: a live id of this export.
            Ok(data) => unsafe { with_id::<C>(p_id, |cm, id| cm.send_drep(id, data)) },
            Err(s) => s,
        }
    }
}

entry_points! {
    /// `send_rej`.
    ///
    /// # Safety
    /// The caller keeps the C contract of the table entry:
    /// * `p_id` is null or an id this table's `create_id` or `get_request[_ex]` made that
    ///   `destroy_id` has not taken back;
    /// * `p_ari` is null or valid for a read of `ari_len` bytes;
    /// * `p_pdata` is null or valid for a read of `pdata_len` bytes.
    unsafe extern "both" fn send_rej<C: ConnectionManager>(
        p_id: *mut iba_cm_id,
        reason: ib_rej_status_t,
        p_ari: *const c_void,
        ari_len: u8,
        p_pdata: *const c_void,
        pdata_len: u8,
    ) -> NTSTATUS {
        // SAFETY: the consumer's ARI, valid for the call.
        let ari = match unsafe { bounded(p_ari, ari_len, REJ_ARI) } {
            Ok(a) => a,
            Err(s) => return s,
        };
        // SAFETY: the consumer's private data, valid for the call.
        match unsafe { bounded(p_pdata, pdata_len, REJ_PRIVATE_DATA) } {
            // SAFETY: a live id of this export.
            Ok(data) => unsafe {
                with_id::<C>(p_id, |cm, id| {
                    cm.send_rej(id, u16::from_be(reason), ari, data)
                })
            },
            Err(s) => s,
        }
    }
}

entry_points! {
    /// `send_mra`.
    ///
    /// # Safety
    /// The caller keeps the C contract of the table entry:
    /// * `p_id` is null or an id this table's `create_id` or `get_request[_ex]` made that
    ///   `destroy_id` has not taken back;
    /// * `p_pdata` is null or valid for a read of `pdata_len` bytes.
    unsafe extern "both" fn send_mra<C: ConnectionManager>(
        p_id: *mut iba_cm_id,
        service_timeout: u8,
        p_pdata: *const c_void,
        pdata_len: u8,
    ) -> NTSTATUS {
        // SAFETY: the consumer's private data, valid for the call.
        match unsafe { bounded(p_pdata, pdata_len, MRA_PRIVATE_DATA) } {
            // SAFETY: a live id of this export.
            Ok(data) => unsafe { with_id::<C>(p_id, |cm, id| cm.send_mra(id, service_timeout, data)) },
            Err(s) => s,
        }
    }
}

entry_points! {
    /// `get_qp_attr`: the CM's attributes for moving the id's QP to `state`.
    ///
    /// # Safety
    /// The caller keeps the C contract of the table entry:
    /// * `p_id` is null or an id this table's `create_id` or `get_request[_ex]` made that
    ///   `destroy_id` has not taken back;
    /// * `p_attr` is null or valid for a write.
    unsafe extern "both" fn get_qp_attr<C: ConnectionManager>(
        p_id: *mut iba_cm_id,
        state: ib_qp_state_t,
        p_attr: *mut ib_qp_mod_t,
    ) -> NTSTATUS {
        // SAFETY: a live id of this export (or null, refused).
        let Some(r) = (unsafe { record::<C>(p_id) }) else {
            return status(NtStatus::INVALID_PARAMETER);
        };
        let Some(id) = r.hal() else {
            return status(NtStatus::INVALID_PARAMETER);
        };
        if p_attr.is_null() {
            return status(NtStatus::INVALID_PARAMETER);
        }
        match r.shared.cm.get_qp_attr(id, qp_state_from_ib(state)) {
            Ok(m) => {
                // SAFETY: the consumer's output, checked not null.
                unsafe { p_attr.write(qp_mod_to_ib(&m)) };
                0
            }
            Err(s) => status(s),
        }
    }
}
