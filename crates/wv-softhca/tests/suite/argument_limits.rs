//! Verb arguments at the device's limits: each limit taken exactly is accepted, one beyond it
//! is refused (`InvalidSetting` for sizes, as `ib_create_qp`/`ib_create_srq` answer EINVAL),
//! and each limit is checked on its own, whatever the other arguments are. Vendor output
//! buffers of exactly the response's size are enough.

use crate::common::*;
use wv_hal::*;
use wv_host::HostPlatform;
use wv_softhca::abi::{self, AhResp, CqResp, SrqResp};

/// A deterministic platform and on it a device with small limits, so each can be reached.
fn small() -> (HostPlatform, Node) {
    deterministic_configured("limits", |c| {
        c.limits.max_qp_wr = 8;
        c.limits.max_sge = 2;
        c.limits.max_inline = 64;
        c.limits.max_srq_wr = 16;
        c.limits.max_mr_size = 8192;
    })
}

#[test]
fn each_qp_size_is_checked_on_its_own_and_its_limit_is_accepted() {
    let (p, a) = small();
    let attr = a.hca.query_ca().unwrap();
    assert_eq!(
        (attr.max_qp_wr, attr.max_sge, attr.max_inline_send),
        (8, 2, 64)
    );
    let cq = a.cq(16);
    // Send depth, receive depth, send SGEs, receive SGEs, inline bytes.
    let create = |s: [u32; 5]| {
        let c = QpCreate {
            qp_type: QpType::Rc,
            sq_depth: s[0],
            rq_depth: s[1],
            sq_sge: s[2],
            rq_sge: s[3],
            sq_max_inline: s[4],
            sq_signaled: true,
            send_cq: &cq.soft,
            recv_cq: &cq.soft,
            srq: None,
        };
        let events = wv_hal::KArc::new(Log::<QpEvent>::default());
        a.hca
            .create_qp(&a.pd, &c, events.into(), &mut Umv::none())
            .map(|(qp, created)| {
                a.hca.destroy_qp(qp);
                created
            })
    };
    // Every limit at once, exactly.
    let created = create([8, 8, 2, 2, 64]).unwrap();
    assert_eq!(
        (
            created.sq_depth,
            created.rq_depth,
            created.sq_sge,
            created.rq_sge,
            created.sq_max_inline
        ),
        (8, 8, 2, 2, 64)
    );
    // One beyond, one argument at a time, the others well inside.
    for (i, what) in [
        "send depth",
        "receive depth",
        "send SGEs",
        "receive SGEs",
        "inline",
    ]
    .into_iter()
    .enumerate()
    {
        let mut s = [1, 1, 1, 1, 0];
        s[i] = [9, 9, 3, 3, 65][i];
        assert_eq!(create(s).unwrap_err(), VerbsError::InvalidSetting, "{what}");
    }
    assert_eq!(a.hca.objects().qps, 0);
    settle(&p);
}

#[test]
fn each_srq_size_is_checked_on_its_own_and_its_limit_is_accepted() {
    let (p, a) = small();
    assert_eq!(a.hca.query_ca().unwrap().max_srq_wr, 16);
    let create = |max_wr, max_sge, srq_limit| {
        let events = wv_hal::KArc::new(Log::<SrqEvent>::default());
        let attr = SrqAttributes {
            max_wr,
            max_sge,
            srq_limit,
        };
        a.hca
            .create_srq(&a.pd, &attr, events.into(), &mut Umv::none())
            .map(|srq| a.hca.destroy_srq(srq))
    };
    // The size, the SGEs and a limit equal to the size, each exactly at its bound.
    assert_eq!(create(16, 2, 16), Ok(()));
    assert_eq!(create(8, 1, 8), Ok(()));
    // An empty queue; one WR, one SGE too many; a limit above the size: each alone.
    assert_eq!(create(0, 1, 0), Err(VerbsError::InvalidSetting), "empty");
    assert_eq!(create(17, 1, 0), Err(VerbsError::InvalidSetting), "size");
    assert_eq!(create(4, 3, 0), Err(VerbsError::InvalidSetting), "SGEs");
    assert_eq!(create(8, 1, 9), Err(VerbsError::InvalidSetting), "limit");
    assert_eq!(a.hca.objects().srqs, 0);
    settle(&p);
}

