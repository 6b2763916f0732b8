//! [`CiCm`]: `wv_hal::ConnectionManager` over the connection manager's interface as the filter
//! holds it (`IRP_MN_QUERY_INTERFACE`, `GUID_INFINIBAND_INTERFACE_CM`, answered by ibbus below
//! the filter). It validates the table, owns the one reference the query took and releases it
//! when dropped; every method is the C call OFW's WinVerbs makes, and the id callbacks the CM
//! makes (from its MAD completion processing, IRQL <= DISPATCH_LEVEL) are trampolines into the
//! driver core's sinks.
//!
//! Ownership: a [`CiCmId`] owns the C id and the heap context its callback receives; the
//! context is freed only after `destroy_id` has returned, and `destroy_id` waits until no
//! callback of the id runs. Requests are taken with `get_request_ex`, which installs the new
//! id's callback and context before the CM can report anything on it (spec §7.1-h: OFW used
//! `get_request`, which gives the new id the listener's callback, and overwrote it afterwards).

use core::ffi::c_void;
use core::ptr;

use wv_abi::NtStatus;
use wv_hal::cm::{
    DREP_PRIVATE_DATA, DREQ_PRIVATE_DATA, MRA_PRIVATE_DATA, REJ_ARI, REJ_PRIVATE_DATA,
    REP_PRIVATE_DATA, RTU_PRIVATE_DATA,
};
use wv_hal::{
    CmEvent, CmEventSink, CmRep, CmReq, CmReqEvent, ConnectionManager, KArc, QpModify, QpState,
};

use crate::base::NTSTATUS;
use crate::cm::*;
use crate::cm_convert::{
    path_to_ib, rep_event_from_ib, req_event_from_ib, req_params_to_ib, req_private_data,
};
use crate::convert::{qp_mod_from_ib, qp_state_to_ib};
use crate::ib_types::*;
use crate::import::{CiError, CiTable};
use crate::pinned::Pinned;

/// The connection manager below the filter, through its `iba_cm_interface` table.
pub struct CiCm {
    iface: INFINIBAND_INTERFACE_CM,
}

// SAFETY: the CM's functions may be called from any thread at the IRQL each documents, and its
// context pointers are the CM's own.
unsafe impl Send for CiCm {}
// SAFETY: as above; the table is never written after construction.
unsafe impl Sync for CiCm {}

impl core::fmt::Debug for CiCm {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("CiCm")
            .field("version", &self.iface.InterfaceHeader.Version)
            .finish()
    }
}

/// A CM id: the C id and the context its callback receives (the owner's sink).
pub struct CiCmId {
    id: *mut iba_cm_id,
    ctx: Pinned<KArc<dyn CmEventSink>>,
}

// SAFETY: the id is the CM's token, usable from any thread; the context is only read (a
// shared sink).
unsafe impl Send for CiCmId {}
// SAFETY: as above; no method hands out mutable access.
unsafe impl Sync for CiCmId {}

impl core::fmt::Debug for CiCmId {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_tuple("CiCmId").field(&self.id).finish()
    }
}

/// `NT_SUCCESS`.
fn check(status: NTSTATUS) -> Result<(), NtStatus> {
    if status >= 0 {
        Ok(())
    } else {
        Err(NtStatus(status as u32))
    }
}

