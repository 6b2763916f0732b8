//! Completion queues: `ibv_create_cq`/`ibv_create_cq_ex` (one box, the `ibv_cq_ex` layout, whose
//! first fields are `ibv_cq`), polling through the user-mode provider (no IOCTL), arming,
//! completion channels and the extended polling API.
//!
//! Completion events: `ibv_req_notify_cq` on a CQ with a channel issues CQ_NOTIFY (then arms
//! the CQ through the provider, so a completion between the two is not lost) and hands the
//! overlapped request to the CQ's event thread, which waits for it and queues the event on the
//! channel, as WinOFED's libibverbs completes a CQ's notify into its channel's completion port.
//! Without a channel an arm has nobody to tell, so it is not sent to the driver.

use core::ffi::{c_int, c_void};
use core::ptr;
use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::sync::mpsc;

use wv_abi::NtStatus;
use wv_client::verbs::{Cq, Pending, WorkCompletion};

use crate::abi::*;
use crate::context::ctx;
use crate::errno::{self, EINVAL, ENOENT, EOPNOTSUPP};
use crate::objects::{CqEvent, channel, unused};
use crate::runtime::File;

/// A CQ: the C struct (`ibv_cq_ex`, whose first fields are `ibv_cq`), then the library's.
#[repr(C)]
pub struct CqBox {
    /// The C struct applications hold.
    pub c: ibv_cq_ex,
    /// The client's CQ (CQ_DESTROY on drop).
    pub cq: Cq<File>,
    /// QPs using this CQ.
    pub users: AtomicUsize,
    /// Sends armed notifies to the event thread (CQs with a channel).
    arms: Option<mpsc::Sender<Pending<()>>>,
    armed: Arc<AtomicBool>,
    wc_flags: u64,
    /// The completion the extended poll is on.
    cur: WorkCompletion,
}

/// # Safety
/// `c` is a live CQ of this library.
pub unsafe fn cq<'a>(c: *mut ibv_cq) -> &'a CqBox {
    // SAFETY: first field of the box.
    unsafe { &*c.cast::<CqBox>() }
}

fn create(
    c: *mut ibv_context,
    cqe: i32,
    cq_context: *mut c_void,
    ch: *mut ibv_comp_channel,
    comp_vector: i32,
    wc_flags: u64,
) -> Result<*mut CqBox, i32> {
    if c.is_null() {
        return Err(EINVAL);
    }
    // SAFETY: live context by the callers' contract.
    let cx = unsafe { ctx(c) };
    if cqe < 1 || cqe > cx.attr.max_cqe || comp_vector != 0 {
        return Err(EINVAL);
    }
    let q = cx.dev.create_cq(cqe as u32).map_err(|e| errno::of(&e))?;
    let armed = Arc::new(AtomicBool::new(false));
    let mut boxed = Box::new(CqBox {
        // SAFETY: all-zero is valid for the C struct (pointers, integers, None).
        c: unsafe { core::mem::zeroed() },
        cq: q,
        users: AtomicUsize::new(0),
        arms: None,
        armed: armed.clone(),
        wc_flags,
        cur: WorkCompletion::default(),
    });
    boxed.c.context = c;
    boxed.c.channel = ch;
    boxed.c.cq_context = cq_context;
    boxed.c.handle = boxed.cq.id() as u32;
    boxed.c.cqe = boxed.cq.entries() as i32;
    boxed.c.comp_mask = 0;
    boxed.c.start_poll = Some(start_poll);
    boxed.c.next_poll = Some(next_poll);
    boxed.c.end_poll = Some(end_poll);
    install_wc_readers(&mut boxed.c);
    let raw = Box::into_raw(boxed);
    if !ch.is_null() {
        // SAFETY: a live channel by the contract.
        let chb = unsafe { channel(ch) };
        // SAFETY: the channel is live; the library only touches refcnt under the caller's
        // serialisation of create/destroy, as rdma-core.
        unsafe { (*ch).refcnt += 1 };
        let events = chb.events.clone();
        let (tx, rx) = mpsc::channel::<Pending<()>>();
        let me = CqEvent {
            cq: raw as usize,
            cq_context: cq_context as usize,
        };
        std::thread::Builder::new()
            .name("ibv-cq-events".into())
            .spawn(move || {
                for p in rx {
                    let r = p.wait();
                    armed.store(false, Ordering::Release);
                    match r {
                        Ok(()) => events.push(me),
                        // Cancelled (the CQ is being destroyed) or the CQ failed: no
                        // completion event (a CQ error is an async event).
                        Err(e) if e.status == NtStatus::CANCELLED => {}
                        Err(_) => {}
                    }
                }
            })
            .map_err(|_| crate::errno::ENOMEM)?;
        // SAFETY: `raw` is live and not yet shared.
        unsafe { (*raw).arms = Some(tx) };
    }
    Ok(raw)
}

