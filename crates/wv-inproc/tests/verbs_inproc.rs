//! The verbs API over the in-process stack: traffic between two soft HCAs through the real
//! driver core, completion events, SRQ, UD with an address handle, and the NTSTATUS every
//! failure carries — alone and mixed with raw IOCTLs on the same handle.

use std::sync::Arc;
use std::time::Duration;

use wv_abi::ioctl::*;
use wv_abi::{NtStatus, WV_IO_ID};
use wv_client::raw::{IoStatus, RawFile, RawIo};
use wv_client::verbs::*;
use wv_inproc::{File, QpModifyMode, Stack, StackConfig, open_inproc};
use zerocopy::IntoBytes;

#[allow(dead_code)]
#[path = "../../../tests/support/rc_side.rs"]
mod rc_side;
use rc_side::{ACCESS, connect as connect_rc, connect_as as connect_rc_as};

/// A hang guard only.
const GUARD: Duration = Duration::from_secs(20);
const QKEY: u32 = 0x1111_1111;

type F = File;

type Side = rc_side::Side<F>;

fn side(p: &Provider<F>, guid: u64, qp_type: QpType, srq: Option<&Srq<F>>) -> Side {
    rc_side::side_of(p, guid, qp_type, srq)
}

fn gid(dev: &Device<F>) -> Gid {
    dev.query_gids(1).unwrap()[0]
}

/// Polls until `n` completions arrived (the soft HCA completes in the posting thread, so this
/// is quick; the bound is a hang guard).
fn poll_n(cq: &Cq<F>, n: usize) -> Vec<WorkCompletion> {
    let mut out = Vec::new();
    let mut wc = [WorkCompletion::default(); 8];
    for _ in 0..1_000_000 {
        let got = cq.poll(&mut wc);
        out.extend_from_slice(&wc[..got]);
        if out.len() >= n {
            return out;
        }
        std::thread::yield_now();
    }
    panic!("only {} of {n} completions", out.len());
}

/// Posts receive `wr_id` on `side`'s QP into `len` bytes of its MR at `offset`.
fn recv_into(side: &Side, wr_id: u64, offset: usize, len: u32) {
    let sge = side.mr.sge(offset, len);
    side.qp
        .post_recv(&RecvWr {
            wr_id,
            sg_list: &[sge],
        })
        .unwrap();
}

fn send_wr<'a>(id: u64, op: WrOpcode, sges: &'a [Sge]) -> SendWr<'a> {
    let mut wr = SendWr::new(id, op);
    wr.sg_list = sges;
    wr.send_flags = send_flags::SIGNALED;
    wr
}

/// A stack with one soft HCA.
fn one_device() -> Stack {
    Stack::new(StackConfig {
        devices: 1,
        ..StackConfig::default()
    })
}

/// Posts RDMA `op` `id` on `side`'s QP between `(offset, len)` of its MR and the remote
/// `(address, rkey)`; returns its completion.
fn rdma(
    side: &Side,
    id: u64,
    op: WrOpcode,
    local: (usize, u32),
    remote: (u64, u32),
) -> WorkCompletion {
    let sge = [side.mr.sge(local.0, local.1)];
    let mut wr = send_wr(id, op, &sge);
    (wr.remote_addr, wr.rkey) = remote;
    side.qp.post_send(&wr).unwrap();
    poll_n(&side.cq, 1)[0]
}

fn rc_pair(stack: &Stack) -> (Provider<F>, Side, Side) {
    rc_pair_with(stack, connect_rc)
}

/// An RC QP on each of the two devices, connected by `connect`.
fn rc_pair_with(stack: &Stack, connect: fn(&Side, &Side)) -> (Provider<F>, Side, Side) {
    let p = open_inproc(stack).unwrap();
    let guids = p.device_guids().unwrap();
    assert_eq!(guids, stack.device_guids());
    let a = side(&p, guids[0], QpType::Rc, None);
    let b = side(&p, guids[1], QpType::Rc, None);
    connect(&a, &b);
    (p, a, b)
}

/// A UD QP on each of the two devices, both in RTS with [`QKEY`]; the devices' GUIDs.
fn ud_pair(stack: &Stack) -> (Provider<F>, Vec<u64>, Side, Side) {
    let p = open_inproc(stack).unwrap();
    let guids = p.device_guids().unwrap();
    let a = side(&p, guids[0], QpType::Ud, None);
    let b = side(&p, guids[1], QpType::Ud, None);
    for s in [&a, &b] {
        s.qp.modify(&QpAttr::init_ud(1, 0, QKEY)).unwrap();
        s.qp.modify(&QpAttr::rtr_ud()).unwrap();
        s.qp.modify(&QpAttr::rts_ud(0)).unwrap();
    }
    (p, guids, a, b)
}

