//! Low resources over the soft HCA's kernel half, the model of a Windows soft-HCA driver (where
//! an infallible allocation that fails is a bug check): every create and resize path (open,
//! PD, MR, MW, AH, CQ, CQ resize, SRQ, SRQ resize, QP with its own CQs, QP on an SRQ, a
//! multicast attach) and the connection manager's (an id, a listen, a REQ sent to a listen of
//! another device and handled by that device's DPC) runs as driver code, in a work item at
//! PASSIVE_LEVEL on fresh devices (the DPCs it causes run before the plan is disarmed), once
//! per allocation it makes, with exactly that allocation refused. Each run must fail for want
//! of memory: a verb with `InsufficientMemory` (OFW's `IB_INSUFFICIENT_MEMORY`; the core
//! answers STATUS_UNSUCCESSFUL for it, as OFW does for any verbs failure), a CM call with
//! `STATUS_NO_MEMORY` or `STATUS_INSUFFICIENT_RESOURCES`, a REQ with the peer's REJ for
//! insufficient resources, or lost as a MAD with no receive buffer is. It must leave the
//! devices' object and CM id counts as they were, let the same call succeed right after, and
//! leave no byte behind once the devices are gone. The walk of a path ends at the first run
//! in which nothing was refused, which must succeed.
//!
//! An infallible allocation on one of these paths calls the allocation-error handler, which
//! aborts the process. So the walk runs in a child process (this test binary again): the
//! parent reports the path and allocation the child was at when it died.
//!
//! A second test races two creators on one handle table (the allocator pauses one of them
//! between the table's two lock acquisitions while the other grows and fills the table), and
//! refuses the allocation that follows: it must be made outside the lock and answered with
//! `InsufficientMemory`, never attempted under the lock.
#![allow(clippy::disallowed_methods)] // the test's own setup may allocate infallibly

use std::alloc::{GlobalAlloc, Layout};
use std::cell::Cell;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use wv_abi::{IB_PATH_REC, NtStatus};
use wv_hal::cm::REJ_INSUFFICIENT_RESOURCES;
use wv_hal::*;
use wv_host::HostPlatform;
use wv_host::low_resources::{self, Plan, Tally};
use wv_softhca::*;

#[global_allocator]
static ALLOC: Pausing = Pausing;

/// The low-resources allocator, and one more power: a thread can have its next allocation
/// wait ([`PAUSE_NEXT`]) until another thread lets it go on, so that a test holds a create
/// between its table's two lock acquisitions while another creator works on the table.
struct Pausing;

thread_local! {
    // Const-initialised `Cell`: no lazy initialisation and no destructor, so the allocator may
    // touch it at any time.
    static PAUSE_NEXT: Cell<bool> = const { Cell::new(false) };
}
/// Set once the paused allocation waits.
static PAUSED: AtomicBool = AtomicBool::new(false);
/// Set to let it go on.
static GO_ON: AtomicBool = AtomicBool::new(false);

fn pause_point() {
    if PAUSE_NEXT.try_with(|p| p.replace(false)).unwrap_or(false) {
        PAUSED.store(true, Ordering::SeqCst);
        while !GO_ON.load(Ordering::SeqCst) {
            std::thread::yield_now();
        }
    }
}

