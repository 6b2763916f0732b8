//! Protection-domain isolation of memory keys, with every object made through the soft HCA's
//! C verbs table (`CiVerbs` over its C face, as winverbs.sys reaches a controller) and the
//! data path run by the user-mode provider. A key works only for QPs of the protection domain
//! its region or window was made in:
//! - a gather or scatter entry naming a region of another PD is a local protection error on
//!   the QP that used it (`LOC_PROT_ERR`; on the responder the requester sees `REM_OP_ERR`);
//! - an RDMA or atomic request naming an rkey of another PD than the target QP's is a remote
//!   access error (`REM_ACCESS_ERR`), and both RC QPs go to ERR (class C);
//! - `LOCAL_INV` of another PD's key fails (`LOC_QP_OP_ERR`), `SEND_WITH_INV` of one fails
//!   the receive and the request (`REM_INV_REQ_ERR`, class J); either way the key stays valid.
//!
//! "Another PD" is the PD of another open of the same device (another process) or a second
//! PD of the same open. Each test runs between two QPs of one device and across two devices.

use std::sync::Arc;

use crate::common::{
    CqSink, Log, Topology, attrs, create_cq, create_qp, mac, open_ca_logged, qp_create, statuses,
};
use wv_abi::consts::*;
use wv_ci::{CiExport, CiVerbs};
use wv_hal::*;
use wv_host::HostPlatform;
use wv_softhca::abi::{self, MwCmd, MwResp, SOFTHCA_ABI_MAGIC};
use wv_softhca::*;
use zerocopy::IntoBytes;

type Hca = SoftHca<HostPlatform>;
type Ca = <CiVerbs as Verbs>::Ca;
type Pd = <CiVerbs as Verbs>::Pd;
type Mr = <CiVerbs as Verbs>::Mr;
type Mw = <CiVerbs as Verbs>::Mw;
type CiCq = <CiVerbs as Verbs>::Cq;
type CiQp = <CiVerbs as Verbs>::Qp;

const ALL: u32 = WV_ACCESS_LOCAL_WRITE
    | WV_ACCESS_REMOTE_WRITE
    | WV_ACCESS_REMOTE_READ
    | WV_ACCESS_REMOTE_ATOMIC
    | WV_ACCESS_MW_BIND;
const REMOTE: u32 = WV_ACCESS_REMOTE_WRITE | WV_ACCESS_REMOTE_READ | WV_ACCESS_REMOTE_ATOMIC;
/// What every region holds before a test: a foreign region must still hold it afterwards.
const FILL: u8 = 0x5A;
const LEN: usize = 256;

/// A soft HCA and the driver's view of it through its C verbs table.
struct Device {
    hca: Arc<Hca>,
    pool: BufferPool,
    verbs: CiVerbs,
    // Declared last: the table outlives the view opened on it.
    _table: CiExport<Hca>,
}

impl Device {
    fn new(p: &HostPlatform, fabric: &Arc<Fabric>) -> Arc<Device> {
        let pool = BufferPool::new();
        let hca = SoftHca::new(
            Arc::new(p.clone()),
            DeviceConfig::new("xpd", mac()),
            ClientMemory::pool(pool.clone()),
        );
        fabric.attach(&hca);
        let table = hca.c_interface().expect("the soft HCA's C face");
        let verbs = table.open().expect("a table the adapter accepts");
        Arc::new(Device {
            hca,
            pool,
            verbs,
            _table: table,
        })
    }
}

/// A registered buffer.
struct Mem {
    buf: DmaBuffer,
    _mr: Mr,
    lkey: u32,
    rkey: u32,
}

impl Mem {
    fn addr(&self, off: usize) -> u64 {
        self.buf.addr() + off as u64
    }
    fn sge(&self, off: usize, len: u32) -> Sge {
        Sge {
            addr: self.addr(off),
            length: len,
            lkey: self.lkey,
        }
    }
    fn untouched(&self) -> bool {
        self.buf.to_vec().iter().all(|&b| b == FILL)
    }
}

