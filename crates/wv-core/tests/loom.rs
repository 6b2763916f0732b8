//! loom models of the driver core's races: the real `Driver` (dispatch, providers, gates,
//! parked requests, the QP-modify drainer, cleanup and removal) on `wv_host::loom_platform`,
//! whose locks and atomics (and the core's own: `RefCount`, `KArc`) are loom's, so loom runs
//! every interleaving of the threads below up to its preemption bound. Each model asserts that
//! every request completed exactly once with a status it may have, that no lower-device object
//! is left, and that the platform recorded no violation (double completion, request dropped
//! or left parked).
//!
//! `RUSTFLAGS="--cfg loom" cargo test -p wv-core --test loom --release`; `LOOM_MAX_PREEMPTIONS`
//! bounds the search (default 3 here; 2 for the four-thread removal model, whose bound-3 run
//! takes two minutes). The endpoint models run over `LoomCm` (below).
#![cfg(loom)]
#![allow(clippy::disallowed_methods)] // tests may allocate infallibly; the core may not (clippy.toml)

use std::sync::Arc;
use std::sync::atomic::Ordering as StdOrdering;

use loom::sync::atomic::{AtomicBool, Ordering};
use wv_abi::ioctl::*;
use wv_abi::{NtStatus, WV_IO_ID, WV_IO_QP_ATTRIBUTES};
use wv_core::{Driver, DriverConfig, FileContext};
use wv_hal::{FilterDriver, KArc, QpState};
use wv_host::loom_platform::{Irp, LoomCm, LoomPlatform, LoomVerbs, PeerMessage};
use zerocopy::IntoBytes;

// The endpoint IOCTLs' input bytes, as the scenario tests build them.
#[allow(dead_code)]
#[path = "common/input.rs"]
mod input;

use input::{
    LOCAL, accept_in, bind_in, connect_in, disconnect_in, get_request_in, id as io_id, incoming,
    ipv4, listen_in, qp_create_in, route_in, u64_in,
};

type Drv = Driver<LoomPlatform, Arc<LoomVerbs>>;
type File = FileContext<LoomPlatform, Arc<LoomVerbs>>;

const GUID: u64 = 0x1234;

fn model(name: &str, f: impl Fn() + Sync + Send + 'static) {
    bounded(name, 3, f);
}

/// A model with its own default preemption bound (`LOOM_MAX_PREEMPTIONS` overrides it).
fn bounded(name: &str, preemptions: usize, f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    // Not a bound on the search: the length of one execution. Connecting an endpoint before
    // the race starts takes a few thousand operations on one thread.
    builder.max_branches = 20_000;
    wv_host::loom_model::check(name, builder, preemptions, f);
}

struct Stack {
    p: LoomPlatform,
    hca: Arc<LoomVerbs>,
    driver: Arc<Drv>,
    file: Arc<File>,
}

fn id(id: u64, data: u32) -> Vec<u8> {
    WV_IO_ID::new(id, data).as_bytes().to_vec()
}

impl Stack {
    /// Runs `f` on a new model thread with the driver and file.
    fn spawn<T: 'static>(
        &self,
        f: impl FnOnce(&Drv, &File, &LoomPlatform) -> T + 'static,
    ) -> loom::thread::JoinHandle<T> {
        let (driver, file, p) = (
            Arc::clone(&self.driver),
            Arc::clone(&self.file),
            self.p.clone(),
        );
        loom::thread::spawn(move || f(&driver, &file, &p))
    }

    fn new() -> Stack {
        Stack::with_cm(None)
    }

    /// A stack whose lower device has `cm` as its connection manager.
    fn with_cm(cm: Option<&Arc<LoomCm>>) -> Stack {
        let p = LoomPlatform::new();
        let hca = Arc::new(LoomVerbs::new(GUID));
        let driver = Arc::new(Driver::new(p.clone(), DriverConfig::default()));
        let cm = cm.map(|cm| KArc::new(Arc::clone(cm)));
        driver
            .device_arrival(KArc::new(Arc::clone(&hca)), cm)
            .unwrap();
        let file = Arc::new(driver.file_create().unwrap());
        Stack {
            p,
            hca,
            driver,
            file,
        }
    }

    /// Sends a request; returns its IRP (to cancel it or read its completions).
    fn send(&self, code: u32, input: &[u8], out: usize) -> Arc<Irp> {
        send(&self.p, &self.driver, &self.file, code, input, out)
    }

    /// Builds a request here and sends it from a new model thread: the IRP exists before the
    /// race starts, so the main thread may cancel it while the dispatch parks it.
    fn send_from_thread(
        &self,
        code: u32,
        input: &[u8],
        out: usize,
    ) -> (loom::thread::JoinHandle<()>, Arc<Irp>) {
        let (request, irp) = self.p.request(code, input, out);
        let sender = self.spawn(move |driver, file, _| driver.device_io_control(file, request));
        (sender, irp)
    }

    /// A creation that must complete inline with SUCCESS; returns the new object's id, which
    /// is 1: ids start at 1 per table and every model creates one object of each type.
    fn create(&self, code: u32, input: &[u8], out: usize) -> u64 {
        let irp = self.send(code, input, out);
        assert_eq!(self.p.completions_of(irp.id), [NtStatus::SUCCESS]);
        1
    }

    /// Cleanup and close of the file, then the lower device's removal (driver unload), and
    /// the end-of-run checks.
    fn finish(self) {
        let Stack {
            p,
            hca,
            driver,
            file,
        } = self;
        driver.file_cleanup(&file);
        let file = Arc::try_unwrap(file).ok().expect("file still shared");
        driver.file_close(file);
        driver.device_removal(GUID);
        assert_eq!(p.violations(), Vec::<String>::new());
        assert_eq!(hca.live(), 0, "lower-device objects leaked");
    }
}