/// The length byte of private data (or ARI) that must fit `field` bytes.
fn len_u8(data: &[u8], field: usize) -> Result<u8, NtStatus> {
    if data.len() > field {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    u8::try_from(data.len()).map_err(|_| NtStatus::INVALID_PARAMETER)
}

/// Where C should read `data`: null for none.
fn data_ptr(data: &[u8]) -> *const c_void {
    if data.is_empty() {
        ptr::null()
    } else {
        data.as_ptr().cast()
    }
}

/// Bytes C passed with an event: `len` bytes at `p`, at most `max`.
///
/// # Safety
/// `p` is null or points at `len` readable bytes that stay valid for `'a`.
unsafe fn bytes<'a>(p: *const c_void, len: u8, max: usize) -> &'a [u8] {
    if p.is_null() || len == 0 {
        return &[];
    }
    // SAFETY: the caller's promise; the length is bounded by what it said is readable.
    unsafe { core::slice::from_raw_parts(p.cast::<u8>(), usize::from(len).min(max)) }
}

/// The private data of an event whose message carries only that (RTU, DREQ, DREP): member
/// `member` of the event's union, its `p_pdata`/`pdata_len`, at most `max` bytes. Used only
/// in the arm of [`deliver`] that matched the member's event type.
macro_rules! pdata_of {
    ($event:expr, $member:ident, $max:expr) => {{
        // SAFETY: the member the event's type selects (the caller matched on it).
        let msg = unsafe { $event.data.$member };
        // SAFETY: the CM's promise for the event's private data.
        unsafe { bytes(msg.p_pdata, msg.pdata_len, $max) }
    }};
}

/// Hands a C event to a sink, converted.
///
/// # Safety
/// `event` is a CM event valid for the call: the union member its `type` selects was written,
/// and its data pointers are null or valid for their lengths.
unsafe fn deliver(sink: &dyn CmEventSink, event: &iba_cm_event) {
    match event.r#type {
        iba_cm_req_received => sink.on_event(CmEvent::ReqReceived),
        iba_cm_req_error => sink.on_event(CmEvent::ReqError),
        iba_cm_rep_received => {
            // SAFETY: the member the type selects; plain integers and pointers.
            let rep = unsafe { event.data.rep };
            // SAFETY: the CM's promise for the event's private data.
            let pdata = unsafe { bytes(rep.rep.p_pdata, rep.rep.pdata_len, REP_PRIVATE_DATA) };
            sink.on_event(CmEvent::RepReceived(&rep_event_from_ib(&rep, pdata)));
        }
        iba_cm_rep_error => sink.on_event(CmEvent::RepError),
        iba_cm_rtu_received => {
            let private_data = pdata_of!(event, rtu, RTU_PRIVATE_DATA);
            sink.on_event(CmEvent::RtuReceived { private_data });
        }
        iba_cm_dreq_received => {
            let private_data = pdata_of!(event, dreq, DREQ_PRIVATE_DATA);
            sink.on_event(CmEvent::DreqReceived { private_data });
        }
        iba_cm_dreq_error => sink.on_event(CmEvent::DreqError),
        iba_cm_drep_received => {
            let private_data = pdata_of!(event, drep, DREP_PRIVATE_DATA);
            sink.on_event(CmEvent::DrepReceived { private_data });
        }
        iba_cm_rej_received => {
            // SAFETY: the member the type selects.
            let rej = unsafe { event.data.rej };
            // SAFETY: the CM's promise for the event's data.
            let ari = unsafe { bytes(rej.ari, rej.ari_length, REJ_ARI) };
            // SAFETY: as above.
            let private_data = unsafe { bytes(rej.p_pdata, rej.pdata_len, REJ_PRIVATE_DATA) };
            sink.on_event(CmEvent::RejReceived {
                reason: u16::from_be(rej.reason),
                ari,
                private_data,
            });
        }
        iba_cm_mra_received => {
            // SAFETY: the member the type selects.
            let mra = unsafe { event.data.mra };
            // SAFETY: the CM's promise for the event's private data.
            let private_data = unsafe { bytes(mra.p_pdata, mra.pdata_len, MRA_PRIVATE_DATA) };
            sink.on_event(CmEvent::MraReceived {
                service_timeout: mra.service_timeout,
                private_data,
            });
        }
        other => sink.on_event(CmEvent::Other(other)),
    }
}

/// The id callback every [`CiCmId`] is created with: finds the sink through the id's context.
/// IRQL <= DISPATCH_LEVEL, from the CM's processing. Always success (WinVerbs never asked the
/// CM to destroy an id from its callback).
///
/// # Safety
/// The CM's call: `p_id` is null or an id this adapter created (its `context` the address of
/// its pinned sink, freed only after `destroy_id` has returned and no callback runs), and
/// `p_event` null or an event valid for the call.
unsafe extern "system" fn cm_callback(
    p_id: *mut iba_cm_id,
    p_event: *mut iba_cm_event,
) -> NTSTATUS {
    // SAFETY: the CM passes its id, valid for the call.
    let Some(id) = (unsafe { p_id.as_ref() }) else {
        return 0;
    };
    // SAFETY: the CM passes an event valid for the call (or null, refused).
    let Some(event) = (unsafe { p_event.as_ref() }) else {
        return 0;
    };
    let context = id.context.cast::<KArc<dyn CmEventSink>>();
    // SAFETY: every id this adapter creates gets as context a `Pinned<KArc<dyn CmEventSink>>`'s
    // value, freed only after `destroy_id` (which waits for running callbacks) has returned.
    let Some(sink) = (unsafe { context.as_ref() }) else {
        return 0;
    };
    // SAFETY: the CM's event, valid for the call.
    unsafe { deliver(&**sink, event) };
    0
}

