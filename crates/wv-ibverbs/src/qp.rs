//! Queue pairs: create (`ibv_create_qp`, `ibv_create_qp_ex`), modify with Linux's rules,
//! query, destroy, the data path through the user-mode provider (`post_send`, `post_recv`,
//! the type 1 `bind_mw`), multicast, and the `ibv_qp_ex` work-request builder (`wr_start`,
//! `wr_*`, `wr_complete`).

use core::ffi::{c_int, c_void};
use core::ptr;
use core::sync::atomic::Ordering;

use wv_abi::WV_IO_QP_ATTRIBUTES;
use wv_abi::consts::*;
use wv_client::verbs::{
    AtomicArgs, MwBind, PostError, Qp, QpAttr, QpInit, QpType, SendWr, Sge, UdAddress, VerbsError,
    WrOpcode,
};

use crate::abi::*;
use crate::context::ctx;
use crate::cq::{CqBox, cq};
use crate::errno::{self, EINVAL, ENOMEM, EOPNOTSUPP};
use crate::objects::{AhBox, MwBox, ibv_access, pd, wv_access};
use crate::query::{mtu_bytes, mtu_enum};
use crate::runtime::File;
use crate::srq::{SrqBox, for_each_recv, for_each_wr, read_sges, srq};

/// One work request built through `ibv_qp_ex`, owned until `wr_complete`.
#[derive(Clone, Default)]
struct BuiltWr {
    wr_id: u64,
    opcode: u32,
    flags: u32,
    sges: Vec<Sge>,
    inline: Option<Vec<u8>>,
    imm: u32,
    remote_addr: u64,
    rkey: u32,
    ud: Option<UdAddress>,
    atomic: Option<AtomicArgs>,
    bind: Option<MwBind>,
}

/// A QP: the C struct (`ibv_qp_ex`, whose first field is `ibv_qp`), then the library's.
#[repr(C)]
pub struct QpBox {
    /// The C struct applications hold.
    pub c: ibv_qp_ex,
    /// The client's QP (QP_DESTROY on drop; its data path is the provider's).
    pub qp: Qp<File>,
    /// The capacities the device granted.
    pub cap: ibv_qp_cap,
    sq_sig_all: bool,
    /// Whether `ibv_qp_to_qp_ex` hands out the extended struct, and the operations allowed.
    send_ops: Option<u64>,
    /// What INIT → INIT keeps when the application does not repeat it (WinVerbs builds a
    /// modify from the target state, and INIT needs the port).
    port: u8,
    pkey_index: u16,
    access: u32,
    qkey: u32,
    /// The `ibv_qp_ex` builder.
    building: Vec<BuiltWr>,
    build_err: i32,
}

/// # Safety
/// `q` is a live QP of this library.
pub unsafe fn qp<'a>(q: *mut ibv_qp) -> &'a QpBox {
    // SAFETY: first field of the box.
    unsafe { &*q.cast::<QpBox>() }
}

fn qp_type(t: u32) -> Result<QpType, i32> {
    match t {
        IBV_QPT_RC => Ok(QpType::Rc),
        IBV_QPT_UC => Ok(QpType::Uc),
        IBV_QPT_UD => Ok(QpType::Ud),
        _ => Err(EOPNOTSUPP),
    }
}

struct Create {
    qp_context: *mut c_void,
    pd: *mut ibv_pd,
    send_cq: *mut ibv_cq,
    recv_cq: *mut ibv_cq,
    srq: *mut ibv_srq,
    cap: ibv_qp_cap,
    qp_type: u32,
    sq_sig_all: bool,
    send_ops: Option<u64>,
}

/// Creates the QP an `ibv_qp_init_attr` or an `ibv_qp_init_attr_ex` (`$init`: the fields of
/// the same names) describes on `$pd`, writes the caps the device granted back into it, and
/// returns the QP, or NULL with `errno`.
macro_rules! create_from {
    ($init:ident, $pd:expr, $send_ops:expr) => {{
        let r = create(&Create {
            qp_context: $init.qp_context,
            pd: $pd,
            send_cq: $init.send_cq,
            recv_cq: $init.recv_cq,
            srq: $init.srq,
            cap: $init.cap,
            qp_type: $init.qp_type,
            sq_sig_all: $init.sq_sig_all != 0,
            send_ops: $send_ops,
        })
        .map(|(q, cap)| {
            $init.cap = cap;
            q
        });
        r
    }};
}

