//! The device as a device service serves it: a client's CQ and QP rings live in memory the
//! service shares with the client, the client's user-mode provider reaches them only through
//! that memory (`UvpContext::mapped`), and its posts ring a doorbell the service's thread
//! answers (`Doorbell::service`). Here both sides are this process, with an anonymous mapping
//! standing in for the shared file.
#![cfg(all(feature = "std", target_os = "linux"))]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::common::*;
use wv_abi::consts::*;
use wv_hal::*;
use wv_host::HostPlatform;
use wv_softhca::abi::{CqResp, QpResp, SrqResp};
use wv_softhca::dma::process::{self, Client};
use wv_softhca::dma::{BlockOwner, SharedBlock, SharedMemory};
use wv_softhca::uvp::{Doorbell, MappedDevice};
use wv_softhca::*;

/// Where the shared memory starts in the device's addresses.
const BASE: u64 = 0x4000_0000;
const PAGE: usize = 4096;

/// The shared memory: a bump allocator of pages over one mapping, and the doorbells of the
/// QPs created in it.
struct Arena {
    base: usize,
    len: usize,
    next: Mutex<usize>,
    doorbells: Mutex<Vec<Doorbell>>,
    rung: AtomicUsize,
}

struct Keep;
impl BlockOwner for Keep {
    fn release(&self, _addr: u64, _len: usize) {}
}

impl Arena {
    fn new(len: usize) -> Arc<Arena> {
        // Never unmapped: the test process ends first.
        let base = anonymous_mapping(len);
        Arc::new(Arena {
            base: base.addr(),
            len,
            next: Mutex::new(0),
            doorbells: Mutex::new(Vec::new()),
            rung: AtomicUsize::new(0),
        })
    }

    fn block_at(&self, off: usize, len: usize) -> SharedBlock {
        // SAFETY: inside the mapping (checked by the callers), page-aligned, a multiple of 8
        // bytes, mapped for the life of the process; the device and the provider reach it
        // only through `SharedBlock` views, as they reach a service's shared file.
        unsafe {
            SharedBlock::new(
                (self.base + off) as *mut u8,
                len,
                BASE + off as u64,
                Arc::new(Keep),
            )
        }
    }

    /// Runs every doorbell once; whether any had rung.
    fn service(&self) -> bool {
        // Every one, even after one that had rung.
        let mut rang = false;
        for d in self.doorbells.lock().unwrap().iter() {
            rang |= d.service() == Some(true);
        }
        rang
    }
}

impl SharedMemory for Arena {
    fn alloc(&self, bytes: usize) -> Result<SharedBlock, wv_hal::AllocError> {
        let len = bytes.max(1).next_multiple_of(PAGE);
        let mut next = self.next.lock().unwrap();
        if *next + len > self.len {
            return Err(wv_hal::AllocError);
        }
        let off = *next;
        *next += len;
        Ok(self.block_at(off, len))
    }

    fn add_doorbell(&self, doorbell: Doorbell) -> Result<(), wv_hal::AllocError> {
        self.doorbells.lock().unwrap().push(doorbell);
        Ok(())
    }
}

impl MappedDevice for Arena {
    fn block(&self, addr: u64, len: u64) -> Option<SharedBlock> {
        let off = usize::try_from(addr.checked_sub(BASE)?).ok()?;
        let len = usize::try_from(len).ok()?;
        (off.checked_add(len)? <= self.len).then(|| self.block_at(off, len))
    }

    fn ring(&self) {
        self.rung.fetch_add(1, Ordering::SeqCst);
    }
}

/// A client of the service (this process) whose rings go into `arena`.
fn client_of(arena: &Arc<Arena>) -> Arc<Client> {
    Client::new(
        std::process::id() as i32,
        Some(arena.clone() as Arc<dyn SharedMemory>),
    )
}

/// `node`'s device opened for a served client: a CA, PD, CQ and RC QP made while the client is
/// attached (so their rings are in `arena`), reached through the mapped provider.
fn served(node: &Node, arena: &Arc<Arena>) -> (Node, Cq, Qp) {
    let (node, cq, qp, _) = served_qp(node, arena, QpType::Rc);
    (node, cq, qp)
}

/// A deterministic pair of devices, a 4 MiB arena, and a served client of the first device
/// (as [`served`]), with the second device's client.
fn served_pair() -> (HostPlatform, Arc<Arena>, Node, Cq, Qp, Node) {
    let (p, _f, a, b) = deterministic_pair();
    let arena = Arena::new(1 << 22);
    let (a, ca, qa) = served(&a, &arena);
    (p, arena, a, ca, qa, b)
}