fn send(
    p: &LoomPlatform,
    driver: &Drv,
    file: &File,
    code: u32,
    input: &[u8],
    out: usize,
) -> Arc<Irp> {
    let (request, irp) = p.request(code, input, out);
    driver.device_io_control(file, request);
    irp
}

/// The one status request `irp` ended with, which must be one of `allowed`.
#[track_caller]
fn once(p: &LoomPlatform, irp: &Irp, allowed: &[NtStatus]) -> NtStatus {
    let got = p.completions_of(irp.id);
    assert_eq!(
        got.len(),
        1,
        "request {} completed {} times: {got:?}",
        irp.id,
        got.len()
    );
    assert!(
        allowed.contains(&got[0]),
        "request {} ended with {:?}",
        irp.id,
        got[0]
    );
    got[0]
}

fn device_and_cq(s: &Stack) -> (u64, u64) {
    let dev = s.create(WV_IOCTL_DEVICE_OPEN, &id(GUID, 0), 16);
    let cq = s.create(WV_IOCTL_CQ_CREATE, &id(dev, 4), 16);
    (dev, cq)
}

fn qp_on(s: &Stack, dev: u64, cq: u64) -> u64 {
    let pd = s.create(WV_IOCTL_PD_ALLOCATE, &id(dev, 0), 16);
    s.create(
        WV_IOCTL_QP_CREATE,
        qp_create_in(pd, cq, cq, 0).as_bytes(),
        72,
    )
}

fn modify_in(qp: u64) -> Vec<u8> {
    let mut attr = WV_IO_QP_ATTRIBUTES::default();
    attr.Id.Id = qp;
    attr.QpState = QpState::Init as u8;
    attr.AddressVector.PortNumber = 1;
    attr.as_bytes().to_vec()
}

/// A system worker: runs queued work items until told to stop and none is left.
struct Worker {
    stop: Arc<AtomicBool>,
    thread: loom::thread::JoinHandle<()>,
}

impl Worker {
    fn start(p: &LoomPlatform) -> Worker {
        let stop = Arc::new(AtomicBool::new(false));
        let (p, told) = (p.clone(), Arc::clone(&stop));
        let thread = loom::thread::spawn(move || {
            loop {
                p.run_work();
                if told.load(Ordering::SeqCst) {
                    p.run_work();
                    break;
                }
                loom::thread::yield_now();
            }
        });
        Worker { stop, thread }
    }

    /// Tells it to stop, and waits for it.
    fn stop(self) {
        self.stop.store(true, Ordering::SeqCst);
        self.thread.join().unwrap();
    }
}

/// A stack with a CQ on its device: the stack and the CQ.
fn stack_with_cq() -> (Stack, u64) {
    let s = Stack::new();
    let (_, cq) = device_and_cq(&s);
    (s, cq)
}

/// A stack with a CQ and a QP on its device, and a worker running the pool: the stack, the
/// CQ, the QP and the worker.
fn pooled_qp() -> (Stack, u64, u64, Worker) {
    let s = Stack::new();
    let (dev, cq) = device_and_cq(&s);
    let qp = qp_on(&s, dev, cq);
    let pool = Worker::start(&s.p);
    (s, cq, qp, pool)
}

/// [`pooled_qp`] with a QP_MODIFY sent from a new model thread: the stack, the QP, the
/// worker, that thread and the modify.
fn modify_on_pool() -> (Stack, u64, Worker, loom::thread::JoinHandle<()>, Arc<Irp>) {
    let (s, _, qp, pool) = pooled_qp();
    let (issuer, modify) = s.send_from_thread(WV_IOCTL_QP_MODIFY, &modify_in(qp), 8);
    (s, qp, pool, issuer, modify)
}

/// A parked CQ notify racing the DPC's broadcast, CQ_CANCEL and the I/O manager's cancel.
#[test]
fn notify_racing_the_dpc_cancel_and_cancel_io() {
    model("notify-dpc-cancel-cancelio", || {
        let (s, cq) = stack_with_cq();
        let (parker, notify) = s.send_from_thread(WV_IOCTL_CQ_NOTIFY, &id(cq, 1), 0);
        let dpc = {
            let hca = Arc::clone(&s.hca);
            loom::thread::spawn(move || hca.cq_completion())
        };
        let cancel = s.send(WV_IOCTL_CQ_CANCEL, &cq.to_ne_bytes(), 0);
        s.p.cancel(&notify);
        parker.join().unwrap();
        dpc.join().unwrap();
        once(&s.p, &cancel, &[NtStatus::SUCCESS]);
        let p = s.p.clone();
        s.finish();
        // The DPC or CQ_CANCEL or CancelIoEx ended it, or (parked after all three) cleanup.
        once(&p, &notify, &[NtStatus::SUCCESS, NtStatus::CANCELLED]);
    });
}