fn create(a: &Create) -> Result<(*mut ibv_qp, ibv_qp_cap), i32> {
    if a.pd.is_null() || a.send_cq.is_null() || a.recv_cq.is_null() {
        return Err(EINVAL);
    }
    let t = qp_type(a.qp_type)?;
    // SAFETY: a live PD by the callers' contract.
    let pdb = unsafe { pd(a.pd) };
    // SAFETY: a live CQ by the callers' contract.
    let scq = unsafe { cq(a.send_cq) };
    // SAFETY: a live CQ by the callers' contract.
    let rcq = unsafe { cq(a.recv_cq) };
    // SAFETY: the PD's context is live.
    let cx = unsafe { ctx(pdb.c.context) };
    let limits = &cx.attr;
    let cap = a.cap;
    let with_srq = !a.srq.is_null();
    if cap.max_send_wr > limits.max_qp_wr as u32
        || cap.max_send_sge > limits.max_sge as u32
        || (!with_srq
            && (cap.max_recv_wr > limits.max_qp_wr as u32
                || cap.max_recv_sge > limits.max_sge as u32))
    {
        return Err(EINVAL);
    }
    let srqb: Option<&SrqBox> = if with_srq {
        // SAFETY: live SRQ.
        Some(unsafe { srq(a.srq) })
    } else {
        None
    };
    let init = QpInit {
        qp_type: t,
        send_cq: &scq.cq,
        recv_cq: &rcq.cq,
        srq: srqb.map(|s| &s.srq),
        max_send_wr: cap.max_send_wr.max(1),
        max_recv_wr: if with_srq { 0 } else { cap.max_recv_wr.max(1) },
        max_send_sge: cap.max_send_sge.max(1),
        max_recv_sge: if with_srq { 0 } else { cap.max_recv_sge.max(1) },
        max_inline: cap.max_inline_data,
        sq_sig_all: a.sq_sig_all,
    };
    let q = pdb.pd.create_qp(&init).map_err(|e| errno::of(&e))?;
    // What the device granted (the kernel writes it back into the caller's caps).
    let mut granted = cap;
    if let Ok(attr) = q.query() {
        granted.max_send_wr = attr.SendDepth;
        granted.max_send_sge = attr.SendSge;
        if !with_srq {
            granted.max_recv_wr = attr.ReceiveDepth;
            granted.max_recv_sge = attr.ReceiveSge;
        }
        granted.max_inline_data = attr.MaxInlineSend.max(q.max_inline());
    }
    pdb.users.fetch_add(1, Ordering::AcqRel);
    scq.users.fetch_add(1, Ordering::AcqRel);
    rcq.users.fetch_add(1, Ordering::AcqRel);
    if let Some(s) = srqb {
        s.users.fetch_add(1, Ordering::AcqRel);
    }
    let mut boxed = Box::new(QpBox {
        // SAFETY: all-zero is valid for the C struct.
        c: unsafe { core::mem::zeroed() },
        qp: q,
        cap: granted,
        sq_sig_all: a.sq_sig_all,
        send_ops: a.send_ops,
        port: 0,
        pkey_index: 0,
        access: 0,
        qkey: 0,
        building: Vec::new(),
        build_err: 0,
    });
    let b = &mut boxed.c.qp_base;
    b.context = pdb.c.context;
    b.qp_context = a.qp_context;
    b.pd = a.pd;
    b.send_cq = a.send_cq;
    b.recv_cq = a.recv_cq;
    b.srq = a.srq;
    b.handle = boxed.qp.id() as u32;
    b.qp_num = boxed.qp.qpn();
    b.state = IBV_QPS_RESET;
    b.qp_type = a.qp_type;
    install_wr_ops(&mut boxed.c);
    Ok((Box::into_raw(boxed).cast(), granted))
}

/// `ibv_create_qp`: the caps the device granted are written back into `init`.
///
/// # Safety
/// `p` is a live PD; `init` readable and writable, naming live CQs (and SRQ).
pub unsafe extern "C" fn ibv_create_qp(p: *mut ibv_pd, init: *mut ibv_qp_init_attr) -> *mut ibv_qp {
    // SAFETY: readable and writable by the contract.
    unsafe { errno::create_with(init, |i| create_from!(i, p, None)) }
}

/// `create_qp_ex` of the extended ops (`ibv_create_qp_ex`): the PD is required; XRC, RSS,
/// TSO and creation flags are `EOPNOTSUPP`; `send_ops_flags` enables `ibv_qp_to_qp_ex`.
///
/// # Safety
/// `c` is a live context; `init` readable and writable.
pub unsafe extern "C" fn create_qp_ex(
    _c: *mut ibv_context,
    init: *mut ibv_qp_init_attr_ex,
) -> *mut ibv_qp {
    let known = IBV_QP_INIT_ATTR_PD
        | IBV_QP_INIT_ATTR_XRCD
        | IBV_QP_INIT_ATTR_CREATE_FLAGS
        | IBV_QP_INIT_ATTR_MAX_TSO_HEADER
        | IBV_QP_INIT_ATTR_IND_TABLE
        | IBV_QP_INIT_ATTR_RX_HASH
        | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
    let body = |i: &mut ibv_qp_init_attr_ex| {
        if i.comp_mask & !known != 0 {
            return Err(EINVAL);
        }
        if i.comp_mask
            & (IBV_QP_INIT_ATTR_XRCD
                | IBV_QP_INIT_ATTR_MAX_TSO_HEADER
                | IBV_QP_INIT_ATTR_IND_TABLE
                | IBV_QP_INIT_ATTR_RX_HASH)
            != 0
            || (i.comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS != 0 && i.create_flags != 0)
        {
            return Err(EOPNOTSUPP);
        }
        if i.comp_mask & IBV_QP_INIT_ATTR_PD == 0 {
            return Err(EINVAL);
        }
        let send_ops = if i.comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS != 0 {
            if i.send_ops_flags & !SUPPORTED_SEND_OPS != 0 {
                return Err(EOPNOTSUPP);
            }
            Some(i.send_ops_flags)
        } else {
            None
        };
        create_from!(i, i.pd, send_ops)
    };
    // SAFETY: readable and writable by the contract.
    unsafe { errno::create_with(init, body) }
}

/// `ibv_qp_to_qp_ex`: the extended struct of a QP created with `send_ops_flags`, else NULL.
///
/// # Safety
/// `q` is a live QP.
pub unsafe extern "C" fn ibv_qp_to_qp_ex(q: *mut ibv_qp) -> *mut ibv_qp_ex {
    if q.is_null() {
        return ptr::null_mut();
    }
    // SAFETY: live QP.
    if unsafe { qp(q) }.send_ops.is_some() {
        q.cast()
    } else {
        ptr::null_mut()
    }
}

/// `ibv_destroy_qp`.
///
/// # Safety
/// `q` is a live QP.
pub unsafe extern "C" fn ibv_destroy_qp(q: *mut ibv_qp) -> c_int {
    if q.is_null() {
        return errno::ret(Err(EINVAL));
    }
    // SAFETY: a live QP.
    let b = unsafe { &*q };
    // SAFETY: the QP's parents count it, so they are live.
    unsafe { pd(b.pd) }.users.fetch_sub(1, Ordering::AcqRel);
    // SAFETY: as above.
    unsafe { cq(b.send_cq) }
        .users
        .fetch_sub(1, Ordering::AcqRel);
    // SAFETY: as above.
    unsafe { cq(b.recv_cq) }
        .users
        .fetch_sub(1, Ordering::AcqRel);
    if !b.srq.is_null() {
        // SAFETY: as above.
        unsafe { srq(b.srq) }.users.fetch_sub(1, Ordering::AcqRel);
    }
    // SAFETY: the box `create` leaked, freed once.
    drop(unsafe { Box::from_raw(q.cast::<QpBox>()) });
    0
}

