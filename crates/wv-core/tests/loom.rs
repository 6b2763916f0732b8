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
//! takes two minutes). Endpoint queues are not modelled: the endpoint IOCTLs
//! are not implemented yet (they answer STATUS_NOT_IMPLEMENTED).
#![cfg(loom)]
#![allow(clippy::disallowed_methods)] // tests may allocate infallibly; the core may not (clippy.toml)

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering as StdOrdering};

use loom::sync::atomic::{AtomicBool, Ordering};
use wv_abi::ioctl::*;
use wv_abi::{NtStatus, WV_IO_ID, WV_IO_QP_ATTRIBUTES, WV_IO_QP_CREATE};
use wv_core::{Driver, DriverConfig, FileContext};
use wv_hal::{FilterDriver, KArc, QpState};
use wv_host::loom_platform::{Irp, LoomPlatform, LoomVerbs};
use zerocopy::IntoBytes;

type Drv = Driver<LoomPlatform, Arc<LoomVerbs>>;
type File = FileContext<LoomPlatform, Arc<LoomVerbs>>;

const GUID: u64 = 0x1234;

/// Interleavings explored, over all models (for docs/VERIFICATION.md).
static EXPLORED: AtomicU64 = AtomicU64::new(0);

fn model(name: &str, f: impl Fn() + Sync + Send + 'static) {
    bounded(name, 3, f);
}

/// A model with its own default preemption bound (`LOOM_MAX_PREEMPTIONS` overrides it).
fn bounded(name: &str, preemptions: usize, f: impl Fn() + Sync + Send + 'static) {
    let before = EXPLORED.load(StdOrdering::SeqCst);
    let mut builder = loom::model::Builder::new();
    if std::env::var("LOOM_MAX_PREEMPTIONS").is_err() {
        builder.preemption_bound = Some(preemptions);
    }
    builder.check(move || {
        EXPLORED.fetch_add(1, StdOrdering::SeqCst);
        f();
    });
    let n = EXPLORED.load(StdOrdering::SeqCst) - before;
    eprintln!("loom model {name}: {n} interleavings");
    record(name, n);
}

/// Appends `name=n` to `$WV_FIGURES_DIR/loom.txt`.
fn record(name: &str, n: u64) {
    if let Ok(dir) = std::env::var("WV_FIGURES_DIR") {
        use std::io::Write;
        std::fs::create_dir_all(&dir).unwrap();
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(std::path::Path::new(&dir).join("loom.txt"))
            .unwrap();
        writeln!(file, "{name}={n}").unwrap();
    }
}

struct Stack {
    p: LoomPlatform,
    hca: Arc<LoomVerbs>,
    driver: Arc<Drv>,
    file: Arc<File>,
}

fn id(id: u64, data: u32) -> Vec<u8> {
    WV_IO_ID {
        Id: id,
        VerbInfo: 0,
        Data: data,
    }
    .as_bytes()
    .to_vec()
}