#[test]
fn rc_send_recv_between_two_devices() {
    for deterministic in [false, true] {
        let stack = Stack::new(StackConfig {
            deterministic,
            ..StackConfig::default()
        });
        let (_p, a, b) = rc_pair(&stack);
        a.buf.write(0, b"hello over the core").unwrap();
        recv_into(&b, 7, 100, 64);
        let sge = [a.mr.sge(0, 19)];
        a.qp.post_send(&send_wr(1, WrOpcode::Send, &sge)).unwrap();
        let wc = poll_n(&b.cq, 1);
        assert_eq!(
            (wc[0].wr_id, wc[0].status, wc[0].opcode, wc[0].byte_len),
            (7, WcStatus::Success, WcOpcode::Recv, 19)
        );
        assert_eq!(wc[0].qp_num, b.qp.qpn());
        let mut got = [0u8; 19];
        b.buf.read(100, &mut got).unwrap();
        assert_eq!(&got, b"hello over the core");
        let wc = poll_n(&a.cq, 1);
        assert_eq!((wc[0].wr_id, wc[0].opcode), (1, WcOpcode::Send));

        // Inline send: the buffer is free at once.
        recv_into(&b, 8, 0, 64);
        let mut wr = send_wr(2, WrOpcode::Send, &[]);
        wr.inline_data = Some(b"inline!");
        a.qp.post_send(&wr).unwrap();
        assert_eq!(poll_n(&b.cq, 1)[0].byte_len, 7);
        assert_eq!(b.buf.to_vec()[..7], *b"inline!");
        poll_n(&a.cq, 1);
        drop((a, b));
        assert_eq!(stack.verifier_violations(), Vec::<String>::new());
    }
}

#[test]
fn rdma_write_and_read() {
    let stack = Stack::new(StackConfig::default());
    let (_p, a, b) = rc_pair(&stack);
    a.buf.fill(0x5A);
    let (addr, rkey) = (b.mr.addr(), b.mr.rkey());
    let wc = rdma(&a, 1, WrOpcode::RdmaWrite, (0, 512), (addr + 1024, rkey));
    assert_eq!(
        (wc.status, wc.opcode),
        (WcStatus::Success, WcOpcode::RdmaWrite)
    );
    // The target polls a byte written by RDMA.
    assert_eq!(b.buf.byte(1024 + 511), Some(0x5A));
    assert_eq!(b.buf.byte(1024 + 512), Some(0));
    assert!(b.buf.to_vec()[1024..1536].iter().all(|&x| x == 0x5A));

    b.buf.write(4000, &[1, 2, 3, 4, 5, 6, 7, 8]).unwrap();
    let wc = rdma(&a, 2, WrOpcode::RdmaRead, (6000, 8), (addr + 4000, rkey));
    assert_eq!(
        (wc.wr_id, wc.opcode, wc.byte_len),
        (2, WcOpcode::RdmaRead, 8)
    );
    let mut got = [0u8; 8];
    a.buf.read(6000, &mut got).unwrap();
    assert_eq!(got, [1, 2, 3, 4, 5, 6, 7, 8]);

    // A bad rkey is a remote access error, and the QP goes to ERR.
    let wc = rdma(&a, 3, WrOpcode::RdmaWrite, (6000, 8), (addr, rkey ^ 0xFF));
    assert_eq!(wc.status, WcStatus::RemAccessErr);
    assert_eq!(a.qp.state(), QpState::Error);
}

#[test]
fn ud_send_through_an_address_handle() {
    let stack = Stack::new(StackConfig::default());
    let (_p, _guids, a, b) = ud_pair(&stack);
    let ah =
        a.pd.create_ah(&AddressVector {
            grh_valid: true,
            dgid: gid(&b.dev),
            hop_limit: 64,
            port: 1,
            ..AddressVector::default()
        })
        .unwrap();
    recv_into(&b, 5, 0, 100 + GRH_BYTES as u32);
    a.buf.write(0, b"datagram").unwrap();
    let sge = [a.mr.sge(0, 8)];
    let mut wr = send_wr(1, WrOpcode::Send, &sge);
    wr.ud = Some(ah.ud(b.qp.qpn(), QKEY));
    a.qp.post_send(&wr).unwrap();
    let wc = poll_n(&b.cq, 1);
    assert_eq!(wc[0].status, WcStatus::Success);
    assert_eq!(wc[0].src_qp, a.qp.qpn());
    assert_ne!(wc[0].wc_flags & wc_flags::GRH, 0);
    assert_eq!(wc[0].byte_len as usize, 8 + GRH_BYTES);
    assert_eq!(b.buf.to_vec()[GRH_BYTES..GRH_BYTES + 8], *b"datagram");
    poll_n(&a.cq, 1);

    // A UD send without a destination is refused by the UVP (errno-style).
    let wr = send_wr(2, WrOpcode::Send, &sge);
    assert_eq!(a.qp.post_send(&wr).map_err(PostError::errno), Err(22));
    // AH_CREATE of a multicast/absent GRH fails in the soft HCA.
    let e = a.pd.create_ah(&AddressVector::default()).unwrap_err();
    assert_eq!((e.op, e.status), ("AH_CREATE", NtStatus::UNSUCCESSFUL));
}

