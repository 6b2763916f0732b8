//! End to end: the WinVerbs driver core on the host model above two soft HCAs. Devices are
//! opened by GUID and PD/MR/CQ/QP created through IOCTL bytes (with the UVP's vendor bytes);
//! QPs go to RTS through the asynchronous QP_MODIFY path; the data path runs through the UVP;
//! completions are waited for through a parked CQ_NOTIFY that the device's DPC completes.
//! It runs twice: with the core calling the soft HCAs directly, and through their C verbs
//! tables (`CiVerbs` over each soft HCA's C face), as winverbs.sys reaches a controller.

use std::sync::Arc;
use std::time::Duration;

use wv_abi::consts::*;
use wv_abi::ioctl::*;
use wv_abi::{
    NtStatus, WV_IO_ID, WV_IO_MEMORY_KEYS, WV_IO_MEMORY_REGISTER, WV_IO_QP_ATTRIBUTES,
    WV_IO_QP_CREATE, read_prefix,
};
use wv_core::{Driver, DriverConfig};
use wv_hal::{FilterDriver, QpState, Verbs};
use wv_host::{File, HostPlatform, Io, IoManager, IoStatus};
use wv_softhca::abi::{self, CqResp, OpenCaResp, QpResp};
use wv_softhca::*;
use zerocopy::IntoBytes;

#[track_caller]
fn ok(st: &IoStatus) {
    assert_eq!(NtStatus(st.status), NtStatus::SUCCESS, "{st:?}");
}

#[track_caller]
fn ioctl<D: FilterDriver<HostPlatform>>(
    file: &File<D>,
    code: u32,
    input: &[u8],
    out_len: usize,
) -> IoStatus {
    let io = file.device_io_control(code, input, out_len);
    assert!(!io.pending(), "IOCTL {code:#x} pended");
    io.wait()
}

/// Issues `code` with a `WV_IO_ID` input (`parent`, `data`) that must succeed inline; returns
/// the id of the object it made and the whole output (vendor bytes follow the header).
fn create<D: FilterDriver<HostPlatform>>(
    file: &File<D>,
    code: u32,
    parent: u64,
    data: u32,
    out_len: usize,
) -> (u64, Vec<u8>) {
    let st = ioctl(file, code, WV_IO_ID::new(parent, data).as_bytes(), out_len);
    ok(&st);
    (read_prefix::<WV_IO_ID>(&st.output).unwrap().Id, st.output)
}

/// Parks a CQ_NOTIFY for the next completion of `cq` (it must pend).
#[track_caller]
fn park_notify<D: FilterDriver<HostPlatform>>(file: &File<D>, cq: u64) -> Io {
    let input = WV_IO_ID::new(cq, WV_CQ_NEXT_COMPLETION);
    let io = file.device_io_control(WV_IOCTL_CQ_NOTIFY, input.as_bytes(), 0);
    assert!(io.pending(), "CQ_NOTIFY completed inline");
    io
}

/// One side: a soft HCA opened through the core, with its user-mode provider.
struct Side {
    hca: Arc<SoftHca<HostPlatform>>,
    pool: BufferPool,
    dev: u64,
    pd: u64,
    cq: u64,
    qp: u64,
    ucq: UvpCq,
    uqp: UvpQp,
}

