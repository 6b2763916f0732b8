//! PD, MR, MW, AH and completion channels.
//!
//! Each object is a box whose first field is the C struct applications hold, followed by the
//! `wv-client` object it wraps; destroying it drops the box (the client object sends its
//! DESTROY IOCTL). Objects count their users where rdma-core (the kernel) refuses to destroy
//! an object still in use (`EBUSY`): a PD's MRs, MWs, AHs, QPs and SRQs; a channel's CQs.

use core::ffi::{c_int, c_void};
use core::ptr;
use core::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use wv_client::verbs::{AddressVector, Ah, Mr, Mw, MwType, Pd, VerbsError};

use crate::abi::*;
use crate::context::{Context, ctx};
use crate::errno::{self, EBUSY, EFAULT, EINVAL, EOPNOTSUPP};
use crate::events::EventQueue;
use crate::runtime::File;

/// Boxes `v` and returns the address of its first field (the C struct).
pub fn leak<T, C>(v: T) -> *mut C {
    Box::into_raw(Box::new(v)).cast()
}

/// The box of an object about to be destroyed: `EINVAL` for NULL, `EBUSY` while objects made
/// on it are alive (the count `users` selects).
///
/// # Safety
/// `p` is null or a live object of this library whose box `get` returns.
pub unsafe fn unused<'a, C, B>(
    p: *mut C,
    get: unsafe fn(*mut C) -> &'a B,
    users: fn(&B) -> &AtomicUsize,
) -> Result<&'a B, c_int> {
    if p.is_null() {
        return Err(EINVAL);
    }
    // SAFETY: a live object by the caller's contract.
    let b = unsafe { get(p) };
    if users(b).load(Ordering::Acquire) != 0 {
        return Err(EBUSY);
    }
    Ok(b)
}

// ------------------------------------------------------------------------------------------
// PD

/// A PD or parent domain: the C struct, then the library's.
#[repr(C)]
pub struct PdBox {
    /// The C struct applications hold.
    pub c: ibv_pd,
    /// The client's PD (a parent domain shares its protection domain's).
    pub pd: Pd<File>,
    /// Objects created on it (`EBUSY` while any).
    pub users: AtomicUsize,
    /// For a parent domain: the protection domain it stands for (NULL for a PD).
    pub protection_domain: *mut ibv_pd,
}

impl PdBox {
    /// An object made on this PD's library side, boxed by `wrap` with its C struct first and
    /// leaked as that C struct, the PD counting it as a user; the errno of a failed `made`.
    fn adopt<T, B, C>(
        &self,
        made: Result<T, VerbsError>,
        wrap: impl FnOnce(T) -> B,
    ) -> Result<*mut C, c_int> {
        let object = made.map_err(|e| errno::of(&e))?;
        self.users.fetch_add(1, Ordering::AcqRel);
        Ok(leak::<_, C>(wrap(object)))
    }
}

/// # Safety
/// `p` is a live PD of this library.
pub unsafe fn pd<'a>(p: *mut ibv_pd) -> &'a PdBox {
    // SAFETY: the C struct is the first field of the box (repr(C)).
    unsafe { &*p.cast::<PdBox>() }
}

/// `ibv_alloc_pd`.
///
/// # Safety
/// `c` is a live context.
pub unsafe extern "C" fn ibv_alloc_pd(c: *mut ibv_context) -> *mut ibv_pd {
    if c.is_null() {
        return errno::ret_ptr(Err(EINVAL));
    }
    // SAFETY: live context.
    let cx = unsafe { ctx(c) };
    let r = cx.dev.alloc_pd().map_err(|e| errno::of(&e)).map(|p| {
        let handle = p.id() as u32;
        leak::<_, ibv_pd>(PdBox {
            c: ibv_pd { context: c, handle },
            pd: p,
            users: AtomicUsize::new(0),
            protection_domain: ptr::null_mut(),
        })
    });
    errno::ret_ptr(r)
}