/// One open of a device (a process): its PD, a second PD, and an RC QP on its own CQ.
struct Client {
    dev: Arc<Device>,
    _ca: Ca,
    pd: Pd,
    pd2: Pd,
    _cq: CiCq,
    ucq: UvpCq,
    qp: CiQp,
    uqp: UvpQp,
    _sinks: (KArc<Log<CaEvent>>, KArc<CqSink>, KArc<Log<QpEvent>>),
}

impl Client {
    fn new(dev: &Arc<Device>) -> Client {
        let v = &dev.verbs;
        let (ca, ca_events, out) = open_ca_logged(v);
        let uvp = UvpContext::from_open_resp(&out).unwrap();
        let pd = v.allocate_pd(&ca, &mut Umv::none()).unwrap();
        let pd2 = v.allocate_pd(&ca, &mut Umv::none()).unwrap();
        let cq_sink = KArc::new(CqSink::default());
        let (cq, r) = create_cq(v, &ca, 64, cq_sink.clone());
        let ucq = uvp.map_cq(&r).unwrap();
        let qp_events = KArc::new(Log::default());
        let create = qp_create(QpType::Rc, &cq, &cq, None, 16, 2, 64, true);
        let (qp, _, r) = create_qp(v, &pd, &create, qp_events.clone());
        let uqp = uvp.map_qp(&r).unwrap();
        Client {
            dev: dev.clone(),
            _ca: ca,
            pd,
            pd2,
            _cq: cq,
            ucq,
            qp,
            uqp,
            _sinks: (ca_events, cq_sink, qp_events),
        }
    }

    /// A region of `LEN` bytes filled with `FILL`, with every right, in `pd`.
    fn mem_in(&self, pd: &Pd) -> Mem {
        let buf = self.dev.pool.alloc(LEN);
        buf.write(0, &[FILL; LEN]).unwrap();
        let region = MemoryRegion {
            address: buf.addr(),
            length: LEN as u64,
            access: ALL,
        };
        let (mr, keys) = self.dev.verbs.register_mr(pd, &region).unwrap();
        Mem {
            buf,
            _mr: mr,
            lkey: keys.lkey,
            rkey: u32::from_be(keys.rkey),
        }
    }

    fn mem(&self) -> Mem {
        self.mem_in(&self.pd)
    }

    /// A window of `kind` in the client's PD: (window, rkey).
    fn window(&self, kind: MwType) -> (Mw, u32) {
        let cmd = MwCmd {
            magic: SOFTHCA_ABI_MAGIC,
            mw_type: kind as u32,
        };
        let mut buf = [0u8; 16];
        buf[..8].copy_from_slice(cmd.as_bytes());
        let (mw, rkey) = self
            .dev
            .verbs
            .create_mw(&self.pd, &mut Umv::new(0, 8, 8, &mut buf))
            .unwrap();
        let r: MwResp = abi::parse(&buf).unwrap();
        assert_eq!(r.mw_type, kind as u32);
        (mw, u32::from_be(rkey))
    }

    /// Binds a window of `kind` over all of `region` with remote rights through this client's
    /// QP (type 1 by the bind verb, type 2 by a `BIND_MW` request, which ties it to the QP);
    /// returns the window and its bound key.
    fn bound_window(&self, kind: MwType, region: &Mem) -> (Mw, u32) {
        let (mw, key0) = self.window(kind);
        let info = MwBindInfo {
            mr_lkey: region.lkey,
            addr: region.addr(0),
            length: LEN as u64,
            access: REMOTE,
        };
        let key = match kind {
            MwType::Type1 => self
                .uqp
                .bind_mw(1, send_flags::SIGNALED, key0, &info)
                .unwrap(),
            MwType::Type2 => {
                let mut wr = SendWr::new(1, WrOpcode::BindMw);
                wr.send_flags = send_flags::SIGNALED;
                wr.bind = Some(MwBind {
                    mw_rkey: key0,
                    new_rkey: inc_rkey(key0),
                    mr_lkey: info.mr_lkey,
                    addr: info.addr,
                    length: info.length,
                    access: info.access,
                });
                self.uqp.post_send(&wr).unwrap();
                inc_rkey(key0)
            }
        };
        assert_eq!(self.one(), (1, WcStatus::Success, WcOpcode::BindMw));
        (mw, key)
    }