/// A function of the table, validated present by [`CiCm::new`].
macro_rules! cm_fn {
    ($self:ident . $f:ident) => {
        $self.iface.CM.$f.ok_or(NtStatus::NOT_IMPLEMENTED)?
    };
}

impl CiCm {
    /// Takes over a CM interface a query returned, with the reference it holds.
    ///
    /// # Errors
    /// A table too small, of another version, or without a function WinVerbs calls; the
    /// reference is released before returning.
    ///
    /// # Safety
    /// `iface` was filled in by the CM's provider answering `IRP_MN_QUERY_INTERFACE` for
    /// `GUID_INFINIBAND_INTERFACE_CM` (or by [`crate::cm_export`]): its functions follow the
    /// `iba_cm_interface` contract and it carries one reference until `InterfaceDereference`.
    pub unsafe fn new(iface: INFINIBAND_INTERFACE_CM) -> Result<Self, CiError> {
        let cm = CiCm { iface };
        let missing = first_missing!(&cm.iface.CM;
            create_id,
            destroy_id,
            listen,
            get_request_ex,
            send_req,
            send_rep,
            send_rtu,
            send_dreq,
            send_drep,
            send_rej,
            send_mra,
            get_qp_attr
        );
        CiTable::Cm.check(&cm.iface.InterfaceHeader, missing)?;
        Ok(cm)
    }

    /// The table.
    pub fn table(&self) -> &iba_cm_interface {
        &self.iface.CM
    }
}

impl Drop for CiCm {
    fn drop(&mut self) {
        // SAFETY: the one reference the query took, released once, at PASSIVE_LEVEL (the
        // filter device's cleanup).
        unsafe { self.iface.InterfaceHeader.release() };
    }
}

/// The context a new id's callback receives.
fn context(events: KArc<dyn CmEventSink>) -> Result<Pinned<KArc<dyn CmEventSink>>, NtStatus> {
    Pinned::new(events).map_err(|_| NtStatus::NO_MEMORY)
}

impl ConnectionManager for CiCm {
    type Id = CiCmId;

    fn create_id(&self, events: KArc<dyn CmEventSink>) -> Result<CiCmId, NtStatus> {
        let create = cm_fn!(self.create_id);
        let ctx = context(events)?;
        let mut id = ptr::null_mut();
        // SAFETY: the trampoline matches the callback type; the context stays at its address
        // until after `destroy_id`; `id` is writable.
        let status = unsafe { create(Some(cm_callback), ctx.as_ptr().cast_mut().cast(), &mut id) };
        check(status)?;
        if id.is_null() {
            return Err(NtStatus::UNSUCCESSFUL);
        }
        Ok(CiCmId { id, ctx })
    }

    fn destroy_id(&self, id: CiCmId) {
        if let Some(destroy) = self.iface.CM.destroy_id {
            // SAFETY: an id this CM created, destroyed once (the value is consumed); the call
            // waits for the id's running callbacks, so its context is freed below only when
            // none can read it.
            unsafe { destroy(id.id) };
        }
        drop(id.ctx);
    }

    fn listen(
        &self,
        id: &CiCmId,
        service_id: u64,
        compare: &[u8],
        compare_offset: u8,
    ) -> Result<(), NtStatus> {
        let listen = cm_fn!(self.listen);
        let len = u8::try_from(compare.len()).map_err(|_| NtStatus::INVALID_PARAMETER)?;
        // SAFETY: a live id; the compare bytes are valid for the call and only read (the CM
        // copies them, as AL's listen does).
        let status = unsafe {
            listen(
                id.id,
                service_id.to_be(),
                data_ptr(compare).cast_mut(),
                len,
                compare_offset,
            )
        };
        check(status)
    }