#[test]
fn an_srq_resizes_to_its_limit_and_takes_a_limit_equal_to_its_size() {
    let (p, a) = small();
    let srq = a.srq(4, 0);
    let size = std::mem::size_of::<SrqResp>();
    let modify = |max_wr: Option<u32>, limit: u32, out_len: usize| {
        let mut out = [0u8; 64];
        let r = a.hca.modify_srq(
            &srq.soft,
            &SrqAttributes {
                max_wr: max_wr.unwrap_or(0),
                max_sge: 0,
                srq_limit: limit,
            },
            SrqModifyMask {
                max_wr: max_wr.is_some(),
                limit: true,
            },
            &mut Umv::new(0, 0, out_len, &mut out),
        );
        r.map(|()| abi::parse::<SrqResp>(&out[..size]).unwrap())
    };
    // The device's largest size, with a limit of all of it; the answer fits its exact size.
    let r = modify(Some(16), 16, size).unwrap();
    assert_eq!(r.entries, 16);
    assert_eq!(
        a.hca.query_srq(&srq.soft, &mut Umv::none()).unwrap(),
        SrqAttributes {
            max_wr: 16,
            max_sge: 2,
            srq_limit: 16,
        }
    );
    // The limit alone, equal to the current size; one above it is refused.
    assert!(modify(None, 16, size).is_ok());
    assert_eq!(
        modify(None, 17, size).unwrap_err(),
        VerbsError::InvalidParameter
    );
    assert_eq!(
        modify(Some(17), 1, size).unwrap_err(),
        VerbsError::InvalidSetting
    );
    // An output buffer one byte short of the answer is refused before anything changes.
    assert_eq!(
        modify(Some(8), 1, size - 1).unwrap_err(),
        VerbsError::InvalidParameter
    );
    assert_eq!(
        a.hca.query_srq(&srq.soft, &mut Umv::none()).unwrap().max_wr,
        16
    );
    settle(&p);
}

#[test]
fn a_cq_resize_answers_into_an_output_of_exactly_its_size() {
    let (p, a) = small();
    let cq = a.cq(4);
    let size = std::mem::size_of::<CqResp>();
    let mut out = [0u8; 64];
    // One byte short: refused, and the CQ keeps its ring.
    assert_eq!(
        a.hca
            .resize_cq(&cq.soft, 32, &mut Umv::new(0, 0, size - 1, &mut out)),
        Err(VerbsError::InvalidParameter)
    );
    assert_eq!(cq.uvp.entries(), 4);
    let guard = cq.uvp.begin_resize();
    let got = a
        .hca
        .resize_cq(&cq.soft, 32, &mut Umv::new(0, 0, size, &mut out))
        .unwrap();
    let r: CqResp = abi::parse(&out[..size]).unwrap();
    assert_eq!((got, r.entries, r.cq_handle), (32, 32, cq.soft.handle()));
    assert_eq!(guard.finish(&r).unwrap(), 32);
    settle(&p);
}

#[test]
fn a_region_may_be_as_long_as_max_mr_size_and_no_longer() {
    let (p, a) = small();
    assert_eq!(a.hca.query_ca().unwrap().max_mr_size, 8192);
    let buf = a.pool.alloc(8193);
    let reg = |length| {
        let r = MemoryRegion {
            address: buf.addr(),
            length,
            access: ALL_ACCESS,
        };
        a.hca.register_mr(&a.pd, &r).map(|(mr, _)| mr)
    };
    let mr = reg(8192).unwrap();
    assert!(a.hca.deregister_mr(mr).is_ok());
    assert_eq!(reg(8193).unwrap_err(), VerbsError::InvalidParameter);
    assert_eq!(a.hca.objects().mrs, 0);
    settle(&p);
}

#[test]
fn an_address_handle_names_a_port_of_the_device_and_one_of_its_gids() {
    let (p, a) = deterministic_configured("two ports", |c| c.ports = 2);
    let one_port = Node::simple(&p);
    let unicast = |port| AddressVector {
        grh_valid: true,
        dgid: one_port.hca.gid(),
        hop_limit: 1,
        port,
        ..AddressVector::default()
    };
    let create = |node: &Node, av: &AddressVector| {
        let mut out = [0u8; 8];
        node.hca
            .create_ah(&node.pd, av, &mut Umv::new(0, 0, 8, &mut out))
            .map(|ah| {
                node.hca.destroy_ah(ah);
                abi::parse::<AhResp>(&out).unwrap()
            })
    };
    // Both ports of a two-port device; neither port 0 nor a port beyond the device's.
    for port in [1, 2] {
        let r = create(&a, &unicast(port)).unwrap();
        assert_eq!(r.sgid_index, 0, "port {port}: a zero SGID is GID index 0");
    }
    for port in [0, 3] {
        assert_eq!(
            create(&a, &unicast(port)).unwrap_err(),
            VerbsError::InvalidParameter,
            "port {port}"
        );
    }
    assert_eq!(
        create(&one_port, &unicast(2)).unwrap_err(),
        VerbsError::InvalidParameter
    );
    // A source GID of the port answers its index; one the port does not have is refused.
    let index = a.hca.add_ipv4_gid(1, [192, 0, 2, 7]).unwrap();
    assert_ne!(index, 0);
    let sgid = a.hca.query_gid(1, index).unwrap();
    let av = AddressVector { sgid, ..unicast(1) };
    assert_eq!(create(&a, &av).unwrap().sgid_index, index);
    let av = AddressVector {
        sgid: a.hca.gid(),
        ..unicast(1)
    };
    assert_eq!(create(&a, &av).unwrap().sgid_index, 0);
    let mut foreign = sgid;
    foreign[15] ^= 1;
    let av = AddressVector {
        sgid: foreign,
        ..unicast(1)
    };
    assert_eq!(create(&a, &av).unwrap_err(), VerbsError::InvalidParameter);
    assert_eq!(a.hca.objects().ahs, 0);
    settle(&p);
}