// SAFETY: Every method forwards to `LowResources` with the caller's arguments unchanged, after
// at most a wait that touches only atomics and a thread-local `Cell` (it never allocates).
unsafe impl GlobalAlloc for Pausing {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        pause_point();
        // SAFETY: The caller's contract for `alloc` is `LowResources::alloc`'s.
        unsafe { wv_host::LowResources.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        pause_point();
        // SAFETY: The caller's contract for `alloc_zeroed` is `LowResources::alloc_zeroed`'s.
        unsafe { wv_host::LowResources.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        pause_point();
        // SAFETY: The caller's contract for `realloc` is `LowResources::realloc`'s.
        unsafe { wv_host::LowResources.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: The caller's contract for `dealloc` is `LowResources::dealloc`'s.
        unsafe { wv_host::LowResources.dealloc(ptr, layout) }
    }
}

/// Set in the child process that runs the walk.
const CHILD: &str = "WV_SOFTHCA_ALLOC_WALK_CHILD";
const TEST: &str = "every_allocation_of_every_create_and_resize_can_fail";

/// Counts the CM events the REQ path looks at (atomics: a sink runs in the DPC, as driver code,
/// and must not allocate under the plan).
#[derive(Default)]
struct CmCounts {
    req_received: AtomicUsize,
    rejected_no_resources: AtomicUsize,
}

impl CmEventSink for CmCounts {
    fn on_event(&self, event: CmEvent<'_>) {
        match event {
            CmEvent::ReqReceived => self.req_received.fetch_add(1, Ordering::SeqCst),
            CmEvent::RejReceived {
                reason: REJ_INSUFFICIENT_RESOURCES,
                ..
            } => self.rejected_no_resources.fetch_add(1, Ordering::SeqCst),
            _ => 0,
        };
    }
}

/// Why a path failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Failure {
    Verbs(VerbsError),
    Cm(NtStatus),
    /// The peer rejected the REQ for insufficient resources.
    Rejected,
    /// The REQ was lost (no room in the peer's inbox): the requester resends it later.
    Lost,
}

impl Failure {
    fn is_out_of_memory(self) -> bool {
        matches!(
            self,
            Failure::Verbs(VerbsError::InsufficientMemory)
                | Failure::Cm(NtStatus::NO_MEMORY | NtStatus::INSUFFICIENT_RESOURCES)
                | Failure::Rejected
                | Failure::Lost
        )
    }
}

impl From<VerbsError> for Failure {
    fn from(e: VerbsError) -> Self {
        Failure::Verbs(e)
    }
}

impl From<NtStatus> for Failure {
    fn from(e: NtStatus) -> Self {
        Failure::Cm(e)
    }
}

type Answer = Result<(), Failure>;

const SID: u64 = 0x0106_1388;

/// Fresh devices with the objects the paths need, made before anything is refused: the one
/// the paths run on and a peer on the same fabric, listening.
struct Fx {
    platform: HostPlatform,
    hca: Arc<SoftHca<HostPlatform>>,
    cm: SoftCm,
    peer: Arc<SoftHca<HostPlatform>>,
    peer_cm: SoftCm,
    listener: SoftCmId,
    /// The listener's events, and those of the REQ path's id.
    listening: KArc<CmCounts>,
    active: KArc<CmCounts>,
    /// The REQ path's id, destroyed once its answer is in.
    pending: Mutex<Option<SoftCmId>>,
    path: IB_PATH_REC,
    _fabric: Arc<Fabric>,
    /// The sinks the paths pass (allocated here: the caller's allocation, not the device's).
    sink: KArc<NoEvents>,
    ca: SoftCa,
    pd: SoftPd,
    /// Two CQs no QP is bound to yet (a QP's binding grows their lists).
    scq: SoftCq,
    rcq: SoftCq,
    srq: SoftSrq,
    /// A UD QP for the multicast attach, on its own CQ.
    ud_cq: SoftCq,
    ud: SoftQp,
    buf: DmaBuffer,
}

fn qp_create<'a>(
    qp_type: QpType,
    scq: &'a SoftCq,
    rcq: &'a SoftCq,
    srq: Option<&'a SoftSrq>,
) -> QpCreate<'a, SoftCq, SoftSrq> {
    QpCreate {
        qp_type,
        sq_depth: 64,
        rq_depth: 64,
        sq_sge: 4,
        rq_sge: 4,
        sq_max_inline: 64,
        sq_signaled: true,
        send_cq: scq,
        recv_cq: rcq,
        srq,
    }
}

