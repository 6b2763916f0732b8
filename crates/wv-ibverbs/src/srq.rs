//! Shared receive queues: create, modify (resize and limit), query, post, and the limit event
//! (SRQ_NOTIFY's `STATUS_ALERTED` → `IBV_EVENT_SRQ_LIMIT_REACHED` on the context's async
//! queue).

use core::ffi::{c_int, c_void};
use core::sync::atomic::{AtomicUsize, Ordering};

use wv_abi::NtStatus;
use wv_client::verbs::{RecvWr, Sge, Srq};

use crate::abi::*;
use crate::context::ctx;
use crate::errno::{self, EINVAL, EOPNOTSUPP};
use crate::objects::{leak, pd, unused};
use crate::runtime::File;

/// An SRQ: the C struct, then the library's.
#[repr(C)]
pub struct SrqBox {
    /// The C struct applications hold.
    pub c: ibv_srq,
    /// The client's SRQ.
    pub srq: Srq<File>,
    /// QPs receiving from it (`EBUSY` while any).
    pub users: AtomicUsize,
    /// SGEs per receive the device granted.
    pub max_sge: u32,
}

/// # Safety
/// `s` is a live SRQ of this library.
pub unsafe fn srq<'a>(s: *mut ibv_srq) -> &'a SrqBox {
    // SAFETY: first field of the box.
    unsafe { &*s.cast::<SrqBox>() }
}

fn create(
    p: *mut ibv_pd,
    srq_context: *mut c_void,
    attr: &mut ibv_srq_attr,
) -> Result<*mut ibv_srq, i32> {
    if p.is_null() {
        return Err(EINVAL);
    }
    // SAFETY: live PD by the contract.
    let pdb = unsafe { pd(p) };
    // SAFETY: its context is live.
    let cx = unsafe { ctx(pdb.c.context) };
    if attr.max_wr == 0
        || attr.max_wr > cx.attr.max_srq_wr as u32
        || attr.max_sge > cx.attr.max_srq_sge as u32
        || attr.srq_limit > attr.max_wr
    {
        return Err(EINVAL);
    }
    let s = pdb
        .pd
        .create_srq(attr.max_wr, attr.max_sge.max(1), 0)
        .map_err(|e| errno::of(&e))?;
    if let Ok(q) = s.query() {
        attr.max_wr = q.MaxWr;
        attr.max_sge = q.MaxSge;
    }
    pdb.users.fetch_add(1, Ordering::AcqRel);
    let raw = leak::<_, ibv_srq>(SrqBox {
        // SAFETY: all-zero is valid for the C struct.
        c: ibv_srq {
            context: pdb.c.context,
            srq_context,
            pd: p,
            handle: s.id() as u32,
            mutex: pthread_mutex_t([0; 40]),
            cond: pthread_cond_t([0; 48]),
            events_completed: 0,
        },
        max_sge: attr.max_sge,
        srq: s,
        users: AtomicUsize::new(0),
    });
    Ok(raw)
}

/// `ibv_create_srq`.
///
/// # Safety
/// `p` is a live PD, `init` readable and writable.
pub unsafe extern "C" fn ibv_create_srq(
    p: *mut ibv_pd,
    init: *mut ibv_srq_init_attr,
) -> *mut ibv_srq {
    // SAFETY: readable and writable by the contract.
    unsafe { errno::create_with(init, |i| create(p, i.srq_context, &mut i.attr)) }
}