/// A parked notify racing the last handle's close: the IOCTL is refused, or parked and
/// cancelled by cleanup, never lost.
#[test]
fn notify_racing_the_handle_close() {
    model("notify-close", || {
        let (s, cq) = stack_with_cq();
        let (parker, notify) = s.send_from_thread(WV_IOCTL_CQ_NOTIFY, &id(cq, 1), 0);
        s.driver.file_cleanup(&s.file);
        parker.join().unwrap();
        once(&s.p, &notify, &[NtStatus::CANCELLED, NtStatus::FILE_CLOSED]);
        s.finish();
    });
}

/// QP_MODIFY on the work-item pool racing QP_CANCEL and QP_DESTROY.
#[test]
fn modify_racing_cancel_and_destroy() {
    model("modify-cancel-destroy", || {
        let (s, qp, pool, issuer, modify) = modify_on_pool();
        let cancel = s.send(WV_IOCTL_QP_CANCEL, &qp.to_ne_bytes(), 0);
        let destroy = s.send(WV_IOCTL_QP_DESTROY, &qp.to_ne_bytes(), 0);
        issuer.join().unwrap();
        pool.stop();
        once(&s.p, &cancel, &[NtStatus::SUCCESS, NtStatus::NOT_FOUND]);
        once(
            &s.p,
            &destroy,
            &[NtStatus::SUCCESS, NtStatus::ACCESS_DENIED],
        );
        once(
            &s.p,
            &modify,
            &[NtStatus::SUCCESS, NtStatus::CANCELLED, NtStatus::NOT_FOUND],
        );
        s.finish();
    });
}

/// QP_MODIFY in the caller's thread (the device's commands measured far shorter than a
/// hand-off) racing a second modify of the same QP, which must then wait for it and reach the
/// pool, and QP_DESTROY, which waits for it as for a drainer: every request ends once, and
/// nothing is left parked or alive.
#[test]
fn modify_in_the_callers_thread_racing_a_queued_one_and_destroy() {
    model("modify-inline-queued-destroy", || {
        let s = Stack::new();
        let (dev, cq) = device_and_cq(&s);
        let qp = qp_on(&s, dev, cq);
        // The estimates: one modify whose worker starts 50 µs after it was queued.
        let warm = s.send(WV_IOCTL_QP_MODIFY, &modify_in(qp), 8);
        s.p.advance_clock(50_000);
        s.p.run_work();
        assert_eq!(s.p.completions_of(warm.id), [NtStatus::SUCCESS]);
        let pool = Worker::start(&s.p);
        let (issuer, first) = s.send_from_thread(WV_IOCTL_QP_MODIFY, &modify_in(qp), 8);
        let second = s.send(WV_IOCTL_QP_MODIFY, &modify_in(qp), 8);
        let destroy = s.send(WV_IOCTL_QP_DESTROY, &qp.to_ne_bytes(), 0);
        issuer.join().unwrap();
        pool.stop();
        // Either may be the one run in its caller's thread, the other queued behind it (and
        // then cancelled by the destroy, or run by the pool), or both find the QP destroyed.
        for modify in [&first, &second] {
            once(
                &s.p,
                modify,
                &[NtStatus::SUCCESS, NtStatus::CANCELLED, NtStatus::NOT_FOUND],
            );
        }
        once(
            &s.p,
            &destroy,
            &[NtStatus::SUCCESS, NtStatus::ACCESS_DENIED],
        );
        s.finish();
    });
}

/// QP_MODIFY racing the last handle's close (cleanup cancels queued modifies and waits for the
/// running one).
#[test]
fn modify_racing_cleanup() {
    model("modify-cleanup", || {
        let (s, _, pool, issuer, modify) = modify_on_pool();
        s.driver.file_cleanup(&s.file);
        issuer.join().unwrap();
        pool.stop();
        once(
            &s.p,
            &modify,
            &[
                NtStatus::SUCCESS,
                NtStatus::CANCELLED,
                NtStatus::FILE_CLOSED,
            ],
        );
        s.finish();
    });
}

/// Device removal racing a parked notify, CQ_CANCEL and a modify on the pool.
#[test]
fn removal_racing_notify_cancel_and_modify() {
    bounded("removal-notify-cancel-modify", 2, || {
        let (s, cq, qp, pool) = pooled_qp();
        let (parker, notify) = s.send_from_thread(WV_IOCTL_CQ_NOTIFY, &id(cq, 1), 0);
        let remover = s.spawn(|driver, _, _| driver.device_removal(GUID));
        let modify = s.send(WV_IOCTL_QP_MODIFY, &modify_in(qp), 8);
        parker.join().unwrap();
        remover.join().unwrap();
        pool.stop();
        once(
            &s.p,
            &notify,
            &[NtStatus::DEVICE_REMOVED, NtStatus::NOT_FOUND],
        );
        once(
            &s.p,
            &modify,
            &[
                NtStatus::SUCCESS,
                NtStatus::DEVICE_REMOVED,
                NtStatus::NOT_FOUND,
            ],
        );
        let cancel = s.send(WV_IOCTL_CQ_CANCEL, &cq.to_ne_bytes(), 0);
        once(&s.p, &cancel, &[NtStatus::NOT_FOUND]);
        s.finish();
    });
}

