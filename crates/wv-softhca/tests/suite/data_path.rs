//! Bytes really move: every WR opcode on RC (across two devices and in loopback), UC and UD,
//! multiple SGEs, inline data, signalled and unsignalled sends.

use crate::common::*;
use wv_hal::*;
use wv_softhca::*;

#[test]
fn rc_send_with_multiple_sges_across_two_devices() {
    let (p, _f, a, b, ca, cb, qa, qb) = deterministic_rc_pair();
    let (src, dst) = mems(&a, 64, &b, 64);
    src.buf.write(0, b"hello, ").unwrap();
    src.buf.write(32, b"world!").unwrap();
    // Receive scattered over three pieces.
    let rs = [dst.sge(0, 4), dst.sge(10, 4), dst.sge(20, 20)];
    qb.uvp.post_recv(&recv_wr(7, &rs)).unwrap();
    let ss = [src.sge(0, 7), src.sge(32, 6)];
    qa.uvp.post_send(&send_wr(1, WrOpcode::Send, &ss)).unwrap();

    let s = poll_all(&ca);
    assert_eq!(s.len(), 1);
    assert_eq!(
        (s[0].wr_id, s[0].status, s[0].opcode),
        (1, WcStatus::Success, WcOpcode::Send)
    );
    let r = poll_all(&cb);
    assert_eq!(r.len(), 1);
    assert_eq!(
        (r[0].wr_id, r[0].status, r[0].opcode, r[0].byte_len),
        (7, WcStatus::Success, WcOpcode::Recv, 13)
    );
    assert_eq!(r[0].src_qp, qa.uvp.qpn());
    assert_eq!(r[0].qp_num, qb.uvp.qpn());
    let d = dst.buf.to_vec();
    assert_eq!(&d[0..4], b"hell");
    assert_eq!(&d[10..14], b"o, w");
    assert_eq!(&d[20..25], b"orld!");
    settle(&p);
}

#[test]
fn a_send_of_many_packets_lands_across_the_receives_pieces() {
    let (p, _f, a, b, _ca, cb, qa, qb) = deterministic_rc_pair();
    let (src, data, dst) = patterned(&a, 10_000, &b, 12_000, |i| (i % 251) as u8);
    // Later packets start inside the second piece.
    let rs = [dst.sge(0, 5_000), dst.sge(6_000, 5_000)];
    qb.uvp.post_recv(&recv_wr(7, &rs)).unwrap();
    post_send(&qa, 1, src.sge(0, 10_000));
    let r = poll_all(&cb);
    assert_eq!(
        (r[0].wr_id, r[0].status, r[0].byte_len),
        (7, WcStatus::Success, 10_000)
    );
    let d = dst.buf.to_vec();
    assert_eq!(&d[..5_000], &data[..5_000]);
    assert_eq!(&d[6_000..11_000], &data[5_000..]);
    settle(&p);
}

#[test]
fn one_piece_and_several_piece_sends_land_exactly_in_one_piece_receives() {
    let (p, _f, a, b, _ca, cb, qa, qb) = deterministic_rc_pair();
    let (src, data, dst) = patterned(&a, 10_000, &b, 32_000, |i| (i % 251) as u8 + 1);
    // One source piece into one receive piece: a small message at an offset of both, and one of
    // many packets.
    post_recv(&qb, 1, dst.sge(7, 100));
    post_send(&qa, 1, src.sge(3, 64));
    post_recv(&qb, 2, dst.sge(200, 10_000));
    post_send(&qa, 2, src.sge(0, 10_000));
    // Two source pieces into one receive piece, and one source piece into two receive pieces.
    post_recv(&qb, 3, dst.sge(20_000, 100));
    let ss = [src.sge(0, 30), src.sge(500, 40)];
    qa.uvp.post_send(&send_wr(3, WrOpcode::Send, &ss)).unwrap();
    let rs = [dst.sge(21_000, 10), dst.sge(21_100, 100)];
    qb.uvp.post_recv(&recv_wr(4, &rs)).unwrap();
    post_send(&qa, 4, src.sge(1_000, 50));
    let r = poll_all(&cb);
    assert_eq!(
        r.iter()
            .map(|w| (w.wr_id, w.status, w.byte_len))
            .collect::<Vec<_>>(),
        vec![
            (1, WcStatus::Success, 64),
            (2, WcStatus::Success, 10_000),
            (3, WcStatus::Success, 70),
            (4, WcStatus::Success, 50),
        ]
    );
    let d = dst.buf.to_vec();
    let mut want = vec![0u8; 32_000];
    want[7..71].copy_from_slice(&data[3..67]);
    want[200..10_200].copy_from_slice(&data);
    want[20_000..20_030].copy_from_slice(&data[..30]);
    want[20_030..20_070].copy_from_slice(&data[500..540]);
    want[21_000..21_010].copy_from_slice(&data[1_000..1_010]);
    want[21_100..21_140].copy_from_slice(&data[1_010..1_050]);
    assert!(d == want, "every byte where it belongs, and none elsewhere");
    settle(&p);
}