/// `ibv_create_cq`.
///
/// # Safety
/// `c` is a live context; `ch` NULL or a live channel of it.
pub unsafe extern "C" fn ibv_create_cq(
    c: *mut ibv_context,
    cqe: c_int,
    cq_context: *mut c_void,
    ch: *mut ibv_comp_channel,
    comp_vector: c_int,
) -> *mut ibv_cq {
    errno::ret_ptr(create(c, cqe, cq_context, ch, comp_vector, 0).map(|b| b.cast()))
}

/// `create_cq_ex` of the extended ops (`ibv_create_cq_ex`).
///
/// # Safety
/// `c` is a live context; `attr` readable and writable (the C API's pointer is not const;
/// nothing is written through it).
pub unsafe extern "C" fn create_cq_ex(
    c: *mut ibv_context,
    attr: *mut ibv_cq_init_attr_ex,
) -> *mut ibv_cq_ex {
    let is_parent_domain = |p: *mut ibv_pd| {
        // SAFETY: a live PD when non-null, by the contract.
        !p.is_null() && !unsafe { crate::objects::pd(p) }.protection_domain.is_null()
    };
    let body = |a: &mut ibv_cq_init_attr_ex| {
        if a.comp_mask & !(IBV_CQ_INIT_ATTR_MASK_FLAGS | IBV_CQ_INIT_ATTR_MASK_PD) != 0 {
            return Err(EINVAL);
        }
        if a.wc_flags & !SUPPORTED_WC_FLAGS != 0 {
            return Err(EOPNOTSUPP);
        }
        if a.comp_mask & IBV_CQ_INIT_ATTR_MASK_PD != 0 && !is_parent_domain(a.parent_domain) {
            // Only a parent domain may be given (rdma-core: EINVAL otherwise).
            return Err(EINVAL);
        }
        let cqe = i32::try_from(a.cqe).unwrap_or(i32::MAX);
        create(
            c,
            cqe,
            a.cq_context,
            a.channel,
            a.comp_vector as i32,
            a.wc_flags,
        )
        .map(|b| b.cast())
    };
    // SAFETY: readable and writable by the contract.
    unsafe { errno::create_with(attr, body) }
}

/// `ibv_destroy_cq`: `EBUSY` while QPs use it. Completion events of it not yet taken from
/// its channel are dropped.
///
/// # Safety
/// `c` is a live CQ.
pub unsafe extern "C" fn ibv_destroy_cq(c: *mut ibv_cq) -> c_int {
    // SAFETY: a live CQ by the contract.
    let b = match unsafe { unused(c, cq, |b| &b.users) } {
        Ok(b) => b,
        Err(e) => return errno::ret(Err(e)),
    };
    let ch = b.c.channel;
    // SAFETY: the box `create` leaked, freed once. Dropping it destroys the CQ (which cancels
    // a parked notify) and closes the event thread's queue.
    drop(unsafe { Box::from_raw(c.cast::<CqBox>()) });
    if !ch.is_null() {
        // SAFETY: the channel outlives its CQs (it counts them).
        unsafe { channel(ch) }.events.retain(|e| e.cq != c as usize);
        // SAFETY: as above.
        unsafe { (*ch).refcnt -= 1 };
    }
    0
}

