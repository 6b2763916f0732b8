//! What the user-mode provider checks before it uses a ring or queues a request: the creation
//! and resize responses it maps must name the device's own rings, a post is refused with the
//! errno rdma-core's providers give (`EINVAL`, `ENOMEM`, `ENODEV`), and the queue sizes it
//! reports are the rings' own.

use crate::common::*;
use wv_hal::*;
use wv_softhca::abi::QpResp;
use wv_softhca::*;

fn qp_resp(n: &Node, cq: &Cq) -> (SoftQp, QpResp) {
    let create = qp_create(QpType::Rc, &cq.soft, &cq.soft, None, 16, 1, 0, true);
    let (soft, _, r) = create_qp(&*n.hca, &n.pd, &create, KArc::new(Log::default()));
    (soft, r)
}

#[test]
fn a_qp_is_mapped_only_from_a_response_naming_its_rings_and_number() {
    let (p, n) = deterministic_node();
    let cq = n.cq(16);
    let (soft, r) = qp_resp(&n, &cq);
    let bad = Some(VerbsError::InvalidParameter);
    for tamper in [
        |r: &mut QpResp| r.sq_addr += 64,
        |r: &mut QpResp| r.rq_addr += 64,
        |r: &mut QpResp| r.qpn ^= 1,
    ] {
        let mut wrong = r;
        tamper(&mut wrong);
        assert_eq!(n.uvp.map_qp(&wrong).err(), bad, "{wrong:?}");
    }
    let qp = n.uvp.map_qp(&r).unwrap();
    assert_eq!(qp.qpn(), r.qpn);
    drop(qp);
    n.hca.destroy_qp(soft);
    settle(&p);
}

#[test]
fn an_srq_is_mapped_only_from_a_response_naming_its_ring() {
    let (p, n) = deterministic_node();
    let attr = SrqAttributes {
        max_wr: 8,
        max_sge: 1,
        srq_limit: 0,
    };
    let (soft, r) = create_srq(&*n.hca, &n.pd, &attr, KArc::new(Log::default()));
    let bad = Some(VerbsError::InvalidParameter);
    let mut wrong = r;
    wrong.ring_addr += 64;
    assert_eq!(n.uvp.map_srq(&wrong).err(), bad);
    let mut wrong = r;
    wrong.entries *= 2;
    assert_eq!(n.uvp.map_srq(&wrong).err(), bad);
    assert_eq!(n.uvp.map_srq(&r).unwrap().entries(), r.entries);
    n.hca.destroy_srq(soft);
    settle(&p);
}

#[test]
fn a_resize_maps_only_the_ring_the_command_gave_the_cq() {
    let (p, n) = deterministic_node();
    let cq = n.cq(4);
    let guard = cq.uvp.begin_resize();
    let (got, r) = resize_cq_command(&n, &cq, 64).unwrap();
    drop(guard);
    let bad = Err(VerbsError::InvalidParameter);
    let mut wrong = r;
    wrong.ring_addr += 64;
    assert_eq!(cq.uvp.begin_resize().finish(&wrong), bad);
    let mut wrong = r;
    wrong.entries /= 2;
    assert_eq!(cq.uvp.begin_resize().finish(&wrong), bad);
    assert_eq!(cq.uvp.begin_resize().finish(&r), Ok(got));
    assert_eq!(cq.uvp.entries(), 64);
    settle(&p);
}

#[test]
fn a_send_missing_what_its_qp_type_or_opcode_needs_is_refused() {
    let (p, _f, _a, _b, _ca, _cb, ud, _) = deterministic_ud_pair(16);
    // A UD send names its destination.
    assert_eq!(
        ud.uvp.post_send(&send_wr(1, WrOpcode::Send, &[])),
        Err(PostError::BadOpcode)
    );
    // A bind names its window.
    let (_f, _a, _b, _ca, _cb, rc, _) = rc_pair(&p);
    assert_eq!(
        rc.uvp.post_send(&send_wr(2, WrOpcode::BindMw, &[])),
        Err(PostError::BadOpcode)
    );
    settle(&p);
}