#[test]
fn send_with_imm_write_write_with_imm_and_read() {
    let (p, _f, a, b, ca, cb, qa, qb) = deterministic_rc_pair();
    let (la, rb) = mems(&a, 4096, &b, 4096);
    for (i, x) in (0..4096).map(|i| (i % 251) as u8).enumerate() {
        la.buf.write(i, &[x]).unwrap();
    }
    // SEND_WITH_IMM
    post_recv(&qb, 1, rb.sge(0, 64));
    let mut wr = send_wr(10, WrOpcode::SendWithImm, &[]);
    let sg = [la.sge(0, 16)];
    wr.sg_list = &sg;
    wr.imm_or_inv = 0xdead_beef;
    qa.uvp.post_send(&wr).unwrap();
    let r = poll_all(&cb);
    assert_eq!(r[0].imm_data, 0xdead_beef);
    assert_eq!(r[0].wc_flags & wc_flags::WITH_IMM, wc_flags::WITH_IMM);
    assert_eq!(r[0].byte_len, 16);

    // RDMA_WRITE (no receive consumed) of 4 KiB.
    let sg = [la.sge(0, 4096)];
    let wr = rdma_wr(11, WrOpcode::RdmaWrite, &sg, &rb, 0);
    qa.uvp.post_send(&wr).unwrap();
    assert_eq!(rb.buf.to_vec(), la.buf.to_vec());
    assert!(poll_all(&cb).is_empty());

    // RDMA_WRITE_WITH_IMM consumes a receive and reports the length.
    qb.uvp.post_recv(&recv_wr(2, &[])).unwrap();
    let sg = [la.sge(100, 8)];
    let mut wr = rdma_wr(12, WrOpcode::RdmaWriteWithImm, &sg, &rb, 2000);
    wr.imm_or_inv = 42;
    qa.uvp.post_send(&wr).unwrap();
    let r = poll_all(&cb);
    assert_eq!(r.len(), 1);
    assert_eq!(
        (r[0].wr_id, r[0].opcode, r[0].imm_data, r[0].byte_len),
        (2, WcOpcode::RecvRdmaWithImm, 42, 8)
    );

    // RDMA_READ back into a fresh local buffer, scattered over two SGEs.
    let back = a.mem(256, ALL_ACCESS);
    rb.buf.write(0, &[9u8; 100]).unwrap();
    let sg = [back.sge(0, 50), back.sge(128, 50)];
    let wr = rdma_wr(13, WrOpcode::RdmaRead, &sg, &rb, 0);
    qa.uvp.post_send(&wr).unwrap();
    let v = back.buf.to_vec();
    assert!(v[0..50].iter().all(|&x| x == 9));
    assert!(v[128..178].iter().all(|&x| x == 9));
    assert!(v[50..128].iter().all(|&x| x == 0));

    let s = poll_all(&ca);
    let ops: Vec<_> = s.iter().map(|w| (w.wr_id, w.opcode, w.status)).collect();
    assert_eq!(
        ops,
        vec![
            (10, WcOpcode::Send, WcStatus::Success),
            (11, WcOpcode::RdmaWrite, WcStatus::Success),
            (12, WcOpcode::RdmaWrite, WcStatus::Success),
            (13, WcOpcode::RdmaRead, WcStatus::Success),
        ]
    );
    assert_eq!(s[3].byte_len, 100);
    settle(&p);
}