impl Fx {
    fn new() -> Fx {
        let platform = HostPlatform::deterministic();
        let pool = BufferPool::new();
        let device = |name, last| {
            SoftHca::new(
                Arc::new(platform.clone()),
                DeviceConfig::new(name, [0x02, 0, 0, 0, 0x57, last]),
                ClientMemory::pool(pool.clone()),
            )
        };
        let (hca, peer) = (device("walk", 1), device("peer", 2));
        let fabric = Fabric::new();
        fabric.attach(&hca);
        fabric.attach(&peer);
        let (cm, peer_cm) = (hca.cm(), peer.cm());
        let listening = KArc::new(CmCounts::default());
        let listener = peer_cm.create_id(listening.clone().into()).unwrap();
        peer_cm.listen(&listener, SID, &[], 0).unwrap();
        let path = IB_PATH_REC {
            dgid: peer.gid(),
            sgid: hca.gid(),
            dlid: peer.lid(1).to_be(),
            slid: hca.lid(1).to_be(),
            hop_flow_raw: 1u32.to_be(),
            num_path: 0x81,
            pkey: 0xFFFFu16.to_be(),
            mtu: 0x80 | 3,
            rate: 0x80 | 3,
            pkt_life: 0x80 | 13,
            ..IB_PATH_REC::default()
        };
        let sink = KArc::new(NoEvents);
        let ca = hca.open_ca(&mut Umv::none(), sink.clone().into()).unwrap();
        let pd = hca.allocate_pd(&ca, &mut Umv::none()).unwrap();
        let cq = || {
            hca.create_cq(&ca, 16, sink.clone().into(), &mut Umv::none())
                .unwrap()
                .0
        };
        let (scq, rcq, ud_cq) = (cq(), cq(), cq());
        let attr = SrqAttributes {
            max_wr: 16,
            max_sge: 2,
            srq_limit: 0,
        };
        let srq = hca
            .create_srq(&pd, &attr, sink.clone().into(), &mut Umv::none())
            .unwrap();
        let ud = hca
            .create_qp(
                &pd,
                &qp_create(QpType::Ud, &ud_cq, &ud_cq, None),
                sink.clone().into(),
                &mut Umv::none(),
            )
            .unwrap()
            .0;
        let buf = pool.alloc(4096);
        Fx {
            platform,
            hca,
            cm,
            peer,
            peer_cm,
            listener,
            listening,
            active: KArc::new(CmCounts::default()),
            pending: Mutex::new(None),
            path,
            _fabric: fabric,
            sink,
            ca,
            pd,
            scq,
            rcq,
            srq,
            ud_cq,
            ud,
            buf,
        }
    }

    /// What the devices hold.
    fn held(&self) -> (ObjectCounts, usize, usize) {
        (self.hca.objects(), self.cm.ids(), self.peer_cm.ids())
    }

    fn tear_down(self) {
        let hca = self.hca;
        hca.destroy_qp(self.ud);
        hca.destroy_cq(self.ud_cq);
        hca.destroy_srq(self.srq);
        hca.destroy_cq(self.rcq);
        hca.destroy_cq(self.scq);
        hca.deallocate_pd(self.pd);
        hca.close_ca(self.ca);
        self.peer_cm.destroy_id(self.listener);
        self.platform.run_until_idle();
        assert_eq!(hca.objects(), ObjectCounts::default(), "teardown");
        assert_eq!(self.peer.objects(), ObjectCounts::default(), "teardown");
        assert_eq!((self.cm.ids(), self.peer_cm.ids()), (0, 0), "teardown");
    }
}

fn cm_req(path: &IB_PATH_REC) -> CmReq<'_> {
    CmReq {
        service_id: SID,
        primary_path: path,
        qpn: 0x10,
        params: CmReqParams {
            qp_type: QpType::Rc,
            starting_psn: 1,
            max_cm_retries: 3,
            responder_resources: 1,
            initiator_depth: 1,
            remote_cm_response_timeout: 16,
            flow_control: true,
            local_cm_response_timeout: 16,
            rnr_retry_count: 6,
            retry_count: 5,
            srq: false,
        },
        private_data: b"walk",
    }
}

