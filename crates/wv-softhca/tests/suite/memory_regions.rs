//! Memory regions over their life: registration of memory the device may only read, local
//! invalidation and fast registration held to the region's key, state and pinned pages (as
//! rxe's `rxe_invalidate_mr` and `rxe_reg_fast_mr` are), and deregistration, after which
//! neither key works any more, even for a QP that used the region just before.

use crate::common::*;
use wv_hal::*;
use wv_host::HostPlatform;
use wv_softhca::*;

fn local_inv(qp: &Qp, id: u64, key: u32) {
    let mut wr = send_wr(id, WrOpcode::LocalInv, &[]);
    wr.imm_or_inv = key;
    qp.uvp.post_send(&wr).unwrap();
}

fn fast_reg(qp: &Qp, id: u64, reg: FastReg) {
    let mut wr = send_wr(id, WrOpcode::RegMr, &[]);
    wr.reg = Some(reg);
    qp.uvp.post_send(&wr).unwrap();
}

#[cfg(all(feature = "std", target_os = "linux"))]
#[test]
fn memory_mapped_read_only_registers_only_for_access_that_never_writes_it() {
    use std::sync::Arc;
    use wv_abi::consts::*;
    let p = HostPlatform::deterministic();
    let hca = SoftHca::new(
        Arc::new(p.clone()),
        DeviceConfig::new("process", mac()),
        ClientMemory::process(),
    );
    let (ca, _events, _out) = open_ca_logged(&*hca);
    let pd = hca.allocate_pd(&ca, &mut Umv::none()).unwrap();
    let page = 4096;
    // Unmapped at the end of the test.
    let ro = anonymous_mapping_with(page, libc::PROT_READ);
    let rw = anonymous_mapping(page);
    let reg = |addr: *mut u8, access| {
        let r = MemoryRegion {
            address: addr as u64,
            length: page as u64,
            access,
        };
        hca.register_mr(&pd, &r).map(|(mr, _)| {
            assert!(hca.deregister_mr(mr).is_ok());
        })
    };
    // The device only reads memory a region lets it read (locally or for a remote read):
    // read-only pages are enough (`ib_umem_get` pins them without FOLL_WRITE).
    assert_eq!(reg(ro, 0), Ok(()));
    assert_eq!(reg(ro, WV_ACCESS_REMOTE_READ), Ok(()));
    assert_eq!(reg(ro, WV_ACCESS_MW_BIND), Ok(()));
    // Local write, remote write and remote atomics let it write: the pages must be writable
    // (`ibv_reg_mr` fails with EFAULT).
    for access in [
        WV_ACCESS_LOCAL_WRITE,
        WV_ACCESS_REMOTE_WRITE,
        WV_ACCESS_LOCAL_WRITE | WV_ACCESS_REMOTE_ATOMIC,
        ALL_ACCESS,
    ] {
        assert_eq!(
            reg(ro, access),
            Err(VerbsError::InvalidPermission),
            "{access:#x}"
        );
        assert_eq!(reg(rw, access), Ok(()), "{access:#x}");
    }
    assert_eq!(hca.objects().mrs, 0);
    hca.deallocate_pd(pd);
    hca.close_ca(ca);
    for m in [ro, rw] {
        // SAFETY: the mappings made above; no region names them any more.
        unsafe { libc::munmap(m.cast(), page) };
    }
    settle(&p);
}

#[test]
fn local_invalidation_needs_the_regions_current_key() {
    let (p, _f, a, b, ca, _cb, qa, _qb) = deterministic_rc_pair();
    let (la, rb) = mems(&a, 256, &b, 256);
    // The region's index with another key byte is not its key.
    local_inv(&qa, 1, la.lkey ^ 0x5A);
    assert_eq!(one(&ca), (1, WcStatus::LocQpOpErr, WcOpcode::LocalInv));
    // The region is still valid: a fresh QP writes from it.
    let (ca2, _cb2, qa2, qb2) = two_qps(&a, &b, QpType::Rc, 16);
    connect(&a, &qa2, &b, &qb2, Conn::default());
    la.buf.write(0, b"valid").unwrap();
    let sg = [la.sge(0, 5)];
    assert_eq!(
        write_through(&qa2, &ca2, 2, &sg, rb.addr(0), rb.rkey),
        (2, WcStatus::Success, WcOpcode::RdmaWrite)
    );
    assert_eq!(&rb.buf.to_vec()[..5], b"valid");
    // With its key it is invalidated.
    local_inv(&qa2, 3, la.lkey);
    assert_eq!(one(&ca2), (3, WcStatus::Success, WcOpcode::LocalInv));
    settle(&p);
}