fn wv_state(s: u32) -> u8 {
    s as u8
}

/// `ibv_qp_attr` + mask → WinVerbs' QP_MODIFY attributes. `cur` and `next` are the
/// transition; INIT → INIT repeats the port, P_Key index and access flags (or Q_Key) the QP
/// has, since WinVerbs builds the modify from the target state.
pub fn wv_modify(
    b: &QpBox,
    a: &ibv_qp_attr,
    mask: u32,
    cur: u32,
    next: u32,
) -> Result<WV_IO_QP_ATTRIBUTES, i32> {
    let mut w = WV_IO_QP_ATTRIBUTES::default();
    let mut o = WV_IO_QP_ATTR_STATE;
    w.QpState = wv_state(next);
    if mask & IBV_QP_CUR_STATE != 0 {
        o |= WV_IO_QP_ATTR_CURRENT_STATE;
        w.CurrentQpState = wv_state(a.cur_qp_state);
    }
    let carry = next == IBV_QPS_INIT && cur == IBV_QPS_INIT;
    let ud = b.c.qp_base.qp_type == IBV_QPT_UD;
    if mask & IBV_QP_PORT != 0 || (carry && b.port != 0) {
        o |= WV_IO_QP_ATTR_PORT_NUMBER;
        w.AddressVector.PortNumber = if mask & IBV_QP_PORT != 0 {
            a.port_num
        } else {
            b.port
        };
    }
    if mask & IBV_QP_PKEY_INDEX != 0 || carry {
        o |= WV_IO_QP_ATTR_PKEY_INDEX;
        w.PkeyIndex = if mask & IBV_QP_PKEY_INDEX != 0 {
            a.pkey_index
        } else {
            b.pkey_index
        };
    }
    if mask & IBV_QP_ACCESS_FLAGS != 0 || (carry && !ud) {
        o |= WV_IO_QP_ATTR_ACCESS_FLAGS;
        let acc = if mask & IBV_QP_ACCESS_FLAGS != 0 {
            a.qp_access_flags
        } else {
            b.access
        };
        w.AccessFlags = wv_access(acc) as u8;
    }
    if mask & IBV_QP_QKEY != 0 || (carry && ud) {
        o |= WV_IO_QP_ATTR_QKEY;
        w.Qkey = (if mask & IBV_QP_QKEY != 0 {
            a.qkey
        } else {
            b.qkey
        })
        .to_be();
    }
    if mask & IBV_QP_AV != 0 {
        o |= WV_IO_QP_ATTR_AV;
        let port = w.AddressVector.PortNumber;
        let av = &a.ah_attr;
        w.AddressVector = wv_abi::WV_IO_AV {
            NetworkRouteValid: av.is_global,
            Reserved1: 0,
            HopLimit: av.grh.hop_limit,
            TrafficClass: av.grh.traffic_class,
            FlowLabel: (av.grh.flow_label & 0x000F_FFFF).to_be(),
            SGid: [0; 16],
            // SAFETY: 16 plain bytes either way.
            DGid: unsafe { av.grh.dgid.raw },
            Reserved2: 0,
            DLid: av.dlid.to_be(),
            ServiceLevel: av.sl,
            SourcePathBits: av.src_path_bits,
            StaticRate: av.static_rate,
            PortNumber: if av.port_num != 0 { av.port_num } else { port },
        };
        if av.is_global != 0 {
            // The source GID travels by index in Linux and by value in WinVerbs.
            // SAFETY: the QP's context is live.
            let cx = unsafe { ctx(b.c.qp_base.context) };
            let p = w.AddressVector.PortNumber.max(1);
            let gids = cx.dev.query_gids(p).map_err(|e| errno::of(&e))?;
            w.AddressVector.SGid = *gids.get(av.grh.sgid_index as usize).ok_or(EINVAL)?;
        }
    }
    if mask & IBV_QP_PATH_MTU != 0 {
        w.PathMtu = mtu_bytes(a.path_mtu).ok_or(EINVAL)?;
    }
    if mask & IBV_QP_TIMEOUT != 0 {
        o |= WV_IO_QP_ATTR_ACK_TIMEOUT;
        w.LocalAckTimeout = a.timeout;
    }
    if mask & IBV_QP_RETRY_CNT != 0 {
        o |= WV_IO_QP_ATTR_ERROR_RETRY_COUNT;
        w.SequenceErrorRetryCount = a.retry_cnt;
    }
    if mask & IBV_QP_RNR_RETRY != 0 {
        o |= WV_IO_QP_ATTR_RNR_RETRY_COUNT;
        w.RnrRetryCount = a.rnr_retry;
    }
    if mask & IBV_QP_RQ_PSN != 0 {
        o |= WV_IO_QP_ATTR_RECEIVE_PSN;
        w.ReceivePsn = (a.rq_psn & 0xff_ffff).to_be();
    }
    if mask & IBV_QP_SQ_PSN != 0 {
        o |= WV_IO_QP_ATTR_SEND_PSN;
        w.SendPsn = (a.sq_psn & 0xff_ffff).to_be();
    }
    if mask & IBV_QP_MAX_QP_RD_ATOMIC != 0 {
        o |= WV_IO_QP_ATTR_INITIATOR_DEPTH;
        w.InitiatorDepth = u32::from(a.max_rd_atomic);
    }
    if mask & IBV_QP_MAX_DEST_RD_ATOMIC != 0 {
        o |= WV_IO_QP_ATTR_RESPONDER_RESOURCES;
        w.ResponderResources = u32::from(a.max_dest_rd_atomic);
    }
    if mask & IBV_QP_MIN_RNR_TIMER != 0 {
        o |= WV_IO_QP_ATTR_RNR_NAK_TIMEOUT;
        w.RnrNakTimeout = a.min_rnr_timer;
    }
    if mask & IBV_QP_DEST_QPN != 0 {
        o |= WV_IO_QP_ATTR_DESTINATION_QPN;
        w.DestinationQpn = a.dest_qp_num.to_be();
    }
    if mask & IBV_QP_PATH_MIG_STATE != 0 {
        o |= WV_IO_QP_ATTR_PATH_MIG_STATE;
        w.ApmState = a.path_mig_state as u8;
    }
    if mask & IBV_QP_ALT_PATH != 0 {
        // No alternate paths on the soft HCA (no path migration).
        return Err(EOPNOTSUPP);
    }
    w.Options = o;
    Ok(w)
}