fn side<D: FilterDriver<HostPlatform>>(
    file: &File<D>,
    hca: Arc<SoftHca<HostPlatform>>,
    pool: BufferPool,
) -> Side {
    let guid = hca.guid();
    // DEVICE_OPEN by GUID; the vendor output tells the UVP how to find the device.
    let (dev, out) = create(file, WV_IOCTL_DEVICE_OPEN, guid, 0, 16 + 24);
    let open: OpenCaResp = abi::parse(&out[16..]).unwrap();
    assert_eq!(open.node_guid, guid);
    let uvp = UvpContext::from_open_resp(&out[16..]).unwrap();
    let (pd, _) = create(file, WV_IOCTL_PD_ALLOCATE, dev, 0, 16);
    let (cq, out) = create(file, WV_IOCTL_CQ_CREATE, dev, 64, 16 + 24);
    let ucq = uvp
        .map_cq(&abi::parse::<CqResp>(&out[16..]).unwrap())
        .unwrap();
    let create = WV_IO_QP_CREATE {
        Id: WV_IO_ID::new(pd, 0),
        SendCqId: cq,
        ReceiveCqId: cq,
        SrqId: 0,
        SendDepth: 16,
        SendSge: 2,
        ReceiveDepth: 16,
        ReceiveSge: 2,
        MaxInlineSend: 64,
        InitiatorDepth: 1,
        ResponderResources: 1,
        QpType: 0,
        QpFlags: WV_IO_QP_SIGNAL_SENDS as u8,
        Reserved: 0,
    };
    let st = ioctl(
        file,
        WV_IOCTL_QP_CREATE,
        create.as_bytes(),
        72 + size_of::<QpResp>(),
    );
    ok(&st);
    let qp = read_prefix::<WV_IO_QP_CREATE>(&st.output).unwrap().Id.Id;
    let uqp = uvp
        .map_qp(&abi::parse::<QpResp>(&st.output[72..]).unwrap())
        .unwrap();
    Side {
        hca,
        pool,
        dev,
        pd,
        cq,
        qp,
        ucq,
        uqp,
    }
}

fn reg<D: FilterDriver<HostPlatform>>(
    file: &File<D>,
    s: &Side,
    len: usize,
) -> (DmaBuffer, u32, u32) {
    let buf = s.pool.alloc(len);
    let r = WV_IO_MEMORY_REGISTER {
        Id: s.pd,
        Address: buf.addr(),
        BufferLength: len as u64,
        AccessFlags: WV_ACCESS_LOCAL_WRITE | WV_ACCESS_REMOTE_WRITE | WV_ACCESS_REMOTE_READ,
        Reserved: 0,
    };
    let st = ioctl(file, WV_IOCTL_MEMORY_REGISTER, r.as_bytes(), 8);
    ok(&st);
    let keys: WV_IO_MEMORY_KEYS = read_prefix(&st.output).unwrap();
    (buf, keys.Lkey, u32::from_be(keys.Rkey))
}

/// QP_MODIFY through the core's asynchronous path (a work item); returns once it completed.
fn modify<D: FilterDriver<HostPlatform>>(
    platform: &HostPlatform,
    file: &File<D>,
    attr: &WV_IO_QP_ATTRIBUTES,
) {
    let io = file.device_io_control(WV_IOCTL_QP_MODIFY, attr.as_bytes(), 8);
    platform.run_until_idle();
    let st = io
        .wait_timeout(Duration::from_secs(20))
        .expect("QP_MODIFY never completed");
    ok(&st);
}

/// RESET → INIT → RTR → RTS with rc_pingpong's attributes, towards `peer`'s QP.
fn to_rts<D: FilterDriver<HostPlatform>>(
    platform: &HostPlatform,
    file: &File<D>,
    s: &Side,
    peer: &Side,
) {
    let remote = (peer.uqp.qpn(), peer.hca.gid());
    for (state, peer) in [
        (QpState::Init, None),
        (QpState::Rtr, Some(remote)),
        (QpState::Rts, None),
    ] {
        modify(
            platform,
            file,
            &WV_IO_QP_ATTRIBUTES::rc_step(s.qp, state as u8, peer),
        );
    }
    assert_eq!(s.uqp.state(), QpState::Rts);
}

type Hca = SoftHca<HostPlatform>;

#[test]
fn core_on_two_soft_hcas_moves_bytes_and_completes_parked_notifies() {
    run(|h: &Arc<Hca>| (h.clone(), ()));
}

#[test]
fn core_through_the_c_verbs_tables_moves_bytes_and_completes_parked_notifies() {
    run(|h: &Arc<Hca>| {
        let table = h.c_interface().expect("the soft HCA's C face");
        let lower = table.open().expect("a table the adapter accepts");
        (lower, table)
    });
}