#[test]
fn ud_multicast_attach_and_detach() {
    let stack = Stack::new(StackConfig::default());
    let (p, guids, a, b) = ud_pair(&stack);
    let mut mgid = [0u8; 16];
    mgid[0] = 0xFF;
    mgid[1] = 0x0E;
    mgid[15] = 0x42;
    b.qp.attach_mcast(&mgid, 0xC001).unwrap();
    recv_into(&b, 1, 0, 64 + GRH_BYTES as u32);
    a.buf.write(0, b"to the group").unwrap();
    let sge = [a.mr.sge(0, 12)];
    let mut wr = send_wr(1, WrOpcode::Send, &sge);
    wr.ud = Some(UdAddress {
        dgid: mgid,
        dlid: 0xC001,
        grh: true,
        remote_qpn: 0xFF_FFFF,
        remote_qkey: QKEY,
        ..UdAddress::default()
    });
    a.qp.post_send(&wr).unwrap();
    let wc = poll_n(&b.cq, 1);
    assert_eq!(
        (wc[0].status, wc[0].byte_len as usize),
        (WcStatus::Success, 12 + GRH_BYTES)
    );
    assert_eq!(b.buf.to_vec()[GRH_BYTES..GRH_BYTES + 12], *b"to the group");
    b.qp.detach_mcast(&mgid, 0xC001).unwrap();
    assert_eq!(
        b.qp.detach_mcast(&mgid, 0xC001).unwrap_err(),
        VerbsError::new("QP_DETACH", NtStatus::NOT_FOUND)
    );
    // Only UD QPs join groups (the soft HCA refuses an RC QP).
    let rc = side(&p, guids[0], QpType::Rc, None);
    assert_eq!(
        rc.qp.attach_mcast(&mgid, 0xC001).unwrap_err(),
        VerbsError::new("QP_ATTACH", NtStatus::UNSUCCESSFUL)
    );
}

#[test]
fn srq_receives_and_limit_event() {
    let stack = Stack::new(StackConfig::default());
    let p = open_inproc(&stack).unwrap();
    let guids = p.device_guids().unwrap();
    let a = side(&p, guids[0], QpType::Rc, None);
    // B's QP receives from an SRQ of its PD.
    let bdev = p.open_device(guids[1]).unwrap();
    let bpd = bdev.alloc_pd().unwrap();
    let srq = bpd.create_srq(16, 1, 2).unwrap();
    let q = srq.query().unwrap();
    assert_eq!((q.MaxWr, q.SrqLimit), (16, 2));
    let bcq = bdev.create_cq(64).unwrap();
    let mut init = QpInit::new(QpType::Rc, &bcq, &bcq);
    init.srq = Some(&srq);
    let bqp = bpd.create_qp(&init).unwrap();
    let bbuf = bdev.alloc_buffer(4096);
    let bmr = bpd.reg_mr(&bbuf, ACCESS).unwrap();
    let b = Side {
        dev: bdev,
        pd: bpd,
        cq: bcq,
        qp: bqp,
        buf: bbuf,
        mr: bmr,
    };
    connect_rc(&a, &b);
    // A receive posted to the QP itself is refused: it uses the SRQ.
    assert_eq!(
        b.qp.post_recv(&RecvWr {
            wr_id: 0,
            sg_list: &[]
        }),
        Err(PostError::UsesSrq)
    );
    let sges: Vec<[Sge; 1]> = (0..3).map(|i| [b.mr.sge(i * 256, 256)]).collect();
    let wrs: Vec<RecvWr<'_>> = sges
        .iter()
        .enumerate()
        .map(|(i, s)| RecvWr {
            wr_id: 100 + i as u64,
            sg_list: s,
        })
        .collect();
    srq.post_recv_list(&wrs).unwrap();
    let limit = srq.notify().unwrap();
    assert!(limit.pended());

    for i in 0..2u8 {
        a.buf.write(0, &[i + 1; 4]).unwrap();
        let sge = [a.mr.sge(0, 4)];
        a.qp.post_send(&send_wr(u64::from(i), WrOpcode::Send, &sge))
            .unwrap();
    }
    let wc = poll_n(&b.cq, 2);
    assert_eq!(
        wc.iter().map(|w| w.wr_id).collect::<Vec<_>>(),
        vec![100, 101]
    );
    assert_eq!(b.buf.to_vec()[256..260], [2; 4]);
    poll_n(&a.cq, 2);
    // One WQE left, below the limit of 2: the limit event completes the notify with ALERTED.
    let st = limit.wait_timeout(GUARD).expect("SRQ limit event");
    assert_eq!(st, Ok(NtStatus::ALERTED.0));

    // A second notify parks until cancelled.
    let again = srq.notify().unwrap();
    srq.cancel().unwrap();
    assert_eq!(
        again.wait(),
        Err(VerbsError::new("SRQ_NOTIFY", NtStatus::CANCELLED))
    );
    // SRQ_DESTROY while the QP uses it: ACCESS_DENIED, through the raw interface on the same
    // handle.
    let st = p
        .file()
        .device_io_control(WV_IOCTL_SRQ_DESTROY, &srq.id().to_ne_bytes(), 0)
        .wait();
    assert_eq!(st.nt_status(), NtStatus::ACCESS_DENIED);
}