/// The state the QP is in as the device sees it.
fn current_state(b: &QpBox) -> u32 {
    b.qp.state() as u32
}

/// `ibv_modify_qp`: validated as the kernel's `ib_modify_qp_is_ok` (EINVAL otherwise, nothing
/// changed), then QP_MODIFY.
///
/// # Safety
/// `q` is a live QP; `attr` readable.
pub unsafe extern "C" fn ibv_modify_qp(
    q: *mut ibv_qp,
    attr: *mut ibv_qp_attr,
    mask: c_int,
) -> c_int {
    if q.is_null() || attr.is_null() {
        return errno::ret(Err(EINVAL));
    }
    // SAFETY: live QP box (the caller serialises modifies of one QP, as the kernel's lock
    // does); readable attr.
    let b = unsafe { &mut *q.cast::<QpBox>() };
    // SAFETY: readable by the contract.
    let a = unsafe { &*attr };
    errno::ret(modify(b, a, mask as u32))
}

/// The checked modify, without the C conventions.
pub fn modify(b: &mut QpBox, a: &ibv_qp_attr, mask: u32) -> Result<(), i32> {
    let cur = if mask & IBV_QP_CUR_STATE != 0 {
        a.cur_qp_state
    } else {
        current_state(b)
    };
    let next = if mask & IBV_QP_STATE != 0 {
        a.qp_state
    } else {
        cur
    };
    if !crate::modify::is_ok(cur, next, b.c.qp_base.qp_type, mask) {
        return Err(EINVAL);
    }
    // SAFETY: the QP's context is live.
    let cx = unsafe { ctx(b.c.qp_base.context) };
    if mask & IBV_QP_PORT != 0 && (a.port_num == 0 || a.port_num > cx.attr.phys_port_cnt) {
        return Err(EINVAL);
    }
    if mask & IBV_QP_MAX_QP_RD_ATOMIC != 0
        && i32::from(a.max_rd_atomic) > cx.attr.max_qp_init_rd_atom
    {
        return Err(EINVAL);
    }
    if mask & IBV_QP_MAX_DEST_RD_ATOMIC != 0
        && i32::from(a.max_dest_rd_atomic) > cx.attr.max_qp_rd_atom
    {
        return Err(EINVAL);
    }
    let w = wv_modify(b, a, mask, cur, next)?;
    b.qp.modify(&QpAttr::from_abi(w))
        .map_err(|e| errno::of(&e))?;
    if mask & IBV_QP_PORT != 0 {
        b.port = a.port_num;
    }
    if mask & IBV_QP_PKEY_INDEX != 0 {
        b.pkey_index = a.pkey_index;
    }
    if mask & IBV_QP_ACCESS_FLAGS != 0 {
        b.access = a.qp_access_flags;
    }
    if mask & IBV_QP_QKEY != 0 {
        b.qkey = a.qkey;
    }
    if next == IBV_QPS_RESET {
        b.port = 0;
    }
    b.c.qp_base.state = next;
    Ok(())
}

/// `ibv_query_qp`.
///
/// # Safety
/// `q` is a live QP; `attr`, `init` writable.
pub unsafe extern "C" fn ibv_query_qp(
    q: *mut ibv_qp,
    attr: *mut ibv_qp_attr,
    _mask: c_int,
    init: *mut ibv_qp_init_attr,
) -> c_int {
    if q.is_null() || attr.is_null() || init.is_null() {
        return errno::ret(Err(EINVAL));
    }
    // SAFETY: live QP.
    let b = unsafe { qp(q) };
    let w = match b.qp.query() {
        Ok(w) => w,
        Err(e) => return errno::ret(Err(errno::of(&e))),
    };
    let state = current_state(b);
    let av = &w.AddressVector;
    // SAFETY: all-zero is a valid ibv_qp_attr.
    let mut a: ibv_qp_attr = unsafe { core::mem::zeroed() };
    a.qp_state = state;
    a.cur_qp_state = state;
    a.path_mtu = mtu_enum(w.PathMtu);
    a.path_mig_state = u32::from(w.ApmState);
    a.qkey = u32::from_be(w.Qkey);
    a.rq_psn = u32::from_be(w.ReceivePsn);
    a.sq_psn = u32::from_be(w.SendPsn);
    a.dest_qp_num = u32::from_be(w.DestinationQpn);
    a.qp_access_flags = if b.access != 0 {
        b.access
    } else {
        ibv_access(u32::from(w.AccessFlags))
    };
    a.cap = b.cap;
    a.ah_attr = ibv_ah_attr {
        grh: ibv_global_route {
            dgid: ibv_gid { raw: av.DGid },
            flow_label: u32::from_be(av.FlowLabel),
            sgid_index: 0,
            hop_limit: av.HopLimit,
            traffic_class: av.TrafficClass,
        },
        dlid: u16::from_be(av.DLid),
        sl: av.ServiceLevel,
        src_path_bits: av.SourcePathBits,
        static_rate: av.StaticRate,
        is_global: av.NetworkRouteValid,
        port_num: av.PortNumber,
    };
    a.pkey_index = w.PkeyIndex;
    a.max_rd_atomic = w.InitiatorDepth as u8;
    a.max_dest_rd_atomic = w.ResponderResources as u8;
    a.min_rnr_timer = w.RnrNakTimeout;
    a.port_num = if b.port != 0 { b.port } else { av.PortNumber };
    a.timeout = w.LocalAckTimeout;
    a.retry_cnt = w.SequenceErrorRetryCount;
    a.rnr_retry = w.RnrRetryCount;
    // SAFETY: writable by the contract.
    unsafe { attr.write(a) };
    // SAFETY: writable by the contract.
    unsafe {
        init.write(ibv_qp_init_attr {
            qp_context: b.c.qp_base.qp_context,
            send_cq: b.c.qp_base.send_cq,
            recv_cq: b.c.qp_base.recv_cq,
            srq: b.c.qp_base.srq,
            cap: b.cap,
            qp_type: b.c.qp_base.qp_type,
            sq_sig_all: c_int::from(b.sq_sig_all),
        })
    };
    0
}

