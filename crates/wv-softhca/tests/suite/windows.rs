//! Memory windows: type 1 (bound by the bind verb) and type 2 (bound by a `BIND_MW` request),
//! remote RDMA and atomics through the window's key within its bounds and rights, local and
//! remote invalidation, and the error of each misuse. Each test runs twice: between two QPs of
//! one device (loopback) and across two devices.

use crate::common::*;
use wv_abi::consts::*;
use wv_hal::*;
use wv_host::HostPlatform;
use wv_softhca::abi::{MwCmd, MwResp, SOFTHCA_ABI_MAGIC};
use wv_softhca::*;
use zerocopy::IntoBytes;

/// Rights of a region windows may be bound to.
const BINDABLE: u32 = WV_ACCESS_LOCAL_WRITE | WV_ACCESS_MW_BIND;
const REMOTE_RW: u32 = WV_ACCESS_REMOTE_READ | 0x2;

/// A window of `kind` in `node`'s PD: (window, rkey).
fn window(node: &Node, kind: MwType) -> (SoftMw, u32) {
    window_in(node, &node.pd, kind)
}

/// A window of `kind` in `pd` of `node`'s client: (window, rkey).
fn window_in(node: &Node, pd: &SoftPd, kind: MwType) -> (SoftMw, u32) {
    let cmd = MwCmd {
        magic: SOFTHCA_ABI_MAGIC,
        mw_type: kind as u32,
    };
    let mut buf = [0u8; 16];
    buf[..8].copy_from_slice(cmd.as_bytes());
    let mut umv = Umv::new(0, 8, 8, &mut buf);
    let (mw, rkey) = node.hca.create_mw(pd, &mut umv).unwrap();
    let r: MwResp = abi::parse(&buf).unwrap();
    assert_eq!(r.mw_type, kind as u32);
    let rkey = u32::from_be(rkey);
    assert_ne!(
        rkey & 0x8000_0000,
        0,
        "window keys are apart from region keys"
    );
    (mw, rkey)
}

fn conn() -> Conn {
    Conn {
        access: WV_ACCESS_REMOTE_WRITE | WV_ACCESS_REMOTE_READ | WV_ACCESS_REMOTE_ATOMIC,
        ..Conn::default()
    }
}

/// B's side of most cases: a bindable 4 KiB region and a window of `kind` in the same PD,
/// not yet bound (the window and its first key).
fn region_and_window(b: &Node, kind: MwType) -> (Mem, SoftMw, u32) {
    let region = b.mem(4096, BINDABLE);
    let (mw, key0) = window(b, kind);
    (region, mw, key0)
}

/// What binding a window to `len` bytes of `mr` at `off` with `access` asks of the bind verb
/// ([`bind_wr`] asks the same of a request).
fn bind_info(mr: &Mem, off: usize, len: u64, access: u32) -> MwBindInfo {
    MwBindInfo {
        mr_lkey: mr.lkey,
        addr: mr.addr(off),
        length: len,
        access,
    }
}

/// Binds the window of `mw_rkey` as `info` says through the bind verb on `qp` (request `id`,
/// signaled): the window's new key.
fn bind_by_verb(qp: &Qp, id: u64, mw_rkey: u32, info: &MwBindInfo) -> u32 {
    qp.uvp
        .bind_mw(id, send_flags::SIGNALED, mw_rkey, info)
        .unwrap()
}

/// Posts [`bind_wr`] on `qp`: a type 2 window bound by a request.
fn post_bind(qp: &Qp, id: u64, mw_rkey: u32, mr: &Mem, off: usize, len: u64, access: u32) {
    qp.uvp
        .post_send(&bind_wr(id, mw_rkey, mr, off, len, access))
        .unwrap();
}

fn bind_wr<'a>(id: u64, mw_rkey: u32, mr: &Mem, off: usize, len: u64, access: u32) -> SendWr<'a> {
    let mut wr = SendWr::new(id, WrOpcode::BindMw);
    wr.send_flags = send_flags::SIGNALED;
    wr.bind = Some(MwBind {
        mw_rkey,
        new_rkey: inc_rkey(mw_rkey),
        mr_lkey: mr.lkey,
        addr: mr.addr(off),
        length: len,
        access,
    });
    wr
}

