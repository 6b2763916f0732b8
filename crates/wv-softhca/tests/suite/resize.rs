//! CQ and SRQ resize, up and down, with the completions and receives not yet used carried
//! over in order, through the device command and the user-mode provider's remap.

use crate::common::*;
use wv_abi::consts::*;
use wv_hal::*;
use wv_softhca::abi::{self, SrqResp};
use wv_softhca::*;

/// CQ_RESIZE as a client library does it: the poll lock held across the command, then the
/// new ring mapped from the vendor output.
fn resize_cq(n: &Node, cq: &Cq, entries: u32) -> Result<u32, VerbsError> {
    let guard = cq.uvp.begin_resize();
    let (got, r) = resize_cq_command(n, cq, entries)?;
    assert_cq_ring_described(&r);
    assert_eq!(guard.finish(&r).unwrap(), got);
    Ok(got)
}

/// SRQ_MODIFY with a size and a limit, the post lock held across it.
fn modify_srq(n: &Node, srq: &Srq, max_wr: u32, limit: u32) -> Result<u32, VerbsError> {
    let guard = srq.uvp.begin_resize();
    let mut out = [0u8; 64];
    n.hca.modify_srq(
        &srq.soft,
        &SrqAttributes {
            max_wr,
            max_sge: 0,
            srq_limit: limit,
        },
        SrqModifyMask {
            max_wr: true,
            limit: true,
        },
        &mut Umv::new(0, 0, 64, &mut out),
    )?;
    let r: SrqResp = abi::parse(&out).unwrap();
    guard.finish(&r)
}

/// B's 4-entry CQ, an RC QP on A over `scq`/`rcq` connected to one on B over that CQ, and
/// the 64-byte buffers [`writes`] goes from (A) and to (B); in that order, so that the QPs go
/// before the CQ when dropped.
fn writer(a: &Node, b: &Node, scq: &Cq, rcq: &Cq) -> (Cq, Qp, Qp, Mem, Mem) {
    let cb = b.cq(4);
    let qa = a.qp_with(QpType::Rc, scq, rcq, None, 64, 1, 0, true);
    let qb = b.qp(QpType::Rc, &cb);
    connect(a, &qa, b, &qb, Conn::default());
    let (m, rb) = mems(a, 64, b, 64);
    (cb, qa, qb, m, rb)
}

fn writes(qa: &Qp, m: &Mem, rb: &Mem, from: u64, n: u64) {
    for i in from..from + n {
        let sg = [m.sge(0, 4)];
        let wr = rdma_wr(i, WrOpcode::RdmaWrite, &sg, rb, 0);
        qa.uvp.post_send(&wr).unwrap();
    }
}

#[test]
fn a_cq_grows_with_its_completions_kept_in_order() {
    let (p, _f, a, b) = deterministic_pair();
    let ca = a.cq(4);
    let (_cb, qa, _qb, m, rb) = writer(&a, &b, &ca, &ca);
    assert_eq!(ca.uvp.entries(), 4);
    writes(&qa, &m, &rb, 0, 3);
    assert_eq!(resize_cq(&a, &ca, 64).unwrap(), 64);
    assert_eq!(ca.uvp.entries(), 64);
    // Forty more: the old ring would have overrun.
    writes(&qa, &m, &rb, 3, 40);
    assert_eq!(ca.sink.errors(), 0);
    expect_in_order(&ca, 43);
    // The arm works on the new ring.
    assert!(!ca.uvp.arm(false));
    writes(&qa, &m, &rb, 43, 1);
    settle(&p);
    assert_eq!(ca.sink.completions(), 1);
    settle(&p);
}

#[test]
fn a_cq_of_one_queue_hands_its_new_ring_to_that_queue() {
    let (p, _f, a, b) = deterministic_pair();
    // The send CQ serves the send queue alone: its sole producer, which posts to the ring it
    // was given rather than under the CQ's lock.
    let scq = a.cq(4);
    let rcq = a.cq(4);
    let (_cb, qa, _qb, m, rb) = writer(&a, &b, &scq, &rcq);
    writes(&qa, &m, &rb, 0, 2);
    assert_eq!(resize_cq(&a, &scq, 64).unwrap(), 64);
    writes(&qa, &m, &rb, 2, 40);
    expect_in_order(&scq, 42);
    settle(&p);
}