/// Device removal racing the last handle's close with a notify parked.
#[test]
fn removal_racing_cleanup() {
    model("removal-cleanup", || {
        let (s, cq) = stack_with_cq();
        let notify = s.send(WV_IOCTL_CQ_NOTIFY, &id(cq, 1), 0);
        let remover = s.spawn(|driver, _, _| driver.device_removal(GUID));
        s.driver.file_cleanup(&s.file);
        remover.join().unwrap();
        once(
            &s.p,
            &notify,
            &[NtStatus::DEVICE_REMOVED, NtStatus::CANCELLED],
        );
        s.finish();
    });
}

/// The gate under every file and device: a user that entered before the close has left when
/// `wait_drained` returns, and nobody enters after the close.
#[test]
fn gate_close_drains_and_refuses() {
    use wv_core::sync::Gate;
    model("gate", || {
        let p = LoomPlatform::new();
        let gate = Arc::new(Gate::new(&p).unwrap());
        let inside = Arc::new(AtomicBool::new(false));
        let user = {
            let (gate, inside) = (Arc::clone(&gate), Arc::clone(&inside));
            loom::thread::spawn(move || {
                if gate.enter() {
                    inside.store(true, Ordering::SeqCst);
                    inside.store(false, Ordering::SeqCst);
                    gate.leave();
                }
            })
        };
        assert!(gate.close());
        gate.wait_drained();
        assert!(!inside.load(Ordering::SeqCst), "a user was still inside");
        assert!(!gate.enter(), "entered a closed gate");
        user.join().unwrap();
    });
}

/// KArc: clones and weak upgrades on two threads; the value is dropped exactly once, after the
/// last strong reference, and upgrades fail from then on.
#[test]
fn karc_counts() {
    use wv_hal::KArc;
    struct Counted(Arc<std::sync::atomic::AtomicUsize>);
    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, StdOrdering::SeqCst);
        }
    }
    model("karc", || {
        let drops = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let a = KArc::try_new(Counted(Arc::clone(&drops))).unwrap();
        let weak = KArc::downgrade(&a);
        let b = a.clone();
        let t = loom::thread::spawn(move || {
            let up = weak.upgrade();
            drop(b);
            drop(up);
            weak
        });
        drop(a);
        let weak = t.join().unwrap();
        assert!(weak.upgrade().is_none());
        assert_eq!(drops.load(StdOrdering::SeqCst), 1);
    });
}

// ---------------------------------------------------------------------------------------------
// Endpoints: the same stack with the lower device's connection manager (`LoomCm`), whose
// peer messages a model thread delivers as the CM's DPC would, at DISPATCH_LEVEL into the
// endpoint's sink. Each model also checks that every CM id was destroyed and every endpoint
// freed (an endpoint holds five queues of the platform until it is dropped).

/// The stack with a CM, and the next endpoint id (ids start at 1 per file and per table).
struct EpStack {
    s: Stack,
    cm: Arc<LoomCm>,
    next_ep: std::cell::Cell<u64>,
}

impl EpStack {
    fn new() -> EpStack {
        let cm = Arc::new(LoomCm::new());
        EpStack {
            s: Stack::with_cm(Some(&cm)),
            cm,
            next_ep: std::cell::Cell::new(1),
        }
    }

    fn send(&self, code: u32, input: &[u8], out: usize) -> Arc<Irp> {
        self.s.send(code, input, out)
    }

    /// A request that must complete inline with `status`.
    #[track_caller]
    fn inline(&self, code: u32, input: &[u8], out: usize, status: NtStatus) {
        let irp = self.send(code, input, out);
        assert_eq!(self.s.p.completions_of(irp.id), [status], "IOCTL {code:#x}");
    }

    /// A new endpoint bound to LOCAL:`port` on the stack's device.
    fn bound(&self, port: u16) -> u64 {
        let type_connect = u64_in(wv_abi::consts::WV_IO_EP_TYPE_CONNECT);
        self.inline(WV_IOCTL_EP_CREATE, &type_connect, 8, NtStatus::SUCCESS);
        let ep = self.next_ep.replace(self.next_ep.get() + 1);
        let bind = bind_in(ep, ipv4(LOCAL, port), GUID);
        self.inline(WV_IOCTL_EP_BIND, &bind, 56, NtStatus::SUCCESS);
        ep
    }

    /// A new endpoint with its route, ready to connect.
    fn routed(&self) -> u64 {
        let ep = self.bound(7000);
        self.inline(WV_IOCTL_EP_MODIFY, &route_in(ep), 0, NtStatus::SUCCESS);
        ep
    }

    /// A new endpoint that is not bound (what a GET_REQUEST fills).
    fn idle(&self) -> u64 {
        let type_connect = u64_in(wv_abi::consts::WV_IO_EP_TYPE_CONNECT);
        self.inline(WV_IOCTL_EP_CREATE, &type_connect, 8, NtStatus::SUCCESS);
        self.next_ep.replace(self.next_ep.get() + 1)
    }

