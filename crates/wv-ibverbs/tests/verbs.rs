//! The library through its C entry points, in this process (the in-process stack comes up on
//! the first `ibv_get_device_list`): Linux's modify rules against WinVerbs' raw QP_MODIFY, the
//! errno conventions, registration of arbitrary memory (and its refusals), and traffic.
#![allow(unsafe_code, reason = "the tests call the C ABI")]

use core::ffi::c_void;
use core::ptr;

use wv_client::verbs::QpAttr;
use wv_ibverbs::abi::*;
use wv_ibverbs::api::*;
use wv_ibverbs::errno;

struct Env {
    ctx: *mut ibv_context,
    pd: *mut ibv_pd,
    cq: *mut ibv_cq,
}

/// The tests drive the in-process stack (a device service running on this machine would
/// otherwise be chosen).
fn in_process() {
    wv_ibverbs::runtime::choose_transport("inproc");
}

fn open() -> Env {
    in_process();
    let mut n = 0;
    // SAFETY: a writable local.
    let list = unsafe { ibv_get_device_list(&mut n) };
    assert!(!list.is_null() && n >= 1, "no devices");
    // SAFETY: the list holds `n >= 1` devices.
    let first = unsafe { list.read() };
    // SAFETY: a device of the list.
    let ctx = unsafe { ibv_open_device(first) };
    // SAFETY: the list, freed once.
    unsafe { ibv_free_device_list(list) };
    assert!(!ctx.is_null());
    // SAFETY: a live context.
    let pd = unsafe { ibv_alloc_pd(ctx) };
    assert!(!pd.is_null());
    // SAFETY: a live context.
    let cq = unsafe { ibv_create_cq(ctx, 64, ptr::null_mut(), ptr::null_mut(), 0) };
    assert!(!cq.is_null());
    Env { ctx, pd, cq }
}

impl Drop for Env {
    fn drop(&mut self) {
        if std::thread::panicking() {
            return;
        }
        // SAFETY: the environment's CQ, destroyed once.
        assert_eq!(unsafe { ibv_destroy_cq(self.cq) }, 0);
        // SAFETY: its PD, deallocated once.
        assert_eq!(unsafe { ibv_dealloc_pd(self.pd) }, 0);
        // SAFETY: its context, closed once.
        assert_eq!(unsafe { ibv_close_device(self.ctx) }, 0);
    }
}

fn rc_qp(e: &Env) -> *mut ibv_qp {
    rc_qp_on(e, e.cq, 8)
}

/// An RC QP on the environment's PD with `cq` for both queues, `depth` requests each way.
fn rc_qp_on(e: &Env, cq: *mut ibv_cq, depth: u32) -> *mut ibv_qp {
    let mut init = ibv_qp_init_attr {
        qp_context: ptr::null_mut(),
        send_cq: cq,
        recv_cq: cq,
        srq: ptr::null_mut(),
        cap: ibv_qp_cap {
            max_send_wr: depth,
            max_recv_wr: depth,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        },
        qp_type: IBV_QPT_RC,
        sq_sig_all: 1,
    };
    // SAFETY: C calls on the live objects this test made, with pointers to its live locals.
    let qp = unsafe { ibv_create_qp(e.pd, &mut init) };
    assert!(!qp.is_null(), "create_qp: errno {}", errno::get());
    qp
}

/// `ibv_modify_qp` of the test's live QP with `a` under `mask`: its return.
fn modify(qp: *mut ibv_qp, a: &mut ibv_qp_attr, mask: u32) -> i32 {
    // SAFETY: a live QP the test made, and a live local.
    unsafe { ibv_modify_qp(qp, a, mask as i32) }
}

/// Destroys the test's live QP, which must succeed.
fn destroy_qp(qp: *mut ibv_qp) {
    // SAFETY: a live QP the test made, destroyed once.
    assert_eq!(unsafe { ibv_destroy_qp(qp) }, 0);
}

fn zeroed_attr() -> ibv_qp_attr {
    // SAFETY: C calls on the live objects this test made, with pointers to its live locals.
    unsafe { core::mem::zeroed() }
}