#[test]
fn a_cq_shrinks_when_its_completions_fit_and_refuses_otherwise() {
    let (p, _f, a, b) = deterministic_pair();
    let ca = a.cq(64);
    let (_cb, qa, _qb, m, rb) = writer(&a, &b, &ca, &ca);
    writes(&qa, &m, &rb, 0, 5);
    // Too small for the five waiting: refused, nothing changes.
    assert_eq!(resize_cq(&a, &ca, 4), Err(VerbsError::InvalidParameter));
    assert_eq!(ca.uvp.entries(), 64);
    assert_eq!(resize_cq(&a, &ca, 7).unwrap(), 8);
    assert_eq!(ca.uvp.entries(), 8);
    writes(&qa, &m, &rb, 5, 3);
    assert_eq!(wr_ids(&poll_all(&ca)), (0..8).collect::<Vec<_>>());
    // The same size keeps the ring; beyond the device limit, or zero, is refused.
    assert_eq!(resize_cq(&a, &ca, 8).unwrap(), 8);
    assert_eq!(
        resize_cq(&a, &ca, a.hca.query_ca().unwrap().max_cqe + 1),
        Err(VerbsError::InvalidSetting)
    );
    assert_eq!(resize_cq(&a, &ca, 0), Err(VerbsError::InvalidSetting));
    // A kernel consumer (no vendor bytes) may resize too.
    assert_eq!(a.hca.resize_cq(&ca.soft, 16, &mut Umv::none()).unwrap(), 16);
    settle(&p);
}

#[test]
fn an_srq_resizes_with_its_receives_kept_and_advertises_it() {
    let (p, _f, a, b) = deterministic_pair();
    assert_ne!(
        b.hca.query_ca().unwrap().capability_flags & WV_IO_SRQ_RESIZE,
        0
    );
    let (ca, cb) = two_cqs(&a, &b, 64);
    let srq = b.srq(4, 0);
    let qa = a.qp_with(QpType::Rc, &ca, &ca, None, 64, 1, 0, true);
    let qb = b.qp_with(QpType::Rc, &cb, &cb, Some(&srq), 8, 1, 0, true);
    connect(&a, &qa, &b, &qb, Conn::default());
    let (m, rb) = mems(&a, 64, &b, 1024);
    let post = |from: u64, n: u64| {
        for i in from..from + n {
            post_srq_recv(&srq, i, rb.sge(i as usize * 8 % 1024, 8));
        }
    };
    post(0, 4);
    assert_eq!(
        srq.uvp.post_recv(&recv_wr(99, &[rb.sge(0, 8)])),
        Err(PostError::QueueFull)
    );
    // Grow: the four posted stay, twelve more fit.
    assert_eq!(modify_srq(&b, &srq, 16, 0).unwrap(), 16);
    assert_eq!(srq.uvp.entries(), 16);
    post(4, 12);
    for i in 0..16 {
        post_send(&qa, i, m.sge(0, 4));
    }
    assert_eq!(wr_ids(&poll_all(&cb)), (0..16).collect::<Vec<_>>());
    // Shrink with two waiting; not below them, nor below the limit.
    post(16, 2);
    assert_eq!(
        modify_srq(&b, &srq, 1, 0),
        Err(VerbsError::InvalidParameter)
    );
    assert_eq!(
        modify_srq(&b, &srq, 2, 3),
        Err(VerbsError::InvalidParameter),
        "limit above the size"
    );
    assert_eq!(modify_srq(&b, &srq, 2, 1).unwrap(), 2);
    assert_eq!(
        b.hca.query_srq(&srq.soft, &mut Umv::none()).unwrap(),
        SrqAttributes {
            max_wr: 2,
            max_sge: 2,
            srq_limit: 1
        }
    );
    for i in 16..18 {
        post_send(&qa, i, m.sge(0, 4));
    }
    assert_eq!(wr_ids(&poll_all(&cb)), vec![16, 17]);
    // Beyond the device limit.
    assert_eq!(
        modify_srq(&b, &srq, 1 << 20, 0),
        Err(VerbsError::InvalidSetting)
    );
    settle(&p);
}

#[test]
fn a_resize_reaches_the_one_queue_left_producing_after_others_were_destroyed() {
    let (p, _f, a, b) = deterministic_pair();
    // X receives into K; Q sends and receives into K; both then go, W staying the one
    // producer of K: whichever QPs came and went, completions after a resize are on the
    // ring the CQ now has.
    let k = a.cq(4);
    let sends = a.cq(64);
    let x = a.qp_with(QpType::Rc, &sends, &k, None, 16, 1, 0, true);
    let q = a.qp_with(QpType::Rc, &k, &k, None, 16, 1, 0, true);
    a.hca.destroy_qp(q.soft);
    let w = a.qp_with(QpType::Rc, &sends, &k, None, 16, 1, 0, true);
    a.hca.destroy_qp(x.soft);
    assert_eq!(resize_cq(&a, &k, 64).unwrap(), 64);

    let (_cb, qb) = connected_peer(&a, &w, &b, 64, Conn::default());
    let (inbox, src) = mems(&a, 64, &b, 64);
    for i in 0..8 {
        post_recv(&w, i, inbox.sge(0, 64));
        post_send(&qb, i, src.sge(0, 8));
    }
    p.run_until_idle();
    expect_in_order(&k, 8);
    settle(&p);
}
