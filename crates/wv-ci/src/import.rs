//! [`CiVerbs`]: `wv_hal::Verbs` over the `ci_interface_t` table an RDMA controller's driver
//! hands the filter (`IRP_MN_QUERY_INTERFACE`, `GUID_RDMA_INTERFACE_VERBS`). Every verb is the
//! C call OFW's WinVerbs makes for the same IOCTL, with the same arguments; the completion and
//! event callbacks the controller makes from its DPC (DISPATCH_LEVEL) are trampolines into the
//! driver core's sinks.
//!
//! Ownership: each handle type owns the C handle and the heap context its callbacks receive.
//! The context is freed only after the destroy call has returned, and the interface contract
//! is that no callback for an object runs after its destroy call returns. The interface itself
//! holds one reference on the controller's driver (taken by the query), dropped with
//! `InterfaceDereference` when the `CiVerbs` is dropped.

use alloc::vec::Vec;
use core::cell::UnsafeCell;
use core::ffi::c_void;
use core::ptr;

use wv_hal::{
    AddressVector, CaAttributes, CaEventSink, CqEventSink, Gid, KArc, MemoryKeys, MemoryRegion,
    PortAttributes, QpAttributes, QpCreate, QpCreated, QpEventSink, QpModify, SrqAttributes,
    SrqEventSink, SrqModifyMask, Umv, Verbs, VerbsError,
};
use zerocopy::IntoBytes;

use crate::base::{INTERFACE, LIST_ENTRY, UserMode, boolean_t};
use crate::ci::*;
use crate::convert;
use crate::ib_types::*;
use crate::pinned::Pinned;
use crate::status::from_ib;

/// Which of the lower interfaces a [`CiError`] is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CiTable {
    /// `RDMA_INTERFACE_VERBS` (`GUID_RDMA_INTERFACE_VERBS`).
    Verbs,
    /// `INFINIBAND_INTERFACE_CM` (`GUID_INFINIBAND_INTERFACE_CM`).
    Cm,
}

impl CiTable {
    fn name(self) -> &'static str {
        match self {
            CiTable::Verbs => "verbs",
            CiTable::Cm => "connection manager",
        }
    }

    /// The `InterfaceHeader.Version` this driver speaks.
    pub fn version(self) -> u16 {
        match self {
            CiTable::Verbs => RDMA_INTERFACE_VERBS_VERSION,
            CiTable::Cm => crate::cm::INFINIBAND_INTERFACE_CM_VERSION,
        }
    }

    /// The size of the interface struct this driver reads.
    fn size(self) -> usize {
        match self {
            CiTable::Verbs => size_of::<RDMA_INTERFACE_VERBS>(),
            CiTable::Cm => size_of::<crate::cm::INFINIBAND_INTERFACE_CM>(),
        }
    }

    /// Checks a queried interface: its header (large enough for the struct this driver reads,
    /// and of the version it speaks), then that no required function is `missing`.
    pub(crate) fn check(
        self,
        header: &INTERFACE,
        missing: Option<&'static str>,
    ) -> Result<(), CiError> {
        if usize::from(header.Size) < self.size() {
            return Err(CiError::Size(self, header.Size));
        }
        if header.Version != self.version() {
            return Err(CiError::Version(self, header.Version));
        }
        missing.map_or(Ok(()), |name| Err(CiError::Missing(self, name)))
    }
}

/// Why a queried lower interface cannot be used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CiError {
    /// `InterfaceHeader.Size` is smaller than the interface's struct.
    Size(CiTable, u16),
    /// `InterfaceHeader.Version` is not the one this driver speaks.
    Version(CiTable, u16),
    /// A function WinVerbs calls is missing from the table.
    Missing(CiTable, &'static str),
}

impl core::fmt::Display for CiError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            CiError::Size(t, s) => write!(f, "{} interface of {s} bytes, too small", t.name()),
            CiError::Version(t, v) => write!(
                f,
                "{} interface version {v:#06x}, want {:#06x}",
                t.name(),
                t.version()
            ),
            CiError::Missing(t, name) => write!(f, "the {} table has no {name}", t.name()),
        }
    }
}

/// The result of a C verb.
fn check(status: ib_api_status_t) -> Result<(), VerbsError> {
    match from_ib(status) {
        None => Ok(()),
        Some(e) => Err(e),
    }
}

