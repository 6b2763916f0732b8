//! Low resources over the soft HCA's kernel half, the model of a Windows soft-HCA driver (where
//! an infallible allocation that fails is a bug check): every create and resize path (open,
//! PD, MR, MW, AH, CQ, CQ resize, SRQ, SRQ resize, QP with its own CQs, QP on an SRQ, a
//! multicast attach) runs as driver code, in a work item at PASSIVE_LEVEL on a fresh device,
//! once per allocation it makes, with exactly that allocation refused. Each run must fail with
//! `InsufficientMemory` (OFW's `IB_INSUFFICIENT_MEMORY`; the core answers STATUS_UNSUCCESSFUL
//! for it, as OFW does for any verbs failure), leave the device's object counts as they were,
//! let the same call succeed right after, and leave no byte behind once the device is gone.
//! The walk ends at the first run in which nothing was refused, which must succeed.
//!
//! An infallible allocation on one of these paths calls the allocation-error handler, which
//! aborts the process. So the walk runs in a child process (this test binary again): the
//! parent reports the path and allocation the child was at when it died.
#![allow(clippy::disallowed_methods)] // the test's own setup may allocate infallibly

use std::process::Command;
use std::sync::{Arc, Mutex};

use wv_hal::*;
use wv_host::HostPlatform;
use wv_host::low_resources::{self, Plan, Tally};
use wv_softhca::*;

#[global_allocator]
static ALLOC: wv_host::LowResources = wv_host::LowResources;

/// Set in the child process that runs the walk.
const CHILD: &str = "WV_SOFTHCA_ALLOC_WALK_CHILD";
const TEST: &str = "every_allocation_of_every_create_and_resize_can_fail";

struct NoSink;
impl CaEventSink for NoSink {
    fn on_event(&self, _: CaEvent) {}
}
impl CqEventSink for NoSink {
    fn on_completion(&self) {}
    fn on_error(&self) {}
}
impl SrqEventSink for NoSink {
    fn on_event(&self, _: SrqEvent) {}
}
impl QpEventSink for NoSink {
    fn on_event(&self, _: QpEvent) {}
}

/// A fresh device with the objects the paths need, made before anything is refused.
struct Fx {
    platform: HostPlatform,
    hca: Arc<SoftHca<HostPlatform>>,
    /// The sinks the paths pass (allocated here: the caller's allocation, not the device's).
    sink: KArc<NoSink>,
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
        let hca = SoftHca::new(
            Arc::new(platform.clone()),
            DeviceConfig::new("walk", [0x02, 0, 0, 0, 0x57, 0x4B]),
            ClientMemory::pool(pool.clone()),
        );
        let sink = KArc::new(NoSink);
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

    fn tear_down(self) {
        let hca = self.hca;
        hca.destroy_qp(self.ud);
        hca.destroy_cq(self.ud_cq);
        hca.destroy_srq(self.srq);
        hca.destroy_cq(self.rcq);
        hca.destroy_cq(self.scq);
        hca.deallocate_pd(self.pd);
        hca.close_ca(self.ca);
        assert_eq!(hca.objects(), ObjectCounts::default(), "teardown");
        self.platform.run_until_idle();
    }
}

/// One path: a call that creates (and destroys again) or resizes.
struct Case {
    name: &'static str,
    op: fn(&Fx) -> Result<(), VerbsError>,
}

fn cases() -> Vec<Case> {
    vec![
        Case {
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
            name: "allocate_pd",
            op: |fx| {
                let pd = fx.hca.allocate_pd(&fx.ca, &mut Umv::none())?;
                fx.hca.deallocate_pd(pd);
                Ok(())
            },
        },
        Case {
            name: "register_mr",
            op: |fx| {
                let region = MemoryRegion {
                    address: fx.buf.addr(),
                    length: fx.buf.len() as u64,
                    access: wv_abi::consts::WV_ACCESS_LOCAL_WRITE,
                };
                let (mr, _) = fx.hca.register_mr(&fx.pd, &region)?;
                fx.hca.deregister_mr(mr).map_err(|(_, e)| e)
            },
        },
        Case {
            name: "create_mw",
            op: |fx| {
                let (mw, _) = fx.hca.create_mw(&fx.pd, &mut Umv::none())?;
                fx.hca.destroy_mw(mw);
                Ok(())
            },
        },
        Case {
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
            name: "resize_cq",
            op: |fx| fx.hca.resize_cq(&fx.scq, 256, &mut Umv::none()).map(drop),
        },
        Case {
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
                fx.hca.modify_srq(&fx.srq, &attr, mask, &mut Umv::none())
            },
        },
        Case {
            name: "create_qp (RC, its own CQs)",
            op: |fx| {
                let c = qp_create(QpType::Rc, &fx.scq, &fx.rcq, None);
                let (qp, _) =
                    fx.hca
                        .create_qp(&fx.pd, &c, fx.sink.clone().into(), &mut Umv::none())?;
                fx.hca.destroy_qp(qp);
                Ok(())
            },
        },
        Case {
            name: "create_qp (on an SRQ, one CQ)",
            op: |fx| {
                let c = qp_create(QpType::Rc, &fx.scq, &fx.scq, Some(&fx.srq));
                let (qp, _) =
                    fx.hca
                        .create_qp(&fx.pd, &c, fx.sink.clone().into(), &mut Umv::none())?;
                fx.hca.destroy_qp(qp);
                Ok(())
            },
        },
        Case {
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

/// Runs `op` on `fx` as the driver would, under `plan`.
fn as_driver(
    fx: &Arc<Fx>,
    plan: Plan,
    op: fn(&Fx) -> Result<(), VerbsError>,
) -> (Result<(), VerbsError>, Tally) {
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
    (r, tally)
}

/// Refuses allocation `n` of `case` on a fresh device; `None` once the path made fewer.
fn attempt(case: &Case, n: u64) -> Option<()> {
    let name = case.name;
    eprintln!("walk: {name}, allocation {n}");
    let before = low_resources::live_bytes();
    let fx = Arc::new(Fx::new());
    let objects = fx.hca.objects();
    let (r, tally) = as_driver(&fx, Plan::FailNth(n), case.op);
    assert_eq!(
        fx.hca.objects(),
        objects,
        "{name}, allocation {n}: objects left"
    );
    let refused = tally.refused == 1;
    if refused {
        assert_eq!(
            r,
            Err(VerbsError::InsufficientMemory),
            "{name}, allocation {n}"
        );
        // The same call succeeds now.
        let (again, _) = as_driver(&fx, Plan::Off, case.op);
        assert_eq!(again, Ok(()), "{name} after refusing allocation {n}");
        assert_eq!(fx.hca.objects(), objects, "{name}: objects left");
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
        let (r, counted) = as_driver(&fx, Plan::Count, case.op);
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

#[test]
fn every_allocation_of_every_create_and_resize_can_fail() {
    if std::env::var_os(CHILD).is_some() {
        walk();
        return;
    }
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", TEST, "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .output()
        .unwrap();
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