    /// A listener on LOCAL:7001 that keeps `backlog` requests.
    fn listener(&self, backlog: u64) -> u64 {
        let ep = self.bound(7001);
        self.inline(
            WV_IOCTL_EP_LISTEN,
            &listen_in(ep, backlog),
            0,
            NtStatus::SUCCESS,
        );
        ep
    }

    /// A QP for endpoints to connect (on its own device, PD and CQ).
    fn qp(&self) -> u64 {
        let (dev, cq) = device_and_cq(&self.s);
        qp_on(&self.s, dev, cq)
    }

    /// CONNECT whose work item ran: the REQ is out and the request waits for the answer.
    fn connecting(&self, ep: u64, qp: u64) -> Arc<Irp> {
        let connect = self.send(WV_IOCTL_EP_CONNECT, &connect_in(ep, qp, b""), 0);
        self.s.p.run_work();
        assert!(self.s.p.completions_of(connect.id).is_empty());
        connect
    }

    /// An endpoint connected actively: CONNECT, the peer's REP, ACCEPT (the RTU goes).
    fn connected(&self, qp: u64) -> u64 {
        let ep = self.routed();
        let connect = self.connecting(ep, qp);
        assert!(self.cm.peer(PeerMessage::Rep));
        once(&self.s.p, &connect, &[NtStatus::SUCCESS]);
        let accept = self.send(WV_IOCTL_EP_ACCEPT, &accept_in(ep, qp, b""), 8);
        self.s.p.run_work();
        once(&self.s.p, &accept, &[NtStatus::SUCCESS]);
        ep
    }

    /// Runs `f` on a new model thread with the driver and file.
    fn spawn<T: 'static>(
        &self,
        f: impl FnOnce(&Drv, &File, &LoomPlatform) -> T + 'static,
    ) -> loom::thread::JoinHandle<T> {
        self.s.spawn(f)
    }

    /// A listener with an idle endpoint's GET_REQUEST parked on it, and a model thread on
    /// which the peer's REQ arrives and the pool runs: the listener, the endpoint, the
    /// GET_REQUEST and that thread, which returns whether the listen's sink heard the REQ (a
    /// listener destroyed first does not).
    fn get_request_meeting_a_req(&self) -> (u64, u64, Arc<Irp>, loom::thread::JoinHandle<bool>) {
        let listener = self.listener(1);
        let ep = self.idle();
        let get = self.send(WV_IOCTL_EP_GET_REQUEST, &get_request_in(listener, ep), 0);
        // Its kick's work item: no request announced yet, nothing to pair.
        self.s.p.run_work();
        let dpc = self.spawn_cm(|cm, p| {
            let heard = cm.peer_request(incoming(b""));
            p.run_work();
            heard
        });
        (listener, ep, get, dpc)
    }

    /// [`Self::get_request_meeting_a_req`] with the I/O manager's cancel of the GET_REQUEST
    /// racing the REQ and a request `input(listener, endpoint)` of `code` sent from another
    /// model thread: the endpoint, the GET_REQUEST and that request, once both threads ended;
    /// the listen's sink heard the REQ unless `code` destroys the listener.
    fn get_request_cancelled_meeting_a_req(
        &self,
        code: u32,
        input: impl FnOnce(u64, u64) -> Vec<u8>,
    ) -> (u64, Arc<Irp>, Arc<Irp>) {
        let (listener, ep, get, dpc) = self.get_request_meeting_a_req();
        let input = input(listener, ep);
        let destroys_listener = code == WV_IOCTL_EP_DESTROY && input == u64_in(listener);
        let other = self.send_on_thread(code, input);
        self.s.p.cancel(&get);
        assert!(
            dpc.join().unwrap() || destroys_listener,
            "the REQ was heard"
        );
        (ep, get, other.join().unwrap())
    }

    /// A routed endpoint on a new QP with its CONNECT waiting for the answer: the endpoint and
    /// the CONNECT.
    fn waiting_connect(&self) -> (u64, Arc<Irp>) {
        let qp = self.qp();
        let ep = self.routed();
        (ep, self.connecting(ep, qp))
    }

    /// Runs `f` on a new model thread with the CM (a DPC of the peer's messages).
    fn spawn_cm<T: 'static>(
        &self,
        f: impl FnOnce(&LoomCm, &LoomPlatform) -> T + 'static,
    ) -> loom::thread::JoinHandle<T> {
        let (cm, p) = (Arc::clone(&self.cm), self.s.p.clone());
        loom::thread::spawn(move || f(&cm, &p))
    }

    /// Sends a request from a new model thread; the thread returns its IRP.
    fn send_on_thread(&self, code: u32, input: Vec<u8>) -> loom::thread::JoinHandle<Arc<Irp>> {
        self.spawn(move |d, f, p| send(p, d, f, code, &input, 0))
    }

    /// The peer's `message`, delivered on a new model thread (the thread returns whether an
    /// id took it).
    fn peer_on_thread(&self, message: PeerMessage) -> loom::thread::JoinHandle<bool> {
        self.spawn_cm(move |cm, _| cm.peer(message))
    }

    /// The peer's DREQ on a new model thread, which then runs the pool (the QP's move to
    /// ERROR the DREQ queued).
    fn dreq_then_pool(&self) -> loom::thread::JoinHandle<()> {
        self.spawn_cm(|cm, p| {
            cm.peer(PeerMessage::Dreq);
            p.run_work();
        })
    }

    /// A routed endpoint's CONNECT whose work item runs on a new model thread (the pool):
    /// the endpoint, the CONNECT and the pool.
    fn connect_on_pool(&self, qp: u64) -> (u64, Arc<Irp>, loom::thread::JoinHandle<()>) {
        let ep = self.routed();
        let connect = self.send(WV_IOCTL_EP_CONNECT, &connect_in(ep, qp, b""), 0);
        let pool = self.spawn(|_, _, p| p.run_work());
        (ep, connect, pool)
    }

    /// The end of a model: work items still queued run (after their endpoints went, a slow
    /// pool), cleanup, close and removal; then nothing may be left: no violation, no CM id, no
    /// lower-device object, no queue (so no endpoint), no work item.
    fn finish(self) {
        let EpStack { s, cm, .. } = self;
        let p = s.p.clone();
        s.driver.file_cleanup(&s.file);
        p.run_work();
        s.finish();
        p.run_work();
        assert_eq!(p.violations(), Vec::<String>::new());
        assert_eq!(cm.live_ids(), 0, "CM ids leaked: {:?}", cm.ceps());
        assert_eq!(p.live_queues(), 0, "endpoints (or other objects) leaked");
        assert_eq!(p.queued_work(), 0);
    }
}