/// `ibv_query_qp_data_in_order`: the soft HCA writes in order: 1 for every operation.
///
/// # Safety
/// None beyond the C signature.
pub unsafe extern "C" fn ibv_query_qp_data_in_order(
    _q: *mut ibv_qp,
    _op: u32,
    _flags: u32,
) -> c_int {
    1
}

// ------------------------------------------------------------------------------------------
// Data path

fn post_errno(e: PostError) -> i32 {
    e.errno()
}

fn wr_opcode(op: u32) -> Result<WrOpcode, i32> {
    Ok(match op {
        IBV_WR_RDMA_WRITE => WrOpcode::RdmaWrite,
        IBV_WR_RDMA_WRITE_WITH_IMM => WrOpcode::RdmaWriteWithImm,
        IBV_WR_SEND => WrOpcode::Send,
        IBV_WR_SEND_WITH_IMM => WrOpcode::SendWithImm,
        IBV_WR_RDMA_READ => WrOpcode::RdmaRead,
        IBV_WR_ATOMIC_CMP_AND_SWP => WrOpcode::AtomicCmpAndSwp,
        IBV_WR_ATOMIC_FETCH_AND_ADD => WrOpcode::AtomicFetchAndAdd,
        IBV_WR_LOCAL_INV => WrOpcode::LocalInv,
        IBV_WR_BIND_MW => WrOpcode::BindMw,
        IBV_WR_SEND_WITH_INV => WrOpcode::SendWithInv,
        _ => return Err(EINVAL),
    })
}

/// Gathers an inline payload from the application's SGEs (user mode reads its own memory, as
/// a provider copies it into the WQE; no key is involved).
///
/// # Safety
/// Every SGE names `length` readable bytes at `addr`.
unsafe fn gather_inline(sges: &[Sge], max: u32) -> Result<Vec<u8>, i32> {
    let total: u64 = sges.iter().map(|s| u64::from(s.length)).sum();
    if total > u64::from(max) {
        return Err(EINVAL);
    }
    let mut v = Vec::with_capacity(total as usize);
    for s in sges.iter().filter(|s| s.length > 0) {
        // SAFETY: by the contract (the application's own buffer, valid during the post).
        v.extend_from_slice(unsafe {
            core::slice::from_raw_parts(s.addr as *const u8, s.length as usize)
        });
    }
    Ok(v)
}

fn ud_of(ah: *mut ibv_ah, remote_qpn: u32, remote_qkey: u32) -> Option<UdAddress> {
    if ah.is_null() {
        return None;
    }
    // SAFETY: a live AH by the post's contract.
    let a = unsafe { &*ah.cast::<AhBox>() };
    Some(a.ah.ud(remote_qpn, remote_qkey))
}

fn post_built(b: &QpBox, w: &BuiltWr) -> Result<(), i32> {
    let opcode = wr_opcode(w.opcode)?;
    let mut wr = SendWr::new(w.wr_id, opcode);
    wr.send_flags = w.flags & !IBV_SEND_INLINE;
    wr.sg_list = &w.sges;
    wr.inline_data = w.inline.as_deref();
    wr.imm_or_inv = w.imm;
    wr.remote_addr = w.remote_addr;
    wr.rkey = w.rkey;
    wr.ud = w.ud;
    wr.atomic = w.atomic;
    wr.bind = w.bind;
    b.qp.post_send(&wr).map_err(post_errno)
}

/// Reads one `ibv_send_wr` into a [`BuiltWr`].
///
/// # Safety
/// `w` is a valid WR whose SGE array holds `num_sge` entries and whose inline SGEs (with
/// `IBV_SEND_INLINE`) name readable memory.
unsafe fn read_send_wr(b: &QpBox, w: &ibv_send_wr) -> Result<BuiltWr, i32> {
    if w.num_sge < 0 {
        return Err(EINVAL);
    }
    let n = w.num_sge as usize;
    // SAFETY: `n` entries by the contract.
    let sges: Vec<Sge> = unsafe { read_sges(w.sg_list, n) }.collect();
    let mut out = BuiltWr {
        wr_id: w.wr_id,
        opcode: w.opcode,
        flags: w.send_flags,
        imm: w.imm_data,
        ..BuiltWr::default()
    };
    let is_send = matches!(
        w.opcode,
        IBV_WR_SEND | IBV_WR_SEND_WITH_IMM | IBV_WR_SEND_WITH_INV
    );
    let is_write = matches!(w.opcode, IBV_WR_RDMA_WRITE | IBV_WR_RDMA_WRITE_WITH_IMM);
    if w.send_flags & IBV_SEND_INLINE != 0 && (is_send || is_write) {
        if n > b.cap.max_send_sge as usize && n > 1 {
            // Inline ignores keys but not the SGE count the QP was made for.
        }
        // SAFETY: forwarded.
        out.inline = Some(unsafe { gather_inline(&sges, b.cap.max_inline_data) }?);
    } else {
        out.sges = sges;
    }
    match w.opcode {
        IBV_WR_RDMA_WRITE | IBV_WR_RDMA_WRITE_WITH_IMM | IBV_WR_RDMA_READ => {
            // SAFETY: an RDMA request's `wr` is its `rdma` member.
            let rdma = unsafe { w.wr.rdma };
            out.remote_addr = rdma.remote_addr;
            out.rkey = rdma.rkey;
        }
        IBV_WR_ATOMIC_CMP_AND_SWP | IBV_WR_ATOMIC_FETCH_AND_ADD => {
            // SAFETY: an atomic request's `wr` is its `atomic` member.
            let at = unsafe { w.wr.atomic };
            out.remote_addr = at.remote_addr;
            out.rkey = at.rkey;
            out.atomic = Some(AtomicArgs {
                compare_add: at.compare_add,
                swap: at.swap,
            });
        }
        IBV_WR_BIND_MW => {
            // SAFETY: a bind request's last union is its `bind_mw` member.
            let bm = unsafe { w.ext.bind_mw };
            if bm.mw.is_null() {
                return Err(EINVAL);
            }
            let bi = bm.bind_info;
            // SAFETY: a live MW named by the request.
            let mw_rkey = unsafe { (*bm.mw).rkey };
            let mr_lkey = if bi.mr.is_null() {
                0
            } else {
                // SAFETY: a live MR named by the bind.
                unsafe { (*bi.mr).lkey }
            };
            out.bind = Some(MwBind {
                mw_rkey,
                new_rkey: bm.rkey,
                mr_lkey,
                addr: bi.addr,
                length: bi.length,
                access: wv_access(bi.mw_access_flags),
            });
        }
        _ => {}
    }
    if b.c.qp_base.qp_type == IBV_QPT_UD {
        // SAFETY: a UD QP's requests carry their destination in `wr.ud`.
        let ud = unsafe { w.wr.ud };
        out.ud = ud_of(ud.ah, ud.remote_qpn, ud.remote_qkey);
        if out.ud.is_none() {
            return Err(EINVAL);
        }
    }
    Ok(out)
}