/// `create_srq_ex` of the extended ops: basic SRQs only (no XRC, no tag matching).
///
/// # Safety
/// `c` is a live context, `init` readable and writable.
pub unsafe extern "C" fn create_srq_ex(
    _c: *mut ibv_context,
    init: *mut ibv_srq_init_attr_ex,
) -> *mut ibv_srq {
    let body = |init: &mut ibv_srq_init_attr_ex| {
        if init.comp_mask & !(IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD) != 0 {
            return Err(EOPNOTSUPP);
        }
        if init.comp_mask & IBV_SRQ_INIT_ATTR_TYPE != 0 && init.srq_type != IBV_SRQT_BASIC {
            return Err(EOPNOTSUPP);
        }
        if init.comp_mask & IBV_SRQ_INIT_ATTR_PD == 0 {
            return Err(EINVAL);
        }
        create(init.pd, init.srq_context, &mut init.attr)
    };
    // SAFETY: readable and writable by the contract.
    unsafe { errno::create_with(init, body) }
}

fn arm_limit(s: *mut ibv_srq) {
    // SAFETY: live SRQ.
    let b = unsafe { srq(s) };
    // SAFETY: its context is live.
    let cx = unsafe { ctx(b.c.context) };
    let Ok(p) = b.srq.notify() else { return };
    let events = cx.async_events.clone();
    let me = s as usize;
    let _ = std::thread::Builder::new()
        .name("ibv-srq-limit".into())
        .spawn(move || {
            if let Ok(status) = p.wait()
                && status == NtStatus::ALERTED.0
            {
                events.push(crate::context::AsyncEvent {
                    element: me,
                    event_type: IBV_EVENT_SRQ_LIMIT_REACHED,
                });
            }
        });
}

/// `ibv_modify_srq`: `IBV_SRQ_MAX_WR` resizes, `IBV_SRQ_LIMIT` arms the limit event (one
/// shot, as the kernel's).
///
/// # Safety
/// `s` is a live SRQ, `attr` readable.
pub unsafe extern "C" fn ibv_modify_srq(
    s: *mut ibv_srq,
    attr: *mut ibv_srq_attr,
    mask: c_int,
) -> c_int {
    if s.is_null() || attr.is_null() {
        return errno::ret(Err(EINVAL));
    }
    let mask = mask as u32;
    if mask & !(IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT) != 0 {
        return errno::ret(Err(EINVAL));
    }
    // SAFETY: a live SRQ.
    let b = unsafe { srq(s) };
    // SAFETY: readable by the contract.
    let a = unsafe { *attr };
    let cur = match b.srq.query() {
        Ok(q) => q,
        Err(e) => return errno::ret(Err(errno::of(&e))),
    };
    let max_wr = if mask & IBV_SRQ_MAX_WR != 0 {
        a.max_wr
    } else {
        cur.MaxWr
    };
    let limit = if mask & IBV_SRQ_LIMIT != 0 {
        a.srq_limit
    } else {
        cur.SrqLimit
    };
    if limit > max_wr {
        return errno::ret(Err(EINVAL));
    }
    if let Err(e) = b.srq.modify(max_wr, limit) {
        return errno::ret(Err(errno::of(&e)));
    }
    if mask & IBV_SRQ_LIMIT != 0 && limit > 0 {
        arm_limit(s);
    }
    0
}

/// `ibv_query_srq`.
///
/// # Safety
/// `s` is a live SRQ, `attr` writable.
pub unsafe extern "C" fn ibv_query_srq(s: *mut ibv_srq, attr: *mut ibv_srq_attr) -> c_int {
    if s.is_null() || attr.is_null() {
        return errno::ret(Err(EINVAL));
    }
    // SAFETY: live SRQ.
    match unsafe { srq(s) }.srq.query() {
        Ok(q) => {
            // SAFETY: writable.
            unsafe {
                *attr = ibv_srq_attr {
                    max_wr: q.MaxWr,
                    max_sge: q.MaxSge,
                    srq_limit: q.SrqLimit,
                }
            };
            0
        }
        Err(e) => errno::ret(Err(errno::of(&e))),
    }
}