/// `ibv_dealloc_pd`: `EBUSY` while objects use it.
///
/// # Safety
/// `p` is a live PD.
pub unsafe extern "C" fn ibv_dealloc_pd(p: *mut ibv_pd) -> c_int {
    // SAFETY: a live PD by the contract.
    let b = match unsafe { unused(p, pd, |b| &b.users) } {
        Ok(b) => b,
        Err(e) => return errno::ret(Err(e)),
    };
    if !b.protection_domain.is_null() {
        // SAFETY: a parent domain's protection domain outlives it (it counts it).
        unsafe { pd(b.protection_domain) }
            .users
            .fetch_sub(1, Ordering::AcqRel);
    }
    // SAFETY: the box `ibv_alloc_pd` or `alloc_parent_domain` leaked, freed once.
    drop(unsafe { Box::from_raw(p.cast::<PdBox>()) });
    0
}

/// `alloc_parent_domain` of the extended ops (`ibv_alloc_parent_domain`): a PD that objects
/// are created on as on its protection domain. The allocators are accepted and never called:
/// the soft HCA's queues live in the device, the provider allocates no buffers of its own
/// (rdma-core lets a provider ignore them where it needs no memory).
///
/// # Safety
/// `c` is a live context; `attr` readable, naming a live PD (and thread domain).
pub unsafe extern "C" fn alloc_parent_domain(
    c: *mut ibv_context,
    attr: *mut ibv_parent_domain_init_attr,
) -> *mut ibv_pd {
    if c.is_null() || attr.is_null() {
        return errno::ret_ptr(Err(EINVAL));
    }
    // SAFETY: readable by the contract.
    let a = unsafe { &*attr };
    if a.pd.is_null()
        || a.comp_mask
            & !(IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS | IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT)
            != 0
    {
        return errno::ret_ptr(Err(EINVAL));
    }
    // SAFETY: a live PD.
    let base = unsafe { pd(a.pd) };
    if !base.protection_domain.is_null() {
        // A parent domain of a parent domain is not one.
        return errno::ret_ptr(Err(EINVAL));
    }
    base.users.fetch_add(1, Ordering::AcqRel);
    errno::ret_ptr(Ok(leak::<_, ibv_pd>(PdBox {
        c: ibv_pd {
            context: c,
            handle: base.c.handle,
        },
        pd: base.pd.clone(),
        users: AtomicUsize::new(0),
        protection_domain: a.pd,
    })))
}

/// `alloc_td` of the extended ops (`ibv_alloc_td`): a thread domain only says its objects are
/// used by one thread; the soft HCA's locks stay, so it is a token.
///
/// # Safety
/// `c` is a live context; `attr` readable.
pub unsafe extern "C" fn alloc_td(c: *mut ibv_context, attr: *mut ibv_td_init_attr) -> *mut ibv_td {
    // SAFETY: readable when non-null.
    if c.is_null() || attr.is_null() || unsafe { (*attr).comp_mask } != 0 {
        return errno::ret_ptr(Err(EINVAL));
    }
    errno::ret_ptr(Ok(leak::<_, ibv_td>(ibv_td { context: c })))
}

/// `dealloc_td` of the extended ops.
///
/// # Safety
/// `td` came from [`alloc_td`] and is freed once.
pub unsafe extern "C" fn dealloc_td(td: *mut ibv_td) -> c_int {
    if td.is_null() {
        return EINVAL;
    }
    // SAFETY: the box `alloc_td` leaked.
    drop(unsafe { Box::from_raw(td) });
    0
}

// ------------------------------------------------------------------------------------------
// MR

/// A memory region: the C struct, then the library's.
#[repr(C)]
pub struct MrBox {
    /// The C struct applications hold.
    pub c: ibv_mr,
    /// The client's region (taken by a successful deregistration).
    pub mr: Option<Mr>,
    /// The `IBV_ACCESS_*` flags it was registered with.
    pub access: u32,
}