#[test]
fn fast_registration_takes_an_invalidated_region_within_its_pages() {
    let p = HostPlatform::deterministic();
    // Each case on a fresh connection (a failed local operation moves the QP to ERR): whether
    // the region is invalidated first, the key the request names (its byte flipped or not),
    // and the range from the region's start: the status, and whether the new key then works
    // over that range.
    let case = |invalidate: bool, wrong_key: bool, start: i64, len: u64| {
        let (_f, a, b, ca, _cb, qa, _qb) = rc_pair(&p);
        let (la, rb) = mems(&a, 256, &b, 512);
        if invalidate {
            local_inv(&qa, 1, la.lkey);
            assert_eq!(one(&ca).1, WcStatus::Success);
        }
        let new_byte = ((la.lkey & 0xFF) as u8).wrapping_add(0x21);
        fast_reg(
            &qa,
            2,
            FastReg {
                mr_key: if wrong_key { la.lkey ^ 1 } else { la.lkey },
                new_key_byte: new_byte,
                access: ALL_ACCESS,
                iova: la.addr(0).wrapping_add_signed(start),
                length: len,
            },
        );
        let status = one(&ca).1;
        if status != WcStatus::Success {
            return status;
        }
        // The new key opens exactly the range: its last byte works.
        let new_key = (la.lkey & !0xFF) | u32::from(new_byte);
        let last = start as u64 + len - 1;
        let sg = [Sge {
            addr: la.addr(last as usize),
            length: 1,
            lkey: new_key,
        }];
        assert_eq!(
            write_through(&qa, &ca, 3, &sg, rb.addr(0), rb.rkey).1,
            WcStatus::Success,
            "the new key"
        );
        status
    };
    use WcStatus::{LocQpOpErr, Success};
    let cases = [
        (true, false, 0, 256, Success, "all its pages"),
        (true, false, 64, 192, Success, "up to its end"),
        (false, false, 0, 256, LocQpOpErr, "a valid region"),
        (true, true, 0, 256, LocQpOpErr, "another key byte"),
        (true, false, -1, 1, LocQpOpErr, "the byte before its start"),
        (true, false, -1, 2, LocQpOpErr, "from before its start"),
        (true, false, 0, 257, LocQpOpErr, "one byte past its end"),
        (true, false, 255, 2, LocQpOpErr, "across its end"),
    ];
    for (invalidate, wrong_key, start, len, want, what) in cases {
        assert_eq!(case(invalidate, wrong_key, start, len), want, "{what}");
    }
    settle(&p);
}

on_both_topologies! {
    fn a_deregistered_region_is_refused_to_the_qps_that_used_it_before(topology) {
                // The requester's side: a gather entry with the lkey of a region it used.
        let (p, _f, a, b, ca, _cb, qa, _qb) = deterministic_rc_pair_on(topology, Conn::default());
        let rb = b.mem(64, ALL_ACCESS);
        let Mem { buf, mr, lkey, .. } = a.mem(64, ALL_ACCESS);
        let sg = [Sge { addr: buf.addr(), length: 8, lkey }];
        assert_eq!(write_through(&qa, &ca, 1, &sg, rb.addr(0), rb.rkey).1, WcStatus::Success);
        assert!(a.hca.deregister_mr(mr).is_ok());
        assert_eq!(
            write_through(&qa, &ca, 2, &sg, rb.addr(0), rb.rkey),
            (2, WcStatus::LocProtErr, WcOpcode::RdmaWrite)
        );

        // The responder's side: an RDMA write with the rkey of a region it served.
        let (_f, a, b, ca, _cb, qa, _qb) = rc_pair_on(&p, topology, Conn::default());
        let la = a.mem(64, ALL_ACCESS);
        let Mem { buf, mr, rkey, .. } = b.mem(64, ALL_ACCESS);
        let sg = [la.sge(0, 8)];
        assert_eq!(write_through(&qa, &ca, 1, &sg, buf.addr(), rkey).1, WcStatus::Success);
        assert!(b.hca.deregister_mr(mr).is_ok());
        la.buf.write(0, b"too late").unwrap();
        assert_eq!(
            write_through(&qa, &ca, 2, &sg, buf.addr(), rkey),
            (2, WcStatus::RemAccessErr, WcOpcode::RdmaWrite)
        );
        assert_ne!(&buf.to_vec()[..8], b"too late");
        settle(&p);
    }
}