/// `ibv_resize_cq`.
///
/// # Safety
/// `c` is a live CQ.
pub unsafe extern "C" fn ibv_resize_cq(c: *mut ibv_cq, cqe: c_int) -> c_int {
    if c.is_null() {
        return errno::ret(Err(EINVAL));
    }
    // SAFETY: live CQ box; the caller serialises resize with polling, as rdma-core requires.
    let b = unsafe { &mut *c.cast::<CqBox>() };
    // SAFETY: its context is live.
    let max = unsafe { ctx(b.c.context) }.attr.max_cqe;
    if cqe < 1 || cqe > max {
        return errno::ret(Err(EINVAL));
    }
    match b.cq.resize(cqe as u32) {
        Ok(n) => {
            b.c.cqe = n as i32;
            0
        }
        Err(e) => errno::ret(Err(errno::of(&e))),
    }
}

fn wc_of(w: &WorkCompletion) -> ibv_wc {
    ibv_wc {
        wr_id: w.wr_id,
        status: w.status as u32,
        opcode: w.opcode as u32,
        vendor_err: w.vendor_err,
        byte_len: w.byte_len,
        imm_data: w.imm_data,
        qp_num: w.qp_num,
        src_qp: w.src_qp,
        wc_flags: w.wc_flags,
        pkey_index: w.pkey_index,
        slid: w.slid,
        sl: w.sl,
        dlid_path_bits: w.dlid_path_bits,
    }
}

/// `poll_cq` of the context ops (`ibv_poll_cq`): through the provider, no IOCTL.
///
/// # Safety
/// `c` is a live CQ; `wc` holds `n` writable entries.
pub unsafe extern "C" fn poll_cq(c: *mut ibv_cq, n: c_int, wc: *mut ibv_wc) -> c_int {
    if c.is_null() || n < 0 || (n > 0 && wc.is_null()) {
        return -EINVAL;
    }
    // SAFETY: live CQ.
    let b = unsafe { cq(c) };
    let mut buf = [WorkCompletion::default(); 16];
    let mut done = 0usize;
    let want = n as usize;
    while done < want {
        let chunk = (want - done).min(buf.len());
        let got = b.cq.poll(&mut buf[..chunk]);
        for (i, w) in buf[..got].iter().enumerate() {
            // SAFETY: entry `done + i < n` of the caller's array.
            unsafe { wc.wrapping_add(done + i).write(wc_of(w)) };
        }
        done += got;
        if got < chunk {
            break;
        }
    }
    done as c_int
}

/// `req_notify_cq` of the context ops (`ibv_req_notify_cq`).
///
/// # Safety
/// `c` is a live CQ.
pub unsafe extern "C" fn req_notify_cq(c: *mut ibv_cq, solicited_only: c_int) -> c_int {
    if c.is_null() {
        return EINVAL;
    }
    // SAFETY: live CQ.
    let b = unsafe { cq(c) };
    let Some(tx) = &b.arms else {
        return 0;
    };
    // One notify in flight at a time: the arm it made is still set until it fires.
    if b.armed.swap(true, Ordering::AcqRel) {
        return 0;
    }
    match b.cq.notify(solicited_only != 0) {
        Ok(p) => {
            let _ = tx.send(p);
            0
        }
        Err(e) => {
            b.armed.store(false, Ordering::Release);
            errno::of(&e)
        }
    }
}

/// `ibv_get_cq_event`: waits on the channel (unless its fd is non-blocking); 0, or -1 with
/// `errno`.
///
/// # Safety
/// `ch` is a live channel; `out_cq`, `out_ctx` writable.
pub unsafe extern "C" fn ibv_get_cq_event(
    ch: *mut ibv_comp_channel,
    out_cq: *mut *mut ibv_cq,
    out_ctx: *mut *mut c_void,
) -> c_int {
    if ch.is_null() || out_cq.is_null() || out_ctx.is_null() {
        return errno::ret_minus1(Err(EINVAL));
    }
    // SAFETY: live channel.
    match unsafe { channel(ch) }.events.pop() {
        Ok(e) => {
            // SAFETY: writable by the contract.
            unsafe { *out_cq = e.cq as *mut ibv_cq };
            // SAFETY: writable by the contract.
            unsafe { *out_ctx = e.cq_context as *mut c_void };
            0
        }
        Err(e) => errno::ret_minus1(Err(e)),
    }
}