    /// `get_request_ex`, which AL allows at IRQL <= DISPATCH_LEVEL and from inside the listen's
    /// own callback (OFW's `WvEpIbListenHandler` calls it there). Allocates the new id's
    /// context from non-paged memory and waits for nothing.
    fn get_request(
        &self,
        listen: &CiCmId,
        events: KArc<dyn CmEventSink>,
    ) -> Result<(CiCmId, CmReqEvent), NtStatus> {
        let get = cm_fn!(self.get_request_ex);
        let ctx = context(events)?;
        let mut id = ptr::null_mut();
        let mut event = iba_cm_event::zeroed();
        // SAFETY: a live listening id; the new id's callback and context are installed by the
        // CM before it can report anything on it; outputs writable.
        let status = unsafe {
            get(
                listen.id,
                Some(cm_callback),
                ctx.as_ptr().cast_mut().cast(),
                &mut id,
                &mut event,
            )
        };
        check(status)?;
        if id.is_null() {
            return Err(NtStatus::UNSUCCESSFUL);
        }
        // SAFETY: a request event: the `req` member was written.
        let req = unsafe { event.data.req };
        Ok((CiCmId { id, ctx }, req_event_from_ib(&req)))
    }

    fn send_req(&self, id: &CiCmId, req: &CmReq<'_>) -> Result<(), NtStatus> {
        let send = cm_fn!(self.send_req);
        let pdata = req_private_data(req.private_data);
        if pdata.len() != req.private_data.len() {
            return Err(NtStatus::INVALID_PARAMETER);
        }
        let mut path = path_to_ib(req.primary_path);
        let mut c = iba_cm_req::zeroed();
        c.service_id = req.service_id.to_be();
        c.p_primary_path = &mut path;
        c.p_alt_path = ptr::null_mut();
        c.qpn = req.qpn.to_be();
        req_params_to_ib!(c, &req.params);
        c.p_pdata = data_ptr(pdata);
        c.pdata_len = pdata.len() as u8;
        // SAFETY: a live id; the request, its path and private data are valid for the call.
        let status = unsafe { send(id.id, &mut c) };
        check(status)
    }

    fn send_rep(&self, id: &CiCmId, rep: &CmRep<'_>) -> Result<(), NtStatus> {
        let send = cm_fn!(self.send_rep);
        let mut c = iba_cm_rep {
            qpn: rep.qpn.to_be(),
            starting_psn: rep.starting_psn.to_be(),
            p_pdata: data_ptr(rep.private_data),
            pdata_len: len_u8(rep.private_data, REP_PRIVATE_DATA)?,
            failover_accepted: rep.failover_accepted,
            resp_res: rep.responder_resources,
            init_depth: rep.initiator_depth,
            flow_ctrl: u8::from(rep.flow_control),
            rnr_retry_cnt: rep.rnr_retry_count,
            srq: u8::from(rep.srq),
        };
        // SAFETY: a live id; the reply and its private data are valid for the call.
        let status = unsafe { send(id.id, &mut c) };
        check(status)
    }

    fn send_rtu(&self, id: &CiCmId, private_data: &[u8]) -> Result<(), NtStatus> {
        let send = cm_fn!(self.send_rtu);
        let len = len_u8(private_data, RTU_PRIVATE_DATA)?;
        // SAFETY: a live id; the private data is valid for the call.
        check(unsafe { send(id.id, data_ptr(private_data), len) })
    }

    fn send_dreq(&self, id: &CiCmId, private_data: &[u8]) -> Result<(), NtStatus> {
        let send = cm_fn!(self.send_dreq);
        let len = len_u8(private_data, DREQ_PRIVATE_DATA)?;
        // SAFETY: a live id; the private data is valid for the call.
        check(unsafe { send(id.id, data_ptr(private_data), len) })
    }

    fn send_drep(&self, id: &CiCmId, private_data: &[u8]) -> Result<(), NtStatus> {
        let send = cm_fn!(self.send_drep);
        let len = len_u8(private_data, DREP_PRIVATE_DATA)?;
        // SAFETY: a live id; the private data is valid for the call.
        check(unsafe { send(id.id, data_ptr(private_data), len) })
    }