on_both_topologies! {
    fn type_1_windows_bind_by_the_verb_and_open_part_of_a_region_to_remote_access(topology) {
        let (p, _f, a, b, ca, cb, qa, qb) = deterministic_rc_pair_on(topology, conn());
        let src = a.mem_holding(256, b"through the window");
        let (region, _mw, key0) = region_and_window(&b, MwType::Type1);
        // Before any bind the window opens onto nothing.
        let sg = [src.sge(0, 18)];
        assert_eq!(
            write_through(&qa, &ca, 1, &sg, region.addr(1024), key0).1,
            WcStatus::RemAccessErr
        );
        let (_f, a, b, ca, cb2, qa, qb2) = rc_pair_on(&p, topology, conn());
        let _ = (cb, qb);
        let src = a.mem_holding(256, b"through the window");
        let (region, _mw, key0) = region_and_window(&b, MwType::Type1);
        // The bind verb: through the responder's own send queue; the key moves on.
        let info = bind_info(&region, 1024, 64, REMOTE_RW);
        let key1 = bind_by_verb(&qb2, 7, key0, &info);
        assert_eq!(key1, inc_rkey(key0));
        assert_eq!(one(&cb2), (7, WcStatus::Success, WcOpcode::BindMw));
        // The remote writes through the window's key, inside its bounds.
        let sg = [src.sge(0, 18)];
        assert_eq!(
            write_through(&qa, &ca, 1, &sg, region.addr(1024 + 8), key1),
            (1, WcStatus::Success, WcOpcode::RdmaWrite)
        );
        assert_eq!(&region.buf.to_vec()[1032..1050], b"through the window");
        // ... and reads back.
        let back = a.mem(64, ALL_ACCESS);
        let sg = [back.sge(0, 18)];
        let mut rd = send_wr(2, WrOpcode::RdmaRead, &sg);
        rd.remote_addr = region.addr(1032);
        rd.rkey = key1;
        qa.uvp.post_send(&rd).unwrap();
        assert_eq!(one(&ca).1, WcStatus::Success);
        assert_eq!(&back.buf.to_vec()[..18], b"through the window");
        // Another QP of the same PD may use a type 1 window too (loopback on B).
        let c = b.cq(8);
        let l1 = b.qp(QpType::Rc, &c);
        let l2 = b.qp(QpType::Rc, &c);
        connect(&b, &l1, &b, &l2, conn());
        let own = b.mem_holding(64, b"loop");
        let sg = [own.sge(0, 4)];
        assert_eq!(write_through(&l1, &c, 3, &sg, region.addr(1024), key1).1, WcStatus::Success);
        assert_eq!(&region.buf.to_vec()[1024..1028], b"loop");
        // The old key no longer works; rebinding moves the window, unbinding closes it.
        let sg = [src.sge(0, 4)];
        let info2 = MwBindInfo {
            addr: region.addr(2048),
            ..info
        };
        let key2 = bind_by_verb(&qb2, 8, key1, &info2);
        assert_eq!(one(&cb2).1, WcStatus::Success);
        assert_eq!(write_through(&qa, &ca, 4, &sg, region.addr(2048), key2).1, WcStatus::Success);
        let unbind = MwBindInfo { length: 0, ..info };
        let key3 = bind_by_verb(&qb2, 9, key2, &unbind);
        assert_eq!(one(&cb2).1, WcStatus::Success);
        assert_eq!(
            write_through(&qa, &ca, 5, &sg, region.addr(2048), key3).1,
            WcStatus::RemAccessErr
        );
        settle(&p);
    }

    fn access_through_a_window_is_held_to_its_bounds_and_rights(topology) {
        let p = HostPlatform::deterministic();
        // Each case on a fresh connection (a remote access error moves both QPs to ERR). The
        // window opens onto [512, 640) of a 4 KiB region.
        use WcStatus::{RemAccessErr, Success};
        let case = |off: i64, len: u32, rights: u32, op: WrOpcode, stale: bool| {
            let (_f, a, b, ca, cb, qa, qb) = rc_pair_on(&p, topology, conn());
            let local = a.mem(256, ALL_ACCESS);
            let (region, _mw, key0) = region_and_window(&b, MwType::Type1);
            let info = bind_info(&region, 512, 128, rights);
            let key = qb.uvp.bind_mw(1, 0, key0, &info).unwrap();
            assert_eq!(one(&cb).1, Success, "the bind");
            let sg = [local.sge(0, len)];
            let mut wr = send_wr(2, op, &sg);
            wr.remote_addr = region.addr(512).wrapping_add_signed(off);
            wr.rkey = if stale { key0 } else { key };
            if op == WrOpcode::AtomicFetchAndAdd {
                wr.atomic = Some(AtomicArgs {
                    compare_add: 1,
                    swap: 0,
                });
            }
            qa.uvp.post_send(&wr).unwrap();
            one(&ca).1
        };
        use WrOpcode::{AtomicFetchAndAdd, RdmaRead, RdmaWrite};
        let (rw, ro) = (REMOTE_RW, WV_ACCESS_REMOTE_READ);
        let rwa = rw | WV_ACCESS_REMOTE_ATOMIC;
        // Offset from the window's start, length, the window's rights, the operation, whether
        // it uses the key from before the bind: its status.
        let cases = [
            (0, 128, rw, RdmaWrite, false, Success, "the whole window"),
            (64, 65, rw, RdmaWrite, false, RemAccessErr, "past the end"),
            (-8, 16, rw, RdmaWrite, false, RemAccessErr, "before the start"),
            (0, 8, ro, RdmaWrite, false, RemAccessErr, "read-only window"),
            (0, 8, ro, RdmaRead, false, Success, "read of it"),
            (0, 8, rw, AtomicFetchAndAdd, false, RemAccessErr, "no atomic right"),
            (0, 8, rwa, AtomicFetchAndAdd, false, Success, "atomic right"),
            (0, 8, rw, RdmaWrite, true, RemAccessErr, "the key before the bind"),
        ];
        for (off, len, rights, op, stale, want, what) in cases {
            assert_eq!(case(off, len, rights, op, stale), want, "{what}");
        }
        settle(&p);
    }

    fn type_2_windows_bind_by_request_serve_only_their_qp_and_are_invalidated(topology) {
        let (p, _f, a, b, ca, cb, qa, qb) = deterministic_rc_pair_on(topology, conn());
        let src = a.mem_holding(256, b"type two");
        let (region, _mw, key0) = region_and_window(&b, MwType::Type2);
        // Bound by a BIND_MW request of the QP the peer talks to.
        post_bind(&qb, 1, key0, &region, 0, 256, REMOTE_RW);
        assert_eq!(one(&cb), (1, WcStatus::Success, WcOpcode::BindMw));
        let key1 = inc_rkey(key0);
        let sg = [src.sge(0, 8)];
        assert_eq!(write_through(&qa, &ca, 2, &sg, region.addr(16), key1).1, WcStatus::Success);
        assert_eq!(&region.buf.to_vec()[16..24], b"type two");
        // A bound type 2 window cannot be bound again.
        post_bind(&qb, 3, key1, &region, 0, 256, REMOTE_RW);
        assert_eq!(one(&cb), (3, WcStatus::MwBindErr, WcOpcode::BindMw));
        assert_eq!(b.state(&qb), QpState::Error);

        // A fresh connection: the window serves only the QP that bound it.
        let (_f, a, b, ca, cb, qa, qb) = rc_pair_on(&p, topology, conn());
        let src = a.mem(256, ALL_ACCESS);
        let (region, _mw, key0) = region_and_window(&b, MwType::Type2);
        let c = b.cq(8);
        let other = b.qp(QpType::Rc, &c);
        let peer = a.qp(QpType::Rc, &a.cq(8));
        connect(&b, &other, &a, &peer, conn());
        post_bind(&other, 1, key0, &region, 0, 256, REMOTE_RW);
        assert_eq!(one(&c).1, WcStatus::Success);
        let key1 = inc_rkey(key0);
        let sg = [src.sge(0, 8)];
        assert_eq!(
            write_through(&qa, &ca, 2, &sg, region.addr(0), key1).1,
            WcStatus::RemAccessErr,
            "bound to another QP"
        );
        let _ = (cb, qb);

        // LOCAL_INV frees it: the key stops working, and it can be bound again.
        let (_f, a, b, ca, cb, qa, qb) = rc_pair_on(&p, topology, conn());
        let src = a.mem(256, ALL_ACCESS);
        let (region, _mw, key0) = region_and_window(&b, MwType::Type2);
        post_bind(&qb, 1, key0, &region, 0, 256, REMOTE_RW);
        let key1 = inc_rkey(key0);
        let mut inv = send_wr(2, WrOpcode::LocalInv, &[]);
        inv.imm_or_inv = key1;
        qb.uvp.post_send(&inv).unwrap();
        assert_eq!(
            completions(&cb),
            vec![
                (1, WcStatus::Success, WcOpcode::BindMw),
                (2, WcStatus::Success, WcOpcode::LocalInv)
            ]
        );
        let sg = [src.sge(0, 8)];
        assert_eq!(write_through(&qa, &ca, 3, &sg, region.addr(0), key1).1, WcStatus::RemAccessErr);

        // SEND_WITH_INV from the peer frees it too.
        let (_f, a, b, ca, cb, qa, qb) = rc_pair_on(&p, topology, conn());
        let src = a.mem(256, ALL_ACCESS);
        let (region, _mw, key0) = region_and_window(&b, MwType::Type2);
        let inbox = b.mem(64, ALL_ACCESS);
        post_bind(&qb, 1, key0, &region, 0, 256, REMOTE_RW);
        assert_eq!(one(&cb).1, WcStatus::Success);
        let key1 = inc_rkey(key0);
        post_recv(&qb, 10, inbox.sge(0, 64));
        let sg = [src.sge(0, 8)];
        let mut wr = send_wr(4, WrOpcode::SendWithInv, &sg);
        wr.imm_or_inv = key1;
        qa.uvp.post_send(&wr).unwrap();
        assert_eq!(one(&ca).1, WcStatus::Success);
        let r = poll_all(&cb);
        assert_eq!((r[0].wr_id, r[0].status), (10, WcStatus::Success));
        assert_ne!(r[0].wc_flags & wc_flags::WITH_INV, 0);
        assert_eq!(r[0].imm_data, key1);
        assert_eq!(write_through(&qa, &ca, 5, &sg, region.addr(0), key1).1, WcStatus::RemAccessErr);
        settle(&p);
    }

    fn every_misuse_of_a_window_has_its_error(topology) {
        let p = HostPlatform::deterministic();
        // Each bind on a fresh QP (a bind error moves it to ERR).
        let bind = |kind: MwType, verb: bool, mr_access: u32, off: usize, len: u64, rights: u32| {
            let (_f, _a, b, _ca, cb, _qa, qb) = rc_pair_on(&p, topology, conn());
            let region = b.mem(4096, mr_access);
            let (_mw, key0) = window(&b, kind);
            if verb {
                bind_by_verb(&qb, 1, key0, &bind_info(&region, off, len, rights));
            } else {
                post_bind(&qb, 1, key0, &region, off, len, rights);
            }
            one(&cb).1
        };
        use MwType::*;
        // Kind, bound by the verb (else by a work request), the region's access, offset,
        // length, the window's rights: the bind's status.
        let cases = [
            // The right way, for reference.
            (Type1, true, BINDABLE, 0, 64, REMOTE_RW, WcStatus::Success),
            (Type2, false, BINDABLE, 0, 64, REMOTE_RW, WcStatus::Success),
            // Each kind only by its own way.
            (Type1, false, BINDABLE, 0, 64, REMOTE_RW, WcStatus::MwBindErr),
            (Type2, true, BINDABLE, 0, 64, REMOTE_RW, WcStatus::MwBindErr),
            // A region without bind rights; a writable window on a region without local
            // write; a read-only window, which needs no local write.
            (Type1, true, WV_ACCESS_LOCAL_WRITE, 0, 64, REMOTE_RW, WcStatus::MwBindErr),
            (Type1, true, WV_ACCESS_MW_BIND, 0, 64, REMOTE_RW, WcStatus::MwBindErr),
            (Type1, true, WV_ACCESS_MW_BIND, 0, 64, WV_ACCESS_REMOTE_READ, WcStatus::Success),
            // Outside the region; a type 2 window with no length.
            (Type1, true, BINDABLE, 4000, 97, REMOTE_RW, WcStatus::MwBindErr),
            (Type2, false, BINDABLE, 0, 0, REMOTE_RW, WcStatus::MwBindErr),
            // Unknown rights.
            (Type1, true, BINDABLE, 0, 64, 0x100, WcStatus::MwBindErr),
        ];
        for (case, (kind, verb, access, off, len, rights, want)) in cases.into_iter().enumerate() {
            assert_eq!(bind(kind, verb, access, off, len, rights), want, "case {case}");
        }

        // A window of another PD; a stale window key.
        let (_f, _a, b, _ca, cb, _qa, qb) = rc_pair_on(&p, topology, conn());
        let region = b.mem(4096, BINDABLE);
        let pd2 = b.hca.allocate_pd(&b.ca, &mut Umv::none()).unwrap();
        let (mw2, rkey2) = b.hca.create_mw(&pd2, &mut Umv::none()).unwrap();
        let fresh = |region: &Mem| bind_info(region, 0, 64, REMOTE_RW);
        bind_by_verb(&qb, 1, u32::from_be(rkey2), &fresh(&region));
        assert_eq!(one(&cb).1, WcStatus::MwBindErr, "window of another PD");
        b.hca.destroy_mw(mw2);
        let (_f, _a, b, _ca, cb, _qa, qb) = rc_pair_on(&p, topology, conn());
        let (region, _mw, key0) = region_and_window(&b, MwType::Type1);
        bind_by_verb(&qb, 1, inc_rkey(key0), &fresh(&region));
        assert_eq!(one(&cb).1, WcStatus::MwBindErr, "stale key");

        // A type 1 window cannot be invalidated; neither can a region with a window bound.
        for key_of in [|k: u32, _: u32| k, |_: u32, l: u32| l] {
            let (_f, _a, b, _ca, cb, _qa, qb) = rc_pair_on(&p, topology, conn());
            let (region, _mw, key0) = region_and_window(&b, MwType::Type1);
            let key1 = qb.uvp.bind_mw(1, 0, key0, &fresh(&region)).unwrap();
            assert_eq!(one(&cb).1, WcStatus::Success);
            let mut inv = send_wr(2, WrOpcode::LocalInv, &[]);
            inv.imm_or_inv = key_of(key1, region.lkey);
            qb.uvp.post_send(&inv).unwrap();
            assert_eq!(one(&cb), (2, WcStatus::LocQpOpErr, WcOpcode::LocalInv));
        }
        settle(&p);
    }

    fn a_region_with_windows_bound_stays_registered_until_they_go(topology) {
        let (p, _f, _a, b, _ca, cb, _qa, qb) = deterministic_rc_pair_on(topology, conn());
        let (region, mw, key0) = region_and_window(&b, MwType::Type1);
        bind_by_verb(&qb, 1, key0, &bind_info(&region, 0, 64, REMOTE_RW));
        assert_eq!(one(&cb).1, WcStatus::Success);
        let Mem { mr, .. } = region;
        let (mr, e) = b.hca.deregister_mr(mr).unwrap_err();
        assert_eq!(e, VerbsError::ResourceBusy);
        // Destroying the window lets the region go.
        b.hca.destroy_mw(mw);
        assert!(b.hca.deregister_mr(mr).is_ok());
        // A window without vendor bytes is type 1; a bad type is refused.
        let (w1, _) = b.hca.create_mw(&b.pd, &mut Umv::none()).unwrap();
        b.hca.destroy_mw(w1);
        let cmd = MwCmd {
            magic: SOFTHCA_ABI_MAGIC,
            mw_type: 3,
        };
        let mut buf = [0u8; 8];
        buf.copy_from_slice(cmd.as_bytes());
        assert_eq!(
            b.hca
                .create_mw(&b.pd, &mut Umv::new(0, 8, 0, &mut buf))
                .unwrap_err(),
            VerbsError::InvalidParameter
        );
        settle(&p);
    }
}