/// [`served`] with a QP of `qp_type`, and the QP's creation response, which names its rings.
fn served_qp(node: &Node, arena: &Arc<Arena>, qp_type: QpType) -> (Node, Cq, Qp, QpResp) {
    let _attached = attach(arena);
    let mapped: Arc<dyn MappedDevice> = arena.clone();
    let client_node = Node::client(&node.platform, node.hca.clone(), node.pool.clone(), |out| {
        UvpContext::mapped(out, mapped).unwrap()
    });
    let (cq, r) = client_node.cq_answered(16);
    assert!(r.ring_addr >= BASE, "the CQ's ring is in the shared memory");
    let create = qp_create(qp_type, &cq.soft, &cq.soft, None, 16, 2, 64, true);
    let (qp, _, r) = client_node.create_qp_answered(&create);
    assert!(r.sq_addr >= BASE, "the QP's rings are in the shared memory");
    (client_node, cq, qp, r)
}

#[test]
fn a_served_clients_sends_run_and_its_receives_in_err_flush_when_the_service_answers_its_doorbell()
{
    let (p, arena, a, ca, qa, b) = served_pair();
    assert_eq!(arena.doorbells.lock().unwrap().len(), 1);
    let (cb, qb) = connected_peer(&a, &qa, &b, 16, Conn::default());
    let (src, dst) = mems(&a, 64, &b, 64);
    src.buf.write(0, b"through the doorbell").unwrap();
    post_recv(&qb, 7, dst.sge(0, 64));
    // Nothing has rung yet.
    assert!(!arena.service());

    post_send(&qa, 1, src.sge(0, 20));
    assert_eq!(
        arena.rung.load(Ordering::SeqCst),
        1,
        "the post woke the service"
    );
    p.run_until_idle();
    assert!(poll_all(&cb).is_empty(), "the send waits for the service");
    // The service's doorbell thread runs what was rung for, once.
    assert!(arena.service());
    assert!(!arena.service());
    p.run_until_idle();
    let r = poll_all(&cb);
    assert_eq!(
        (r.len(), r[0].wr_id, r[0].status),
        (1, 7, WcStatus::Success)
    );
    assert_eq!(&dst.buf.to_vec()[..20], b"through the doorbell");
    let s = poll_all(&ca);
    assert_eq!(
        (s.len(), s[0].wr_id, s[0].status),
        (1, 1, WcStatus::Success)
    );

    // A receive posted to a QP in ERR is flushed by the service, when its doorbell is answered.
    a.modify(&qa, &qpm(QpState::Error, WV_IO_QP_ATTR_STATE))
        .unwrap();
    p.run_until_idle();
    assert!(poll_all(&ca).is_empty());
    let inbox = a.mem(64, ALL_ACCESS);
    post_recv(&qa, 9, inbox.sge(0, 64));
    assert_eq!(arena.rung.load(Ordering::SeqCst), 2);
    p.run_until_idle();
    assert!(poll_all(&ca).is_empty(), "the flush waits for the service");
    let f = serve(&p, &arena, &ca);
    assert_eq!(statuses(&f), vec![(9, WcStatus::WrFlushErr)]);
    settle(&p);
}

/// The service's thread answers the doorbells (one at least had rung) and the DPCs run: what
/// `cq` then holds.
fn serve(p: &HostPlatform, arena: &Arena, cq: &Cq) -> Vec<WorkCompletion> {
    assert!(arena.service());
    p.run_until_idle();
    poll_all(cq)
}

/// `n` messages from `qb` received by the served `qa`, one receive posted for each (into
/// `inbox`), ids from `from`.
fn receive(p: &HostPlatform, qa: &Qp, qb: &Qp, inbox: &Mem, src: &Mem, from: u64, n: u64) {
    for i in from..from + n {
        post_recv(qa, i, inbox.sge(0, 64));
        post_send(qb, i, src.sge(0, 8));
    }
    p.run_until_idle();
}

#[test]
fn a_served_cq_reports_its_overrun_through_the_shared_ring() {
    let (p, _arena, a, ca, qa, b) = served_pair();
    let (_cb, qb) = connected_peer(&a, &qa, &b, 64, Conn::default());
    let (inbox, src) = (a.mem(64, ALL_ACCESS), b.mem(64, ALL_ACCESS));
    assert_eq!(ca.uvp.entries(), 16);
    receive(&p, &qa, &qb, &inbox, &src, 0, 16);
    assert!(!ca.uvp.overrun(), "full, not overrun");
    receive(&p, &qa, &qb, &inbox, &src, 16, 1);
    assert!(ca.uvp.overrun());
    settle(&p);
    assert_eq!(ca.sink.errors(), 1);
}