/// Modify attributes with `qp_state` set, the rest zero.
fn attr_to(qp_state: u32) -> ibv_qp_attr {
    ibv_qp_attr {
        qp_state,
        ..zeroed_attr()
    }
}

/// An environment with an RC QP in it ([`rc_qp`]), which goes (before the environment) when
/// the test is done: how every test of one QP ends.
struct QpEnv {
    e: Env,
    qp: *mut ibv_qp,
}

impl Drop for QpEnv {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            destroy_qp(self.qp);
        }
    }
}

/// [`QpEnv`] opened, with its QP.
fn open_rc_qp() -> (QpEnv, *mut ibv_qp) {
    let e = open();
    let qp = rc_qp(&e);
    (QpEnv { e, qp }, qp)
}

fn state(qp: *mut ibv_qp) -> u32 {
    // SAFETY: C calls on the live objects this test made, with pointers to its live locals.
    unsafe { wv_ibverbs::qp::qp(qp) }.qp.state() as u32
}

/// Sends the same ibv attributes as WinVerbs' raw QP_MODIFY, bypassing the library's Linux
/// check: what the driver (OFW's meaning) does with them.
fn raw_modify(qp: *mut ibv_qp, a: &ibv_qp_attr, mask: u32) -> bool {
    // SAFETY: C calls on the live objects this test made, with pointers to its live locals.
    let b = unsafe { wv_ibverbs::qp::qp(qp) };
    let cur = state(qp);
    let next = if mask & IBV_QP_STATE != 0 {
        a.qp_state
    } else {
        cur
    };
    let w = wv_ibverbs::qp::wv_modify(b, a, mask, cur, next).expect("attributes convert");
    b.qp.modify(&QpAttr::from_abi(w)).is_ok()
}

#[test]
fn reset_to_init_without_access_flags_is_refused_though_winverbs_would_take_it() {
    let (_e, qp) = open_rc_qp();
    let mut a = attr_to(IBV_QPS_INIT);
    a.port_num = 1;
    let mask = IBV_QP_STATE | IBV_QP_PORT | IBV_QP_PKEY_INDEX; // no IBV_QP_ACCESS_FLAGS
    assert_eq!(modify(qp, &mut a, mask), errno::EINVAL);
    assert_eq!(errno::get(), errno::EINVAL);
    assert_eq!(state(qp), IBV_QPS_RESET, "nothing changed");
    // The raw driver call (OFW: the modify is built from the target state) accepts it.
    assert!(
        raw_modify(qp, &a, mask),
        "WinVerbs refuses it too: the test shows nothing"
    );
    assert_eq!(state(qp), IBV_QPS_INIT);
}

#[test]
fn reset_to_error_is_refused() {
    let (_e, qp) = open_rc_qp();
    let mut a = attr_to(IBV_QPS_ERR);
    assert_eq!(modify(qp, &mut a, IBV_QP_STATE), errno::EINVAL);
    assert_eq!(state(qp), IBV_QPS_RESET);
}

#[test]
fn an_extra_attribute_is_refused_and_init_to_init_keeps_the_port() {
    let (t, qp) = open_rc_qp();
    let mut a = attr_to(IBV_QPS_INIT);
    a.port_num = 1;
    a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
    let init = IBV_QP_STATE | IBV_QP_PORT | IBV_QP_PKEY_INDEX | IBV_QP_ACCESS_FLAGS;
    // SQ_PSN does not belong to RESET -> INIT.
    assert_eq!(modify(qp, &mut a, init | IBV_QP_SQ_PSN), errno::EINVAL);
    assert_eq!(modify(qp, &mut a, init), 0);
    // SAFETY: C calls on the live objects this test made, with pointers to its live locals.
    assert_eq!(unsafe { (*qp).state }, IBV_QPS_INIT);
    // INIT -> INIT with only the access flags: the library repeats the port WinVerbs needs.
    let mut b = attr_to(IBV_QPS_INIT);
    b.qp_access_flags = IBV_ACCESS_REMOTE_READ;
    assert_eq!(modify(qp, &mut b, IBV_QP_STATE | IBV_QP_ACCESS_FLAGS), 0);
    let mut q = zeroed_attr();
    // SAFETY: C calls on the live objects this test made, with pointers to its live locals.
    let mut qi: ibv_qp_init_attr = unsafe { core::mem::zeroed() };
    // SAFETY: C calls on the live objects this test made, with pointers to its live locals.
    assert_eq!(unsafe { ibv_query_qp(qp, &mut q, 0, &mut qi) }, 0);
    assert_eq!(q.port_num, 1);
    assert_eq!(q.qp_access_flags, IBV_ACCESS_REMOTE_READ);
    assert_eq!(q.qp_state, IBV_QPS_INIT);
    // A PD with a QP on it is busy.
    // SAFETY: C calls on the live objects this test made, with pointers to its live locals.
    assert_eq!(unsafe { ibv_dealloc_pd(t.e.pd) }, errno::EBUSY);
}