on_both_topologies! {
    fn each_of_several_windows_answers_its_own_key(topology) {
        let (p, _f, a, b, ca, cb, qa, qb) = deterministic_rc_pair_on(topology, conn());
        let src = a.mem_holding(64, b"first!second");
        let region = b.mem(4096, BINDABLE);
        // Three windows, the second of type 2; each bound to its own part of the region.
        let windows = [
            (window(&b, MwType::Type1), 0),
            (window(&b, MwType::Type2), 1024),
            (window(&b, MwType::Type1), 2048),
        ];
        let mut keys = Vec::new();
        for (i, ((_, key0), off)) in windows.iter().enumerate() {
            let id = i as u64;
            let key = if i == 1 {
                post_bind(&qb, id, *key0, &region, *off, 64, REMOTE_RW);
                inc_rkey(*key0)
            } else {
                bind_by_verb(&qb, id, *key0, &bind_info(&region, *off, 64, REMOTE_RW))
            };
            assert_eq!(one(&cb), (id, WcStatus::Success, WcOpcode::BindMw), "window {i}");
            keys.push(key);
        }
        // A write through each key lands in that window's part.
        for (i, (key, (_, off))) in keys.iter().zip(&windows).enumerate() {
            let sg = [src.sge(i * 6 % 12, 6)];
            assert_eq!(
                write_through(&qa, &ca, 10 + i as u64, &sg, region.addr(*off), *key).1,
                WcStatus::Success,
                "window {i}"
            );
        }
        let got = region.buf.to_vec();
        assert_eq!(&got[..6], b"first!");
        assert_eq!(&got[1024..1030], b"second");
        assert_eq!(&got[2048..2054], b"first!");
        // One window's key does not open another's part.
        let sg = [src.sge(0, 6)];
        assert_eq!(
            write_through(&qa, &ca, 20, &sg, region.addr(1024), keys[2]).1,
            WcStatus::RemAccessErr
        );
        settle(&p);
    }

    fn a_type_2_window_is_bound_only_by_a_qp_of_its_pd(topology) {
                // C10-72: the window and the region in another PD than the QP's.
        let (p, _f, _a, b, _ca, cb, _qa, qb) = deterministic_rc_pair_on(topology, conn());
        let pd2 = b.hca.allocate_pd(&b.ca, &mut Umv::none()).unwrap();
        let (mw, key0) = window_in(&b, &pd2, MwType::Type2);
        let region = b.mem_in(&pd2, 4096, BINDABLE);
        post_bind(&qb, 1, key0, &region, 0, 64, REMOTE_RW);
        assert_eq!(one(&cb), (1, WcStatus::MwBindErr, WcOpcode::BindMw));
        b.hca.destroy_mw(mw);
        assert!(b.hca.deregister_mr(region.mr).is_ok());
        b.hca.deallocate_pd(pd2);
        settle(&p);
    }
}

#[test]
fn inc_rkey_steps_the_key_byte_and_keeps_the_index() {
    // rdma-core's ibv_inc_rkey: the low 8 bits count on, wrapping within the byte.
    assert_eq!(inc_rkey(0x8000_1201), 0x8000_1202);
    assert_eq!(inc_rkey(0x8000_12FE), 0x8000_12FF);
    assert_eq!(inc_rkey(0x8000_12FF), 0x8000_1200);
    assert_eq!(inc_rkey(0xFFFF_FFFF), 0xFFFF_FF00);
}