#[test]
fn a_served_cq_resized_is_polled_on_the_new_ring_with_what_it_held() {
    let (p, arena, a, ca, qa, b) = served_pair();
    let (_cb, qb) = connected_peer(&a, &qa, &b, 64, Conn::default());
    let (inbox, src) = (a.mem(64, ALL_ACCESS), b.mem(64, ALL_ACCESS));
    receive(&p, &qa, &qb, &inbox, &src, 0, 3);
    {
        let _attached = attach(&arena);
        let guard = ca.uvp.begin_resize();
        let (got, r) = resize_cq_command(&a, &ca, 64).unwrap();
        assert!(r.ring_addr >= BASE, "the new ring is in the shared memory");
        assert_eq!(guard.finish(&r), Ok(got));
    }
    assert_eq!(ca.uvp.entries(), 64);
    // More than the old ring held.
    receive(&p, &qa, &qb, &inbox, &src, 3, 20);
    expect_in_order(&ca, 23);
    settle(&p);
}

#[test]
fn a_doorbell_is_live_while_its_qp_exists_and_answers_none_after() {
    let (p, arena, a, _ca, qa, _b) = served_pair();
    let doorbells = arena.doorbells.lock().unwrap();
    assert!(doorbells[0].is_live());
    assert_eq!(doorbells[0].service(), Some(false));
    a.hca.destroy_qp(qa.soft);
    assert!(
        !doorbells[0].is_live(),
        "its device lives on, the QP is gone"
    );
    assert_eq!(doorbells[0].service(), None);
    settle(&p);
}

#[test]
fn a_post_that_queues_nothing_rings_no_doorbell() {
    let (p, arena, a, _ca, qa, _b) = served_pair();
    let m = a.mem(64, ALL_ACCESS);
    // As rdma-core's providers ring only for a list that posted something.
    assert_eq!(
        qa.uvp
            .post_send(&send_wr(1, WrOpcode::Send, &[m.sge(0, 8)])),
        Err(PostError::WrongState)
    );
    a.modify(&qa, &qpm(QpState::Init, INIT_RC)).unwrap();
    a.modify(&qa, &qpm(QpState::Error, WV_IO_QP_ATTR_STATE))
        .unwrap();
    assert_eq!(qa.uvp.state(), QpState::Error);
    let three = [m.sge(0, 8), m.sge(8, 8), m.sge(16, 8)];
    assert_eq!(
        qa.uvp.post_recv(&recv_wr(2, &three)),
        Err(PostError::TooManySge)
    );
    assert_eq!(arena.rung.load(Ordering::SeqCst), 0);
    assert!(!arena.service(), "no doorbell bit either");
    settle(&p);
}

#[test]
fn a_receive_doorbell_left_from_err_flushes_nothing_once_the_qp_is_reset() {
    let (p, arena, a, ca, qa, b) = served_pair();
    let inbox = a.mem(64, ALL_ACCESS);
    a.modify(&qa, &qpm(QpState::Init, INIT_RC)).unwrap();
    a.modify(&qa, &qpm(QpState::Error, WV_IO_QP_ATTR_STATE))
        .unwrap();
    // Rung for a flush the service has not run yet when the QP is reset and used again.
    post_recv(&qa, 1, inbox.sge(0, 64));
    assert_eq!(arena.rung.load(Ordering::SeqCst), 1);
    a.modify(&qa, &qpm(QpState::Reset, WV_IO_QP_ATTR_STATE))
        .unwrap();
    a.modify(&qa, &qpm(QpState::Init, INIT_RC)).unwrap();
    post_recv(&qa, 2, inbox.sge(0, 64));
    assert_eq!(arena.rung.load(Ordering::SeqCst), 1, "nothing to flush");
    assert!(arena.service());
    p.run_until_idle();
    // Only a QP in ERR flushes its receives: this one waits for its message.
    assert!(poll_all(&ca).is_empty());
    let (_cb, qb) = connected_peer(&a, &qa, &b, 16, Conn::default());
    let src = b.mem(64, ALL_ACCESS);
    post_send(&qb, 9, src.sge(0, 8));
    p.run_until_idle();
    let r = poll_all(&ca);
    assert_eq!(statuses(&r), vec![(2, WcStatus::Success)]);
    settle(&p);
}