#[test]
fn loopback_between_two_qps_of_one_device() {
    let (p, a) = deterministic_node();
    let cq = a.cq(16);
    let q1 = a.qp(QpType::Rc, &cq);
    let q2 = a.qp(QpType::Rc, &cq);
    connect(&a, &q1, &a, &q2, Conn::default());
    let m = a.mem_holding(128, b"loop");
    post_recv(&q2, 5, m.sge(64, 64));
    post_send(&q1, 6, m.sge(0, 4));
    let wcs = poll_all(&cq);
    assert_eq!(wcs.len(), 2);
    assert_eq!(&m.buf.to_vec()[64..68], b"loop");
    // A QP can also talk to itself.
    let q3 = a.qp(QpType::Rc, &cq);
    bring_up(&a, &q3, a.hca.gid(), q3.uvp.qpn(), Conn::default());
    post_recv(&q3, 8, m.sge(100, 4));
    post_send(&q3, 9, m.sge(0, 4));
    assert_eq!(poll_all(&cq).len(), 2);
    assert_eq!(&m.buf.to_vec()[100..104], b"loop");
    settle(&p);
}

#[test]
fn inline_data_is_copied_at_post_time() {
    let (p, _f, a, b, _ca, cb, qa, qb) = deterministic_rc_pair();
    let dst = b.mem(64, ALL_ACCESS);
    post_recv(&qb, 1, dst.sge(0, 64));
    post_recv(&qb, 2, dst.sge(32, 32));
    let mut wr = send_wr(1, WrOpcode::Send, &[]);
    let data = *b"inline payload";
    wr.inline_data = Some(&data);
    qa.uvp.post_send(&wr).unwrap();
    assert_eq!(&dst.buf.to_vec()[..14], b"inline payload");
    // INLINE flag with SGEs: the bytes are taken at post time.
    let src = a.mem_holding(16, b"abc");
    let sg = [src.sge(0, 3)];
    let mut wr = send_wr(2, WrOpcode::Send, &sg);
    wr.send_flags |= send_flags::INLINE;
    qa.uvp.post_send(&wr).unwrap();
    assert_eq!(&dst.buf.to_vec()[32..35], b"abc");
    assert_eq!(poll_all(&cb).len(), 2);
    // Too large for the QP's inline size.
    let big = [0u8; 65];
    let mut wr = send_wr(3, WrOpcode::Send, &[]);
    wr.inline_data = Some(&big);
    assert_eq!(qa.uvp.post_send(&wr), Err(PostError::InlineTooLarge));
    settle(&p);
}

#[test]
fn unsignaled_sends_are_retired_silently_and_sq_sig_all_signals_everything() {
    let (p, _f, a, b, ca, _cb, qa, _qb) = deterministic_rc_pair();
    let _ = b;
    let (m, rb) = mems(&a, 64, &b, 64);
    // The QPs of `qp()` have sq_sig_all; make one without.
    let cq2 = a.cq(16);
    let q = a.qp_with(QpType::Rc, &cq2, &cq2, None, 8, 1, 0, false);
    let qr = b.qp(QpType::Rc, &b.cq(4));
    connect(&a, &q, &b, &qr, Conn::default());
    for i in 0..5 {
        let sg = [m.sge(0, 8)];
        let mut wr = rdma_wr(i, WrOpcode::RdmaWrite, &sg, &rb, 0);
        if i != 4 {
            wr.send_flags = 0;
        }
        q.uvp.post_send(&wr).unwrap();
    }
    let wcs = poll_all(&cq2);
    assert_eq!(wr_ids(&wcs), vec![4]);
    // sq_sig_all QP: an unsignaled WR still completes.
    let sg = [m.sge(0, 8)];
    let mut wr = rdma_wr(9, WrOpcode::RdmaWrite, &sg, &rb, 0);
    wr.send_flags = 0;
    qa.uvp.post_send(&wr).unwrap();
    assert_eq!(poll_all(&ca).len(), 1);
    settle(&p);
}