/// The REQ path's answer, once the DPCs ran: the listener got the request, or the requester
/// the peer's REJ, or neither (the message was lost). Then its ids go.
fn req_answered(fx: &Fx) -> Answer {
    let id = fx.pending.lock().unwrap().take();
    let got = fx.listening.req_received.swap(0, Ordering::SeqCst);
    let rejected = fx.active.rejected_no_resources.swap(0, Ordering::SeqCst);
    if got > 0 {
        let (passive, _) = fx
            .peer_cm
            .get_request(&fx.listener, fx.listening.clone().into())
            .unwrap();
        fx.peer_cm.destroy_id(passive);
    }
    if let Some(id) = id {
        fx.cm.destroy_id(id);
    }
    fx.platform.run_until_idle();
    match (got, rejected) {
        (1, 0) => Ok(()),
        (0, 1) => Err(Failure::Rejected),
        (0, 0) => Err(Failure::Lost),
        other => panic!("REQ answered {other:?}"),
    }
}

/// One path: a call that creates (and destroys again) or resizes, run as driver code, and
/// what tells its answer once the DPCs it caused have run.
/// Creates a QP of `c` on the fixture's PD, and destroys it again.
fn create_and_destroy_qp(fx: &Fx, c: &QpCreate<'_, SoftCq, SoftSrq>) -> Answer {
    let (qp, _) = fx
        .hca
        .create_qp(&fx.pd, c, fx.sink.clone().into(), &mut Umv::none())?;
    fx.hca.destroy_qp(qp);
    Ok(())
}

struct Case {
    name: &'static str,
    op: fn(&Fx) -> Answer,
    settle: fn(&Fx) -> Answer,
}