#[test]
fn a_served_inline_send_gathers_the_applications_own_bytes() {
    let (p, arena, a, _ca, qa, b) = served_pair();
    let (cb, qb) = connected_peer(&a, &qa, &b, 16, Conn::default());
    let dst = b.mem(64, ALL_ACCESS);
    post_recv(&qb, 7, dst.sge(0, 64));
    // Not registered: the provider copies the application's memory itself.
    let app = b"gathered by the provider".to_vec();
    let sge = |addr: u64| Sge {
        addr,
        length: app.len() as u32,
        lkey: 0,
    };
    let mut wr = send_wr(1, WrOpcode::Send, &[]);
    wr.send_flags |= send_flags::INLINE;
    let sg = [sge(app.as_ptr().addr() as u64)];
    wr.sg_list = &sg;
    qa.uvp.post_send(&wr).unwrap();
    // A wrong address is refused at once (EINVAL), not a fault.
    let bad = [sge(1 << 47)];
    wr.sg_list = &bad;
    assert_eq!(qa.uvp.post_send(&wr), Err(PostError::BadInlineSge));
    let r = serve(&p, &arena, &cb);
    assert_eq!(
        r.iter()
            .map(|w| (w.wr_id, w.status, w.byte_len))
            .collect::<Vec<_>>(),
        vec![(7, WcStatus::Success, app.len() as u32)]
    );
    assert_eq!(&dst.buf.to_vec()[..app.len()], &app[..]);
    settle(&p);
}

#[test]
fn a_served_srq_takes_as_many_sges_as_it_was_created_with() {
    let (p, arena, a, _ca, _qa, _b) = served_pair();
    let attr = SrqAttributes {
        max_wr: 8,
        max_sge: 2,
        srq_limit: 0,
    };
    let (soft, r) = {
        let _attached = attach(&arena);
        create_srq(&*a.hca, &a.pd, &attr, KArc::new(Log::default()))
    };
    assert!(
        r.ring_addr >= BASE,
        "the SRQ's ring is in the shared memory"
    );
    let srq = a.uvp.map_srq(&r).unwrap();
    let m = a.mem(64, ALL_ACCESS);
    let sges = [m.sge(0, 8), m.sge(8, 8), m.sge(16, 8)];
    assert_eq!(srq.post_recv(&recv_wr(1, &sges[..2])), Ok(()));
    assert_eq!(
        srq.post_recv(&recv_wr(2, &sges)),
        Err(PostError::TooManySge)
    );
    a.hca.destroy_srq(soft);
    settle(&p);
}

/// This thread serving a client (this process) whose shared memory is `arena`, while the
/// value lives: what the device creates meanwhile has its rings there.
fn attach(arena: &Arc<Arena>) -> process::Attached {
    process::attach(&client_of(arena))
}

#[test]
fn a_served_clients_srq_and_the_qp_on_it_live_in_the_shared_memory() {
    let (p, arena, a, ca, _qa, b) = served_pair();
    let (srq, qa) = {
        let _attached = attach(&arena);
        let srq = a.srq_with(8, 2, 0);
        let qa = a.qp_with(QpType::Rc, &ca, &ca, Some(&srq), 8, 1, 0, true);
        (srq, qa)
    };
    assert_eq!(arena.doorbells.lock().unwrap().len(), 2);
    let (_cb, qb) = connected_peer(&a, &qa, &b, 16, Conn::default());
    let inbox = a.mem(64, ALL_ACCESS);
    // The mapped provider holds receives to the SRQ's SGE count, as the device does.
    let three = [inbox.sge(0, 4), inbox.sge(8, 4), inbox.sge(16, 4)];
    assert_eq!(
        srq.uvp.post_recv(&recv_wr(1, &three)),
        Err(PostError::TooManySge)
    );
    srq.uvp.post_recv(&recv_wr(2, &three[..2])).unwrap();
    let src = b.mem_holding(64, b"shared!!");
    post_send(&qb, 1, src.sge(0, 8));
    p.run_until_idle();
    let r = poll_all(&ca);
    assert_eq!(statuses(&r), vec![(2, WcStatus::Success)]);
    let d = inbox.buf.to_vec();
    assert_eq!((&d[0..4], &d[8..12]), (&b"shar"[..], &b"ed!!"[..]));
    settle(&p);
}