/// An endpoint model: a stack with a CM, the race `f` runs on it, and the end-of-model checks
/// of [`EpStack::finish`].
fn ep_model(name: &str, f: impl Fn(&EpStack) + Sync + Send + 'static) {
    model(name, move || {
        let e = EpStack::new();
        f(&e);
        e.finish();
    });
}

/// A GET_REQUEST parked on a listener racing the peer's REQ (the CM's DPC calls the listen's
/// sink, which fills it there, or leaves it to the pool), EP_CANCEL of the listener and the I/O manager's cancel of the
/// GET_REQUEST. A GET_REQUEST that succeeds leaves its endpoint able to answer the request; one
/// that is cancelled gives it back; either way the listener's hold on it is dropped.
#[test]
fn get_request_racing_the_req_ep_cancel_and_cancel_io() {
    ep_model("ep-get-request-req-cancel-cancelio", |e| {
        listener_request_meeting_the_race(e, WV_IOCTL_EP_CANCEL);
    });
}

/// [`EpStack::get_request_cancelled_meeting_a_req`] with `code` on the listener, which
/// succeeds, and then [`filled_or_cancelled`].
fn listener_request_meeting_the_race(e: &EpStack, code: u32) {
    let (ep, get, other) =
        e.get_request_cancelled_meeting_a_req(code, |listener, _| u64_in(listener));
    once(&e.s.p, &other, &[NtStatus::SUCCESS]);
    filled_or_cancelled(e, ep, &get);
}

/// The GET_REQUEST `get` for endpoint `ep` ended well, and the endpoint holds the request (it
/// can refuse it), or cancelled; either way nothing holds the endpoint any more.
fn filled_or_cancelled(e: &EpStack, ep: u64, get: &Irp) {
    let p = &e.s.p;
    if once(p, get, &[NtStatus::SUCCESS, NtStatus::CANCELLED]) == NtStatus::SUCCESS {
        let reject = e.send(WV_IOCTL_EP_REJECT, &io_id(ep, 0, 0), 0);
        once(p, &reject, &[NtStatus::SUCCESS]);
    }
    e.inline(WV_IOCTL_EP_DESTROY, &u64_in(ep), 0, NtStatus::SUCCESS);
}

/// The same race with the endpoint destroyed as soon as the listener gives it back: the pool's
/// pairing must not hand the new connection to an endpoint that is gone (its CM id would never
/// be destroyed).
#[test]
fn get_request_racing_the_req_ep_cancel_and_destroy() {
    ep_model("ep-get-request-req-cancel-destroy", |e| {
        let (listener, ep, get, dpc) = e.get_request_meeting_a_req();
        let canceller = e.send_on_thread(WV_IOCTL_EP_CANCEL, u64_in(listener));
        // Refused while the listener holds the endpoint.
        let destroy = e.send(WV_IOCTL_EP_DESTROY, &u64_in(ep), 0);
        assert!(dpc.join().unwrap(), "the REQ was heard");
        let cancel = canceller.join().unwrap();
        let p = &e.s.p;
        once(p, &cancel, &[NtStatus::SUCCESS]);
        once(p, &get, &[NtStatus::SUCCESS, NtStatus::CANCELLED]);
        once(p, &destroy, &[NtStatus::SUCCESS, NtStatus::ACCESS_DENIED]);
    });
}

/// The listen's sink filling a waiting GET_REQUEST in the CM's DPC (it takes the request
/// there, no work item) racing EP_DESTROY of the listener and the I/O manager's cancel of the
/// GET_REQUEST: the sink's fill, the listener's teardown (which gives the endpoint back and
/// destroys the listen's id, waiting for the sink) and the cancel meet on the fill's mark. An
/// id the sink took for an endpoint given back meanwhile is parked for the work item or the
/// teardown, never lost (the end-of-model check counts live CM ids).
#[test]
fn listen_sink_fill_racing_listener_destroy_and_cancel_io() {
    ep_model("ep-listen-sink-destroy-cancelio", |e| {
        listener_request_meeting_the_race(e, WV_IOCTL_EP_DESTROY);
    });
}