/// A C verb that carries the request's vendor bytes: `call` gets them as the `ci_umv_buf_t`
/// the verbs take, the vendor status the driver leaves there goes back into `umv`, and the
/// verb's status is [`check`]ed.
fn vendor_call(
    umv: &mut Umv<'_>,
    call: impl FnOnce(&mut ci_umv_buf_t) -> ib_api_status_t,
) -> Result<(), VerbsError> {
    let mut buf = umv_buf(umv);
    let status = call(&mut buf);
    umv.status = buf.status;
    check(status)
}

/// `ci_umv_buf_t` over a request's vendor bytes.
fn umv_buf(umv: &mut Umv<'_>) -> ci_umv_buf_t {
    let buf = if umv.buf.is_empty() {
        0
    } else {
        umv.buf.as_mut_ptr().expose_provenance() as u64
    };
    ci_umv_buf_t {
        command: umv.command,
        status: 0,
        input_size: umv.input_len as u32,
        output_size: umv.output_len as u32,
        p_inout_buf: buf,
    }
}

macro_rules! handles {
    ($( $(#[$doc:meta])* $name:ident($handle:ty) $(+ $ctx:ident: $ctxty:ty)?; )*) => {$(
        $(#[$doc])*
        pub struct $name {
            h: $handle,
            $( $ctx: $ctxty, )?
        }
        // SAFETY: a verbs handle is an opaque token of the controller's driver, which accepts
        // it from any thread (at the IRQL each verb documents); the context, if any, is only
        // read (a shared sink).
        unsafe impl Send for $name {}
        // SAFETY: as above; no method hands out mutable access.
        unsafe impl Sync for $name {}
        impl core::fmt::Debug for $name {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                f.debug_tuple(stringify!($name)).field(&self.h).finish()
            }
        }
    )*};
}

/// The registration record of one opened device: the C handler first, so the record's address
/// is the `ib_event_rec_t.context` the controller passes back.
#[repr(C)]
struct CaHandler {
    reg: UnsafeCell<ci_event_handler_t>,
    sink: KArc<dyn CaEventSink>,
}

impl Pinned<CaHandler> {
    /// The record's address as the controller links it. Derived from the whole handler (not
    /// from the `reg` field alone), because the callback gets it back as the handler's address.
    fn registration(&self) -> *mut ci_event_handler_t {
        self.as_ptr().cast_mut().cast()
    }
}

handles! {
    /// A user-mode open of the device (`um_open_ca`) and its event registration.
    CiCa(ib_ca_handle_t) + handler: Pinned<CaHandler>;
    /// A protection domain.
    CiPd(ib_pd_handle_t);
    /// A registered memory region.
    CiMr(ib_mr_handle_t);
    /// A memory window.
    CiMw(ib_mw_handle_t);
    /// An address vector.
    CiAh(ib_av_handle_t);
    /// A completion queue and the sink its callbacks reach.
    CiCq(ib_cq_handle_t) + ctx: Pinned<KArc<dyn CqEventSink>>;
    /// A shared receive queue and the sink its events reach.
    CiSrq(ib_srq_handle_t) + ctx: Pinned<KArc<dyn SrqEventSink>>;
    /// A queue pair and the sink its events reach.
    CiQp(ib_qp_handle_t) + ctx: Pinned<KArc<dyn QpEventSink>>;
    /// A multicast attachment.
    CiMcast(ib_mcast_handle_t);
}

/// The device events trampoline (`ci_async_event_cb_t` of a registered handler). DISPATCH_LEVEL.
///
/// # Safety
/// The controller's call of a registered handler: `rec` is null or a record valid for the call
/// whose `context` is the `ci_event_handler_t` `open_ca` registered (the first field of a
/// `CaHandler`, unregistered by `close_ca` before it is freed).
unsafe extern "system" fn ca_event(rec: *mut ib_event_rec_t) {
    // SAFETY: the controller passes a record valid for the call (or null, refused here).
    let Some(rec) = (unsafe { rec.as_ref() }) else {
        return;
    };
    let handler = rec.context.cast::<CaHandler>();
    // SAFETY: `context` is the `ci_event_handler_t` registered by `open_ca`, the first field
    // of a `CaHandler` that stays allocated until `close_ca` has unregistered it.
    let Some(handler) = (unsafe { handler.as_ref() }) else {
        return;
    };
    handler
        .sink
        .on_event(convert::ca_event_from_ib(rec.r#type, rec.port_number));
}

/// The sink behind a CQ/SRQ/QP context pointer.
///
/// # Safety
/// `context` is null or the address of a live `Pinned<KArc<S>>`'s value.
unsafe fn sink<'a, S: ?Sized>(context: *const c_void) -> Option<&'a KArc<S>> {
    // SAFETY: the caller's promise.
    unsafe { context.cast::<KArc<S>>().as_ref() }
}

/// The CQ completion trampoline (`ci_completion_cb_t`). DISPATCH_LEVEL.
///
/// # Safety
/// The controller's completion call: `context` is null or the `cq_context` `create_cq` gave,
/// the address of the CQ's pinned sink, freed only after `destroy_cq` has returned.
unsafe extern "system" fn cq_completion(context: *mut c_void) {
    // SAFETY: `context` is the `cq_context` given to `create_cq`: the CQ's sink, freed only
    // after `destroy_cq` has returned.
    if let Some(s) = unsafe { sink::<dyn CqEventSink>(context) } {
        s.on_completion();
    }
}

/// The CQ error trampoline (`ci_async_event_cb_t`): any CQ event is an error (OFW's
/// `WvCqEventHandler`). DISPATCH_LEVEL.
///
/// # Safety
/// The controller's event call: `rec` is null or a record valid for the call whose `context`
/// is as for [`cq_completion`].
unsafe extern "system" fn cq_event(rec: *mut ib_event_rec_t) {
    // SAFETY: a record valid for the call, or null.
    let Some(rec) = (unsafe { rec.as_ref() }) else {
        return;
    };
    // SAFETY: `context` is the CQ's `cq_context`, as in `cq_completion`.
    if let Some(s) = unsafe { sink::<dyn CqEventSink>(rec.context) } {
        s.on_error();
    }
}

/// The SRQ event trampoline. DISPATCH_LEVEL.
///
/// # Safety
/// The controller's event call: `rec` is null or a record valid for the call whose `context`
/// is null or the `srq_context` `create_srq` gave, freed only after `destroy_srq` has returned.
unsafe extern "system" fn srq_event(rec: *mut ib_event_rec_t) {
    // SAFETY: a record valid for the call, or null.
    let Some(rec) = (unsafe { rec.as_ref() }) else {
        return;
    };
    // SAFETY: `context` is the `srq_context` given to `create_srq`, freed after `destroy_srq`.
    if let Some(s) = unsafe { sink::<dyn SrqEventSink>(rec.context) } {
        s.on_event(convert::srq_event_from_ib(rec.r#type));
    }
}

/// The QP event trampoline. DISPATCH_LEVEL.
///
/// # Safety
/// The controller's event call: `rec` is null or a record valid for the call whose `context`
/// is null or the `qp_context` `create_qp` gave, freed only after `destroy_qp` has returned.
unsafe extern "system" fn qp_event(rec: *mut ib_event_rec_t) {
    // SAFETY: a record valid for the call, or null.
    let Some(rec) = (unsafe { rec.as_ref() }) else {
        return;
    };
    // SAFETY: `context` is the `qp_context` given to `create_qp`, freed after `destroy_qp`.
    if let Some(s) = unsafe { sink::<dyn QpEventSink>(rec.context) }
        && let Some(event) = convert::qp_event_from_ib(rec.r#type)
    {
        s.on_event(event);
    }
}

/// Types that may be read from any bytes of a `query_ca` buffer.
trait Plain: Copy {}
impl Plain for ib_ca_attr_t {}
impl Plain for ib_port_attr_t {}
impl Plain for ib_gid_t {}
impl Plain for u16 {}
impl Plain for u32 {}

/// One `query_ca` answer: the attributes and the tables they point into, in one buffer.
struct CaAttrBuffer {
    words: Vec<u64>,
    len: usize,
}

impl CaAttrBuffer {
    fn bytes(&self) -> &[u8] {
        &self.words.as_bytes()[..self.len]
    }

    /// A `T` at byte `offset`.
    fn read<T: Plain>(&self, offset: usize) -> Result<T, VerbsError> {
        let bytes = self.bytes();
        let end = offset
            .checked_add(size_of::<T>())
            .ok_or(VerbsError::Other)?;
        let src = bytes.get(offset..end).ok_or(VerbsError::Other)?;
        // SAFETY: `src` holds `size_of::<T>()` initialised bytes, and every `Plain` type is made
        // of integers and raw pointers, for which any bit pattern is valid; the read does not
        // need alignment.
        Ok(unsafe { ptr::read_unaligned(src.as_ptr().cast::<T>()) })
    }

    /// The offset in this buffer a table pointer of the answer points at.
    fn offset_of<T>(&self, p: *const T) -> Result<usize, VerbsError> {
        let base = self.words.as_ptr().addr();
        p.addr()
            .checked_sub(base)
            .filter(|off| *off <= self.len)
            .ok_or(VerbsError::Other)
    }

    fn ca(&self) -> Result<ib_ca_attr_t, VerbsError> {
        self.read(0)
    }

    fn port(&self, port: u8) -> Result<ib_port_attr_t, VerbsError> {
        let ca = self.ca()?;
        if port == 0 || port > ca.num_ports {
            return Err(VerbsError::InvalidParameter);
        }
        let at =
            self.offset_of(ca.p_port_attr)? + usize::from(port - 1) * size_of::<ib_port_attr_t>();
        self.read(at)
    }
}

/// The RDMA controller below the filter, through its `ci_interface_t` table.
pub struct CiVerbs {
    iface: RDMA_INTERFACE_VERBS,
}

// SAFETY: the table is a set of function pointers and the controller's own context pointers;
// the controller's contract is that its verbs may be called from any thread at the IRQL each
// documents, and its reference routines at any IRQL <= DISPATCH_LEVEL.
unsafe impl Send for CiVerbs {}
// SAFETY: as above; `CiVerbs` never writes to the table after construction.
unsafe impl Sync for CiVerbs {}

impl core::fmt::Debug for CiVerbs {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("CiVerbs")
            .field("guid", &self.iface.Verbs.guid)
            .field("library", &self.library_name())
            .finish()
    }
}

impl Drop for CiVerbs {
    fn drop(&mut self) {
        // SAFETY: the one reference the query took, released once (PASSIVE_LEVEL: the driver
        // core drops its lower device outside every lock).
        unsafe { self.iface.InterfaceHeader.release() };
    }
}

/// The functions WinVerbs calls, each required.
fn missing(v: &ci_interface_t) -> Option<&'static str> {
    first_missing!(v;
        um_open_ca,
        um_close_ca,
        query_ca,
        register_event_handler,
        unregister_event_handler,
        allocate_pd,
        deallocate_pd,
        create_av,
        destroy_av,
        create_srq,
        modify_srq,
        query_srq,
        destroy_srq,
        create_qp,
        query_qp,
        destroy_qp,
        ndi_modify_qp,
        create_cq,
        resize_cq,
        destroy_cq,
        register_mr,
        deregister_mr,
        create_mw,
        destroy_mw,
        attach_mcast,
        detach_mcast
    )
}

/// A function of the table, validated present by [`CiVerbs::new`].
macro_rules! verb {
    ($self:ident . $f:ident) => {
        $self.iface.Verbs.$f.ok_or(VerbsError::Unsupported)?
    };
}

impl CiVerbs {
    /// Takes over a verbs interface a query returned, with the reference it holds.
    ///
    /// # Errors
    /// The interface is unusable (size, version, a missing function); the reference is
    /// released before returning, as OFW does on a version mismatch.
    ///
    /// # Safety
    /// `iface` was filled in by the controller's driver answering `IRP_MN_QUERY_INTERFACE`
    /// for `GUID_RDMA_INTERFACE_VERBS` (or by [`crate::export`]): its functions follow the
    /// `ci_interface_t` contract, `p_hca_obj` and `Context` stay valid, and it carries one
    /// reference, until `InterfaceDereference` is called.
    pub unsafe fn new(iface: RDMA_INTERFACE_VERBS) -> Result<Self, CiError> {
        let ci = CiVerbs { iface };
        CiTable::Verbs.check(&ci.iface.InterfaceHeader, missing(&ci.iface.Verbs))?;
        Ok(ci)
    }

    fn h_ca(&self) -> ib_ca_handle_t {
        self.iface.Verbs.p_hca_obj.cast()
    }

    /// `query_ca` with a buffer of the size the controller asks for (OFW's
    /// `WvQueryCaAttributes`: a first call with no buffer answers `IB_INSUFFICIENT_MEMORY` and
    /// the size).
    fn query_ca_buffer(&self) -> Result<CaAttrBuffer, VerbsError> {
        let query = verb!(self.query_ca);
        let mut size = 0u32;
        // SAFETY: a size query: no buffer, `size` is writable, no vendor data.
        let status = unsafe { query(self.h_ca(), ptr::null_mut(), &mut size, ptr::null_mut()) };
        if status != IB_INSUFFICIENT_MEMORY {
            return Err(from_ib(status).unwrap_or(VerbsError::Other));
        }
        let len = size as usize;
        if len < size_of::<ib_ca_attr_t>() {
            return Err(VerbsError::Other);
        }
        let mut words = Vec::new();
        words
            .try_reserve_exact(len.div_ceil(8))
            .map_err(|_| VerbsError::InsufficientMemory)?;
        words.resize(len.div_ceil(8), 0u64);
        // SAFETY: `words` is `size` bytes (rounded up), 8-aligned as `ib_ca_attr_t` needs, and
        // stays alive and unmoved for the call.
        let status = unsafe {
            query(
                self.h_ca(),
                words.as_mut_ptr().cast(),
                &mut size,
                ptr::null_mut(),
            )
        };
        check(status)?;
        Ok(CaAttrBuffer {
            words,
            len: len.min(size as usize),
        })
    }
}

impl Verbs for CiVerbs {
    type Ca = CiCa;
    type Pd = CiPd;
    type Mr = CiMr;
    type Mw = CiMw;
    type Ah = CiAh;
    type Cq = CiCq;
    type Srq = CiSrq;
    type Qp = CiQp;
    type Mcast = CiMcast;
    type Cm = crate::CiCm;

    fn guid(&self) -> u64 {
        self.iface.Verbs.guid
    }

    fn library_name(&self) -> &str {
        let name = &self.iface.Verbs.libname;
        let len = name.iter().position(|&b| b == 0).unwrap_or(name.len());
        core::str::from_utf8(&name[..len]).unwrap_or("")
    }

    fn open_ca(
        &self,
        umv: &mut Umv<'_>,
        events: KArc<dyn CaEventSink>,
    ) -> Result<CiCa, VerbsError> {
        let open = verb!(self.um_open_ca);
        let register = verb!(self.register_event_handler);
        let handler = Pinned::new(CaHandler {
            reg: UnsafeCell::new(ci_event_handler_t {
                entry: LIST_ENTRY::zeroed(),
                pfn_async_event_cb: Some(ca_event),
            }),
            sink: events,
        })
        .map_err(|_| VerbsError::InsufficientMemory)?;
        let mut h = ptr::null_mut();
        // SAFETY: `buf` describes the request's vendor bytes, which outlive the call; `h` is
        // writable.
        vendor_call(umv, |buf| unsafe {
            open(self.h_ca(), UserMode, buf, &mut h)
        })?;
        // SAFETY: the record lives at a fixed address until `close_ca` unregisters it; the
        // controller owns its list link meanwhile.
        unsafe { register(self.h_ca(), handler.registration()) };
        Ok(CiCa { h, handler })
    }

    fn close_ca(&self, ca: CiCa) {
        let h_ca = self.h_ca();
        if let Some(unregister) = self.iface.Verbs.unregister_event_handler {
            // SAFETY: the record `open_ca` registered, still alive.
            unsafe { unregister(h_ca, ca.handler.registration()) };
        }
        if let Some(close) = self.iface.Verbs.um_close_ca {
            // SAFETY: the handle `um_open_ca` returned, closed once (the handle is consumed).
            unsafe { close(h_ca, ca.h) };
        }
    }

    fn query_ca(&self) -> Result<CaAttributes, VerbsError> {
        let buf = self.query_ca_buffer()?;
        let ca = buf.ca()?;
        let mut pages = [0u32; 32];
        let n = (ca.num_page_sizes as usize).min(pages.len());
        if n > 0 {
            let at = buf.offset_of(ca.p_page_size)?;
            for (i, page) in pages.iter_mut().enumerate().take(n) {
                *page = buf.read(at + i * 4)?;
            }
        }
        Ok(convert::ca_attr_from_ib(&ca, &pages[..n]))
    }

    fn query_port(&self, port: u8) -> Result<PortAttributes, VerbsError> {
        let buf = self.query_ca_buffer()?;
        Ok(convert::port_attr_from_ib(&buf.port(port)?))
    }

    fn query_gid(&self, port: u8, index: u32) -> Result<Gid, VerbsError> {
        let buf = self.query_ca_buffer()?;
        let p = buf.port(port)?;
        if index >= u32::from(p.num_gids) {
            return Err(VerbsError::InvalidParameter);
        }
        let at = buf.offset_of(p.p_gid_table)? + index as usize * size_of::<ib_gid_t>();
        let gid: ib_gid_t = buf.read(at)?;
        // SAFETY: all views of `ib_gid_t` are 16 plain bytes.
        Ok(unsafe { gid.raw })
    }

    fn query_pkey(&self, port: u8, index: u16) -> Result<u16, VerbsError> {
        let buf = self.query_ca_buffer()?;
        let p = buf.port(port)?;
        if index >= p.num_pkeys {
            return Err(VerbsError::InvalidParameter);
        }
        let at = buf.offset_of(p.p_pkey_table)? + usize::from(index) * 2;
        buf.read(at)
    }

    fn allocate_pd(&self, ca: &CiCa, umv: &mut Umv<'_>) -> Result<CiPd, VerbsError> {
        let allocate = verb!(self.allocate_pd);
        let mut h = ptr::null_mut();
        // SAFETY: the open CA's handle, vendor bytes alive for the call, `h` writable.
        vendor_call(umv, |buf| unsafe {
            allocate(ca.h, IB_PDT_NORMAL, &mut h, buf)
        })?;
        Ok(CiPd { h })
    }

    fn deallocate_pd(&self, pd: CiPd) {
        if let Some(f) = self.iface.Verbs.deallocate_pd {
            // SAFETY: a PD `allocate_pd` returned, freed once.
            unsafe { f(pd.h) };
        }
    }

    fn register_mr(
        &self,
        pd: &CiPd,
        region: &MemoryRegion,
    ) -> Result<(CiMr, MemoryKeys), VerbsError> {
        let register = verb!(self.register_mr);
        let create = ib_mr_create_t {
            // A user address of the calling process: the controller probes and locks it.
            vaddr: ptr::without_provenance_mut(region.address as usize),
            length: region.length,
            access_ctrl: region.access,
        };
        let (mut lkey, mut rkey, mut h) = (0u32, 0u32, ptr::null_mut());
        // SAFETY: a live PD; the request and the outputs are valid for the call; `um_call`
        // TRUE: the address belongs to the calling process, as OFW registers it.
        let status = unsafe { register(pd.h, &create, &mut lkey, &mut rkey, &mut h, 1) };
        check(status).map(|()| (CiMr { h }, MemoryKeys { lkey, rkey }))
    }

    fn deregister_mr(&self, mr: CiMr) -> Result<(), (CiMr, VerbsError)> {
        let Some(f) = self.iface.Verbs.deregister_mr else {
            return Err((mr, VerbsError::Unsupported));
        };
        // SAFETY: a registered MR; on failure it stays registered and is handed back.
        let status = unsafe { f(mr.h) };
        check(status).map_err(|e| (mr, e))
    }

    fn create_mw(&self, pd: &CiPd, umv: &mut Umv<'_>) -> Result<(CiMw, u32), VerbsError> {
        let create = verb!(self.create_mw);
        let (mut rkey, mut h) = (0u32, ptr::null_mut());
        // SAFETY: a live PD, outputs and vendor bytes valid for the call.
        vendor_call(umv, |buf| unsafe { create(pd.h, &mut rkey, &mut h, buf) })?;
        Ok((CiMw { h }, rkey))
    }

    fn destroy_mw(&self, mw: CiMw) {
        if let Some(f) = self.iface.Verbs.destroy_mw {
            // SAFETY: a window `create_mw` returned, destroyed once.
            unsafe { f(mw.h) };
        }
    }

    fn create_ah(
        &self,
        pd: &CiPd,
        av: &AddressVector,
        umv: &mut Umv<'_>,
    ) -> Result<CiAh, VerbsError> {
        let create = verb!(self.create_av);
        let attr = convert::av_to_ib(av);
        let mut h = ptr::null_mut();
        // SAFETY: a live PD, the attributes, output and vendor bytes valid for the call.
        vendor_call(umv, |buf| unsafe { create(pd.h, &attr, &mut h, buf) })?;
        Ok(CiAh { h })
    }

    fn destroy_ah(&self, ah: CiAh) {
        if let Some(f) = self.iface.Verbs.destroy_av {
            // SAFETY: an AV `create_av` returned, destroyed once.
            unsafe { f(ah.h) };
        }
    }

    fn create_cq(
        &self,
        ca: &CiCa,
        entries: u32,
        events: KArc<dyn CqEventSink>,
        umv: &mut Umv<'_>,
    ) -> Result<(CiCq, u32), VerbsError> {
        let create = verb!(self.create_cq);
        let ctx = Pinned::new(events).map_err(|_| VerbsError::InsufficientMemory)?;
        let (mut size, mut h) = (entries, ptr::null_mut());
        // SAFETY: the open CA; the context stays at its address until after `destroy_cq`;
        // the trampolines match the callback types; outputs and vendor bytes valid.
        vendor_call(umv, |buf| unsafe {
            create(
                ca.h,
                ctx.as_ptr().cast(),
                Some(cq_event),
                Some(cq_completion),
                &mut size,
                &mut h,
                buf,
            )
        })?;
        Ok((CiCq { h, ctx }, size))
    }

    fn resize_cq(&self, cq: &CiCq, entries: u32, umv: &mut Umv<'_>) -> Result<u32, VerbsError> {
        let resize = verb!(self.resize_cq);
        let mut size = entries;
        // SAFETY: a live CQ, the size and vendor bytes valid for the call.
        vendor_call(umv, |buf| unsafe { resize(cq.h, &mut size, buf) })?;
        Ok(size)
    }

    fn destroy_cq(&self, cq: CiCq) {
        if let Some(f) = self.iface.Verbs.destroy_cq {
            // SAFETY: a CQ `create_cq` returned, destroyed once; its context is freed below,
            // after the call, when no callback for it can run any more.
            unsafe { f(cq.h) };
        }
        drop(cq.ctx);
    }

    fn create_srq(
        &self,
        pd: &CiPd,
        attr: &SrqAttributes,
        events: KArc<dyn SrqEventSink>,
        umv: &mut Umv<'_>,
    ) -> Result<CiSrq, VerbsError> {
        let create = verb!(self.create_srq);
        let ctx = Pinned::new(events).map_err(|_| VerbsError::InsufficientMemory)?;
        let attr = convert::srq_attr_to_ib(attr);
        let mut h = ptr::null_mut();
        // SAFETY: a live PD; the context outlives the SRQ; inputs, output and vendor bytes
        // valid for the call.
        vendor_call(umv, |buf| unsafe {
            create(
                pd.h,
                ctx.as_ptr().cast(),
                Some(srq_event),
                &attr,
                &mut h,
                buf,
            )
        })?;
        Ok(CiSrq { h, ctx })
    }

    fn modify_srq(
        &self,
        srq: &CiSrq,
        attr: &SrqAttributes,
        mask: SrqModifyMask,
        umv: &mut Umv<'_>,
    ) -> Result<(), VerbsError> {
        let modify = verb!(self.modify_srq);
        let attr = convert::srq_attr_to_ib(attr);
        let bits =
            if mask.max_wr { IB_SRQ_MAX_WR } else { 0 } | if mask.limit { IB_SRQ_LIMIT } else { 0 };
        // SAFETY: a live SRQ, the attributes and vendor bytes valid for the call.
        vendor_call(umv, |buf| unsafe { modify(srq.h, &attr, bits, buf) })
    }

    fn query_srq(&self, srq: &CiSrq, umv: &mut Umv<'_>) -> Result<SrqAttributes, VerbsError> {
        let query = verb!(self.query_srq);
        let mut attr = ib_srq_attr_t::zeroed();
        // SAFETY: a live SRQ, the output and vendor bytes valid for the call.
        vendor_call(umv, |buf| unsafe { query(srq.h, &mut attr, buf) })?;
        Ok(convert::srq_attr_from_ib(&attr))
    }

    fn destroy_srq(&self, srq: CiSrq) {
        if let Some(f) = self.iface.Verbs.destroy_srq {
            // SAFETY: an SRQ `create_srq` returned, destroyed once; its context is freed after.
            unsafe { f(srq.h) };
        }
        drop(srq.ctx);
    }

    fn create_qp(
        &self,
        pd: &CiPd,
        create: &QpCreate<'_, CiCq, CiSrq>,
        events: KArc<dyn QpEventSink>,
        umv: &mut Umv<'_>,
    ) -> Result<(CiQp, QpCreated), VerbsError> {
        let create_qp = verb!(self.create_qp);
        let ctx = Pinned::new(events).map_err(|_| VerbsError::InsufficientMemory)?;
        let mut attr_in = ib_qp_create_t {
            qp_type: convert::qp_type_to_ib(create.qp_type),
            sq_max_inline: create.sq_max_inline,
            sq_depth: create.sq_depth,
            rq_depth: create.rq_depth,
            sq_sge: create.sq_sge,
            rq_sge: create.rq_sge,
            h_sq_cq: create.send_cq.h,
            h_rq_cq: create.recv_cq.h,
            h_srq: create.srq.map_or(ptr::null_mut(), |s| s.h),
            sq_signaled: boolean_t::from(create.sq_signaled),
        };
        let mut out = ib_qp_attr_t::zeroed();
        let mut h = ptr::null_mut();
        // SAFETY: a live PD and live CQ/SRQ handles; the context outlives the QP; inputs,
        // outputs and vendor bytes valid for the call.
        vendor_call(umv, |buf| unsafe {
            create_qp(
                pd.h,
                ctx.as_ptr().cast(),
                Some(qp_event),
                &mut attr_in,
                &mut out,
                &mut h,
                buf,
            )
        })?;
        let created = QpCreated {
            qpn: u32::from_be(out.num) & 0x00FF_FFFF,
            sq_depth: out.sq_depth,
            rq_depth: out.rq_depth,
            sq_sge: out.sq_sge,
            rq_sge: out.rq_sge,
            sq_max_inline: out.sq_max_inline,
        };
        Ok((CiQp { h, ctx }, created))
    }

    fn query_qp(&self, qp: &CiQp) -> Result<QpAttributes, VerbsError> {
        let query = verb!(self.query_qp);
        let mut attr = ib_qp_attr_t::zeroed();
        // SAFETY: a live QP, the output valid for the call, no vendor data.
        let status = unsafe { query(qp.h, &mut attr, ptr::null_mut()) };
        check(status)?;
        convert::qp_attr_from_ib(&attr)
    }

    fn modify_qp(&self, qp: &CiQp, modify: &QpModify, out: &mut [u8]) -> Result<(), VerbsError> {
        let ndi_modify = verb!(self.ndi_modify_qp);
        let attr = convert::qp_mod_to_ib(modify);
        let (len, buf) = if out.is_empty() {
            (0, ptr::null_mut())
        } else {
            (out.len() as u32, out.as_mut_ptr())
        };
        // SAFETY: a live QP; `attr` valid for the call; `buf` is `len` writable bytes (null
        // when there are none), OFW's `ndi_modify_qp(h, &mod, NULL, outlen, out)`.
        let status = unsafe { ndi_modify(qp.h, &attr, ptr::null_mut(), len, buf) };
        check(status)
    }

    fn destroy_qp(&self, qp: CiQp) {
        if let Some(f) = self.iface.Verbs.destroy_qp {
            // SAFETY: a QP `create_qp` returned, destroyed once; its context is freed after.
            unsafe { f(qp.h, 0) };
        }
        drop(qp.ctx);
    }

    fn attach_mcast(&self, qp: &CiQp, gid: &Gid, lid: u16) -> Result<CiMcast, VerbsError> {
        let attach = verb!(self.attach_mcast);
        let mgid = ib_gid_t { raw: *gid };
        let mut h = ptr::null_mut();
        // SAFETY: a live QP, the GID and output valid for the call, no vendor data.
        let status = unsafe { attach(qp.h, &mgid, lid.to_be(), &mut h, ptr::null_mut()) };
        check(status).map(|()| CiMcast { h })
    }

    fn detach_mcast(&self, mcast: CiMcast) {
        if let Some(f) = self.iface.Verbs.detach_mcast {
            // SAFETY: an attachment `attach_mcast` returned, detached once.
            unsafe { f(mcast.h) };
        }
    }
}