    fn modify(&self, m: &QpModify) {
        self.dev
            .verbs
            .modify_qp(&self.qp, m, &mut [0u8; 8])
            .unwrap();
    }

    /// Moves the QP to RTS, connected to `peer`'s QP, with remote read, write and atomics.
    fn connect_to(&self, peer: &Client) {
        let mut a = attrs(crate::common::INIT_RC);
        a.access = REMOTE;
        self.modify(&a.to(QpState::Init));
        a.options = crate::common::RTR_RC;
        a.av = AddressVector {
            grh_valid: true,
            dgid: peer.dev.hca.gid(),
            port: 1,
            hop_limit: 1,
            ..AddressVector::default()
        };
        a.dest_qpn = peer.uqp.qpn();
        self.modify(&a.to(QpState::Rtr));
        a.options = crate::common::RTS_RC;
        self.modify(&a.to(QpState::Rts));
        assert_eq!(self.state(), QpState::Rts);
    }

    fn state(&self) -> QpState {
        self.dev.verbs.query_qp(&self.qp).unwrap().state
    }

    fn completions(&self) -> Vec<WorkCompletion> {
        let mut wc = [WorkCompletion::default(); 16];
        let n = self.ucq.poll(&mut wc);
        wc[..n].to_vec()
    }

    /// The one completion there is: (wr_id, status, opcode).
    fn one(&self) -> (u64, WcStatus, WcOpcode) {
        let w = self.completions();
        assert_eq!(w.len(), 1, "{w:?}");
        (w[0].wr_id, w[0].status, w[0].opcode)
    }
}

/// Two connected clients `a` and `b` (on one device or on two), and on each of their devices
/// another open of it, `ia` beside `a` and `ib` beside `b`, whose QPs are connected to each
/// other: the owners of the foreign keys, able to show that those keys still work.
struct World {
    p: HostPlatform,
    _fabric: Arc<Fabric>,
    a: Client,
    b: Client,
    ia: Client,
    ib: Client,
}

fn world(topology: Topology) -> World {
    let p = HostPlatform::deterministic();
    let fabric = Fabric::new();
    let d0 = Device::new(&p, &fabric);
    let d1 = match topology {
        Topology::OneDevice => d0.clone(),
        Topology::TwoDevices => Device::new(&p, &fabric),
    };
    let (a, b, ia, ib) = (
        Client::new(&d0),
        Client::new(&d1),
        Client::new(&d0),
        Client::new(&d1),
    );
    a.connect_to(&b);
    b.connect_to(&a);
    ia.connect_to(&ib);
    ib.connect_to(&ia);
    World {
        p,
        _fabric: fabric,
        a,
        b,
        ia,
        ib,
    }
}

impl World {
    fn settle(&self) {
        crate::common::settle(&self.p);
    }

    /// `c` invalidates `key` by a signaled LOCAL_INV (`id`): the one completion it makes.
    fn invalidate(&self, c: &Client, id: u64, key: u32) -> (u64, WcStatus, WcOpcode) {
        let mut inv = SendWr::new(id, WrOpcode::LocalInv);
        inv.send_flags = send_flags::SIGNALED;
        inv.imm_or_inv = key;
        c.uqp.post_send(&inv).unwrap();
        self.p.run_until_idle();
        c.one()
    }
}