/// `post_send` of the context ops (`ibv_post_send`): through the provider, no IOCTL; stops at
/// the first failure and points `bad` at it.
///
/// # Safety
/// `q` is a live QP; `wr` a valid list; `bad` writable.
pub unsafe extern "C" fn post_send(
    q: *mut ibv_qp,
    wr: *mut ibv_send_wr,
    bad: *mut *mut ibv_send_wr,
) -> c_int {
    if q.is_null() {
        return EINVAL;
    }
    // SAFETY: live QP.
    let b = unsafe { qp(q) };
    let each = |w: &ibv_send_wr| {
        // SAFETY: forwarded contract.
        let built = unsafe { read_send_wr(b, w) }?;
        post_built(b, &built)?;
        if let Some(bind) = built.bind {
            // The window takes the key the bind gives it once posted.
            // SAFETY: a BIND_MW request's last union is its bind.
            let mw = unsafe { w.ext.bind_mw.mw };
            // SAFETY: a live MW named by the WR.
            unsafe { (*mw).rkey = bind.new_rkey };
        }
        Ok(())
    };
    // SAFETY: forwarded list contract.
    unsafe { for_each_wr(wr, bad, |w| w.next, each) }
}

/// `post_recv` of the context ops (`ibv_post_recv`).
///
/// # Safety
/// `q` is a live QP; `wr` a valid list; `bad` writable.
pub unsafe extern "C" fn post_recv(
    q: *mut ibv_qp,
    wr: *mut ibv_recv_wr,
    bad: *mut *mut ibv_recv_wr,
) -> c_int {
    if q.is_null() {
        return EINVAL;
    }
    // SAFETY: live QP.
    let b = unsafe { qp(q) };
    // SAFETY: forwarded list contract.
    unsafe { for_each_recv(wr, bad, |r| b.qp.post_recv(r).map_err(post_errno)) }
}

/// `bind_mw` of the context ops (`ibv_bind_mw`, type 1 windows): the new rkey is written to
/// `mw->rkey` once the bind is posted.
///
/// # Safety
/// `q`, `mw` live; `bind` readable.
pub unsafe extern "C" fn bind_mw(q: *mut ibv_qp, mw: *mut ibv_mw, bind: *mut ibv_mw_bind) -> c_int {
    if q.is_null() || mw.is_null() || bind.is_null() {
        return EINVAL;
    }
    // SAFETY: live objects by the contract.
    let b = unsafe { qp(q) };
    // SAFETY: a live MW by the contract.
    let m = unsafe { &mut *mw.cast::<MwBox>() };
    // SAFETY: readable by the contract.
    let bd = unsafe { &*bind };
    if m.c.type_ != IBV_MW_TYPE_1 as u32 {
        return EINVAL;
    }
    let info = bd.bind_info;
    let (lkey, addr) = if info.mr.is_null() {
        if info.length != 0 {
            return EINVAL;
        }
        (0, 0)
    } else {
        // SAFETY: a live MR named by the bind.
        (unsafe { (*info.mr).lkey }, info.addr)
    };
    let wv_info = wv_client::verbs::MwBindInfo {
        mr_lkey: lkey,
        addr,
        length: info.length,
        access: wv_access(info.mw_access_flags),
    };
    match b.qp.bind_mw_info(&m.mw, bd.wr_id, bd.send_flags, &wv_info) {
        Ok(new) => {
            m.c.rkey = new;
            0
        }
        Err(e) => post_errno(e),
    }
}

/// `op` on the client's QP of `q` with the group GID `gid` points at; the errno return of
/// `ibv_attach_mcast` and `ibv_detach_mcast`.
///
/// # Safety
/// `q` is null or a live QP, `gid` null or readable.
unsafe fn with_mcast_gid(
    q: *mut ibv_qp,
    gid: *const ibv_gid,
    op: impl FnOnce(&Qp<File>, &[u8; 16]) -> Result<(), VerbsError>,
) -> c_int {
    if q.is_null() || gid.is_null() {
        return errno::ret(Err(EINVAL));
    }
    // SAFETY: live QP; readable GID.
    let b = unsafe { qp(q) };
    // SAFETY: a readable GID by the contract.
    let gv = unsafe { gid.read() };
    // SAFETY: both views of the union are 16 plain bytes.
    let g = unsafe { gv.raw };
    errno::ret(op(&b.qp, &g).map_err(|e| errno::of(&e)))
}

/// `ibv_attach_mcast` (`lid` host order, as rdma-core takes it).
///
/// # Safety
/// `q` is a live QP, `gid` readable.
pub unsafe extern "C" fn ibv_attach_mcast(q: *mut ibv_qp, gid: *const ibv_gid, lid: u16) -> c_int {
    // SAFETY: the caller's contract is the helper's.
    unsafe { with_mcast_gid(q, gid, |qp, g| qp.attach_mcast(g, lid)) }
}

