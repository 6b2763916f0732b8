//! What destroying a QP and dropping a device leave behind: no timer of a destroyed or reset
//! QP stays armed on the platform (a driver's `KTIMER` must be cancelled before the object
//! holding it is freed), and a device whose last handle is dropped is freed even while its
//! QPs, never destroyed, are connected to each other.

use crate::common::*;
use wv_hal::*;
use wv_softhca::*;

on_both_topologies! {
    fn a_destroyed_or_reset_qp_leaves_no_timer_armed(topology) {
        let (p, _f, a, b, ca, _cb, qa, _qb) = deterministic_rc_pair_on(topology, Conn::default());
        let (ca2, _cb2, qa2, qb2) = two_qps(&a, &b, QpType::Rc, 16);
        connect(&a, &qa2, &b, &qb2, Conn::default());
        let m = a.mem(64, ALL_ACCESS);
        // The peer's port is down: each send waits for its ACK under the local ACK timer.
        b.hca.set_port_state(1, false).unwrap();
        post_send(&qa, 1, m.sge(0, 8));
        post_send(&qa2, 2, m.sge(0, 8));
        settle(&p);
        assert_eq!(p.pending_timers(), 2);
        a.modify(&qa2, &qpm(QpState::Reset, wv_abi::consts::WV_IO_QP_ATTR_STATE))
            .unwrap();
        assert_eq!(p.pending_timers(), 1, "the reset QP's timer");
        let Qp { soft, .. } = qa;
        a.hca.destroy_qp(soft);
        assert_eq!(p.pending_timers(), 0, "the destroyed QP's timer");
        // Nothing fires later either.
        p.advance_clock(10 * ACK_TIMEOUT_NS);
        settle(&p);
        assert!(poll_all(&ca).is_empty());
        assert!(poll_all(&ca2).is_empty());
        b.hca.set_port_state(1, true).unwrap();
        settle(&p);
    }

    fn a_device_dropped_with_its_qps_connected_is_freed(topology) {
        let (p, f, a, b, ca, cb, qa, qb) = deterministic_rc_pair_on(topology, Conn::default());
        let (la, lb) = mems(&a, 64, &b, 64);
        // Traffic both ways: each requester keeps its peer (and so the peer's device), each
        // responder the region it wrote.
        for (from, src, to, dst) in [(&qa, &la, &qb, &lb), (&qb, &lb, &qa, &la)] {
            post_recv(to, 1, dst.sge(0, 64));
            post_send(from, 2, src.sge(0, 8));
            let sg = [src.sge(0, 8)];
            let wr = rdma_wr(3, WrOpcode::RdmaWrite, &sg, dst, 8);
            from.uvp.post_send(&wr).unwrap();
        }
        settle(&p);
        for cq in [&ca, &cb] {
            let wcs = poll_all(cq);
            assert_eq!(wcs.len(), 3, "a receive, a send and a write: {wcs:?}");
            assert!(wcs.iter().all(|w| w.status == WcStatus::Success));
        }
        // The opens the clients' providers would present again.
        let opens = [(a.hca.guid(), a.ca.token), (b.hca.guid(), b.ca.token)];
        for (guid, token) in opens {
            assert!(UvpContext::open(guid, token).is_ok());
        }
        // Everything the test holds goes, the QPs and regions undestroyed.
        drop((ca, cb, qa, qb, la, lb, a, b));
        settle(&p);
        for (guid, token) in opens {
            assert_eq!(
                UvpContext::open(guid, token).err(),
                Some(VerbsError::InvalidParameter),
                "the device is gone"
            );
        }
        drop(f);
    }
}