/// Each `IBV_ACCESS_*` right with the `WV_ACCESS_*` bits that stand for it (remote write's
/// two, as a remotely writable region is also locally writable): the one table both ways of
/// [`wv_access`] and [`ibv_access`] read.
const ACCESS_RIGHTS: [(u32, u32); 5] = {
    use wv_client::verbs::*;
    [
        (IBV_ACCESS_LOCAL_WRITE, WV_ACCESS_LOCAL_WRITE),
        (IBV_ACCESS_REMOTE_WRITE, WV_ACCESS_REMOTE_WRITE),
        (IBV_ACCESS_REMOTE_READ, WV_ACCESS_REMOTE_READ),
        (IBV_ACCESS_REMOTE_ATOMIC, WV_ACCESS_REMOTE_ATOMIC),
        (IBV_ACCESS_MW_BIND, WV_ACCESS_MW_BIND),
    ]
};

/// `IBV_ACCESS_*` → `WV_ACCESS_*`.
pub fn wv_access(a: u32) -> u32 {
    ACCESS_RIGHTS
        .iter()
        .filter(|&&(ibv, _)| a & ibv != 0)
        .fold(0, |w, &(_, wv)| w | wv)
}

/// `WV_ACCESS_*` → `IBV_ACCESS_*`: a right whose every bit is set.
pub fn ibv_access(w: u32) -> u32 {
    ACCESS_RIGHTS
        .iter()
        .filter(|&&(_, wv)| w & wv == wv)
        .fold(0, |a, &(ibv, _)| a | ibv)
}

/// Access flags the library accepts for a registration (the optional range is ignored, as
/// rdma-core lets devices ignore it).
const MR_ACCESS_KNOWN: u32 = IBV_ACCESS_LOCAL_WRITE
    | IBV_ACCESS_REMOTE_WRITE
    | IBV_ACCESS_REMOTE_READ
    | IBV_ACCESS_REMOTE_ATOMIC
    | IBV_ACCESS_MW_BIND
    | IBV_ACCESS_ZERO_BASED
    | IBV_ACCESS_ON_DEMAND
    | IBV_ACCESS_HUGETLB;

/// The checks `ib_check_mr_access` and `ib_umem_get` make before a registration.
fn check_registration(addr: u64, len: usize, access: u32) -> Result<u32, i32> {
    let access = access & !IBV_ACCESS_OPTIONAL_RANGE;
    if access & !MR_ACCESS_KNOWN != 0 {
        return Err(EINVAL);
    }
    // Remote write or atomic access needs local write (IBTA o10-36.2.1).
    if access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC) != 0
        && access & IBV_ACCESS_LOCAL_WRITE == 0
    {
        return Err(EINVAL);
    }
    if access & (IBV_ACCESS_ON_DEMAND | IBV_ACCESS_ZERO_BASED | IBV_ACCESS_HUGETLB) != 0 {
        return Err(EOPNOTSUPP);
    }
    if len == 0 {
        return Err(EINVAL);
    }
    probe(addr, len, access)?;
    Ok(access)
}

/// The kernel's probe of the pages: unmapped, or not writable when the device may write them,
/// is `EFAULT`.
fn probe(addr: u64, len: usize, access: u32) -> Result<(), i32> {
    #[cfg(target_os = "linux")]
    {
        let write = access
            & (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)
            != 0;
        let this = wv_softhca::dma::Client::this_process();
        wv_softhca::dma::process::probe(&this, addr, len as u64, write).map_err(|_| EFAULT)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (addr, len, access, EFAULT);
        Ok(())
    }
}

fn register(p: *mut ibv_pd, addr: u64, len: usize, access: u32) -> Result<*mut ibv_mr, i32> {
    if p.is_null() {
        return Err(EINVAL);
    }
    let access = check_registration(addr, len, access)?;
    // SAFETY: live PD by the callers' contract.
    let pdb = unsafe { pd(p) };
    let made = pdb.pd.reg_mr_addr(addr, len, wv_access(access));
    pdb.adopt(made, |mr| MrBox {
        c: ibv_mr {
            context: pdb.c.context,
            pd: p,
            addr: addr as *mut c_void,
            length: len,
            handle: mr.lkey(),
            lkey: mr.lkey(),
            rkey: mr.rkey(),
        },
        mr: Some(mr),
        access,
    })
}