/// CONNECT: the endpoint's work item on the pool (it makes the CM id, sends the REQ and parks
/// the request for the answer) racing EP_CANCEL and EP_DESTROY. Nothing answers, so the
/// CONNECT ends cancelled, by whichever gets to it.
#[test]
fn connect_work_racing_ep_cancel_and_destroy() {
    ep_model("ep-connect-work-cancel-destroy", |e| {
        let (ep, connect, pool) = e.connect_on_pool(e.qp());
        let canceller = e.send_on_thread(WV_IOCTL_EP_CANCEL, u64_in(ep));
        let destroy = e.send(WV_IOCTL_EP_DESTROY, &u64_in(ep), 0);
        pool.join().unwrap();
        let p = &e.s.p;
        let cancel = canceller.join().unwrap();
        once(p, &cancel, &[NtStatus::SUCCESS, NtStatus::NOT_FOUND]);
        once(p, &destroy, &[NtStatus::SUCCESS, NtStatus::ACCESS_DENIED]);
        once(p, &connect, &[NtStatus::CANCELLED]);
    });
}

/// CONNECT's work item racing the file's cleanup and EP_CANCEL.
#[test]
fn connect_work_racing_cleanup() {
    ep_model("ep-connect-work-cleanup", |e| {
        let (ep, connect, pool) = e.connect_on_pool(e.qp());
        let canceller = e.send_on_thread(WV_IOCTL_EP_CANCEL, u64_in(ep));
        e.s.driver.file_cleanup(&e.s.file);
        pool.join().unwrap();
        let closed = [NtStatus::SUCCESS, NtStatus::FILE_CLOSED];
        once(&e.s.p, &canceller.join().unwrap(), &closed);
        once(&e.s.p, &connect, &[NtStatus::CANCELLED]);
    });
}

/// CONNECT's work item racing the peer's REP (the peer answers once the REQ is out) and
/// EP_CANCEL.
#[test]
fn connect_work_racing_the_rep_and_ep_cancel() {
    ep_model("ep-connect-work-rep-cancel", |e| {
        let (ep, connect, pool) = e.connect_on_pool(e.qp());
        let dpc = e.peer_on_thread(PeerMessage::Rep);
        let cancel = e.send(WV_IOCTL_EP_CANCEL, &u64_in(ep), 0);
        pool.join().unwrap();
        let answered = dpc.join().unwrap();
        once(&e.s.p, &cancel, &[NtStatus::SUCCESS]);
        let status = once(&e.s.p, &connect, &[NtStatus::SUCCESS, NtStatus::CANCELLED]);
        assert!(
            status != NtStatus::SUCCESS || answered,
            "a CONNECT succeeded unanswered"
        );
    });
}

/// A CONNECT waiting for the answer: the peer's REP racing EP_CANCEL and EP_DESTROY.
#[test]
fn connect_rep_racing_ep_cancel_and_destroy() {
    ep_model("ep-connect-rep-cancel-destroy", |e| {
        let (ep, connect) = e.waiting_connect();
        let dpc = e.peer_on_thread(PeerMessage::Rep);
        let canceller = e.send_on_thread(WV_IOCTL_EP_CANCEL, u64_in(ep));
        let destroy = e.send(WV_IOCTL_EP_DESTROY, &u64_in(ep), 0);
        dpc.join().unwrap();
        let not_found = [NtStatus::SUCCESS, NtStatus::NOT_FOUND];
        once(&e.s.p, &canceller.join().unwrap(), &not_found);
        let denied = [NtStatus::SUCCESS, NtStatus::ACCESS_DENIED];
        once(&e.s.p, &destroy, &denied);
        once(&e.s.p, &connect, &[NtStatus::SUCCESS, NtStatus::CANCELLED]);
    });
}

/// A CONNECT waiting for the answer: the peer's REJ racing the I/O manager's cancel and the
/// file's cleanup.
#[test]
fn connect_rej_racing_cancel_io_and_cleanup() {
    ep_model("ep-connect-rej-cancelio-cleanup", |e| {
        let (ep, connect) = e.waiting_connect();
        let dpc = e.peer_on_thread(PeerMessage::Rej);
        let canceller = {
            let (p, connect) = (e.s.p.clone(), Arc::clone(&connect));
            loom::thread::spawn(move || p.cancel(&connect))
        };
        e.s.driver.file_cleanup(&e.s.file);
        dpc.join().unwrap();
        canceller.join().unwrap();
        let allowed = [NtStatus::CONNECTION_REFUSED, NtStatus::CANCELLED];
        once(&e.s.p, &connect, &allowed);
        let _ = ep;
    });
}

