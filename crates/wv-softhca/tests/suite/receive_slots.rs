//! The user-mode provider's view of its receive queue: a QP attached to its receive CQ
//! (`UvpQp::with_recv_cq`) learns which receive slots are free from the receive completions
//! its CQ's polls take, and never believes a slot free that the device has not released.

use crate::common::*;
use wv_hal::*;
use wv_softhca::*;

/// An RC QP on `node` with a receive queue of 4, its sends and receives on `cq`, attached to
/// `cq`.
fn attached(node: &Node, cq: &Cq) -> Qp {
    let q = node.qp_with(QpType::Rc, cq, cq, None, 4, 1, 0, true);
    Qp {
        uvp: q.uvp.with_recv_cq(&cq.uvp),
        ..q
    }
}

/// Two clients: `qa` on `a` (its own CQ `ca`), and on `b` a QP made by [`attached`] on `cb`,
/// connected to `qa`; a region on each side.
struct Rig {
    p: wv_host::HostPlatform,
    _f: std::sync::Arc<Fabric>,
    _a: Node,
    b: Node,
    ca: Cq,
    qa: Qp,
    cb: Cq,
    qb: Qp,
    ma: Mem,
    mb: Mem,
}

fn rig() -> Rig {
    let (p, _f, a, b) = deterministic_pair();
    let ca = a.cq(16);
    let qa = a.qp(QpType::Rc, &ca);
    let cb = b.cq(16);
    let qb = attached(&b, &cb);
    connect(&a, &qa, &b, &qb, Conn::default());
    let (ma, mb) = (a.mem(64, ALL_ACCESS), b.mem(64, ALL_ACCESS));
    Rig {
        p,
        _f,
        _a: a,
        b,
        ca,
        qa,
        cb,
        qb,
        ma,
        mb,
    }
}

#[test]
fn a_polled_receive_frees_its_slot_and_nothing_else_does() {
    // Every field bound: the nodes and the fabric live to the test's end.
    let Rig {
        p,
        _f,
        _a,
        b: _b,
        ca,
        qa,
        cb,
        qb,
        ma,
        mb,
    } = rig();
    let sg = [mb.sge(0, 8)];
    for i in 0..4 {
        qb.uvp.post_recv(&recv_wr(i, &sg)).unwrap();
    }
    assert_eq!(
        qb.uvp.post_recv(&recv_wr(9, &sg)),
        Err(PostError::QueueFull)
    );
    // A send of `qb`'s own completes on the same CQ: its CQE frees no receive slot.
    post_recv(&qa, 30, ma.sge(0, 8));
    post_send(&qb, 20, mb.sge(8, 8));
    post_send(&qa, 31, ma.sge(8, 8));
    let wcs = poll_all(&cb);
    assert_eq!(wcs.len(), 2, "{wcs:?}");
    assert_eq!(poll_all(&ca).len(), 2);
    // One receive was taken and polled: one slot, not two.
    qb.uvp.post_recv(&recv_wr(4, &sg)).unwrap();
    assert_eq!(
        qb.uvp.post_recv(&recv_wr(5, &sg)),
        Err(PostError::QueueFull)
    );
    // Taken but not yet polled: the device's head still says so.
    post_send(&qa, 32, ma.sge(8, 8));
    assert_eq!(poll_all(&ca).len(), 1);
    qb.uvp.post_recv(&recv_wr(5, &sg)).unwrap();
    assert_eq!(
        qb.uvp.post_recv(&recv_wr(6, &sg)),
        Err(PostError::QueueFull)
    );
    // Three more taken, and all four polled: receive 5 is the one left in the ring.
    for i in 0..3 {
        post_send(&qa, 33 + i, ma.sge(8, 8));
    }
    assert_eq!(poll_all(&ca).len(), 3);
    assert_eq!(poll_all(&cb).len(), 4);
    for i in 0..3 {
        qb.uvp.post_recv(&recv_wr(10 + i, &sg)).unwrap();
    }
    assert_eq!(
        qb.uvp.post_recv(&recv_wr(13, &sg)),
        Err(PostError::QueueFull)
    );
    settle(&p);
}

#[test]
fn the_completions_of_a_destroyed_qp_free_no_slot_of_the_next_with_its_number() {
    let Rig {
        p,
        _f,
        _a,
        b,
        ca,
        qa,
        cb,
        qb: old,
        ma,
        mb,
    } = rig();
    let sg = [mb.sge(0, 8)];
    for i in 0..4 {
        old.uvp.post_recv(&recv_wr(i, &sg)).unwrap();
        post_send(&qa, 10 + i, ma.sge(8, 8));
    }
    assert_eq!(poll_all(&ca).len(), 4);
    // Four receive CQEs of the old QP wait in the CQ while it goes and a new QP takes its
    // handle, and so its number.
    let qpn = old.uvp.qpn();
    b.hca.destroy_qp(old.soft);
    drop(old.uvp);
    let new = attached(&b, &cb);
    assert_eq!(new.uvp.qpn(), qpn, "the handle is reused");
    b.modify(&new, &qpm(QpState::Init, INIT_RC)).unwrap();
    for i in 0..4 {
        new.uvp.post_recv(&recv_wr(20 + i, &sg)).unwrap();
    }
    let stale = poll_all(&cb);
    assert_eq!(stale.len(), 4);
    assert!(stale.iter().all(|wc| wc.qp_num == qpn));
    // They are the old QP's: the new one's four receives are all still in its ring.
    assert_eq!(
        new.uvp.post_recv(&recv_wr(24, &sg)),
        Err(PostError::QueueFull)
    );
    settle(&p);
}