#[test]
fn uc_write_and_send() {
    let (p, _f, a, b, ca, cb, qa, qb) = deterministic_connected(QpType::Uc, 16, Conn::default());
    let (la, rb) = mems(&a, 64, &b, 64);
    la.buf.write(0, b"uc!").unwrap();
    let sg = [la.sge(0, 3)];
    let wr = rdma_wr(1, WrOpcode::RdmaWrite, &sg, &rb, 10);
    qa.uvp.post_send(&wr).unwrap();
    assert_eq!(&rb.buf.to_vec()[10..13], b"uc!");
    // A UC send with no receive posted is lost; the sender still succeeds.
    qa.uvp.post_send(&send_wr(2, WrOpcode::Send, &sg)).unwrap();
    assert!(poll_all(&cb).is_empty());
    post_recv(&qb, 3, rb.sge(32, 8));
    qa.uvp.post_send(&send_wr(4, WrOpcode::Send, &sg)).unwrap();
    assert_eq!(poll_all(&cb)[0].wr_id, 3);
    assert_eq!(
        poll_all(&ca).iter().map(|w| w.status).collect::<Vec<_>>(),
        vec![WcStatus::Success; 3]
    );
    // RDMA_READ is not valid on UC.
    let mut wr = send_wr(5, WrOpcode::RdmaRead, &sg);
    wr.rkey = rb.rkey;
    assert_eq!(qa.uvp.post_send(&wr), Err(PostError::BadOpcode));
    settle(&p);
}

#[test]
fn ud_send_with_grh_and_qkey() {
    let (p, _f, a, b, ca, cb, qa, qb) = deterministic_ud_pair(16);
    let (la, rb) = mems(&a, 64, &b, 128);
    la.buf.write(0, b"datagram").unwrap();
    post_recv(&qb, 1, rb.sge(0, 128));
    let sg = [la.sge(0, 8)];
    let mut wr = send_wr(2, WrOpcode::Send, &sg);
    wr.ud = Some(ud_to(b.hca.gid(), qb.uvp.qpn()));
    qa.uvp.post_send(&wr).unwrap();
    let r = poll_all(&cb);
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].byte_len, 8 + GRH_BYTES as u32);
    assert_eq!(r[0].src_qp, qa.uvp.qpn());
    assert_ne!(r[0].wc_flags & wc_flags::GRH, 0);
    let v = rb.buf.to_vec();
    assert_eq!(&v[8..24], &a.hca.gid());
    assert_eq!(&v[40..48], b"datagram");
    // Wrong Q_Key: dropped; the sender still succeeds. LID routing works too.
    post_recv(&qb, 3, rb.sge(0, 128));
    let by_lid = |remote_qkey| {
        Some(UdAddress {
            dlid: b.hca.lid(1),
            remote_qpn: qb.uvp.qpn(),
            remote_qkey,
            ..Default::default()
        })
    };
    wr.ud = by_lid(5);
    qa.uvp.post_send(&wr).unwrap();
    assert!(poll_all(&cb).is_empty());
    // "Use the QP's Q_Key" (high bit).
    wr.ud = by_lid(0x8000_0000);
    qa.uvp.post_send(&wr).unwrap();
    assert_eq!(poll_all(&cb)[0].wr_id, 3);
    // Larger than the path MTU: a local length error.
    let big = a.mem(8192, ALL_ACCESS);
    let sg = [big.sge(0, 8192)];
    let mut wr2 = send_wr(4, WrOpcode::Send, &sg);
    wr2.ud = wr.ud;
    qa.uvp.post_send(&wr2).unwrap();
    let s = poll_all(&ca);
    assert_eq!(s.last().unwrap().status, WcStatus::LocLenErr);
    // Only SEND / SEND_WITH_IMM on UD.
    let mut w = send_wr(5, WrOpcode::RdmaWrite, &[]);
    w.ud = wr.ud;
    assert_eq!(qa.uvp.post_send(&w), Err(PostError::BadOpcode));
    settle(&p);
}