/// `ibv_ack_cq_events`.
///
/// # Safety
/// `c` is a live CQ.
pub unsafe extern "C" fn ibv_ack_cq_events(c: *mut ibv_cq, n: u32) {
    if !c.is_null() {
        // SAFETY: live CQ; the counter is the application's to serialise, as in rdma-core
        // (which takes the CQ's mutex: acks of one CQ from several threads are not ordered by
        // this library).
        let cq = unsafe { &mut *c };
        cq.comp_events_completed = cq.comp_events_completed.wrapping_add(n);
    }
}

/// `modify_cq` (moderation): not supported by the soft HCA.
///
/// # Safety
/// None beyond the C signature.
pub unsafe extern "C" fn modify_cq(_c: *mut ibv_cq, _attr: *mut ibv_modify_cq_attr) -> c_int {
    EOPNOTSUPP
}

// ------------------------------------------------------------------------------------------
// Extended polling

fn cur<'a>(c: *mut ibv_cq_ex) -> &'a mut CqBox {
    // SAFETY: every `ibv_cq_ex` these ops are installed on is a live CqBox, polled by one
    // thread at a time (rdma-core's rule for start/next/end_poll).
    unsafe { &mut *c.cast::<CqBox>() }
}

fn step(c: *mut ibv_cq_ex) -> c_int {
    let b = cur(c);
    let mut one = [WorkCompletion::default()];
    if b.cq.poll(&mut one) == 0 {
        return ENOENT;
    }
    b.cur = one[0];
    b.c.status = b.cur.status as u32;
    b.c.wr_id = b.cur.wr_id;
    0
}

unsafe extern "C" fn start_poll(c: *mut ibv_cq_ex, attr: *mut ibv_poll_cq_attr) -> c_int {
    // SAFETY: readable when non-null.
    if !attr.is_null() && unsafe { (*attr).comp_mask } != 0 {
        return EINVAL;
    }
    step(c)
}
unsafe extern "C" fn next_poll(c: *mut ibv_cq_ex) -> c_int {
    step(c)
}
unsafe extern "C" fn end_poll(_c: *mut ibv_cq_ex) {}
/// The `read_*` ops of the extended CQ, each one field of the current completion, and
/// `install_wc_readers`, which sets each op of that name on an `ibv_cq_ex`.
macro_rules! wc_readers {
    ($($name:ident -> $ty:ty = |$w:ident| $value:expr;)*) => {
        $(
            unsafe extern "C" fn $name(c: *mut ibv_cq_ex) -> $ty {
                let $w = &cur(c).cur;
                $value
            }
        )*

        fn install_wc_readers(c: &mut ibv_cq_ex) {
            $(c.$name = Some($name);)*
        }
    };
}
wc_readers! {
    read_opcode -> u32 = |w| w.opcode as u32;
    read_vendor_err -> u32 = |w| w.vendor_err;
    read_byte_len -> u32 = |w| w.byte_len;
    read_imm_data -> u32 = |w| w.imm_data;
    read_qp_num -> u32 = |w| w.qp_num;
    read_src_qp -> u32 = |w| w.src_qp;
    read_wc_flags -> u32 = |w| w.wc_flags;
    read_slid -> u32 = |w| u32::from(w.slid);
    read_sl -> u8 = |w| w.sl;
    read_dlid_path_bits -> u8 = |w| w.dlid_path_bits;
}

/// The flags a CQ was created with (for tests).
pub fn wc_flags(b: &CqBox) -> u64 {
    b.wc_flags
}

/// A null CQ.
pub fn none() -> *mut ibv_cq {
    ptr::null_mut()
}