#[test]
fn srq_modify_sets_the_limit_and_resizes() {
    let stack = one_device();
    let p = open_inproc(&stack).unwrap();
    let dev = p.open_device(p.device_guids().unwrap()[0]).unwrap();
    let pd = dev.alloc_pd().unwrap();
    let srq = pd.create_srq(16, 1, 0).unwrap();
    srq.modify(16, 4).unwrap();
    assert_eq!(srq.query().unwrap().SrqLimit, 4);
    srq.modify(64, 4).unwrap();
    assert_eq!(srq.query().unwrap().MaxWr, 64);
    let e = srq.modify(1 << 20, 4).unwrap_err();
    assert_eq!(e.status, NtStatus::UNSUCCESSFUL);
}

#[test]
fn event_mode_completions_through_cq_notify() {
    let stack = Stack::new(StackConfig::default());
    let (_p, a, b) = rc_pair(&stack);
    // As ibv_rc_pingpong -e: arm, then per event: re-arm, poll.
    let mut event = b.cq.notify(false).unwrap();
    assert!(event.pended());
    assert!(!event.is_complete());
    for i in 0..20u64 {
        recv_into(&b, i, 0, 64);
        let sge = [a.mr.sge(0, 16)];
        a.qp.post_send(&send_wr(i, WrOpcode::Send, &sge)).unwrap();
        event
            .wait_timeout(GUARD)
            .expect("completion event")
            .unwrap();
        event = b.cq.notify(false).unwrap();
        let wc = poll_n(&b.cq, 1);
        assert_eq!(wc[0].wr_id, i);
        poll_n(&a.cq, 1);
    }
    // One more message consumes the last arm, so the next arm starts from none.
    recv_into(&b, 99, 0, 64);
    let sge = [a.mr.sge(0, 16)];
    a.qp.post_send(&send_wr(99, WrOpcode::Send, &sge)).unwrap();
    event
        .wait_timeout(GUARD)
        .expect("completion event")
        .unwrap();
    poll_n(&b.cq, 1);
    poll_n(&a.cq, 1);
    // Solicited-only: an unsolicited receive raises no event, a solicited one does.
    let solicited = b.cq.notify(true).unwrap();
    for (i, flags) in [(1u64, 0), (2, send_flags::SOLICITED)] {
        recv_into(&b, i, 0, 64);
        let sge = [a.mr.sge(0, 16)];
        let mut wr = send_wr(i, WrOpcode::Send, &sge);
        wr.send_flags |= flags;
        a.qp.post_send(&wr).unwrap();
        poll_n(&a.cq, 1);
        if flags == 0 {
            assert_eq!(solicited.wait_timeout(Duration::ZERO), None);
        }
    }
    solicited
        .wait_timeout(GUARD)
        .expect("solicited event")
        .unwrap();
    assert_eq!(poll_n(&b.cq, 2).len(), 2);
    // CQ_CANCEL ends a waiting notify with STATUS_CANCELLED.
    let cancelled = b.cq.notify(false).unwrap();
    b.cq.cancel().unwrap();
    assert_eq!(
        cancelled.wait(),
        Err(VerbsError::new("CQ_NOTIFY", NtStatus::CANCELLED))
    );

    // The error queue is separate: a cancel ends it too; Pending::cancel is CancelIoEx.
    let err = b.cq.error_notify().unwrap();
    let next = b.cq.notify(false).unwrap();
    assert!(err.cancel());
    assert_eq!(err.wait().unwrap_err().status, NtStatus::CANCELLED);
    assert!(!next.is_complete());
    drop(next); // an abandoned request is cancelled, not left parked
    assert_eq!(stack.verifier_violations(), Vec::<String>::new());
}

#[test]
fn port_events_and_surprise_removal_through_verbs() {
    let stack = Stack::new(StackConfig::default());
    let (p, a, b) = rc_pair(&stack);
    let port = a.dev.port_notify(1).unwrap();
    stack.set_port_state(0, 1, false).unwrap();
    assert_eq!(port.wait_timeout(GUARD).unwrap(), Ok(WV_IO_EVENT_STATE));
    assert_eq!(
        a.dev.query_port(1).unwrap().State,
        wv_abi::consts::WV_IO_PORT_DOWN
    );
    stack.set_port_state(0, 1, true).unwrap();
    let port = a.dev.port_notify(1).unwrap();
    assert!(!port.pended(), "accumulated flags return inline");
    assert_eq!(port.wait(), Ok(WV_IO_EVENT_STATE));
    let e = a.dev.port_notify(9).unwrap_err();
    assert_eq!(
        (e.op, e.status),
        ("DEVICE_NOTIFY", NtStatus::INVALID_PORT_HANDLE)
    );

    // Surprise removal of B's device: its parked requests end with DEVICE_REMOVED, its data
    // path stops, and every object still destroys cleanly afterwards.
    let port = b.dev.port_notify(1).unwrap();
    let cqn = b.cq.notify(false).unwrap();
    let modify = b.qp.modify_async(&QpAttr::to_state(QpState::Error));
    assert!(stack.remove_device(1));
    assert_eq!(
        port.wait_timeout(GUARD).unwrap().unwrap_err().status,
        NtStatus::DEVICE_REMOVED
    );
    assert_eq!(
        cqn.wait_timeout(GUARD).unwrap().unwrap_err().status,
        NtStatus::DEVICE_REMOVED
    );
    // The modify either ran before the removal or was failed by it.
    if let Ok(m) = modify {
        let _ = m.wait_timeout(GUARD).expect("modify ended");
    }
    assert_eq!(
        b.qp.post_recv(&RecvWr {
            wr_id: 0,
            sg_list: &[]
        }),
        Err(PostError::DeviceRemoved)
    );
    assert!(b.dev.query().unwrap_err().status.is_error());
    assert_eq!(p.device_guids().unwrap(), vec![a.dev.guid()]);
    drop((a, b, port, cqn));
    drop(p);
    assert_eq!(stack.unload(), Vec::<String>::new());
}