    fn send_rej(
        &self,
        id: &CiCmId,
        reason: u16,
        ari: &[u8],
        private_data: &[u8],
    ) -> Result<(), NtStatus> {
        let send = cm_fn!(self.send_rej);
        let ari_len = len_u8(ari, REJ_ARI)?;
        let len = len_u8(private_data, REJ_PRIVATE_DATA)?;
        // SAFETY: a live id; the ARI and private data are valid for the call.
        let status = unsafe {
            send(
                id.id,
                reason.to_be(),
                data_ptr(ari),
                ari_len,
                data_ptr(private_data),
                len,
            )
        };
        check(status)
    }

    fn send_mra(
        &self,
        id: &CiCmId,
        service_timeout: u8,
        private_data: &[u8],
    ) -> Result<(), NtStatus> {
        let send = cm_fn!(self.send_mra);
        let len = len_u8(private_data, MRA_PRIVATE_DATA)?;
        // SAFETY: a live id; the private data is valid for the call.
        check(unsafe { send(id.id, service_timeout, data_ptr(private_data), len) })
    }

    fn get_qp_attr(&self, id: &CiCmId, state: QpState) -> Result<QpModify, NtStatus> {
        let get = cm_fn!(self.get_qp_attr);
        let mut attr = ib_qp_mod_t::zeroed();
        // SAFETY: a live id; the output is writable.
        let status = unsafe { get(id.id, qp_state_to_ib(state), &mut attr) };
        check(status)?;
        qp_mod_from_ib(&attr).map_err(|_| NtStatus::INVALID_PARAMETER)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;
    use core::sync::atomic::{AtomicUsize, Ordering};

    static RELEASED: AtomicUsize = AtomicUsize::new(0);

    /// A test interface's `InterfaceDereference`: counts its calls.
    ///
    /// # Safety
    /// None beyond the C signature: the context is not read.
    unsafe extern "system" fn release(_context: *mut c_void) {
        RELEASED.fetch_add(1, Ordering::SeqCst);
    }

    fn iface(version: u16) -> INFINIBAND_INTERFACE_CM {
        let mut i = INFINIBAND_INTERFACE_CM::zeroed();
        i.InterfaceHeader.Size = size_of::<INFINIBAND_INTERFACE_CM>() as u16;
        i.InterfaceHeader.Version = version;
        i.InterfaceHeader.InterfaceDereference = Some(release);
        i
    }

    #[test]
    fn refused_tables_release_their_reference() {
        let before = RELEASED.load(Ordering::SeqCst);
        // SAFETY: a table whose only routine is the counting dereference.
        let e = unsafe { CiCm::new(iface(0x0102)) }.unwrap_err();
        assert_eq!(e, CiError::Version(CiTable::Cm, 0x0102));
        assert_eq!(
            e.to_string(),
            "connection manager interface version 0x0102, want 0x0101"
        );
        // SAFETY: as above.
        let e = unsafe { CiCm::new(iface(INFINIBAND_INTERFACE_CM_VERSION)) }.unwrap_err();
        assert_eq!(e, CiError::Missing(CiTable::Cm, "create_id"));
        let mut small = iface(INFINIBAND_INTERFACE_CM_VERSION);
        small.InterfaceHeader.Size = 32;
        // SAFETY: as above.
        let e = unsafe { CiCm::new(small) }.unwrap_err();
        assert_eq!(e, CiError::Size(CiTable::Cm, 32));
        assert_eq!(RELEASED.load(Ordering::SeqCst) - before, 3);
    }

    #[test]
    fn lengths_that_do_not_fit_their_field_are_refused() {
        assert_eq!(len_u8(&[0; 148], REJ_PRIVATE_DATA), Ok(148));
        assert_eq!(
            len_u8(&[0; 149], REJ_PRIVATE_DATA),
            Err(NtStatus::INVALID_PARAMETER)
        );
        assert_eq!(check(0x102), Ok(()));
        assert_eq!(check(0x8000_001Au32 as i32), Err(NtStatus::NO_MORE_ENTRIES));
    }
}