/// `ibv_reg_mr` (the 1.1 entry point and what the header's inline `ibv_reg_mr` calls).
///
/// # Safety
/// `p` is a live PD; `[addr, addr + length)` is the caller's memory.
pub unsafe extern "C" fn ibv_reg_mr(
    p: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    access: c_int,
) -> *mut ibv_mr {
    errno::ret_ptr(register(p, addr as u64, length, access as u32))
}

/// `ibv_reg_mr_iova`: only `iova == addr` (no zero-based or shifted regions): other IOVAs are
/// `EOPNOTSUPP`.
///
/// # Safety
/// As [`ibv_reg_mr`].
pub unsafe extern "C" fn ibv_reg_mr_iova(
    p: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    iova: u64,
    access: c_int,
) -> *mut ibv_mr {
    if iova != addr as u64 {
        return errno::ret_ptr(Err(EOPNOTSUPP));
    }
    errno::ret_ptr(register(p, addr as u64, length, access as u32))
}

/// `ibv_reg_mr_iova2`.
///
/// # Safety
/// As [`ibv_reg_mr`].
pub unsafe extern "C" fn ibv_reg_mr_iova2(
    p: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    iova: u64,
    access: u32,
) -> *mut ibv_mr {
    // SAFETY: forwarded.
    unsafe { ibv_reg_mr_iova(p, addr, length, iova, access as c_int) }
}

/// `ibv_reg_dmabuf_mr`: no dma-buf support (`EOPNOTSUPP`).
///
/// # Safety
/// None beyond the C signature.
pub unsafe extern "C" fn ibv_reg_dmabuf_mr(
    _p: *mut ibv_pd,
    _offset: u64,
    _length: usize,
    _iova: u64,
    _fd: c_int,
    _access: c_int,
) -> *mut ibv_mr {
    errno::ret_ptr(Err(EOPNOTSUPP))
}

/// `ibv_dereg_mr`: `EBUSY` while a memory window is bound to it.
///
/// # Safety
/// `m` is a live MR.
pub unsafe extern "C" fn ibv_dereg_mr(m: *mut ibv_mr) -> c_int {
    if m.is_null() {
        return errno::ret(Err(EINVAL));
    }
    // SAFETY: live MR box.
    let b = unsafe { &mut *m.cast::<MrBox>() };
    if let Some(mr) = b.mr.take()
        && let Err(e) = mr.deregister()
    {
        let code = errno::of(&e.1);
        b.mr = Some(e.0);
        return errno::ret(Err(if code == EINVAL { EBUSY } else { code }));
    }
    // SAFETY: the PD outlives its MRs (it counts them).
    unsafe { pd(b.c.pd) }.users.fetch_sub(1, Ordering::AcqRel);
    // SAFETY: the box `register` leaked, freed once.
    drop(unsafe { Box::from_raw(m.cast::<MrBox>()) });
    0
}

/// `ibv_rereg_mr`: WinVerbs has no re-registration verb (MEMORY_REGISTER and
/// MEMORY_DEREGISTER only), and a deregister + register would hand out new keys, which an
/// application that already gave its rkey to a peer cannot see. So, after rdma-core's own
/// input checks (`IBV_REREG_MR_ERR_INPUT` with `EINVAL`), it answers as rdma-core does for a
/// device without re-registration (rxe): `EOPNOTSUPP`, the region left as it was
/// (`IBV_REREG_MR_ERR_INPUT`: still valid).
///
/// # Safety
/// `m` is a live MR.
pub unsafe extern "C" fn ibv_rereg_mr(
    m: *mut ibv_mr,
    flags: c_int,
    new_pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    _access: c_int,
) -> c_int {
    let fail = |e: i32| {
        errno::set(e);
        IBV_REREG_MR_ERR_INPUT
    };
    if m.is_null() || flags & !IBV_REREG_MR_FLAGS_SUPPORTED != 0 || flags == 0 {
        return fail(EINVAL);
    }
    if flags & IBV_REREG_MR_CHANGE_TRANSLATION != 0 && (addr.is_null() || length == 0) {
        return fail(EINVAL);
    }
    if flags & IBV_REREG_MR_CHANGE_PD != 0 && new_pd.is_null() {
        return fail(EINVAL);
    }
    fail(EOPNOTSUPP)
}