fn mmap(len: usize, prot: i32) -> *mut c_void {
    // SAFETY: C calls on the live objects this test made, with pointers to its live locals.
    let p = unsafe {
        libc::mmap(
            ptr::null_mut(),
            len,
            prot,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    assert_ne!(p, libc::MAP_FAILED);
    p
}

#[test]
fn registration_probes_the_pages_as_the_kernel_does() {
    let e = open();
    let page = 4096;
    // Read-only memory: registrable for reading, EFAULT when the device may write it.
    let ro = mmap(page, libc::PROT_READ);
    // SAFETY: C calls on the live objects this test made, with pointers to its live locals.
    let mr = unsafe { ibv_reg_mr(e.pd, ro, page, 0) };
    assert!(
        !mr.is_null(),
        "read-only registration: errno {}",
        errno::get()
    );
    // SAFETY: C calls on the live objects this test made, with pointers to its live locals.
    unsafe { assert_eq!(ibv_dereg_mr(mr), 0) };
    // SAFETY: C calls on the live objects this test made, with pointers to its live locals.
    let mr = unsafe { ibv_reg_mr(e.pd, ro, page, IBV_ACCESS_LOCAL_WRITE as i32) };
    assert!(mr.is_null());
    assert_eq!(errno::get(), errno::EFAULT);
    // Inaccessible memory (PROT_NONE), and memory nothing can map (a non-canonical address: a
    // page unmapped here could be mapped again by another test's thread): EFAULT.
    let none = mmap(page, libc::PROT_NONE);
    // SAFETY: a live PD; the library only probes the range.
    let mr = unsafe { ibv_reg_mr(e.pd, none, page, 0) };
    assert!(mr.is_null());
    assert_eq!(errno::get(), errno::EFAULT);
    // SAFETY: as above.
    let mr = unsafe { ibv_reg_mr(e.pd, (1usize << 47) as *mut c_void, page, 0) };
    assert!(mr.is_null());
    assert_eq!(errno::get(), errno::EFAULT);
    // Remote write without local write: EINVAL (before any probe).
    let rw = mmap(page, libc::PROT_READ | libc::PROT_WRITE);
    // SAFETY: C calls on the live objects this test made, with pointers to its live locals.
    let mr = unsafe { ibv_reg_mr(e.pd, rw, page, IBV_ACCESS_REMOTE_WRITE as i32) };
    assert!(mr.is_null());
    assert_eq!(errno::get(), errno::EINVAL);
    // SAFETY: the test's own mapping.
    unsafe { libc::munmap(ro, page) };
    // SAFETY: the test's own mapping.
    unsafe { libc::munmap(rw, page) };
    // SAFETY: the test's own mapping.
    unsafe { libc::munmap(none, page) };
}

/// An RC QP connected to itself: RESET → INIT → RTR → RTS through `ibv_modify_qp`.
fn connect_to_self(e: &Env, qp: *mut ibv_qp) {
    let mut gid = ibv_gid { raw: [0; 16] };
    // SAFETY: C calls on the live objects this test made, with pointers to its live locals.
    assert_eq!(unsafe { ibv_query_gid(e.ctx, 1, 0, &mut gid) }, 0);
    let mut a = attr_to(IBV_QPS_INIT);
    a.port_num = 1;
    a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
    let m = IBV_QP_STATE | IBV_QP_PORT | IBV_QP_PKEY_INDEX | IBV_QP_ACCESS_FLAGS;
    assert_eq!(modify(qp, &mut a, m), 0);
    let mut a = attr_to(IBV_QPS_RTR);
    a.path_mtu = 3;
    // SAFETY: C calls on the live objects this test made, with pointers to its live locals.
    a.dest_qp_num = unsafe { (*qp).qp_num };
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 12;
    a.ah_attr.is_global = 1;
    a.ah_attr.grh.dgid = gid;
    a.ah_attr.grh.hop_limit = 1;
    a.ah_attr.port_num = 1;
    let m = IBV_QP_STATE
        | IBV_QP_AV
        | IBV_QP_PATH_MTU
        | IBV_QP_DEST_QPN
        | IBV_QP_RQ_PSN
        | IBV_QP_MAX_DEST_RD_ATOMIC
        | IBV_QP_MIN_RNR_TIMER;
    assert_eq!(modify(qp, &mut a, m), 0);
    let mut a = attr_to(IBV_QPS_RTS);
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.max_rd_atomic = 1;
    let m = IBV_QP_STATE
        | IBV_QP_TIMEOUT
        | IBV_QP_RETRY_CNT
        | IBV_QP_RNR_RETRY
        | IBV_QP_SQ_PSN
        | IBV_QP_MAX_QP_RD_ATOMIC;
    assert_eq!(modify(qp, &mut a, m), 0);
}

fn poll_one(cq: *mut ibv_cq) -> ibv_wc {
    // SAFETY: C calls on the live objects this test made, with pointers to its live locals.
    let mut wc: ibv_wc = unsafe { core::mem::zeroed() };
    for _ in 0..1_000_000 {
        // SAFETY: C calls on the live objects this test made, with pointers to its live locals.
        let n = unsafe { wv_ibverbs::cq::poll_cq(cq, 1, &mut wc) };
        if n == 1 {
            return wc;
        }
        std::thread::yield_now();
    }
    panic!("no completion");
}

#[test]
fn rdma_write_and_atomic_into_malloc_memory() {
    let (t, qp) = open_rc_qp();
    connect_to_self(&t.e, qp);
    let mut src = vec![0u8; 64];
    let mut dst = vec![0u8; 64];
    src[..5].copy_from_slice(b"hello");
    let acc = (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC) as i32;
    // SAFETY: C calls on the live objects this test made, with pointers to its live locals.
    let smr = unsafe { ibv_reg_mr(t.e.pd, src.as_mut_ptr().cast(), 64, acc) };
    // SAFETY: C calls on the live objects this test made, with pointers to its live locals.
    let dmr = unsafe { ibv_reg_mr(t.e.pd, dst.as_mut_ptr().cast(), 64, acc) };
    assert!(!smr.is_null() && !dmr.is_null());
    let mut sge = ibv_sge {
        addr: src.as_ptr() as u64,
        length: 5,
        // SAFETY: C calls on the live objects this test made, with pointers to its live locals.
        lkey: unsafe { (*smr).lkey },
    };
    // SAFETY: C calls on the live objects this test made, with pointers to its live locals.
    let mut wr: ibv_send_wr = unsafe { core::mem::zeroed() };
    wr.wr_id = 7;
    wr.sg_list = &mut sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.wr = ibv_send_wr_wr {
        rdma: ibv_send_wr_rdma {
            remote_addr: dst.as_ptr() as u64,
            // SAFETY: C calls on the live objects this test made, with pointers to its live locals.
            rkey: unsafe { (*dmr).rkey },
        },
    };
    let mut bad = ptr::null_mut();
    assert_eq!(
        // SAFETY: C calls on the live objects this test made, with pointers to its live locals.
        unsafe { wv_ibverbs::qp::post_send(qp, &mut wr, &mut bad) },
        0
    );
    let wc = poll_one(t.e.cq);
    assert_eq!((wc.status, wc.wr_id), (0, 7));
    assert_eq!(&dst[..5], b"hello");
    // Fetch-and-add on the 8 bytes at dst+8, the old value into src+8.
    dst[8..16].copy_from_slice(&40u64.to_ne_bytes());
    let mut sge = ibv_sge {
        addr: src.as_ptr() as u64 + 8,
        length: 8,
        // SAFETY: C calls on the live objects this test made, with pointers to its live locals.
        lkey: unsafe { (*smr).lkey },
    };
    wr.wr_id = 8;
    wr.sg_list = &mut sge;
    wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
    wr.wr = ibv_send_wr_wr {
        atomic: ibv_send_wr_atomic {
            remote_addr: dst.as_ptr() as u64 + 8,
            compare_add: 2,
            swap: 0,
            // SAFETY: C calls on the live objects this test made, with pointers to its live locals.
            rkey: unsafe { (*dmr).rkey },
        },
    };
    assert_eq!(
        // SAFETY: C calls on the live objects this test made, with pointers to its live locals.
        unsafe { wv_ibverbs::qp::post_send(qp, &mut wr, &mut bad) },
        0
    );
    let wc = poll_one(t.e.cq);
    assert_eq!((wc.status, wc.wr_id), (0, 8));
    assert_eq!(u64::from_ne_bytes(dst[8..16].try_into().unwrap()), 42);
    assert_eq!(u64::from_ne_bytes(src[8..16].try_into().unwrap()), 40);
    // SAFETY: the test's MRs, deregistered once.
    assert_eq!(unsafe { ibv_dereg_mr(smr) }, 0);
    // SAFETY: as above.
    assert_eq!(unsafe { ibv_dereg_mr(dmr) }, 0);
}

#[test]
fn a_completion_channel_delivers_one_event_per_arm_and_honours_o_nonblock() {
    let e = open();
    // SAFETY: C calls on the live objects this test made, with pointers to its live locals.
    let ch = unsafe { ibv_create_comp_channel(e.ctx) };
    assert!(!ch.is_null());
    let tag = 0x5a5a as *mut c_void;
    // SAFETY: C calls on the live objects this test made, with pointers to its live locals.
    let cq = unsafe { ibv_create_cq(e.ctx, 16, tag, ch, 0) };
    assert!(!cq.is_null());
    // A channel in use cannot go.
    // SAFETY: C calls on the live objects this test made, with pointers to its live locals.
    assert_eq!(unsafe { ibv_destroy_comp_channel(ch) }, errno::EBUSY);
    let qp = rc_qp_on(&e, cq, 4);
    connect_to_self(&e, qp);
    // Non-blocking descriptor: nothing yet.
    // SAFETY: C calls on the live objects this test made, with pointers to its live locals.
    let fd = unsafe { (*ch).fd };
    // SAFETY: fcntl on the channel's descriptor.
    let fl = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    // SAFETY: as above.
    unsafe { libc::fcntl(fd, libc::F_SETFL, fl | libc::O_NONBLOCK) };
    let (mut got_cq, mut got_ctx) = (ptr::null_mut(), ptr::null_mut());
    assert_eq!(
        // SAFETY: C calls on the live objects this test made, with pointers to its live locals.
        unsafe { ibv_get_cq_event(ch, &mut got_cq, &mut got_ctx) },
        -1
    );
    assert_eq!(errno::get(), errno::EAGAIN);
    // Arm, then a completion: one event, for this CQ and its context.
    // SAFETY: C calls on the live objects this test made, with pointers to its live locals.
    assert_eq!(unsafe { wv_ibverbs::cq::req_notify_cq(cq, 0) }, 0);
    let mut buf = vec![0u8; 8];
    // SAFETY: C calls on the live objects this test made, with pointers to its live locals.
    let mr = unsafe {
        ibv_reg_mr(
            e.pd,
            buf.as_mut_ptr().cast(),
            8,
            IBV_ACCESS_LOCAL_WRITE as i32,
        )
    };
    let mut sge = ibv_sge {
        addr: buf.as_ptr() as u64,
        length: 8,
        // SAFETY: C calls on the live objects this test made, with pointers to its live locals.
        lkey: unsafe { (*mr).lkey },
    };
    let mut rwr = ibv_recv_wr {
        wr_id: 1,
        next: ptr::null_mut(),
        sg_list: &mut sge,
        num_sge: 1,
    };
    let mut bad_r = ptr::null_mut();
    assert_eq!(
        // SAFETY: C calls on the live objects this test made, with pointers to its live locals.
        unsafe { wv_ibverbs::qp::post_recv(qp, &mut rwr, &mut bad_r) },
        0
    );
    // SAFETY: C calls on the live objects this test made, with pointers to its live locals.
    let mut wr: ibv_send_wr = unsafe { core::mem::zeroed() };
    wr.wr_id = 2;
    wr.sg_list = &mut sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    let mut bad = ptr::null_mut();
    assert_eq!(
        // SAFETY: C calls on the live objects this test made, with pointers to its live locals.
        unsafe { wv_ibverbs::qp::post_send(qp, &mut wr, &mut bad) },
        0
    );
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    assert_eq!(
        // SAFETY: C calls on the live objects this test made, with pointers to its live locals.
        unsafe { libc::poll(&mut pfd, 1, 5000) },
        1,
        "the channel's fd polls readable"
    );
    assert_eq!(
        // SAFETY: C calls on the live objects this test made, with pointers to its live locals.
        unsafe { ibv_get_cq_event(ch, &mut got_cq, &mut got_ctx) },
        0
    );
    assert_eq!((got_cq, got_ctx), (cq, tag));
    // One shot: no second event without a new arm.
    assert_eq!(poll_one(cq).status, 0);
    assert_eq!(poll_one(cq).status, 0);
    assert_eq!(
        // SAFETY: C calls on the live objects this test made, with pointers to its live locals.
        unsafe { ibv_get_cq_event(ch, &mut got_cq, &mut got_ctx) },
        -1
    );
    // SAFETY: the test's CQ.
    unsafe { ibv_ack_cq_events(cq, 1) };
    // SAFETY: the test's CQ.
    assert_eq!(unsafe { (*cq).comp_events_completed }, 1);
    // SAFETY: the test's objects, each destroyed once, children first.
    assert_eq!(unsafe { ibv_destroy_qp(qp) }, 0);
    // SAFETY: as above.
    assert_eq!(unsafe { ibv_dereg_mr(mr) }, 0);
    // SAFETY: as above.
    assert_eq!(unsafe { ibv_destroy_cq(cq) }, 0);
    // SAFETY: as above.
    assert_eq!(unsafe { ibv_destroy_comp_channel(ch) }, 0);
}

#[test]
fn a_port_going_down_and_up_is_an_async_event_on_the_async_fd() {
    // The second device, so the other tests' traffic on the first is not disturbed.
    in_process();
    let mut n = 0;
    // SAFETY: a writable local.
    let list = unsafe { ibv_get_device_list(&mut n) };
    assert!(n >= 2, "the default stack has two devices");
    // SAFETY: the list holds `n >= 2` devices.
    let second = unsafe { list.wrapping_add(1).read() };
    // SAFETY: a device of the list.
    let ctx = unsafe { ibv_open_device(second) };
    // SAFETY: the list, freed once.
    unsafe { ibv_free_device_list(list) };
    assert!(!ctx.is_null());
    let stack = wv_ibverbs::runtime::get()
        .unwrap()
        .stack
        .as_ref()
        .expect("the in-process stack");
    // SAFETY: a live context.
    let fd = unsafe { (*ctx).async_fd };
    let wait = |want: u32| {
        let mut p = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: polls one pollfd, a live local.
        let ready = unsafe { libc::poll(&mut p, 1, 5000) };
        assert_eq!(ready, 1, "async_fd readable");
        // SAFETY: all-zero is a valid event to overwrite.
        let mut ev: ibv_async_event = unsafe { core::mem::zeroed() };
        // SAFETY: a live context and a writable local.
        assert_eq!(unsafe { ibv_get_async_event(ctx, &mut ev) }, 0);
        assert_eq!(ev.event_type, want);
        // SAFETY: a port event's element is its port number.
        assert_eq!(unsafe { ev.element.port_num }, 1);
        // SAFETY: the event just taken.
        unsafe { ibv_ack_async_event(&mut ev) };
    };
    stack.set_port_state(1, 1, false).unwrap();
    wait(IBV_EVENT_PORT_ERR);
    stack.set_port_state(1, 1, true).unwrap();
    wait(IBV_EVENT_PORT_ACTIVE);
    // SAFETY: the context, closed once (its port thread's request is cancelled).
    assert_eq!(unsafe { ibv_close_device(ctx) }, 0);
}