#[test]
fn errors_carry_the_ntstatus() {
    let stack = Stack::new(StackConfig::default());
    let p = open_inproc(&stack).unwrap();
    let guids = p.device_guids().unwrap();

    let e = p.open_device(0xDEAD).unwrap_err();
    assert_eq!(
        e,
        VerbsError::new("LIBRARY_QUERY", NtStatus::NO_SUCH_DEVICE)
    );
    assert_eq!(
        e.to_string(),
        "LIBRARY_QUERY failed: STATUS_NO_SUCH_DEVICE (0xC000000E)"
    );

    let a = side(&p, guids[0], QpType::Rc, None);
    // Invalid transition RESET → RTS: the state table refuses it; the QP stays in RESET.
    let e = a.qp.modify(&QpAttr::rts(0, 14, 7, 7, 1)).unwrap_err();
    assert_eq!(e, VerbsError::new("QP_MODIFY", NtStatus::UNSUCCESSFUL));
    assert_eq!(a.qp.state(), QpState::Reset);
    // Posting before RTS is the UVP's EINVAL.
    let sge = [a.mr.sge(0, 4)];
    let err =
        a.qp.post_send(&send_wr(1, WrOpcode::Send, &sge))
            .unwrap_err();
    assert_eq!((err, err.errno()), (PostError::WrongState, 22));
    let list = [
        send_wr(1, WrOpcode::Send, &sge),
        send_wr(2, WrOpcode::Send, &sge),
    ];
    assert_eq!(a.qp.post_send_list(&list), Err((0, PostError::WrongState)));

    // A CQ of the other device: the driver refuses the mix.
    let other_dev = p.open_device(guids[1]).unwrap();
    let other_cq = other_dev.create_cq(8).unwrap();
    let e =
        a.pd.create_qp(&QpInit::new(QpType::Rc, &a.cq, &other_cq))
            .unwrap_err();
    assert_eq!(e, VerbsError::new("QP_CREATE", NtStatus::INVALID_PARAMETER));
    // A CQ of another handle: refused before it reaches the driver.
    let p2 = open_inproc(&stack).unwrap();
    let dev2 = p2.open_device(guids[0]).unwrap();
    let cq2 = dev2.create_cq(8).unwrap();
    let e =
        a.pd.create_qp(&QpInit::new(QpType::Rc, &cq2, &cq2))
            .unwrap_err();
    assert_eq!(e, VerbsError::new("QP_CREATE", NtStatus::INVALID_HANDLE));
    // Bad sizes fail in the device.
    assert_eq!(
        a.dev.create_cq(0).unwrap_err(),
        VerbsError::new("CQ_CREATE", NtStatus::UNSUCCESSFUL)
    );
    assert_eq!(
        a.pd.reg_mr(&a.buf, 0x4000_0000).unwrap_err().op,
        "MEMORY_REGISTER"
    );
    assert_eq!(
        a.pd.reg_mr_range(&a.buf, 8000, 1000, ACCESS).unwrap_err(),
        VerbsError::new("MEMORY_REGISTER", NtStatus::INVALID_PARAMETER)
    );
    assert_eq!(a.cq.resize(a.cq.entries()).unwrap(), a.cq.entries());
    assert_eq!(
        a.cq.resize(1 << 20).unwrap_err(),
        VerbsError::new("CQ_RESIZE", NtStatus::UNSUCCESSFUL),
        "beyond MaxCqEntries"
    );
    assert_eq!(
        a.dev.query_port(0).unwrap_err(),
        VerbsError::new("DEVICE_PORT_QUERY", NtStatus::INVALID_PORT_HANDLE)
    );
}