/// `ibv_destroy_srq`: `EBUSY` while QPs use it.
///
/// # Safety
/// `s` is a live SRQ.
pub unsafe extern "C" fn ibv_destroy_srq(s: *mut ibv_srq) -> c_int {
    // SAFETY: a live SRQ by the contract.
    let b = match unsafe { unused(s, srq, |b| &b.users) } {
        Ok(b) => b,
        Err(e) => return errno::ret(Err(e)),
    };
    // SAFETY: the PD counts the SRQ, so it is live.
    unsafe { pd(b.c.pd) }.users.fetch_sub(1, Ordering::AcqRel);
    // SAFETY: the box `create` leaked, freed once.
    drop(unsafe { Box::from_raw(s.cast::<SrqBox>()) });
    0
}

/// The `n` entries of an application's SGE array, as the provider's [`Sge`]s. Read lazily:
/// the caller consumes the iterator while the array is valid.
///
/// # Safety
/// `list` addresses `n` readable `ibv_sge`s.
pub unsafe fn read_sges(list: *const ibv_sge, n: usize) -> impl Iterator<Item = Sge> {
    (0..n).map(move |i| {
        // SAFETY: `n` entries by the caller's promise.
        let e = unsafe { list.wrapping_add(i).read() };
        Sge {
            addr: e.addr,
            length: e.length,
            lkey: e.lkey,
        }
    })
}

/// A work-request list of a post call: `post` on each node in order (`next` names the one
/// after it); stops at the first failure, points `bad` at that node and returns its errno.
///
/// # Safety
/// `wr` is a valid NULL-terminated list as `post` reads it; `bad` is null or writable.
pub unsafe fn for_each_wr<W>(
    mut wr: *mut W,
    bad: *mut *mut W,
    next: impl Fn(&W) -> *mut W,
    mut post: impl FnMut(&W) -> Result<(), c_int>,
) -> c_int {
    while !wr.is_null() {
        // SAFETY: a list node by the contract.
        let w = unsafe { &*wr };
        if let Err(e) = post(w) {
            if !bad.is_null() {
                // SAFETY: writable by the contract.
                unsafe { *bad = wr };
            }
            return e;
        }
        wr = next(w);
    }
    0
}

/// Reads an application's receive list into SGE storage and `RecvWr`s, calling `post` on
/// each; stops at the first failure and points `bad` at it.
///
/// # Safety
/// `wr` is a valid NULL-terminated list whose SGE arrays hold `num_sge` entries each.
pub unsafe fn for_each_recv(
    wr: *mut ibv_recv_wr,
    bad: *mut *mut ibv_recv_wr,
    mut post: impl FnMut(&RecvWr<'_>) -> Result<(), i32>,
) -> c_int {
    let each = |w: &ibv_recv_wr| {
        let Ok(n) = usize::try_from(w.num_sge) else {
            return Err(EINVAL);
        };
        // SAFETY: `num_sge` entries by the contract.
        let entries = unsafe { read_sges(w.sg_list, n) };
        let mut sges = [Sge::default(); 32];
        let mut heap = Vec::new();
        let sg: &[Sge] = if n <= sges.len() {
            for (s, e) in sges.iter_mut().zip(entries) {
                *s = e;
            }
            &sges[..n]
        } else {
            heap.extend(entries);
            &heap
        };
        post(&RecvWr {
            wr_id: w.wr_id,
            sg_list: sg,
        })
    };
    // SAFETY: forwarded list contract.
    unsafe { for_each_wr(wr, bad, |w| w.next, each) }
}

/// `post_srq_recv` of the context ops.
///
/// # Safety
/// `s` is a live SRQ; `wr` a valid list; `bad` writable.
pub unsafe extern "C" fn post_srq_recv(
    s: *mut ibv_srq,
    wr: *mut ibv_recv_wr,
    bad: *mut *mut ibv_recv_wr,
) -> c_int {
    if s.is_null() {
        return EINVAL;
    }
    // SAFETY: live SRQ.
    let b = unsafe { srq(s) };
    // SAFETY: forwarded list contract.
    unsafe { for_each_recv(wr, bad, |r| b.srq.post_recv(r).map_err(|e| e.errno())) }
}
