//! A client without the driver ([`DirectClient`]): two devices opened directly carry a send
//! between the RC QPs it connected, and a refused step is named in the error.

use std::sync::Arc;

use crate::common::*;
use wv_hal::*;
use wv_host::HostPlatform;
use wv_softhca::*;

struct Side {
    dev: DirectClient<HostPlatform>,
    _soft_cq: SoftCq,
    cq: UvpCq,
    soft_qp: SoftQp,
    qp: UvpQp,
    mem: Mem,
}

/// A device of its own on `p` whose client memory is `pool`, opened directly.
fn client(p: &HostPlatform, pool: &BufferPool) -> DirectClient<HostPlatform> {
    let memory = ClientMemory::pool(pool.clone());
    let config = DeviceConfig::new("direct", mac());
    DirectClient::create(
        Arc::new(p.clone()),
        config,
        memory,
        KArc::new(NoEvents).into(),
    )
    .unwrap()
}

fn side(p: &HostPlatform, fabric: &Arc<Fabric>) -> Side {
    let pool = BufferPool::new();
    let dev = client(p, &pool);
    fabric.attach(&dev.hca);
    let (soft_cq, cq) = dev.create_cq(16, KArc::new(NoEvents).into()).unwrap();
    let (soft_qp, qp) = dev
        .create_rc_qp(&soft_cq, &soft_cq, [8, 8], 0, KArc::new(NoEvents).into())
        .unwrap();
    let buf = pool.alloc(64);
    let region = MemoryRegion {
        address: buf.addr(),
        length: 64,
        access: ALL_ACCESS,
    };
    let (mr, keys) = dev.hca.register_mr(&dev.pd, &region).unwrap();
    Side {
        dev,
        _soft_cq: soft_cq,
        cq,
        soft_qp,
        qp,
        mem: Mem {
            buf,
            mr,
            lkey: keys.lkey,
            rkey: u32::from_be(keys.rkey),
        },
    }
}

#[test]
fn two_direct_clients_connect_and_carry_a_send() {
    let p = HostPlatform::deterministic();
    let fabric = Fabric::new();
    let (a, b) = (side(&p, &fabric), side(&p, &fabric));
    a.dev
        .connect_rc(&a.soft_qp, b.dev.hca.gid(), b.qp.qpn())
        .unwrap();
    b.dev
        .connect_rc(&b.soft_qp, a.dev.hca.gid(), a.qp.qpn())
        .unwrap();
    assert_eq!(a.dev.hca.query_qp(&a.soft_qp).unwrap().state, QpState::Rts);
    b.qp.post_recv(&RecvWr {
        wr_id: 7,
        sg_list: &[b.mem.sge(0, 64)],
    })
    .unwrap();
    a.mem.buf.write(0, b"direct").unwrap();
    let sge = [a.mem.sge(0, 6)];
    let mut wr = SendWr::new(1, WrOpcode::Send);
    wr.sg_list = &sge;
    wr.send_flags = send_flags::SIGNALED;
    a.qp.post_send(&wr).unwrap();
    p.run_until_idle();
    let mut wc = [WorkCompletion::default(); 2];
    assert_eq!(b.cq.poll(&mut wc), 1);
    assert_eq!((wc[0].wr_id, wc[0].byte_len), (7, 6));
    assert_eq!(&b.mem.buf.to_vec()[..6], b"direct");
    assert_eq!(a.cq.poll(&mut wc), 1);
    assert_eq!((wc[0].wr_id, wc[0].status), (1, WcStatus::Success));
}

#[test]
fn a_refused_step_is_named() {
    let dev = client(&HostPlatform::deterministic(), &BufferPool::new());
    let e = dev
        .create_cq(u32::MAX, KArc::new(NoEvents).into())
        .err()
        .unwrap();
    assert_eq!(e.step, "CQ");
    assert!(e.to_string().starts_with("CQ: "), "{e}");
    let (soft_cq, _cq) = dev.create_cq(16, KArc::new(NoEvents).into()).unwrap();
    let e = dev
        .create_rc_qp(
            &soft_cq,
            &soft_cq,
            [u32::MAX, 8],
            0,
            KArc::new(NoEvents).into(),
        )
        .err()
        .unwrap();
    assert_eq!(e.step, "QP");
}