#[test]
fn local_inv_fast_reg_and_send_with_inv() {
    let (p, _f, a, b, ca, cb, qa, qb) = deterministic_rc_pair();
    let (la, rb) = mems(&a, 256, &b, 256);
    // LOCAL_INV of our own region: afterwards its lkey is refused.
    let mut wr = send_wr(1, WrOpcode::LocalInv, &[]);
    wr.imm_or_inv = la.lkey;
    qa.uvp.post_send(&wr).unwrap();
    let s = poll_all(&ca);
    assert_eq!(
        (s[0].opcode, s[0].status),
        (WcOpcode::LocalInv, WcStatus::Success)
    );
    // Fast-register it again with a new key byte over part of the pages.
    let mut wr = send_wr(2, WrOpcode::RegMr, &[]);
    wr.reg = Some(FastReg {
        mr_key: la.lkey,
        new_key_byte: 0x5A,
        access: ALL_ACCESS,
        iova: la.addr(128),
        length: 64,
    });
    qa.uvp.post_send(&wr).unwrap();
    let s = poll_all(&ca);
    assert_eq!(
        (s[0].opcode, s[0].status),
        (WcOpcode::RegMr, WcStatus::Success)
    );
    let new_key = (la.lkey & !0xFF) | 0x5A;
    la.buf.write(128, b"fastreg").unwrap();
    let sg = [Sge {
        addr: la.addr(128),
        length: 7,
        lkey: new_key,
    }];
    let wr = rdma_wr(3, WrOpcode::RdmaWrite, &sg, &rb, 0);
    qa.uvp.post_send(&wr).unwrap();
    assert_eq!(poll_all(&ca)[0].status, WcStatus::Success);
    assert_eq!(&rb.buf.to_vec()[..7], b"fastreg");

    // SEND_WITH_INV invalidates the remote region named by the rkey.
    post_recv(&qb, 4, rb.sge(100, 16));
    let victim = b.mem(16, ALL_ACCESS);
    let mut wr = send_wr(5, WrOpcode::SendWithInv, &sg);
    wr.imm_or_inv = victim.rkey;
    qa.uvp.post_send(&wr).unwrap();
    let r = poll_all(&cb);
    assert_eq!(r[0].status, WcStatus::Success);
    assert_ne!(r[0].wc_flags & wc_flags::WITH_INV, 0);
    assert_eq!(r[0].imm_data, victim.rkey);
    // The invalidated region now refuses remote writes.
    let wr = rdma_wr(6, WrOpcode::RdmaWrite, &sg, &victim, 0);
    qa.uvp.post_send(&wr).unwrap();
    let s = poll_all(&ca);
    assert_eq!(s.last().unwrap().status, WcStatus::RemAccessErr);
    settle(&p);
}

#[test]
fn sqd_holds_new_sends_until_rts_again() {
    let (p, _f, a, b, ca, cb, qa, qb) = deterministic_rc_pair();
    let (m, rb) = mems(&a, 64, &b, 64);
    post_recv(&qb, 1, rb.sge(0, 8));
    a.modify(&qa, &qpm(QpState::Sqd, wv_abi::consts::WV_IO_QP_ATTR_STATE))
        .unwrap();
    post_send(&qa, 1, m.sge(0, 4));
    assert!(poll_all(&ca).is_empty());
    a.modify(&qa, &qpm(QpState::Rts, wv_abi::consts::WV_IO_QP_ATTR_STATE))
        .unwrap();
    assert_eq!(poll_all(&ca).len(), 1);
    assert_eq!(poll_all(&cb).len(), 1);
    settle(&p);
}