/// The key a peer is handed for `target`: its region's rkey, or (`window`) the key of a type 2
/// window `owner` binds over it, with the window.
fn key_over(owner: &Client, target: &Mem, window: bool) -> (Option<Mw>, u32) {
    if window {
        let (mw, key) = owner.bound_window(MwType::Type2, target);
        (Some(mw), key)
    } else {
        (None, target.rkey)
    }
}

/// Which foreign PD a key comes from.
#[derive(Clone, Copy, Debug)]
enum Foreign {
    /// A second PD of the same open of the device.
    SecondPd,
    /// The PD of another open of the device (another process).
    OtherOpen,
}

const FOREIGN: [Foreign; 2] = [Foreign::SecondPd, Foreign::OtherOpen];

/// A region in a PD other than `owner`'s, on `owner`'s device; `neighbour` is the other open
/// of that device.
fn foreign_mem(owner: &Client, neighbour: &Client, f: Foreign) -> Mem {
    match f {
        Foreign::SecondPd => owner.mem_in(&owner.pd2),
        Foreign::OtherOpen => neighbour.mem(),
    }
}

/// A signaled request `op` (`id`) of the bytes `sg` names, at `addr` under `rkey` for an RDMA
/// or atomic one; an atomic adds, or compares with, `compare_add` (and swaps in 0).
fn remote_wr(
    id: u64,
    op: WrOpcode,
    sg: &[Sge],
    addr: u64,
    rkey: u32,
    compare_add: u64,
) -> SendWr<'_> {
    let mut wr = SendWr::new(id, op);
    wr.send_flags = send_flags::SIGNALED;
    wr.sg_list = sg;
    wr.remote_addr = addr;
    wr.rkey = rkey;
    if matches!(op, WrOpcode::AtomicCmpAndSwp | WrOpcode::AtomicFetchAndAdd) {
        wr.atomic = Some(AtomicArgs {
            compare_add,
            swap: 0,
        });
    }
    wr
}

/// An RDMA write of 8 bytes of `src` through `key` at `addr` by `qp`'s client.
fn write_through(c: &Client, src: &Mem, addr: u64, key: u32) -> (u64, WcStatus, WcOpcode) {
    let sg = [src.sge(0, 8)];
    c.uqp
        .post_send(&remote_wr(77, WrOpcode::RdmaWrite, &sg, addr, key, 0))
        .unwrap();
    c.one()
}

/// `key` (of a region or window over `target`, owned by `ib`) still works: `ia` writes through
/// it and the bytes land.
fn still_valid(w: &World, target: &Mem, key: u32) {
    let src = w.ia.mem();
    src.buf.write(0, b"stillok!").unwrap();
    assert_eq!(
        write_through(&w.ia, &src, target.addr(0), key),
        (77, WcStatus::Success, WcOpcode::RdmaWrite),
        "the key was invalidated from another PD"
    );
    assert_eq!(&target.buf.to_vec()[..8], b"stillok!");
}