/// The scenario, with `lower` giving the driver its view of a soft HCA (and what must outlive
/// the driver's use of it).
fn run<V: Verbs, Keep>(lower: impl Fn(&Arc<Hca>) -> (V, Keep)) {
    let platform = HostPlatform::deterministic();
    let fabric = Fabric::new();
    let pools = [BufferPool::new(), BufferPool::new()];
    let hcas: Vec<_> = pools
        .iter()
        .map(|pool| {
            SoftHca::new(
                Arc::new(platform.clone()),
                DeviceConfig::new("e2e", crate::common::mac()),
                ClientMemory::pool(pool.clone()),
            )
        })
        .collect();
    for h in &hcas {
        fabric.attach(h);
    }
    let driver = Arc::new(Driver::<HostPlatform, V>::new(
        platform.clone(),
        DriverConfig::default(),
    ));
    let io = IoManager::new(platform.clone(), driver);
    let mut keep = Vec::new();
    for h in &hcas {
        let (v, k) = lower(h);
        keep.push(k);
        io.arrive(v).expect("arrival");
    }
    let file = io.open().expect("CreateFile");
    let a = side(&file, hcas[0].clone(), pools[0].clone());
    let b = side(&file, hcas[1].clone(), pools[1].clone());
    to_rts(&platform, &file, &a, &b);
    to_rts(&platform, &file, &b, &a);
    let (la, lka, _) = reg(&file, &a, 4096);
    let (lb, lkb, rkb) = reg(&file, &b, 4096);

    // SEND: B parks a CQ_NOTIFY, then arms its CQ from user mode; A sends; B's DPC completes it.
    la.write(0, b"through the core").unwrap();
    b.uqp
        .post_recv(&RecvWr {
            wr_id: 1,
            sg_list: &[Sge {
                addr: lb.addr(),
                length: 64,
                lkey: lkb,
            }],
        })
        .unwrap();
    let notify = park_notify(&file, b.cq);
    assert!(!b.ucq.arm(false));
    let sge = [Sge {
        addr: la.addr(),
        length: 16,
        lkey: lka,
    }];
    let mut wr = SendWr::new(10, WrOpcode::Send);
    wr.sg_list = &sge;
    a.uqp.post_send(&wr).unwrap();
    assert!(!notify.is_complete(), "the DPC has not run yet");
    platform.run_until_idle();
    let st = notify
        .wait_timeout(Duration::from_secs(20))
        .expect("CQ_NOTIFY never completed");
    ok(&st);
    let mut wc = [WorkCompletion::default(); 4];
    assert_eq!(b.ucq.poll(&mut wc), 1);
    assert_eq!(
        (wc[0].wr_id, wc[0].status, wc[0].byte_len),
        (1, WcStatus::Success, 16)
    );
    assert_eq!(&lb.to_vec()[..16], b"through the core");
    assert_eq!(a.ucq.poll(&mut wc), 1);

    // RDMA WRITE then RDMA READ back; A waits on a parked notify for the read.
    la.write(100, &[7u8; 200]).unwrap();
    // An `op` (`id`) of 200 bytes between A's buffer at `at` and B's at 1000.
    let post_rdma = |id: u64, op: WrOpcode, at: u64| {
        let sge = [Sge {
            addr: la.addr() + at,
            length: 200,
            lkey: lka,
        }];
        let mut wr = SendWr::new(id, op);
        wr.sg_list = &sge;
        wr.remote_addr = lb.addr() + 1000;
        wr.rkey = rkb;
        a.uqp.post_send(&wr).unwrap();
    };
    post_rdma(11, WrOpcode::RdmaWrite, 100);
    assert_eq!(a.ucq.poll(&mut wc), 1);
    assert!(lb.to_vec()[1000..1200].iter().all(|&x| x == 7));
    let notify = park_notify(&file, a.cq);
    a.ucq.arm(false);
    post_rdma(12, WrOpcode::RdmaRead, 2000);
    platform.run_until_idle();
    ok(&notify
        .wait_timeout(Duration::from_secs(20))
        .expect("CQ_NOTIFY never completed"));
    assert_eq!(a.ucq.poll(&mut wc), 1);
    assert_eq!(
        (wc[0].wr_id, wc[0].opcode, wc[0].byte_len),
        (12, WcOpcode::RdmaRead, 200)
    );
    assert!(la.to_vec()[2000..2200].iter().all(|&x| x == 7));

    let _ = (a.dev, b.dev);
    drop(file);
    platform.run_until_idle();
    for h in &hcas {
        io.remove(h.guid());
    }
    drop(keep);
    assert_eq!(platform.verifier().violations(), Vec::<String>::new());
}