#[test]
fn deregistered_keys_and_closed_contexts_are_refused() {
    let (p, _f, a, b, ca, _cb, qa, _qb) = deterministic_rc_pair();
    let (m, rb) = mems(&a, 64, &b, 64);
    let sg = [m.sge(0, 4)];
    let rkey = rb.rkey;
    let raddr = rb.addr(0);
    assert!(b.hca.deregister_mr(rb.mr).is_ok());
    let mut wr = send_wr(1, WrOpcode::RdmaWrite, &sg);
    wr.remote_addr = raddr;
    wr.rkey = rkey;
    qa.uvp.post_send(&wr).unwrap();
    assert_eq!(poll_all(&ca)[0].status, WcStatus::RemAccessErr);
    // After close_ca, user mode can no longer find the device with that context.
    let guid = b.hca.guid();
    let mut out = [0u8; 64];
    let ca2 = b
        .hca
        .open_ca(
            &mut Umv::new(0, 0, 64, &mut out),
            wv_hal::KArc::new(Log::<CaEvent>::default()).into(),
        )
        .unwrap();
    let r: abi::OpenCaResp = abi::parse(&out).unwrap();
    assert_eq!(r.node_guid, guid);
    assert!(UvpContext::open(guid, r.context).is_ok());
    b.hca.close_ca(ca2);
    assert!(UvpContext::open(guid, r.context).is_err());
    settle(&p);
}

#[test]
fn ud_multicast_reaches_every_attached_qp() {
    let (p, _f, a, b) = deterministic_pair();
    let (ca, cb) = two_cqs(&a, &b, 16);
    let sender = a.qp(QpType::Ud, &ca);
    let local = a.qp(QpType::Ud, &ca);
    let remote = b.qp(QpType::Ud, &cb);
    for (n, q) in [(&a, &sender), (&a, &local), (&b, &remote)] {
        bring_up(n, q, [0; 16], 0, Conn::default());
    }
    let mut group = [0u8; 16];
    group[0] = 0xFF;
    group[1] = 0x0E;
    group[15] = 1;
    let m1 = a.hca.attach_mcast(&local.soft, &group, 0xC001).unwrap();
    let _m2 = b.hca.attach_mcast(&remote.soft, &group, 0xC001).unwrap();
    // Only UD QPs, only multicast GIDs.
    let rc = a.qp(QpType::Rc, &ca);
    assert_eq!(
        a.hca.attach_mcast(&rc.soft, &group, 0).unwrap_err(),
        VerbsError::InvalidParameter
    );
    assert_eq!(
        a.hca
            .attach_mcast(&local.soft, &a.hca.gid(), 0)
            .unwrap_err(),
        VerbsError::InvalidParameter
    );
    let (la, rb) = mems(&a, 256, &b, 256);
    post_recv(&local, 1, la.sge(0, 128));
    post_recv(&local, 2, la.sge(128, 128));
    post_recv(&remote, 3, rb.sge(0, 128));
    post_recv(&remote, 4, rb.sge(128, 128));
    let data = *b"to all";
    let mut wr = send_wr(9, WrOpcode::Send, &[]);
    wr.inline_data = Some(&data);
    wr.ud = Some(ud_to(group, 0xFF_FFFF));
    sender.uvp.post_send(&wr).unwrap();
    assert_eq!(&la.buf.to_vec()[40..46], b"to all");
    assert_eq!(&rb.buf.to_vec()[40..46], b"to all");
    let local_got: Vec<_> = poll_all(&ca)
        .iter()
        .filter(|w| w.opcode == WcOpcode::Recv)
        .map(|w| w.wr_id)
        .collect();
    assert_eq!(local_got, vec![1]);
    assert_eq!(poll_all(&cb).len(), 1);
    // Detached: no more copies for that QP.
    a.hca.detach_mcast(m1);
    sender.uvp.post_send(&wr).unwrap();
    assert!(poll_all(&ca).iter().all(|w| w.opcode != WcOpcode::Recv));
    assert_eq!(poll_all(&cb).len(), 1);
    settle(&p);
}

/// The 16 four-byte pieces of `mem`'s first 64 bytes, last piece first.
fn pieces(mem: &Mem) -> Vec<Sge> {
    (0..MAX_SGE).rev().map(|i| mem.sge(i * 4, 4)).collect()
}