on_both_topologies! {
    fn a_gather_or_scatter_entry_with_another_pds_lkey_is_a_local_protection_error(topology) {
        for f in FOREIGN {
            for op in [WrOpcode::Send, WrOpcode::RdmaWrite, WrOpcode::RdmaRead, WrOpcode::AtomicFetchAndAdd] {
                let w = world(topology);
                let (a, b) = (&w.a, &w.b);
                let stolen = foreign_mem(a, &w.ia, f);
                let inbox = b.mem();
                b.uqp.post_recv(&RecvWr { wr_id: 9, sg_list: &[inbox.sge(0, 64)] }).unwrap();
                // The entry lies within the foreign region: only its PD is wrong.
                let sg = [stolen.sge(0, if op == WrOpcode::AtomicFetchAndAdd { 8 } else { 16 })];
                a.uqp.post_send(&remote_wr(1, op, &sg, inbox.addr(64), inbox.rkey, 1)).unwrap();
                w.p.run_until_idle();
                assert_eq!(
                    statuses(&a.completions()),
                    vec![(1, WcStatus::LocProtErr)],
                    "{f:?} {op:?}"
                );
                assert_eq!(a.state(), QpState::Error, "{f:?} {op:?}");
                assert!(stolen.untouched(), "{f:?} {op:?}: the foreign region changed");
                assert!(inbox.untouched(), "{f:?} {op:?}: the peer's region changed");
                assert!(b.completions().is_empty(), "{f:?} {op:?}: the peer saw a message");
            }
        }
        world(topology).settle();
    }

    fn a_receive_with_another_pds_lkey_is_a_local_protection_error(topology) {
        for f in FOREIGN {
            let w = world(topology);
            let (a, b) = (&w.a, &w.b);
            let stolen = foreign_mem(b, &w.ib, f);
            b.uqp.post_recv(&RecvWr { wr_id: 9, sg_list: &[stolen.sge(0, 64)] }).unwrap();
            let src = a.mem();
            a.uqp.post_send(&crate::common::send_wr(1, WrOpcode::Send, &[src.sge(0, 16)])).unwrap();
            w.p.run_until_idle();
            assert_eq!(
                statuses(&b.completions()),
                vec![(9, WcStatus::LocProtErr)],
                "{f:?}"
            );
            assert_eq!(a.one(), (1, WcStatus::RemOpErr, WcOpcode::Send), "{f:?}");
            assert!(stolen.untouched(), "{f:?}: the foreign region changed");
            assert_eq!(b.state(), QpState::Error, "{f:?}");
        }
        world(topology).settle();
    }

    fn rdma_and_atomics_with_an_rkey_of_another_pd_than_the_target_qps_are_remote_access_errors(topology) {
        let ops = [
            WrOpcode::RdmaWrite,
            WrOpcode::RdmaRead,
            WrOpcode::AtomicCmpAndSwp,
            WrOpcode::AtomicFetchAndAdd,
        ];
        for f in FOREIGN {
            for op in ops {
                let w = world(topology);
                let (a, b) = (&w.a, &w.b);
                let target = foreign_mem(b, &w.ib, f);
                let local = a.mem();
                let sg = [local.sge(0, 8)];
                // A compare that matches: only the PD stops the swap.
                let fill = u64::from_ne_bytes([FILL; 8]);
                a.uqp.post_send(&remote_wr(1, op, &sg, target.addr(8), target.rkey, fill)).unwrap();
                w.p.run_until_idle();
                assert_eq!(a.one().1, WcStatus::RemAccessErr, "{f:?} {op:?}");
                assert_eq!(a.state(), QpState::Error, "{f:?} {op:?}");
                assert_eq!(b.state(), QpState::Error, "{f:?} {op:?}: class C on the responder");
                assert!(target.untouched(), "{f:?} {op:?}: the foreign region changed");
                assert!(local.untouched(), "{f:?} {op:?}: bytes came back");
            }
        }
        // A type 1 window (bound to no QP) of another open, over that open's region.
        for op in ops {
            let w = world(topology);
            let (a, b) = (&w.a, &w.b);
            let target = w.ib.mem();
            let (_mw, key) = w.ib.bound_window(MwType::Type1, &target);
            let local = a.mem();
            let sg = [local.sge(0, 8)];
            let fill = u64::from_ne_bytes([FILL; 8]);
            a.uqp.post_send(&remote_wr(1, op, &sg, target.addr(8), key, fill)).unwrap();
            w.p.run_until_idle();
            assert_eq!(a.one().1, WcStatus::RemAccessErr, "window {op:?}");
            assert_eq!(b.state(), QpState::Error, "window {op:?}");
            assert!(target.untouched(), "window {op:?}: the foreign region changed");
            // The window serves its own PD's QP.
            still_valid(&w, &target, key);
        }
        world(topology).settle();
    }

    fn local_invalidate_of_another_pds_key_is_refused_and_the_key_stays_valid(topology) {
        // A region of the other open; a type 2 window it bound to its QP.
        for window in [false, true] {
            let w = world(topology);
            let target = w.ib.mem();
            let (_mw, key) = key_over(&w.ib, &target, window);
            assert_eq!(
                w.invalidate(&w.b, 2, key),
                (2, WcStatus::LocQpOpErr, WcOpcode::LocalInv),
                "window: {window}"
            );
            still_valid(&w, &target, key);
        }
        // A region of a second PD of the same open: its key still serves a QP of that PD.
        let w = world(topology);
        let target = w.b.mem_in(&w.b.pd2);
        let refused = w.invalidate(&w.b, 2, target.lkey);
        assert_eq!(refused, (2, WcStatus::LocQpOpErr, WcOpcode::LocalInv));
        w.settle();
    }

    fn send_with_invalidate_of_another_pds_key_fails_the_receive_and_the_key_stays_valid(topology) {
        for window in [false, true] {
            let w = world(topology);
            let (a, b) = (&w.a, &w.b);
            let target = w.ib.mem();
            let (_mw, key) = key_over(&w.ib, &target, window);
            let inbox = b.mem();
            b.uqp.post_recv(&RecvWr { wr_id: 9, sg_list: &[inbox.sge(0, 64)] }).unwrap();
            let src = a.mem();
            let sg = [src.sge(0, 16)];
            let mut wr = crate::common::send_wr(1, WrOpcode::SendWithInv, &sg);
            wr.imm_or_inv = key;
            a.uqp.post_send(&wr).unwrap();
            w.p.run_until_idle();
            assert_eq!(
                statuses(&b.completions()),
                vec![(9, WcStatus::RemInvReqErr)],
                "window: {window}"
            );
            assert_eq!(a.one().1, WcStatus::RemInvReqErr, "window: {window}");
            assert_eq!(a.state(), QpState::Error, "window: {window}");
            assert_eq!(b.state(), QpState::Error, "window: {window}");
            still_valid(&w, &target, key);
        }
        world(topology).settle();
    }

    fn keys_of_the_qps_own_pd_work_for_the_same_requests(topology) {
        // The control: the requests above succeed with keys of the right PD, so the errors
        // are the PD's doing.
        let w = world(topology);
        let (a, b) = (&w.a, &w.b);
        let (src, dst) = (a.mem(), b.mem());
        for (id, op) in [
            (1, WrOpcode::RdmaWrite),
            (2, WrOpcode::RdmaRead),
            (3, WrOpcode::AtomicFetchAndAdd),
        ] {
            let sg = [src.sge(16, 8)];
            a.uqp.post_send(&remote_wr(id, op, &sg, dst.addr(8), dst.rkey, 1)).unwrap();
            w.p.run_until_idle();
            assert_eq!(a.one().1, WcStatus::Success, "{op:?}");
        }
        let victim = b.mem();
        let inbox = b.mem();
        b.uqp.post_recv(&RecvWr { wr_id: 9, sg_list: &[inbox.sge(0, 64)] }).unwrap();
        let sg = [src.sge(0, 16)];
        let mut wr = crate::common::send_wr(4, WrOpcode::SendWithInv, &sg);
        wr.imm_or_inv = victim.rkey;
        a.uqp.post_send(&wr).unwrap();
        w.p.run_until_idle();
        assert_eq!(a.one().1, WcStatus::Success);
        assert_eq!(b.one().1, WcStatus::Success);
        let other = b.mem();
        assert_eq!(w.invalidate(b, 5, other.lkey), (5, WcStatus::Success, WcOpcode::LocalInv));
        // Both keys are gone now.
        let stale = write_through(a, &src, victim.addr(0), victim.rkey);
        assert_eq!(stale.1, WcStatus::RemAccessErr);
        assert!(victim.untouched());
        w.settle();
    }
}