/// A connected endpoint with a DISCONNECT_NOTIFY parked: EP_DISCONNECT (the DREQ goes, the
/// request waits for the DREP) racing the peer's own DREQ (the pool then moves the QP to
/// ERROR) and the file's cleanup.
#[test]
fn disconnect_racing_the_dreq_and_cleanup() {
    ep_model("ep-disconnect-dreq-cleanup", |e| {
        let qp = e.qp();
        let ep = e.connected(qp);
        let notify = e.send(WV_IOCTL_EP_DISCONNECT_NOTIFY, &u64_in(ep), 0);
        let disconnector = e.spawn(move |d, f, p| {
            let (request, irp) = p.request(WV_IOCTL_EP_DISCONNECT, &disconnect_in(ep, qp), 8);
            d.device_io_control(f, request);
            irp
        });
        let dpc = e.dreq_then_pool();
        e.s.driver.file_cleanup(&e.s.file);
        let disconnect = disconnector.join().unwrap();
        dpc.join().unwrap();
        let p = &e.s.p;
        once(p, &notify, &[NtStatus::SUCCESS, NtStatus::CANCELLED]);
        let ended = [
            NtStatus::SUCCESS,
            NtStatus::CANCELLED,
            NtStatus::FILE_CLOSED,
        ];
        once(p, &disconnect, &ended);
    });
}

/// A connected endpoint: EP_DISCONNECT_NOTIFY and EP_DISCONNECT from two threads racing the
/// peer's DREQ (and the pool's QP → ERROR after it).
#[test]
fn disconnect_and_notify_racing_the_dreq() {
    ep_model("ep-disconnect-notify-dreq", |e| {
        let qp = e.qp();
        let ep = e.connected(qp);
        let notifier = e.send_on_thread(WV_IOCTL_EP_DISCONNECT_NOTIFY, u64_in(ep));
        let dpc = e.dreq_then_pool();
        let disconnect = e.send(WV_IOCTL_EP_DISCONNECT, &disconnect_in(ep, qp), 8);
        let notify = notifier.join().unwrap();
        dpc.join().unwrap();
        // The work item a DREQ queued after the last run.
        e.s.p.run_work();
        once(&e.s.p, &notify, &[NtStatus::SUCCESS]);
        once(&e.s.p, &disconnect, &[NtStatus::SUCCESS]);
    });
}

/// Device removal racing a CONNECT whose work item runs on the pool and a DISCONNECT_NOTIFY
/// being parked on another, connected, endpoint.
#[test]
fn removal_racing_connect_and_notify() {
    ep_model("ep-removal-connect-notify", |e| {
        let qp = e.qp();
        let connected = e.connected(qp);
        let (_, connect, pool) = e.connect_on_pool(qp);
        let notifier = e.send_on_thread(WV_IOCTL_EP_DISCONNECT_NOTIFY, u64_in(connected));
        e.s.driver.device_removal(GUID);
        pool.join().unwrap();
        let notify = notifier.join().unwrap();
        let p = &e.s.p;
        let gone = [
            NtStatus::DEVICE_REMOVED,
            NtStatus::NO_SUCH_DEVICE,
            NtStatus::NOT_FOUND,
        ];
        once(p, &connect, &gone);
        once(p, &notify, &[NtStatus::SUCCESS, NtStatus::DEVICE_REMOVED]);
    });
}

/// Device removal racing a GET_REQUEST on a listener of that device's CM: the GET_REQUEST
/// ends by itself (removed with the listener's others, or refused by a listener that no longer
/// listens) and its endpoint is Idle again, destroyable. The GET_REQUEST could check the
/// listener's state before the removal, park after the removal had drained the listener, and
/// wait until the file closed with its endpoint held.
#[test]
fn removal_racing_get_request() {
    ep_model("ep-removal-get-request", |e| {
        let listener = e.listener(1);
        let ep = e.idle();
        let getter = e.send_on_thread(WV_IOCTL_EP_GET_REQUEST, get_request_in(listener, ep));
        e.s.driver.device_removal(GUID);
        let get = getter.join().unwrap();
        let allowed = [NtStatus::DEVICE_REMOVED, NtStatus::NOT_SUPPORTED];
        once(&e.s.p, &get, &allowed);
        e.inline(WV_IOCTL_EP_DESTROY, &u64_in(ep), 0, NtStatus::SUCCESS);
    });
}

/// A GET_REQUEST cancelled by the I/O manager while the peer's REQ arrives (the pool pairs
/// it) and its endpoint's EP_DESTROY runs: the destroy is refused only while the GET_REQUEST
/// lives; once the GET_REQUEST has ended, either way, the endpoint is destroyable. A cancelled
/// GET_REQUEST left its endpoint held by the listener until the listener was cancelled.
#[test]
fn get_request_cancel_io_racing_the_req_and_its_endpoints_destroy() {
    ep_model("ep-get-request-cancelio-destroy-req", |e| {
        let (ep, get, destroy) =
            e.get_request_cancelled_meeting_a_req(WV_IOCTL_EP_DESTROY, |_, ep| u64_in(ep));
        let p = &e.s.p;
        once(p, &get, &[NtStatus::SUCCESS, NtStatus::CANCELLED]);
        let destroyed = once(p, &destroy, &[NtStatus::SUCCESS, NtStatus::ACCESS_DENIED]);
        if destroyed == NtStatus::ACCESS_DENIED {
            // The GET_REQUEST lived then; it has ended since, so nothing holds the endpoint.
            e.inline(WV_IOCTL_EP_DESTROY, &u64_in(ep), 0, NtStatus::SUCCESS);
        }
    });
}