#[test]
fn raw_ioctls_and_verbs_on_one_handle() {
    let stack = one_device();
    let p = open_inproc(&stack).unwrap();
    let guid = p.device_guids().unwrap()[0];
    let a = side(&p, guid, QpType::Rc, None);
    let file: &Arc<F> = p.file();
    let raw = |code: u32, id: u64| -> IoStatus {
        file.device_io_control(code, &id.to_ne_bytes(), 0).wait()
    };
    // A memory window holds its PD too.
    let mw = a.pd.alloc_mw().unwrap();
    assert_ne!(mw.rkey(), 0);
    assert_eq!(mw.pd().id(), a.pd.id());
    // Destroy while referenced → ACCESS_DENIED (the verbs objects hold the references).
    assert_eq!(
        raw(WV_IOCTL_CQ_DESTROY, a.cq.id()).nt_status(),
        NtStatus::ACCESS_DENIED
    );
    assert_eq!(
        raw(WV_IOCTL_PD_DEALLOCATE, a.pd.id()).nt_status(),
        NtStatus::ACCESS_DENIED
    );
    assert_eq!(
        raw(WV_IOCTL_DEVICE_CLOSE, a.dev.id()).nt_status(),
        NtStatus::ACCESS_DENIED
    );
    // Bad ids: each type's status.
    assert_eq!(
        raw(WV_IOCTL_QP_DESTROY, 999).nt_status(),
        NtStatus::NOT_FOUND
    );
    assert_eq!(
        raw(WV_IOCTL_DEVICE_CLOSE, 999).nt_status(),
        NtStatus::NO_SUCH_DEVICE
    );

    // DEVICE_QUERY through both paths agrees.
    let st = file
        .device_io_control(WV_IOCTL_DEVICE_QUERY, &a.dev.id().to_ne_bytes(), 152)
        .wait();
    assert_eq!(st.output, a.dev.query().unwrap().as_bytes());
    assert_eq!(a.dev.query().unwrap().NodeGuid, guid);
    assert_eq!(a.dev.port_count(), 1);
    assert!(!a.dev.query_pkeys(1).unwrap().is_empty());

    // A CQ_NOTIFY issued raw on the verbs CQ, completed by traffic the verbs API posts.
    let raw_notify = file.device_io_control(
        WV_IOCTL_CQ_NOTIFY,
        WV_IO_ID::new(a.cq.id(), wv_abi::consts::WV_CQ_NEXT_COMPLETION).as_bytes(),
        0,
    );
    assert!(raw_notify.pending());
    // Loopback RC QP on the same device (connected to itself).
    a.qp.modify(&QpAttr::init(1, 0, ACCESS)).unwrap();
    let av = AddressVector {
        grh_valid: true,
        dgid: gid(&a.dev),
        hop_limit: 1,
        port: 1,
        ..AddressVector::default()
    };
    a.qp.modify(&QpAttr::rtr(a.qp.qpn(), 0, &av, Mtu::Mtu4096, 1, 12))
        .unwrap();
    a.qp.modify(&QpAttr::rts(0, 14, 7, 7, 1)).unwrap();
    let q = a.qp.query().unwrap();
    assert_eq!(q.QpState, QpState::Rts as u8);
    assert_eq!(u32::from_be(q.DestinationQpn), a.qp.qpn());
    recv_into(&a, 1, 4096, 64);
    a.buf.write(0, b"loop").unwrap();
    let sge = [a.mr.sge(0, 4)];
    a.qp.post_send(&send_wr(2, WrOpcode::Send, &sge)).unwrap();
    // The raw CQ_NOTIFY was not armed by anyone: a raw client must arm through the UVP
    // itself, so it stays parked until cancelled.
    assert_eq!(raw_notify.wait_timeout(Duration::ZERO), None);
    assert!(file.cancel_io_ex(&raw_notify));
    assert_eq!(raw_notify.wait().nt_status(), NtStatus::CANCELLED);
    let wc = poll_n(&a.cq, 2);
    assert!(
        wc.iter()
            .any(|w| w.opcode == WcOpcode::Recv && w.byte_len == 4)
    );
    assert_eq!(a.buf.to_vec()[4096..4100], *b"loop");

    // An MR deregisters on drop: its lkey is then unknown to the PD.
    let lkey = a.mr.lkey();
    let pd_id = a.pd.id();
    let Side { mr, .. } = a;
    drop(mr);
    let st = file
        .device_io_control(
            WV_IOCTL_MEMORY_DEREGISTER,
            WV_IO_ID::new(pd_id, lkey).as_bytes(),
            0,
        )
        .wait();
    assert_eq!(st.nt_status(), NtStatus::NOT_FOUND);
}

#[test]
fn queued_modifies_are_cancelled_by_qp_cancel() {
    // Deterministic: the modify work item runs only when someone waits, so both modifies are
    // still queued when QP_CANCEL arrives.
    let stack = Stack::new(StackConfig {
        devices: 1,
        deterministic: true,
        qp_modify: QpModifyMode::Async,
        ..StackConfig::default()
    });
    let p = open_inproc(&stack).unwrap();
    let a = side(&p, p.device_guids().unwrap()[0], QpType::Rc, None);
    let m1 = a.qp.modify_async(&QpAttr::init(1, 0, ACCESS)).unwrap();
    let m2 =
        a.qp.modify_async(&QpAttr::to_state(QpState::Error))
            .unwrap();
    assert!(m1.pended() && m2.pended());
    a.qp.cancel().unwrap();
    for m in [m1, m2] {
        assert_eq!(
            m.wait(),
            Err(VerbsError::new("QP_MODIFY", NtStatus::CANCELLED))
        );
    }
    assert_eq!(a.qp.state(), QpState::Reset);
    a.qp.modify(&QpAttr::init(1, 0, ACCESS)).unwrap();
    assert_eq!(a.qp.state(), QpState::Init);
}