impl Stack {
    fn new() -> Stack {
        let p = LoomPlatform::new();
        let hca = Arc::new(LoomVerbs::new(GUID));
        let driver = Arc::new(Driver::new(p.clone(), DriverConfig::default()));
        driver
            .device_arrival(KArc::new(Arc::clone(&hca)), None)
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
    let create = WV_IO_QP_CREATE {
        Id: WV_IO_ID {
            Id: pd,
            VerbInfo: 0,
            Data: 0,
        },
        SendCqId: cq,
        ReceiveCqId: cq,
        SendDepth: 4,
        SendSge: 1,
        ReceiveDepth: 4,
        ReceiveSge: 1,
        ..Default::default()
    };
    s.create(WV_IOCTL_QP_CREATE, create.as_bytes(), 72)
}

fn modify_in(qp: u64) -> Vec<u8> {
    let mut attr = WV_IO_QP_ATTRIBUTES::default();
    attr.Id.Id = qp;
    attr.QpState = QpState::Init as u8;
    attr.AddressVector.PortNumber = 1;
    attr.as_bytes().to_vec()
}

/// A system worker: runs queued work items until told to stop and none is left.
fn worker(p: LoomPlatform, stop: Arc<AtomicBool>) -> loom::thread::JoinHandle<()> {
    loom::thread::spawn(move || {
        loop {
            p.run_work();
            if stop.load(Ordering::SeqCst) {
                p.run_work();
                break;
            }
            loom::thread::yield_now();
        }
    })
}

/// A parked CQ notify racing the DPC's broadcast, CQ_CANCEL and the I/O manager's cancel.
#[test]
fn notify_racing_the_dpc_cancel_and_cancel_io() {
    model("notify-dpc-cancel-cancelio", || {
        let s = Stack::new();
        let (_, cq) = device_and_cq(&s);
        let (request, notify) = s.p.request(WV_IOCTL_CQ_NOTIFY, &id(cq, 1), 0);
        let parker = {
            let (driver, file) = (Arc::clone(&s.driver), Arc::clone(&s.file));
            loom::thread::spawn(move || driver.device_io_control(&file, request))
        };
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
        let s = Stack::new();
        let (_, cq) = device_and_cq(&s);
        let (request, notify) = s.p.request(WV_IOCTL_CQ_NOTIFY, &id(cq, 1), 0);
        let parker = {
            let (driver, file) = (Arc::clone(&s.driver), Arc::clone(&s.file));
            loom::thread::spawn(move || driver.device_io_control(&file, request))
        };
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
        let s = Stack::new();
        let (dev, cq) = device_and_cq(&s);
        let qp = qp_on(&s, dev, cq);
        let stop = Arc::new(AtomicBool::new(false));
        let pool = worker(s.p.clone(), Arc::clone(&stop));
        let (request, modify) = s.p.request(WV_IOCTL_QP_MODIFY, &modify_in(qp), 8);
        let issuer = {
            let (driver, file) = (Arc::clone(&s.driver), Arc::clone(&s.file));
            loom::thread::spawn(move || driver.device_io_control(&file, request))
        };
        let cancel = s.send(WV_IOCTL_QP_CANCEL, &qp.to_ne_bytes(), 0);
        let destroy = s.send(WV_IOCTL_QP_DESTROY, &qp.to_ne_bytes(), 0);
        issuer.join().unwrap();
        stop.store(true, Ordering::SeqCst);
        pool.join().unwrap();
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

/// QP_MODIFY racing the last handle's close (cleanup cancels queued modifies and waits for the
/// running one).
#[test]
fn modify_racing_cleanup() {
    model("modify-cleanup", || {
        let s = Stack::new();
        let (dev, cq) = device_and_cq(&s);
        let qp = qp_on(&s, dev, cq);
        let stop = Arc::new(AtomicBool::new(false));
        let pool = worker(s.p.clone(), Arc::clone(&stop));
        let (request, modify) = s.p.request(WV_IOCTL_QP_MODIFY, &modify_in(qp), 8);
        let issuer = {
            let (driver, file) = (Arc::clone(&s.driver), Arc::clone(&s.file));
            loom::thread::spawn(move || driver.device_io_control(&file, request))
        };
        s.driver.file_cleanup(&s.file);
        issuer.join().unwrap();
        stop.store(true, Ordering::SeqCst);
        pool.join().unwrap();
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
        let s = Stack::new();
        let (dev, cq) = device_and_cq(&s);
        let qp = qp_on(&s, dev, cq);
        let stop = Arc::new(AtomicBool::new(false));
        let pool = worker(s.p.clone(), Arc::clone(&stop));
        let (request, notify) = s.p.request(WV_IOCTL_CQ_NOTIFY, &id(cq, 1), 0);
        let parker = {
            let (driver, file) = (Arc::clone(&s.driver), Arc::clone(&s.file));
            loom::thread::spawn(move || driver.device_io_control(&file, request))
        };
        let remover = {
            let driver = Arc::clone(&s.driver);
            loom::thread::spawn(move || driver.device_removal(GUID))
        };
        let modify = s.send(WV_IOCTL_QP_MODIFY, &modify_in(qp), 8);
        parker.join().unwrap();
        remover.join().unwrap();
        stop.store(true, Ordering::SeqCst);
        pool.join().unwrap();
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
        let s = Stack::new();
        let (_, cq) = device_and_cq(&s);
        let notify = s.send(WV_IOCTL_CQ_NOTIFY, &id(cq, 1), 0);
        let remover = {
            let driver = Arc::clone(&s.driver);
            loom::thread::spawn(move || driver.device_removal(GUID))
        };
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