/// `alloc_null_mr` is absent: applications fall back to a real registration.
///
/// # Safety
/// `m` is a live MR.
pub unsafe fn mr_lkey(m: *mut ibv_mr) -> u32 {
    // SAFETY: live MR.
    unsafe { (*m).lkey }
}

// ------------------------------------------------------------------------------------------
// MW

/// A memory window: the C struct, then the library's.
#[repr(C)]
pub struct MwBox {
    /// The C struct applications hold (its `rkey` follows the binds posted).
    pub c: ibv_mw,
    /// The client's window.
    pub mw: Mw<File>,
}

/// `alloc_mw` of the context ops (`ibv_alloc_mw`).
///
/// # Safety
/// `p` is a live PD.
pub unsafe extern "C" fn alloc_mw(p: *mut ibv_pd, kind: i32) -> *mut ibv_mw {
    if p.is_null() {
        return errno::ret_ptr(Err(EINVAL));
    }
    let kind = match kind {
        IBV_MW_TYPE_1 => MwType::Type1,
        IBV_MW_TYPE_2 => MwType::Type2,
        _ => return errno::ret_ptr(Err(EINVAL)),
    };
    // SAFETY: live PD.
    let pdb = unsafe { pd(p) };
    let r = pdb.adopt(pdb.pd.alloc_mw_type(kind), |mw| MwBox {
        c: ibv_mw {
            context: pdb.c.context,
            pd: p,
            rkey: mw.rkey(),
            handle: mw.id() as u32,
            type_: kind as u32,
        },
        mw,
    });
    errno::ret_ptr(r)
}

/// `dealloc_mw` of the context ops.
///
/// # Safety
/// `m` is a live MW.
pub unsafe extern "C" fn dealloc_mw(m: *mut ibv_mw) -> c_int {
    if m.is_null() {
        return EINVAL;
    }
    // SAFETY: a live MW.
    let p = unsafe { (*m).pd };
    // SAFETY: its PD counts it, so it is live.
    unsafe { pd(p) }.users.fetch_sub(1, Ordering::AcqRel);
    // SAFETY: the box `alloc_mw` leaked, freed once.
    drop(unsafe { Box::from_raw(m.cast::<MwBox>()) });
    0
}

// ------------------------------------------------------------------------------------------
// AH

/// An address handle: the C struct, then the library's.
#[repr(C)]
pub struct AhBox {
    /// The C struct applications hold.
    pub c: ibv_ah,
    /// The client's address handle (its address vector goes into UD sends).
    pub ah: Ah<File>,
}

/// `ibv_ah_attr` → the client's address vector.
pub fn address_vector(a: &ibv_ah_attr) -> AddressVector {
    AddressVector {
        grh_valid: a.is_global != 0,
        hop_limit: a.grh.hop_limit,
        traffic_class: a.grh.traffic_class,
        flow_label: a.grh.flow_label,
        sgid: [0; 16],
        // SAFETY: both union views are 16 plain bytes.
        dgid: unsafe { a.grh.dgid.raw },
        dlid: a.dlid,
        service_level: a.sl,
        path_bits: a.src_path_bits,
        static_rate: a.static_rate,
        port: a.port_num,
    }
}