#[test]
fn queues_made_for_the_most_sges_and_an_inline_size_carry_them_whole() {
    let (p, _f, a, b) = deterministic_pair();
    let (ca, cb) = two_cqs(&a, &b, 16);
    // As many SGEs as the device advertises, on both sides; inline sends of the size asked.
    fn shape(cq: &Cq) -> QpCreate<'_, SoftCq, SoftSrq> {
        QpCreate {
            qp_type: QpType::Rc,
            sq_depth: 4,
            rq_depth: 4,
            sq_sge: MAX_SGE as u32,
            rq_sge: MAX_SGE as u32,
            sq_max_inline: 64,
            sq_signaled: true,
            send_cq: &cq.soft,
            recv_cq: &cq.soft,
            srq: None,
        }
    }
    let (qa, _) = a.create_qp(&shape(&ca));
    let (qb, _) = b.create_qp(&shape(&cb));
    assert_eq!(a.hca.query_ca().unwrap().max_sge, MAX_SGE as u32);
    connect(&a, &qa, &b, &qb, Conn::default());
    let (src, dst) = mems(&a, 64, &b, 128);
    let data: Vec<u8> = (0..64).collect();
    src.buf.write(0, &data).unwrap();

    // Gathered from 16 pieces, scattered into 16.
    qb.uvp.post_recv(&recv_wr(1, &pieces(&dst))).unwrap();
    qa.uvp
        .post_send(&send_wr(1, WrOpcode::Send, &pieces(&src)))
        .unwrap();
    let r = poll_all(&cb);
    assert_eq!(
        (r.len(), r[0].status, r[0].byte_len),
        (1, WcStatus::Success, 64)
    );
    assert_eq!(&dst.buf.to_vec()[..64], &data[..]);

    // An inline send as large as the QP was made for.
    post_recv(&qb, 2, dst.sge(64, 64));
    let mut wr = send_wr(2, WrOpcode::Send, &[]);
    let inline: Vec<u8> = (0..64).map(|i| 200 - i).collect();
    wr.inline_data = Some(&inline);
    qa.uvp.post_send(&wr).unwrap();
    let r = poll_all(&cb);
    assert_eq!((r.len(), r[0].wr_id, r[0].byte_len), (1, 2, 64));
    assert_eq!(&dst.buf.to_vec()[64..], &inline[..]);
    assert_eq!(poll_all(&ca).len(), 2);
    settle(&p);
}

#[test]
fn an_srq_made_for_several_sges_scatters_into_them_all() {
    let (p, _f, a, b) = deterministic_pair();
    let (ca, cb) = two_cqs(&a, &b, 16);
    let srq = b.srq_with(8, 5, 0);
    let qa = a.qp(QpType::Rc, &ca);
    let qb = b.qp_with(QpType::Rc, &cb, &cb, Some(&srq), 8, 1, 0, true);
    connect(&a, &qa, &b, &qb, Conn::default());
    let (src, dst) = mems(&a, 64, &b, 64);
    src.buf.write(0, b"five pieces of one message").unwrap();
    let rs: Vec<Sge> = (0..5).map(|i| dst.sge(i * 12, 6)).collect();
    assert_eq!(
        srq.uvp.post_recv(&recv_wr(0, &[dst.sge(0, 1); 6])),
        Err(PostError::TooManySge)
    );
    srq.uvp.post_recv(&recv_wr(9, &rs)).unwrap();
    post_send(&qa, 1, src.sge(0, 26));
    let r = poll_all(&cb);
    assert_eq!(
        (r.len(), r[0].wr_id, r[0].status, r[0].byte_len),
        (1, 9, WcStatus::Success, 26)
    );
    let d = dst.buf.to_vec();
    let got: Vec<u8> = (0..5)
        .flat_map(|i| d[i * 12..i * 12 + 6].to_vec())
        .collect();
    assert_eq!(&got[..26], b"five pieces of one message");
    settle(&p);
}