fn settled(_: &Fx) -> Answer {
    Ok(())
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            settle: settled,
            name: "open_ca",
            op: |fx| {
                let mut out = [0u8; 64];
                let mut umv = Umv::new(0, 0, out.len(), &mut out);
                let ca = fx.hca.open_ca(&mut umv, fx.sink.clone().into())?;
                fx.hca.close_ca(ca);
                Ok(())
            },
        },
        Case {
            settle: settled,
            name: "allocate_pd",
            op: |fx| {
                let pd = fx.hca.allocate_pd(&fx.ca, &mut Umv::none())?;
                fx.hca.deallocate_pd(pd);
                Ok(())
            },
        },
        Case {
            settle: settled,
            name: "register_mr",
            op: |fx| {
                let region = MemoryRegion {
                    address: fx.buf.addr(),
                    length: fx.buf.len() as u64,
                    access: wv_abi::consts::WV_ACCESS_LOCAL_WRITE,
                };
                let (mr, _) = fx.hca.register_mr(&fx.pd, &region)?;
                fx.hca.deregister_mr(mr).map_err(|(_, e)| e.into())
            },
        },
        Case {
            settle: settled,
            name: "create_mw",
            op: |fx| {
                let (mw, _) = fx.hca.create_mw(&fx.pd, &mut Umv::none())?;
                fx.hca.destroy_mw(mw);
                Ok(())
            },
        },
        Case {
            settle: settled,
            name: "create_ah",
            op: |fx| {
                let av = AddressVector {
                    grh_valid: true,
                    hop_limit: 64,
                    dgid: fx.hca.gid(),
                    port: 1,
                    ..AddressVector::default()
                };
                let ah = fx.hca.create_ah(&fx.pd, &av, &mut Umv::none())?;
                fx.hca.destroy_ah(ah);
                Ok(())
            },
        },
        Case {
            settle: settled,
            name: "create_cq",
            op: |fx| {
                let (cq, _) =
                    fx.hca
                        .create_cq(&fx.ca, 256, fx.sink.clone().into(), &mut Umv::none())?;
                fx.hca.destroy_cq(cq);
                Ok(())
            },
        },
        Case {
            settle: settled,
            name: "resize_cq",
            op: |fx| {
                fx.hca.resize_cq(&fx.scq, 256, &mut Umv::none())?;
                Ok(())
            },
        },
        Case {
            settle: settled,
            name: "create_srq",
            op: |fx| {
                let attr = SrqAttributes {
                    max_wr: 64,
                    max_sge: 2,
                    srq_limit: 0,
                };
                let srq =
                    fx.hca
                        .create_srq(&fx.pd, &attr, fx.sink.clone().into(), &mut Umv::none())?;
                fx.hca.destroy_srq(srq);
                Ok(())
            },
        },
        Case {
            settle: settled,
            name: "modify_srq (resize)",
            op: |fx| {
                let attr = SrqAttributes {
                    max_wr: 64,
                    max_sge: 2,
                    srq_limit: 0,
                };
                let mask = SrqModifyMask {
                    max_wr: true,
                    limit: false,
                };
                Ok(fx.hca.modify_srq(&fx.srq, &attr, mask, &mut Umv::none())?)
            },
        },
        Case {
            settle: settled,
            name: "create_qp (RC, its own CQs)",
            op: |fx| create_and_destroy_qp(fx, &qp_create(QpType::Rc, &fx.scq, &fx.rcq, None)),
        },
        Case {
            settle: settled,
            name: "create_qp (on an SRQ, one CQ)",
            op: |fx| {
                create_and_destroy_qp(fx, &qp_create(QpType::Rc, &fx.scq, &fx.scq, Some(&fx.srq)))
            },
        },
        Case {
            settle: settled,
            name: "attach_mcast",
            op: |fx| {
                let mut group = [0u8; 16];
                group[0] = 0xFF;
                group[15] = 1;
                let m = fx.hca.attach_mcast(&fx.ud, &group, 0xC001)?;
                fx.hca.detach_mcast(m);
                Ok(())
            },
        },
        Case {
            settle: settled,
            name: "cm create_id",
            op: |fx| {
                let id = fx.cm.create_id(fx.sink.clone().into())?;
                fx.cm.destroy_id(id);
                Ok(())
            },
        },
        Case {
            settle: settled,
            name: "cm listen (four: the fabric's listen registry grows)",
            op: |fx| {
                let mut ids = [const { None }; 4];
                let mut listened = Ok(());
                for (sid, slot) in (SID + 1..).zip(&mut ids) {
                    listened = fx
                        .cm
                        .create_id(fx.sink.clone().into())
                        .and_then(|id| fx.cm.listen(slot.insert(id), sid, &[], 0));
                    if listened.is_err() {
                        break;
                    }
                }
                for id in ids.into_iter().flatten() {
                    fx.cm.destroy_id(id);
                }
                Ok(listened?)
            },
        },
        Case {
            name: "cm REQ to a listen on the peer (the peer's DPC takes it)",
            op: |fx| {
                let id = fx.cm.create_id(fx.active.clone().into())?;
                let sent = fx.cm.send_req(&id, &cm_req(&fx.path));
                *fx.pending.lock().unwrap() = Some(id);
                Ok(sent?)
            },
            settle: req_answered,
        },
    ]
}

/// The work item that runs a path: the host model runs it as driver code at PASSIVE_LEVEL.
struct Job<F>(Mutex<Option<F>>);

impl<F: FnOnce() + Send + 'static> WorkItem for Job<F> {
    fn run(&self) {
        if let Some(f) = self.0.lock().unwrap().take() {
            f();
        }
    }
}