/// A transport that answers LIBRARY_QUERY with a real HCA's provider name, as `\\.\WinVerbs`
/// above an mlx4 would.
struct FakeHw;
struct Done(IoStatus);

impl RawIo for Done {
    fn pending(&self) -> bool {
        false
    }
    fn wait(self) -> IoStatus {
        self.0
    }
    fn wait_timeout(&self, _: Duration) -> Option<IoStatus> {
        Some(self.0.clone())
    }
}

impl RawFile for FakeHw {
    type Io = Done;
    fn device_io_control(&self, code: u32, _input: &[u8], _output_len: usize) -> Done {
        let (status, output) = match code {
            WV_IOCTL_LIBRARY_QUERY => (0, b"mlx4u\0".to_vec()),
            _ => (NtStatus::NOT_IMPLEMENTED.0, Vec::new()),
        };
        Done(IoStatus {
            status,
            information: output.len(),
            output,
        })
    }
    fn cancel_io_ex(&self, _io: &Done) -> bool {
        false
    }
}

#[test]
fn a_device_without_a_built_in_uvp_names_the_missing_library() {
    let p = Provider::new(FakeHw);
    assert_eq!(p.library_name(1).unwrap(), "mlx4u");
    let e = p.open_device(1).unwrap_err();
    assert_eq!(e.status, STATUS_DLL_NOT_FOUND);
    assert_eq!(
        e.to_string(),
        "LoadLibrary(mlx4u.dll) failed: STATUS_DLL_NOT_FOUND (0xC0000135)"
    );
}

#[test]
fn objects_cross_threads() {
    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>() {}
    send_sync::<Stack>();
    send_sync::<Provider<F>>();
    send_sync::<Device<F>>();
    send_sync::<Pd<F>>();
    send_sync::<Cq<F>>();
    send_sync::<Qp<F>>();
    send_sync::<Srq<F>>();
    send_sync::<Ah<F>>();
    send_sync::<Mw<F>>();
    send_sync::<Mr>();
    send_sync::<Buffer>();
    send::<Pending<()>>();

    // A waiter thread sleeps on the completion event while this thread sends.
    let stack = Stack::new(StackConfig::default());
    let (_p, a, b) = rc_pair(&stack);
    let event = b.cq.notify(false).unwrap();
    let waiter = std::thread::spawn(move || event.wait());
    recv_into(&b, 1, 0, 64);
    let sge = [a.mr.sge(0, 8)];
    a.qp.post_send(&send_wr(1, WrOpcode::Send, &sge)).unwrap();
    waiter.join().unwrap().unwrap();
    let cq = b.cq.clone();
    let polled = std::thread::spawn(move || poll_n(&cq, 1)).join().unwrap();
    assert_eq!(polled[0].wr_id, 1);
}

/// Both sides to RTS with remote atomic access too.
fn connect_rc_atomic(a: &Side, b: &Side) {
    connect_rc_as(a, b, ACCESS | WV_ACCESS_REMOTE_ATOMIC, 7, 4);
}

fn word(buf: &Buffer, off: usize) -> u64 {
    let mut w = [0u8; 8];
    buf.read(off, &mut w).unwrap();
    u64::from_ne_bytes(w)
}

#[test]
fn atomics_through_the_verbs_api() {
    let stack = Stack::new(StackConfig::default());
    let (_p, a, b) = rc_pair_with(&stack, connect_rc_atomic);
    assert_eq!(b.dev.query().unwrap().AtomicCapability, 1, "ATOMIC_HCA");
    let target = b.dev.alloc_buffer(64);
    let tmr =
        b.pd.reg_mr(&target, WV_ACCESS_LOCAL_WRITE | WV_ACCESS_REMOTE_ATOMIC)
            .unwrap();
    target.write(0, &40u64.to_ne_bytes()).unwrap();
    let flags = send_flags::SIGNALED;
    a.qp.fetch_add(1, a.mr.sge(0, 8), tmr.addr(), tmr.rkey(), 2, flags)
        .unwrap();
    a.qp.compare_swap(2, a.mr.sge(8, 8), tmr.addr(), tmr.rkey(), 42, 99, flags)
        .unwrap();
    let wcs = poll_n(&a.cq, 2);
    assert_eq!(
        wcs.iter()
            .map(|w| (w.wr_id, w.status, w.opcode))
            .collect::<Vec<_>>(),
        vec![
            (1, WcStatus::Success, WcOpcode::FetchAdd),
            (2, WcStatus::Success, WcOpcode::CompSwap)
        ]
    );
    assert_eq!((word(&a.buf, 0), word(&a.buf, 8)), (40, 42));
    assert_eq!(word(&target, 0), 99);
    // A misaligned target: an error completion, the QP in ERR.
    a.qp.fetch_add(3, a.mr.sge(0, 8), tmr.addr() + 4, tmr.rkey(), 1, flags)
        .unwrap();
    assert_eq!(poll_n(&a.cq, 1)[0].status, WcStatus::RemInvReqErr);
    // The local buffer must be 8 bytes.
    assert_eq!(
        b.qp.fetch_add(4, b.mr.sge(0, 4), tmr.addr(), tmr.rkey(), 1, flags),
        Err(PostError::AtomicLength)
    );
}