#[test]
fn the_mapped_provider_refuses_a_ring_whose_geometry_is_impossible() {
    let (p, node) = deterministic_node();
    let arena = Arena::new(1 << 20);
    let (_ca, _events, out) = open_ca_logged(&*node.hca);
    let uvp = UvpContext::mapped(&out, arena.clone()).unwrap();
    // Indices run modulo twice the size: a ring's size is a power of two.
    let cq = |entries| CqResp {
        cq_handle: 1,
        entries,
        ring_addr: BASE,
        ring_bytes: u64::from(entries) * 64,
    };
    assert!(uvp.map_cq(&cq(4)).is_ok());
    assert_eq!(
        uvp.map_cq(&cq(3)).map(|_| ()),
        Err(VerbsError::InvalidParameter)
    );
    // A slot has at least one word.
    let qp = |sq_stride, rq_stride| QpResp {
        qp_handle: 1,
        qpn: 2,
        sq_entries: 4,
        sq_stride,
        rq_entries: 4,
        rq_stride,
        sq_addr: BASE,
        rq_addr: BASE + 65536,
        qp_type: QpType::Rc as u32,
        sq_max_sge: 1,
        rq_max_sge: 1,
        max_inline: 0,
        flags: 0,
        reserved: 0,
    };
    assert!(uvp.map_qp(&qp(10, 4)).is_ok());
    for (sq, rq) in [(0, 4), (10, 0)] {
        assert_eq!(
            uvp.map_qp(&qp(sq, rq)).map(|_| ()),
            Err(VerbsError::InvalidParameter),
            "strides {sq} and {rq}"
        );
    }
    let srq = |stride| SrqResp {
        srq_handle: 1,
        entries: 4,
        stride,
        reserved: 0,
        ring_addr: BASE,
    };
    assert!(uvp.map_srq(&srq(4)).is_ok());
    assert_eq!(
        uvp.map_srq(&srq(0)).map(|_| ()),
        Err(VerbsError::InvalidParameter)
    );
    settle(&p);
}

#[test]
fn a_wqe_with_an_opcode_its_transport_lacks_written_straight_into_the_shared_ring_fails_locally() {
    // The ring is client memory: the device checks what it reads there as the provider checks
    // a post. An RDMA read is not a UC operation (IBTA: UC carries sends and RDMA writes), so
    // a WQE that claims one completes with LOC_QP_OP_ERR and the send queue goes to SQE.
    let (p, _f, a, b) = deterministic_pair();
    let arena = Arena::new(1 << 22);
    let (a, ca, qa, resp) = served_qp(&a, &arena, QpType::Uc);
    let (cb, _qb) = connected_peer(&a, &qa, &b, 16, Conn::default());
    let (src, dst) = mems(&a, 64, &b, 64);
    src.buf.write(0, b"not a read").unwrap();
    const MARK: u64 = 0x5EED_1234_0BAD_0001;
    let sg = [src.sge(0, 10)];
    let wr = rdma_wr(MARK, WrOpcode::RdmaWrite, &sg, &dst, 0);
    qa.uvp.post_send(&wr).unwrap();
    // The WQE is in the shared ring, not yet run: its first word is the request's id, the low
    // byte of the next its opcode.
    let len = u64::from(resp.sq_entries) * u64::from(resp.sq_stride) * 8 + PAGE as u64;
    let ring = arena.block(resp.sq_addr, len).unwrap();
    let words = ring.words32();
    let at = (0..words.len() - 3)
        .step_by(2)
        .find(|&i| {
            words[i].load(Ordering::SeqCst) == MARK as u32
                && words[i + 1].load(Ordering::SeqCst) == (MARK >> 32) as u32
        })
        .expect("the posted WQE is in the ring");
    let op = &words[at + 2];
    op.store(
        (op.load(Ordering::SeqCst) & !0xFF) | WrOpcode::RdmaRead as u32,
        Ordering::SeqCst,
    );
    let r = serve(&p, &arena, &ca);
    assert_eq!(
        r.iter()
            .map(|w| (w.wr_id, w.status, w.qp_num))
            .collect::<Vec<_>>(),
        vec![(MARK, WcStatus::LocQpOpErr, qa.uvp.qpn())]
    );
    assert_eq!(a.state(&qa), QpState::SqError);
    assert!(poll_all(&cb).is_empty());
    assert_eq!(&dst.buf.to_vec()[..10], &[0u8; 10]);
    settle(&p);
}