/// `ibv_detach_mcast`.
///
/// # Safety
/// `q` is a live QP, `gid` readable.
pub unsafe extern "C" fn ibv_detach_mcast(q: *mut ibv_qp, gid: *const ibv_gid, lid: u16) -> c_int {
    // SAFETY: the caller's contract is the helper's.
    unsafe { with_mcast_gid(q, gid, |qp, g| qp.detach_mcast(g, lid)) }
}

// ------------------------------------------------------------------------------------------
// ibv_qp_ex: the work-request builder

fn bx<'a>(q: *mut ibv_qp_ex) -> &'a mut QpBox {
    // SAFETY: these ops are installed only on QpBoxes, used by one thread between wr_start and
    // wr_complete/wr_abort (rdma-core's rule).
    unsafe { &mut *q.cast::<QpBox>() }
}

/// `ibv_qp_create_send_ops_flags` has the bit of each `ibv_wr_opcode` at the opcode's place.
const _: () = {
    let pairs = [
        (IBV_WR_RDMA_WRITE, IBV_QP_EX_WITH_RDMA_WRITE),
        (
            IBV_WR_RDMA_WRITE_WITH_IMM,
            IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM,
        ),
        (IBV_WR_SEND, IBV_QP_EX_WITH_SEND),
        (IBV_WR_SEND_WITH_IMM, IBV_QP_EX_WITH_SEND_WITH_IMM),
        (IBV_WR_RDMA_READ, IBV_QP_EX_WITH_RDMA_READ),
        (IBV_WR_ATOMIC_CMP_AND_SWP, IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP),
        (
            IBV_WR_ATOMIC_FETCH_AND_ADD,
            IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD,
        ),
        (IBV_WR_LOCAL_INV, IBV_QP_EX_WITH_LOCAL_INV),
        (IBV_WR_BIND_MW, IBV_QP_EX_WITH_BIND_MW),
        (IBV_WR_SEND_WITH_INV, IBV_QP_EX_WITH_SEND_WITH_INV),
    ];
    let mut i = 0;
    while i < pairs.len() {
        assert!(1u64 << pairs[i].0 == pairs[i].1);
        i += 1;
    }
};

/// Starts building an `opcode` request, unless the QP was created without its send op
/// (`EOPNOTSUPP` at `wr_complete`).
fn begin(q: *mut ibv_qp_ex, opcode: u32) -> Option<&'static mut BuiltWr> {
    let b = bx(q);
    if b.send_ops.unwrap_or(0) & (1 << opcode) == 0 {
        b.build_err = EOPNOTSUPP;
        return None;
    }
    let w = BuiltWr {
        wr_id: b.c.wr_id,
        opcode,
        flags: b.c.wr_flags,
        ..BuiltWr::default()
    };
    b.building.push(w);
    // SAFETY: the element just pushed lives in the box's vector until wr_complete/abort; the
    // 'static is the builder's span, during which nothing else touches the vector.
    b.building
        .last_mut()
        .map(|w| unsafe { &mut *ptr::from_mut(w) })
}

fn last(q: *mut ibv_qp_ex) -> Option<&'static mut BuiltWr> {
    // SAFETY: as in `begin`.
    bx(q)
        .building
        .last_mut()
        .map(|w| unsafe { &mut *ptr::from_mut(w) })
}

unsafe extern "C" fn wr_start(q: *mut ibv_qp_ex) {
    let b = bx(q);
    b.building.clear();
    b.build_err = 0;
}

unsafe extern "C" fn wr_complete(q: *mut ibv_qp_ex) -> c_int {
    let b = bx(q);
    let list = core::mem::take(&mut b.building);
    if b.build_err != 0 {
        return core::mem::take(&mut b.build_err);
    }
    for w in &list {
        if let Err(e) = post_built(b, w) {
            return e;
        }
    }
    0
}

unsafe extern "C" fn wr_abort(q: *mut ibv_qp_ex) {
    let b = bx(q);
    b.building.clear();
    b.build_err = 0;
}

unsafe extern "C" fn wr_send(q: *mut ibv_qp_ex) {
    let _ = begin(q, IBV_WR_SEND);
}
unsafe extern "C" fn wr_send_imm(q: *mut ibv_qp_ex, imm: u32) {
    if let Some(w) = begin(q, IBV_WR_SEND_WITH_IMM) {
        w.imm = imm;
    }
}
unsafe extern "C" fn wr_send_inv(q: *mut ibv_qp_ex, rkey: u32) {
    if let Some(w) = begin(q, IBV_WR_SEND_WITH_INV) {
        w.imm = rkey;
    }
}
unsafe extern "C" fn wr_send_tso(q: *mut ibv_qp_ex, _hdr: *mut c_void, _sz: u16, _mss: u16) {
    bx(q).build_err = EOPNOTSUPP;
}
/// [`begin`] of a request that reaches `addr` of the peer's region `rkey`.
fn begin_remote(
    q: *mut ibv_qp_ex,
    opcode: u32,
    rkey: u32,
    addr: u64,
) -> Option<&'static mut BuiltWr> {
    let w = begin(q, opcode)?;
    w.rkey = rkey;
    w.remote_addr = addr;
    Some(w)
}