#[test]
fn memory_windows_through_the_verbs_api() {
    let stack = Stack::new(StackConfig::default());
    let (p, a, b) = rc_pair(&stack);
    let region_buf = b.dev.alloc_buffer(4096);
    let region =
        b.pd.reg_mr(&region_buf, WV_ACCESS_LOCAL_WRITE | WV_ACCESS_MW_BIND)
            .unwrap();
    a.buf.write(0, b"via a window").unwrap();
    let flags = send_flags::SIGNALED;
    let write =
        |id: u64, at: u64, rkey: u32| rdma(&a, id, WrOpcode::RdmaWrite, (0, 12), (at, rkey)).status;
    // Type 1, bound by the verb on B's QP.
    let mw1 = b.pd.alloc_mw().unwrap();
    assert_eq!(mw1.kind(), MwType::Type1);
    let old = mw1.rkey();
    let key =
        b.qp.bind_mw(&mw1, 1, flags, &region, 100, 64, WV_ACCESS_REMOTE_WRITE)
            .unwrap();
    assert_eq!((key, mw1.rkey()), (inc_rkey(old), inc_rkey(old)));
    let w = poll_n(&b.cq, 1);
    assert_eq!(
        (w[0].status, w[0].opcode),
        (WcStatus::Success, WcOpcode::BindMw)
    );
    assert_eq!(write(2, region.addr() + 100, mw1.rkey()), WcStatus::Success);
    let mut got = [0u8; 12];
    region_buf.read(100, &mut got).unwrap();
    assert_eq!(&got, b"via a window");
    // While a window is bound the region cannot be deregistered (MEMORY_DEREGISTER fails and
    // the region stays, as OFW's driver re-inserts it); it can once the windows are gone.
    let dereg = |mr: &Mr| {
        let id = WV_IO_ID::new(b.pd.id(), mr.lkey());
        p.file()
            .device_io_control(WV_IOCTL_MEMORY_DEREGISTER, id.as_bytes(), 0)
            .wait()
            .nt_status()
    };
    assert_eq!(dereg(&region), NtStatus::UNSUCCESSFUL);
    let mw2 = b.pd.alloc_mw_type(MwType::Type2).unwrap();
    assert_eq!(mw2.kind(), MwType::Type2);
    let key2 =
        b.qp.post_bind_mw(&mw2, 3, flags, &region, 0, 4096, WV_ACCESS_REMOTE_WRITE)
            .unwrap();
    assert_eq!(poll_n(&b.cq, 1)[0].status, WcStatus::Success);
    assert_eq!(write(4, region.addr() + 2000, key2), WcStatus::Success);
    // LOCAL_INV of the type 2 window: its key stops working (and the QPs go to ERR on the
    // remote access error that follows).
    b.qp.invalidate(5, key2, flags).unwrap();
    assert_eq!(poll_n(&b.cq, 1)[0].status, WcStatus::Success);
    assert_eq!(write(6, region.addr() + 2000, key2), WcStatus::RemAccessErr);
    drop(mw1);
    drop(mw2);
    assert_eq!(dereg(&region), NtStatus::SUCCESS);
    drop(region);
}

#[test]
fn cq_resize_keeps_the_completions_waiting() {
    let stack = Stack::new(StackConfig::default());
    let (_p, a, b) = rc_pair(&stack);
    for i in 0..10u64 {
        let sg = [a.mr.sge(0, 8)];
        let mut wr = send_wr(i, WrOpcode::RdmaWrite, &sg);
        wr.remote_addr = b.mr.addr();
        wr.rkey = b.mr.rkey();
        a.qp.post_send(&wr).unwrap();
    }
    // Ten waiting in 64 entries: shrink to 16, then grow to 256; they come out in order.
    assert_eq!(a.cq.resize(16).unwrap(), 16);
    assert_eq!(a.cq.entries(), 16);
    assert_eq!(
        a.cq.resize(8).unwrap_err(),
        VerbsError::new("CQ_RESIZE", NtStatus::UNSUCCESSFUL),
        "too small for the ten waiting"
    );
    assert_eq!(a.cq.resize(256).unwrap(), 256);
    let ids: Vec<u64> = poll_n(&a.cq, 10).iter().map(|w| w.wr_id).collect();
    assert_eq!(ids, (0..10).collect::<Vec<_>>());
}

#[test]
fn an_empty_device_list_is_an_empty_list() {
    // GUID_QUERY answers only the count (8 bytes) when no device is below the driver.
    let stack = one_device();
    let p = Provider::new(stack.open().expect("open"));
    assert_eq!(p.device_guids().expect("GUID_QUERY").len(), 1);
    assert!(stack.remove_device(0));
    assert_eq!(p.device_guids().expect("GUID_QUERY"), Vec::<u64>::new());
}