/// Runs `case` on `fx` as the driver would, under `plan` (its DPCs too), then tells its
/// answer.
fn as_driver(fx: &Arc<Fx>, plan: Plan, case: &Case) -> (Answer, Tally) {
    let op = case.op;
    let result = Arc::new(Mutex::new(None));
    let job = {
        let (fx, result) = (Arc::clone(fx), Arc::clone(&result));
        KArc::new(Job(Mutex::new(Some(move || {
            let r = op(&fx);
            *result.lock().unwrap() = Some(r);
        }))))
    };
    low_resources::arm(plan);
    fx.platform.queue_work(job.into()).unwrap();
    fx.platform.run_until_idle();
    let tally = low_resources::disarm();
    let r = result.lock().unwrap().take().expect("the work item ran");
    let settled = (case.settle)(fx);
    (r.and(settled), tally)
}

/// Refuses allocation `n` of `case` on a fresh device; `None` once the path made fewer.
fn attempt(case: &Case, n: u64) -> Option<()> {
    let name = case.name;
    eprintln!("walk: {name}, allocation {n}");
    let before = low_resources::live_bytes();
    let fx = Arc::new(Fx::new());
    let held = fx.held();
    let (r, tally) = as_driver(&fx, Plan::FailNth(n), case);
    assert_eq!(fx.held(), held, "{name}, allocation {n}: objects left");
    let refused = tally.refused == 1;
    if refused {
        assert!(
            r.is_err_and(Failure::is_out_of_memory),
            "{name}, allocation {n}: {r:?}"
        );
        // The same call succeeds now.
        let (again, _) = as_driver(&fx, Plan::Off, case);
        assert_eq!(again, Ok(()), "{name} after refusing allocation {n}");
        assert_eq!(fx.held(), held, "{name}: objects left");
    } else {
        assert_eq!(tally.refused, 0);
        assert_eq!(r, Ok(()), "{name} with nothing refused");
    }
    Arc::into_inner(fx)
        .expect("the work item let go")
        .tear_down();
    assert_eq!(
        low_resources::live_bytes(),
        before,
        "{name}, allocation {n}: bytes left once the device is gone"
    );
    refused.then_some(())
}

fn walk() {
    let cases = cases();
    let mut points = 0u64;
    for case in &cases {
        let fx = Arc::new(Fx::new());
        let (r, counted) = as_driver(&fx, Plan::Count, case);
        assert_eq!(r, Ok(()), "{}", case.name);
        assert!(counted.seen > 0, "{} allocates nothing", case.name);
        Arc::into_inner(fx).unwrap().tear_down();
        let mut n = 1;
        while attempt(case, n).is_some() {
            n += 1;
        }
        let walked = n - 1;
        println!(
            "walk: {}: {walked} allocations refused one by one ({} counted)",
            case.name, counted.seen
        );
        points += walked;
    }
    println!(
        "walk: {} paths, {points} allocation points, 0 failures",
        cases.len()
    );
    if let Ok(dir) = std::env::var("WV_FIGURES_DIR") {
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            std::path::Path::new(&dir).join("softhca_alloc_walk.txt"),
            format!("paths={}\npoints={points}\n", cases.len()),
        )
        .unwrap();
    }
}

/// Runs the test `test` alone in a child process of this binary, with `marker` set so that it
/// knows it is the child, and waits for its output.
fn run_in_child(test: &str, marker: &str) -> std::process::Output {
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env(marker, "1")
        .output()
        .unwrap()
}

#[test]
fn every_allocation_of_every_create_and_resize_can_fail() {
    if std::env::var_os(CHILD).is_some() {
        walk();
        return;
    }
    let out = run_in_child(TEST, CHILD);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // The harness prints the test's name on the line its first output continues.
    for line in stdout
        .lines()
        .filter_map(|l| l.find("walk: ").map(|i| &l[i..]))
    {
        println!("{line}");
    }
    if !out.status.success() {
        let at = stderr
            .lines()
            .rev()
            .find_map(|l| l.find("walk: ").map(|i| &l[i..]))
            .unwrap_or("walk: before the first path");
        let tail: Vec<&str> = stderr.lines().rev().take(12).collect();
        panic!(
            "the walk's process failed ({}) at \"{at}\" (an infallible allocation calls the \
             allocation-error handler, which aborts; in the kernel, a bug check). Its last \
             lines:\n{}",
            out.status,
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        );
    }
}