unsafe extern "C" fn wr_rdma_write(q: *mut ibv_qp_ex, rkey: u32, addr: u64) {
    let _ = begin_remote(q, IBV_WR_RDMA_WRITE, rkey, addr);
}
unsafe extern "C" fn wr_rdma_write_imm(q: *mut ibv_qp_ex, rkey: u32, addr: u64, imm: u32) {
    if let Some(w) = begin_remote(q, IBV_WR_RDMA_WRITE_WITH_IMM, rkey, addr) {
        w.imm = imm;
    }
}
unsafe extern "C" fn wr_rdma_read(q: *mut ibv_qp_ex, rkey: u32, addr: u64) {
    let _ = begin_remote(q, IBV_WR_RDMA_READ, rkey, addr);
}
unsafe extern "C" fn wr_atomic_cmp_swp(
    q: *mut ibv_qp_ex,
    rkey: u32,
    addr: u64,
    compare: u64,
    swap: u64,
) {
    if let Some(w) = begin_remote(q, IBV_WR_ATOMIC_CMP_AND_SWP, rkey, addr) {
        w.atomic = Some(AtomicArgs {
            compare_add: compare,
            swap,
        });
    }
}
unsafe extern "C" fn wr_atomic_fetch_add(q: *mut ibv_qp_ex, rkey: u32, addr: u64, add: u64) {
    if let Some(w) = begin_remote(q, IBV_WR_ATOMIC_FETCH_AND_ADD, rkey, addr) {
        w.atomic = Some(AtomicArgs {
            compare_add: add,
            swap: 0,
        });
    }
}
unsafe extern "C" fn wr_atomic_write(q: *mut ibv_qp_ex, _rkey: u32, _addr: u64, _v: *const c_void) {
    bx(q).build_err = EOPNOTSUPP;
}
unsafe extern "C" fn wr_local_inv(q: *mut ibv_qp_ex, rkey: u32) {
    if let Some(w) = begin(q, IBV_WR_LOCAL_INV) {
        w.imm = rkey;
    }
}
unsafe extern "C" fn wr_bind_mw(
    q: *mut ibv_qp_ex,
    mw: *mut ibv_mw,
    rkey: u32,
    info: *const ibv_mw_bind_info,
) {
    if mw.is_null() || info.is_null() {
        bx(q).build_err = EINVAL;
        return;
    }
    if let Some(w) = begin(q, IBV_WR_BIND_MW) {
        // SAFETY: live MW and readable info by the contract.
        let m = unsafe { &mut *mw };
        // SAFETY: readable by the contract.
        let i = unsafe { *info };
        w.bind = Some(MwBind {
            mw_rkey: m.rkey,
            new_rkey: rkey,
            mr_lkey: if i.mr.is_null() {
                0
            } else {
                // SAFETY: a live MR when non-null.
                unsafe { (*i.mr).lkey }
            },
            addr: i.addr,
            length: i.length,
            access: wv_access(i.mw_access_flags),
        });
        m.rkey = rkey;
    }
}
unsafe extern "C" fn wr_set_ud_addr(q: *mut ibv_qp_ex, ah: *mut ibv_ah, qpn: u32, qkey: u32) {
    if let Some(w) = last(q) {
        w.ud = ud_of(ah, qpn, qkey);
    }
}
unsafe extern "C" fn wr_set_xrc_srqn(q: *mut ibv_qp_ex, _srqn: u32) {
    bx(q).build_err = EOPNOTSUPP;
}
unsafe extern "C" fn wr_set_sge(q: *mut ibv_qp_ex, lkey: u32, addr: u64, length: u32) {
    if let Some(w) = last(q) {
        w.sges = vec![Sge { addr, length, lkey }];
    }
}
unsafe extern "C" fn wr_set_sge_list(q: *mut ibv_qp_ex, n: usize, list: *const ibv_sge) {
    if let Some(w) = last(q) {
        // SAFETY: `n` entries by the contract.
        w.sges = unsafe { read_sges(list, n) }.collect();
    }
}
unsafe extern "C" fn wr_set_inline_data(q: *mut ibv_qp_ex, addr: *mut c_void, length: usize) {
    let max = bx(q).cap.max_inline_data as usize;
    if length > max {
        bx(q).build_err = EINVAL;
        return;
    }
    if let Some(w) = last(q) {
        // SAFETY: `length` readable bytes by the contract.
        w.inline = Some(unsafe { core::slice::from_raw_parts(addr as *const u8, length) }.to_vec());
    }
}
unsafe extern "C" fn wr_set_inline_data_list(
    q: *mut ibv_qp_ex,
    n: usize,
    list: *const ibv_data_buf,
) {
    let max = bx(q).cap.max_inline_data as usize;
    let mut v = Vec::new();
    for i in 0..n {
        // SAFETY: `n` entries, each naming readable bytes, by the contract.
        let d = unsafe { &*list.wrapping_add(i) };
        // SAFETY: as above.
        v.extend_from_slice(unsafe { core::slice::from_raw_parts(d.addr as *const u8, d.length) });
    }
    if v.len() > max {
        bx(q).build_err = EINVAL;
        return;
    }
    if let Some(w) = last(q) {
        w.inline = Some(v);
    }
}

fn install_wr_ops(c: &mut ibv_qp_ex) {
    c.wr_start = Some(wr_start);
    c.wr_complete = Some(wr_complete);
    c.wr_abort = Some(wr_abort);
    c.wr_send = Some(wr_send);
    c.wr_send_imm = Some(wr_send_imm);
    c.wr_send_inv = Some(wr_send_inv);
    c.wr_send_tso = Some(wr_send_tso);
    c.wr_rdma_write = Some(wr_rdma_write);
    c.wr_rdma_write_imm = Some(wr_rdma_write_imm);
    c.wr_rdma_read = Some(wr_rdma_read);
    c.wr_atomic_cmp_swp = Some(wr_atomic_cmp_swp);
    c.wr_atomic_fetch_add = Some(wr_atomic_fetch_add);
    c.wr_atomic_write = Some(wr_atomic_write);
    c.wr_local_inv = Some(wr_local_inv);
    c.wr_bind_mw = Some(wr_bind_mw);
    c.wr_set_ud_addr = Some(wr_set_ud_addr);
    c.wr_set_xrc_srqn = Some(wr_set_xrc_srqn);
    c.wr_set_sge = Some(wr_set_sge);
    c.wr_set_sge_list = Some(wr_set_sge_list);
    c.wr_set_inline_data = Some(wr_set_inline_data);
    c.wr_set_inline_data_list = Some(wr_set_inline_data_list);
}

/// The CQ box a QP sends to (for tests).
pub fn send_cq(b: &QpBox) -> *mut CqBox {
    b.c.qp_base.send_cq.cast()
}

/// `ENOMEM` is what a full queue answers (`PostError::QueueFull`).
pub const QUEUE_FULL: i32 = ENOMEM;