#[test]
fn inline_is_for_sends_and_writes_and_holds_exactly_the_qps_inline_size() {
    let (p, _f, a, b, ca, cb, qa, qb) = deterministic_rc_pair();
    assert_eq!(qa.uvp.max_inline(), 64);
    let (local, remote) = mems(&a, 256, &b, 256);
    let pattern: Vec<u8> = (0..=255).collect();
    remote.buf.write(0, &pattern).unwrap();

    // IBV_SEND_INLINE is valid for sends and RDMA writes only: a read ignores it, whatever
    // its length.
    let sg = [local.sge(0, 128)];
    let mut wr = send_wr(1, WrOpcode::RdmaRead, &sg);
    wr.send_flags |= send_flags::INLINE;
    wr.remote_addr = remote.addr(0);
    wr.rkey = remote.rkey;
    assert_eq!(qa.uvp.post_send(&wr), Ok(()));
    p.run_until_idle();
    expect_statuses(&ca, &[(1, WcStatus::Success)]);
    assert_eq!(&local.buf.to_vec()[..128], &pattern[..128]);

    // Inline data of exactly the inline size, given or gathered from SGEs, is taken; one
    // byte more is not.
    let dst = remote.addr(0);
    let write = |id: u64, sg: &[Sge], data: Option<&[u8]>| {
        let mut wr = send_wr(id, WrOpcode::RdmaWrite, sg);
        wr.send_flags |= send_flags::INLINE;
        wr.inline_data = data;
        wr.remote_addr = dst;
        wr.rkey = remote.rkey;
        qa.uvp.post_send(&wr)
    };
    let given = [0x11u8; 65];
    assert_eq!(write(2, &[], Some(&given[..64])), Ok(()));
    assert_eq!(write(3, &[], Some(&given)), Err(PostError::InlineTooLarge));
    local.buf.write(0, &[0x22; 32]).unwrap();
    local.buf.write(32, &[0x33; 32]).unwrap();
    assert_eq!(
        write(4, &[local.sge(0, 32), local.sge(32, 32)], None),
        Ok(())
    );
    assert_eq!(
        write(5, &[local.sge(0, 65)], None),
        Err(PostError::InlineTooLarge)
    );
    p.run_until_idle();
    expect_statuses(&ca, &[(2, WcStatus::Success), (4, WcStatus::Success)]);
    let got = remote.buf.to_vec();
    assert_eq!(&got[..32], &[0x22; 32]);
    assert_eq!(&got[32..64], &[0x33; 32]);
    assert_eq!(&got[64..], &pattern[64..]);
    drop((cb, qb));
    settle(&p);
}

#[test]
fn a_qp_reports_the_depths_of_its_rings() {
    let (p, n) = deterministic_node();
    let cq = n.cq(64);
    let (soft, r) = qp_resp(&n, &cq);
    let qp = n.uvp.map_qp(&r).unwrap();
    assert_eq!((qp.sq_depth(), qp.rq_depth()), (16, 16));
    assert_eq!((qp.sq_depth(), qp.rq_depth()), (r.sq_entries, r.rq_entries));
    // Exactly that many receives fit.
    let m = n.mem(64, ALL_ACCESS);
    n.hca
        .modify_qp(&soft, &qpm(QpState::Init, INIT_RC), &mut [0u8; 8])
        .unwrap();
    for i in 0..u64::from(qp.rq_depth()) {
        qp.post_recv(&recv_wr(i, &[m.sge(0, 8)])).unwrap();
    }
    assert_eq!(
        qp.post_recv(&recv_wr(99, &[m.sge(0, 8)])),
        Err(PostError::QueueFull)
    );
    // With an SRQ the QP has no receive ring of its own.
    let srq = n.srq(8, 0);
    let on_srq = n.qp_with(QpType::Rc, &cq, &cq, Some(&srq), 32, 1, 0, true);
    assert_eq!((on_srq.uvp.sq_depth(), on_srq.uvp.rq_depth()), (32, 0));
    settle(&p);
}

#[test]
fn closing_one_open_of_a_device_leaves_its_other_opens_reachable() {
    let (p, n) = deterministic_node();
    let (first, _, out1) = open_ca_logged(&*n.hca);
    let (_second, _, out2) = open_ca_logged(&*n.hca);
    assert!(UvpContext::from_open_resp(&out1).is_ok());
    n.hca.close_ca(first);
    assert_eq!(
        UvpContext::from_open_resp(&out1).err(),
        Some(VerbsError::InvalidParameter)
    );
    assert!(UvpContext::from_open_resp(&out2).is_ok());
    settle(&p);
}

#[test]
fn posting_to_an_srq_of_a_removed_device_fails_with_enodev() {
    let (p, n) = deterministic_node();
    let srq = n.srq(8, 0);
    let m = n.mem(64, ALL_ACCESS);
    assert_eq!(srq.uvp.post_recv(&recv_wr(1, &[m.sge(0, 8)])), Ok(()));
    n.hca.surprise_remove();
    let e = srq.uvp.post_recv(&recv_wr(2, &[m.sge(0, 8)]));
    assert_eq!(e, Err(PostError::DeviceRemoved));
    assert_eq!(e.unwrap_err().errno(), 19);
    settle(&p);
}