/// Set in the child process that runs the race of two creators.
const RACE_CHILD: &str = "WV_SOFTHCA_TABLE_RACE_CHILD";
const RACE_TEST: &str = "a_table_another_creator_filled_meanwhile_is_grown_again_outside_its_lock";

/// A create finds its handle table full and allocates a bigger one with the lock released;
/// meanwhile another creator grows the table twice and fills it. Back under the lock, the
/// bigger table is too small for what the table now holds: it is let go and the create grows
/// the table again with the lock released, so a refusal of that allocation is answered with
/// `InsufficientMemory`. Growing it under the lock instead is an infallible allocation there
/// (in the kernel, at DISPATCH_LEVEL), whose refusal aborts (a bug check).
#[test]
fn a_table_another_creator_filled_meanwhile_is_grown_again_outside_its_lock() {
    if std::env::var_os(RACE_CHILD).is_none() {
        let out = run_in_child(RACE_TEST, RACE_CHILD);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "the race's process failed ({}):\n{stderr}",
            out.status
        );
        return;
    }
    let platform = HostPlatform::deterministic();
    let hca = SoftHca::new(
        Arc::new(platform.clone()),
        DeviceConfig::new("race", [0x02, 0, 0, 0, 0x58, 1]),
        ClientMemory::pool(BufferPool::new()),
    );
    let sink = KArc::new(NoEvents);
    let ca = Arc::new(hca.open_ca(&mut Umv::none(), sink.into()).unwrap());
    let pd = || hca.allocate_pd(&ca, &mut Umv::none()).unwrap();
    // The PD table's first growth is to 4 handles: full.
    let mut pds: Vec<SoftPd> = (0..4).map(|_| pd()).collect();
    // The other creator: 12 more PDs (the table grows to 8, then 16, and is full again) while
    // the driver's create waits in its allocation of a table of 8.
    let other = {
        let (hca, ca) = (hca.clone(), ca.clone());
        std::thread::spawn(move || {
            while !PAUSED.load(Ordering::SeqCst) {
                std::thread::yield_now();
            }
            let made: Vec<SoftPd> = (0..12)
                .map(|_| hca.allocate_pd(&ca, &mut Umv::none()).unwrap())
                .collect();
            GO_ON.store(true, Ordering::SeqCst);
            made
        })
    };
    let result = Arc::new(Mutex::new(None));
    let job = {
        let (hca, ca, result) = (hca.clone(), ca.clone(), Arc::clone(&result));
        KArc::new(Job(Mutex::new(Some(move || {
            PAUSE_NEXT.with(|p| p.set(true));
            let r = hca.allocate_pd(&ca, &mut Umv::none());
            PAUSE_NEXT.with(|p| p.set(false));
            *result.lock().unwrap() = Some(r);
        }))))
    };
    // The paused allocation is the driver's first; its next one is refused.
    low_resources::arm(Plan::FailNth(2));
    platform.queue_work(job.into()).unwrap();
    platform.run_until_idle();
    let tally = low_resources::disarm();
    pds.extend(other.join().unwrap());
    let r = result.lock().unwrap().take().expect("the work item ran");
    assert_eq!(r.err(), Some(VerbsError::InsufficientMemory));
    assert_eq!(tally.refused, 1);
    assert_eq!(
        hca.objects().pds,
        16,
        "the other creator's PDs are all there"
    );
    // Nothing refused now: the table grows and the create succeeds.
    pds.push(pd());
    assert_eq!(hca.objects().pds, 17);
    for pd in pds {
        hca.deallocate_pd(pd);
    }
    hca.close_ca(Arc::into_inner(ca).unwrap());
    platform.run_until_idle();
    assert_eq!(hca.objects(), ObjectCounts::default());
}