/// `ibv_create_ah`.
///
/// # Safety
/// `p` is a live PD, `attr` readable.
pub unsafe extern "C" fn ibv_create_ah(p: *mut ibv_pd, attr: *mut ibv_ah_attr) -> *mut ibv_ah {
    if p.is_null() || attr.is_null() {
        return errno::ret_ptr(Err(EINVAL));
    }
    // SAFETY: a live PD.
    let pdb = unsafe { pd(p) };
    // SAFETY: readable by the contract.
    let a = unsafe { &*attr };
    // SAFETY: the PD's context is live.
    let cx: &Context = unsafe { ctx(pdb.c.context) };
    if a.port_num == 0 || a.port_num > cx.attr.phys_port_cnt {
        return errno::ret_ptr(Err(EINVAL));
    }
    // A RoCE port routes by GID only (the kernel refuses an AH without GRH there).
    if cx.link_layer == IBV_LINK_LAYER_ETHERNET && a.is_global == 0 {
        return errno::ret_ptr(Err(EINVAL));
    }
    let r = pdb.adopt(pdb.pd.create_ah(&address_vector(a)), |ah| AhBox {
        c: ibv_ah {
            context: pdb.c.context,
            pd: p,
            handle: ah.id() as u32,
        },
        ah,
    });
    errno::ret_ptr(r)
}

/// `ibv_destroy_ah`.
///
/// # Safety
/// `a` is a live AH.
pub unsafe extern "C" fn ibv_destroy_ah(a: *mut ibv_ah) -> c_int {
    if a.is_null() {
        return errno::ret(Err(EINVAL));
    }
    // SAFETY: a live AH.
    let p = unsafe { (*a).pd };
    // SAFETY: its PD counts it, so it is live.
    unsafe { pd(p) }.users.fetch_sub(1, Ordering::AcqRel);
    // SAFETY: the box `ibv_create_ah` leaked, freed once.
    drop(unsafe { Box::from_raw(a.cast::<AhBox>()) });
    0
}

// ------------------------------------------------------------------------------------------
// Completion channels

/// One completion event: the CQ and its context.
#[derive(Clone, Copy)]
pub struct CqEvent {
    /// The CQ's address.
    pub cq: usize,
    /// Its `cq_context`.
    pub cq_context: usize,
}

/// A completion channel: the C struct, then its event queue.
#[repr(C)]
pub struct ChannelBox {
    /// The C struct applications hold (`fd` is the queue's).
    pub c: ibv_comp_channel,
    /// The completion events, shared with the CQs' event threads.
    pub events: Arc<EventQueue<CqEvent>>,
}

/// # Safety
/// `ch` is a live channel.
pub unsafe fn channel<'a>(ch: *mut ibv_comp_channel) -> &'a ChannelBox {
    // SAFETY: first field of the box.
    unsafe { &*ch.cast::<ChannelBox>() }
}

/// `ibv_create_comp_channel`: its `fd` is pollable (one count per completion event).
///
/// # Safety
/// `c` is a live context.
pub unsafe extern "C" fn ibv_create_comp_channel(c: *mut ibv_context) -> *mut ibv_comp_channel {
    if c.is_null() {
        return errno::ret_ptr(Err(EINVAL));
    }
    let r = EventQueue::new().map(|q| {
        let events = Arc::new(q);
        leak::<_, ibv_comp_channel>(ChannelBox {
            c: ibv_comp_channel {
                context: c,
                fd: events.fd(),
                refcnt: 0,
            },
            events,
        })
    });
    errno::ret_ptr(r)
}

/// `ibv_destroy_comp_channel`: `EBUSY` while CQs use it.
///
/// # Safety
/// `ch` is a live channel.
pub unsafe extern "C" fn ibv_destroy_comp_channel(ch: *mut ibv_comp_channel) -> c_int {
    if ch.is_null() {
        return errno::ret(Err(EINVAL));
    }
    // SAFETY: live channel.
    if unsafe { (*ch).refcnt } != 0 {
        return errno::ret(Err(EBUSY));
    }
    // SAFETY: the box leaked by `ibv_create_comp_channel`, freed once.
    drop(unsafe { Box::from_raw(ch.cast::<ChannelBox>()) });
    0
}

/// A null `ibv_mr` pointer, for ops rdma-core leaves unset.
pub fn no_mr() -> *mut ibv_mr {
    ptr::null_mut()
}
