//! Driver Verifier's low-resources simulation over every IOCTL path: for each of the 53 codes
//! (and CreateFile and device arrival), count the driver's allocations on the path, then run
//! the path again once per allocation with exactly that one refused. Each run must end the
//! request with the status OFW answers for that allocation, leave no lower-device object behind,
//! leave the stack able to run the same request successfully, and pass the verifier's
//! teardown check (no request, queue, file or lower object alive). An infallible allocation
//! would abort the test process instead (the allocation-error handler; on Windows a bug
//! check). No allocation may happen while a spin lock is held.
//!
//! A second test refuses a random 5% of the driver's allocations over whole sequences of
//! requests with cancels and a close.
#![allow(clippy::disallowed_methods)] // tests may allocate infallibly; the core may not (clippy.toml)

mod common;

use common::ep::*;
use common::*;
use wv_abi::NtStatus;
use wv_abi::ioctl::*;
use wv_host::low_resources::{self, Plan, Tally};

#[global_allocator]
static ALLOC: wv_host::LowResources = wv_host::LowResources;

const NO_MEMORY: NtStatus = NtStatus::NO_MEMORY;
const UNSUCCESSFUL: NtStatus = NtStatus::UNSUCCESSFUL;

/// The status OFW answers for each allocation a valid request of `code` makes, in the order
/// the path makes them: an object, its id-table slot and its buffers `STATUS_NO_MEMORY`
/// (`ExAllocatePoolWithTag` failing in OFW's handlers); a device's port array and what holds
/// it `STATUS_UNSUCCESSFUL` (`WvDeviceInit` answers that for any failure of
/// `WvDeviceCreatePorts`). The length is the number of allocations the path makes, so a path
/// that starts allocating differently fails here until its statuses are decided.
fn ofw_statuses(code: Ioctl) -> &'static [NtStatus] {
    use Ioctl as I;
    match code {
        I::DeviceOpen => &[
            NO_MEMORY,
            NO_MEMORY,
            NO_MEMORY,
            NO_MEMORY,
            UNSUCCESSFUL,
            UNSUCCESSFUL,
        ],
        I::DeviceGidQuery | I::DevicePkeyQuery => &[NO_MEMORY],
        I::PdAllocate | I::MwAllocate | I::AhCreate => &[NO_MEMORY; 2],
        I::CqCreate | I::SrqCreate | I::EpCreate => &[NO_MEMORY; 3],
        I::QpCreate => &[NO_MEMORY; 4],
        _ => &[],
    }
}

fn fixture() -> (Fx, WvFile, Full) {
    let fx = Fx::with(
        wv_host::HostPlatform::deterministic(),
        wv_core::DriverConfig::default(),
    );
    let f = fx.open();
    let s = full_stack(&fx, &f);
    (fx, f, s)
}

/// Runs `op` under `plan`; returns its status and what the allocator saw.
fn armed<T>(plan: Plan, op: impl FnOnce() -> T) -> (T, Tally) {
    low_resources::arm(plan);
    let r = op();
    (r, low_resources::disarm())
}

/// One path to walk: a request on the full stack, after an optional extra setup that puts
/// the stack in the state where the path allocates (an empty MR table, a full id table).
struct Case {
    name: &'static str,
    code: Ioctl,
    setup: fn(&Fx, &WvFile, &Full) -> (Vec<u8>, usize),
    /// OFW's status for each of the path's allocations, in order (see [`ofw_statuses`]).
    statuses: &'static [NtStatus],
}

/// The states the plain table does not reach: containers that must grow.
fn growth_cases() -> Vec<Case> {
    vec![
        Case {
            name: "MEMORY_REGISTER (first MR of a PD)",
            code: Ioctl::MemoryRegister,
            setup: |_, _, s| (mr_reg_in(s.spare_pd), 8),
            statuses: &[NO_MEMORY],
        },
        Case {
            name: "QP_ATTACH (first group of a QP)",
            code: Ioctl::QpAttach,
            setup: |_, f, s| {
                let mut ud = qp_create_in(s.pd, s.cq, s.cq, 0);
                ud.QpType = 3;
                let st = ioctl(f, WV_IOCTL_QP_CREATE, &bytes(&ud), 72);
                let qp = out::<wv_abi::WV_IO_QP_CREATE>(&st).Id.Id;
                (mc_in(qp, 0xC003), 0)
            },
            statuses: &[NO_MEMORY],
        },
        Case {
            name: "PD_ALLOCATE (id table full: it grows)",
            code: Ioctl::PdAllocate,
            setup: |_, f, s| {
                // Two PDs exist; fill the first four slots.
                alloc_pd(f, s.dev);
                alloc_pd(f, s.dev);
                (id(s.dev, 0, 0), 16)
            },
            statuses: &[NO_MEMORY; 4],
        },
    ]
}

/// The endpoint paths in the states where they do their work (the plain table's zeroed
/// inputs stop at the type check or the id lookup).
fn endpoint_cases() -> Vec<Case> {
    vec![
        Case {
            name: "EP_CREATE (id table full: it grows)",
            code: Ioctl::EpCreate,
            setup: |_, f, _| {
                // Two endpoints exist; fill the first four slots.
                ep_create(f);
                ep_create(f);
                (u64_in(wv_abi::consts::WV_IO_EP_TYPE_CONNECT), 8)
            },
            // OFW's `WvEpAllocate` and `WvEpCreate`: the endpoint, what it holds, its slot.
            statuses: &[NO_MEMORY; 5],
        },
        Case {
            name: "EP_LISTEN (a bound endpoint)",
            code: Ioctl::EpListen,
            setup: |fx, f, _| (listen_in(bound(fx, f, 7001), 4), 16),
            statuses: &[NO_MEMORY; 2],
        },
        Case {
            name: "EP_GET_REQUEST (a request is waiting)",
            code: Ioctl::EpGetRequest,
            setup: |fx, f, _| {
                let (listener, lid) = listener_on(fx, f, 7001, 4);
                fx.cm.incoming_request(lid, incoming(b"walk"));
                fx.run();
                (get_request_in(listener, ep_create(f)), 0)
            },
            statuses: &[NO_MEMORY; 3],
        },
        Case {
            // The listener's work item, run by the request, also refuses the requests beyond
            // the backlog: that refusal allocates nothing, so every refused allocation is the
            // GET_REQUEST's. The first announcement finds it waiting: the listen's sink fills
            // it (the new id's sink and record), and when either allocation fails the sink
            // leaves the request to the work item, whose own fill succeeds.
            name: "EP_GET_REQUEST (more requests waiting than the backlog keeps)",
            code: Ioctl::EpGetRequest,
            setup: |fx, f, _| {
                let ep = ep_create(f);
                let (listener, lid) = listener_on(fx, f, 7001, 1);
                // Announced, not yet counted (no IOCTL runs the DPC before the walked one):
                // the request's own run counts them, pairs one and refuses one.
                for user in [&b"one"[..], b"two", b"three"] {
                    fx.cm.incoming_request(lid, incoming(user));
                }
                assert!(fx.platform().queued() > 0, "the CM's DPC waits");
                (get_request_in(listener, ep), 0)
            },
            statuses: &[NO_MEMORY, NtStatus::SUCCESS, NtStatus::SUCCESS],
        },
        Case {
            name: "EP_CONNECT (a routed endpoint)",
            code: Ioctl::EpConnect,
            setup: |fx, f, s| {
                let ep = routed(fx, f);
                (connect_in(ep, s.qp, b"walk"), 0)
            },
            statuses: &[NO_MEMORY; 2],
        },
    ]
}

#[test]
fn every_allocation_of_every_ioctl_path_can_fail() {
    let mut paths = 0u64;
    let mut points = 0u64;
    let mut allocating_paths = 0u64;
    let plain = Ioctl::ALL.iter().map(|&code| Case {
        name: code.name(),
        code,
        setup: |_, _, _| (Vec::new(), usize::MAX),
        statuses: ofw_statuses(code),
    });
    for case in plain.chain(growth_cases()).chain(endpoint_cases()) {
        let code = case.code;
        let prepare = |fx: &Fx, f: &WvFile, s: &Full| match (case.setup)(fx, f, s) {
            (_, usize::MAX) => valid_request(code, s),
            custom => custom,
        };
        let (fx, f, s) = fixture();
        let (input, out_len) = prepare(&fx, &f, &s);
        let (normal, tally) = armed(Plan::Count, || issue(&fx, &f, code.code(), &input, out_len));
        assert_eq!(
            tally.under_spin_lock, 0,
            "{}: {} allocation(s) while holding a spin lock",
            case.name, tally.under_spin_lock
        );
        drop((f, fx));
        eprintln!("{}: {} allocation(s)", case.name, tally.seen);
        assert_eq!(
            tally.seen,
            case.statuses.len() as u64,
            "{}: the path makes {} allocation(s), OFW's statuses are listed for {}",
            case.name,
            tally.seen,
            case.statuses.len()
        );
        paths += 1;
        if tally.seen > 0 {
            allocating_paths += 1;
        }
        for n in 1..=tally.seen {
            let (fx, f, s) = fixture();
            let (input, out_len) = prepare(&fx, &f, &s);
            let before = fx.hca.live_objects();
            let (st, t) = armed(Plan::FailNth(n), || {
                issue(&fx, &f, code.code(), &input, out_len)
            });
            assert_eq!(t.refused, 1, "{} #{n}: the path changed", case.name);
            assert_eq!(
                status(&st),
                case.statuses[n as usize - 1],
                "{}: allocation #{n} of {} refused, request ended with {st:?}",
                case.name,
                tally.seen
            );
            assert_eq!(
                fx.hca.live_objects(),
                before,
                "{} #{n}: a lower-device object was left behind",
                case.name
            );
            // The stack is healthy: the same request now does what it did before (one that
            // succeeded all the same, by another way, did it already and used its endpoint).
            if status(&st) != NtStatus::SUCCESS {
                let again = issue(&fx, &f, code.code(), &input, out_len);
                assert_eq!(
                    status(&again),
                    status(&normal),
                    "{} #{n}: not healthy afterwards",
                    case.name
                );
            }
            drop(f);
            drop(fx); // the verifier's teardown check
            points += 1;
        }
    }
    // Paths outside IOCTLs that a user can trigger: CreateFile and a device arrival.
    let (count, tally) = {
        let fx = Fx::new();
        let (file, tally) = armed(Plan::Count, || fx.io.open());
        drop(file);
        (fx, tally)
    };
    drop(count);
    for n in 1..=tally.seen {
        let fx = Fx::new();
        let (file, t) = armed(Plan::FailNth(n), || fx.io.open());
        assert_eq!(t.refused, 1);
        let err = file.expect_err("CreateFile with a refused allocation");
        // The file's provider and its place in the driver's list: the object's status. (OFW
        // allocated nothing here itself: the framework allocated the file's context.)
        assert_eq!(err, NO_MEMORY, "CreateFile: allocation #{n}");
        drop(fx.open());
        points += 1;
    }
    paths += 1;
    let (count, tally) = {
        let fx = Fx::new();
        let other = wv_host::fake_verbs::FakeVerbs::new(fx.platform(), second_hca());
        let (r, tally) = armed(Plan::Count, || fx.io.arrive(other));
        r.expect("arrival");
        (fx, tally)
    };
    drop(count);
    for n in 1..=tally.seen {
        let fx = Fx::new();
        let other = wv_host::fake_verbs::FakeVerbs::new(fx.platform(), second_hca());
        let (r, t) = armed(Plan::FailNth(n), || fx.io.arrive(other.clone()));
        assert_eq!(t.refused, 1);
        // The device's record and its place in the device list (OFW's lived in the
        // framework's device context): the object's status.
        assert_eq!(
            r.expect_err("arrival"),
            NO_MEMORY,
            "arrival: allocation #{n}"
        );
        fx.io.arrive(other).expect("arrival once memory is back");
        points += 1;
    }
    paths += 1;
    assert!(
        allocating_paths >= 12,
        "the walk found too few allocating paths"
    );
    eprintln!(
        "allocation-failure walk: {paths} paths ({allocating_paths} IOCTLs allocate), \
         {points} allocation points refused one by one, 0 failures"
    );
    figures(
        "alloc_walk",
        &[
            ("paths", paths),
            ("allocating_ioctls", allocating_paths),
            ("points", points),
        ],
    );
}

/// Requests beyond a listen's backlog are refused even with no memory left at all: the
/// refusal allocates nothing, so the listener's work item ends. It allocated a sink per
/// refusal before; refused, it kept the request in the CM with the count unchanged, and the
/// work item ran again at once, for as long as memory stayed short (here: for ever).
#[test]
fn requests_beyond_the_backlog_are_refused_with_no_memory_at_all() {
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    // Its own thread: a work item that spins never returns to be reported.
    std::thread::spawn(move || {
        let fx = Fx::with(
            wv_host::HostPlatform::deterministic(),
            wv_core::DriverConfig::default(),
        );
        let f = fx.open();
        let listener = bound(&fx, &f, 7001);
        let st = ioctl(&f, WV_IOCTL_EP_LISTEN, &listen_in(listener, 1), 16);
        assert_eq!(status(&st), NtStatus::SUCCESS);
        let lid = fx
            .cm
            .last_id(wv_host::fake_cm::FakeCmOp::Listen)
            .expect("a listen");
        for user in [&b"one"[..], b"two", b"three"] {
            fx.cm.incoming_request(lid, incoming(user));
        }
        let everything_refused = Plan::Random {
            per_million: 1_000_000,
            seed: 7,
        };
        let ((), _) = armed(everything_refused, || fx.run());
        let refused = fx.cm.sent(wv_host::fake_cm::FakeCmOp::SendRej).len();
        drop(f);
        fx.run();
        done_tx.send(refused).expect("the test waits");
    });
    let refused = done_rx
        .recv_timeout(std::time::Duration::from_secs(20))
        .expect("the listener's work item never ended while memory was short");
    assert_eq!(refused, 2, "backlog 1: two of the three refused");
}

fn second_hca() -> wv_host::fake_verbs::FakeConfig {
    wv_host::fake_verbs::FakeConfig {
        guid: 0x0002_c903_0000_5678u64.to_be(),
        ..Default::default()
    }
}

#[test]
fn a_random_fraction_of_allocations_fails_over_whole_sequences() {
    let mut faults = 0u64;
    let mut requests = 0u64;
    for seed in 1..=40u64 {
        let (fx, f, s) = fixture();
        let (_, tally) = armed(
            Plan::Random {
                per_million: 50_000,
                seed,
            },
            || {
                let mut pending = Vec::new();
                for code in Ioctl::ALL.iter().cycle().skip(seed as usize).take(80) {
                    let (input, out_len) = valid_request(*code, &s);
                    let io = f.device_io_control(code.code(), &input, out_len);
                    requests += 1;
                    if io.pending() {
                        pending.push(io);
                    }
                }
                fx.run();
                for io in &pending {
                    f.cancel_io_ex(io);
                }
                pending
            },
        );
        faults += tally.refused;
        assert_eq!(tally.under_spin_lock, 0);
        drop(f);
        fx.run();
        drop(fx); // teardown: every request ended once, nothing leaked
    }
    assert!(faults > 0, "the random plan refused nothing");
    eprintln!("random low resources: {requests} requests, {faults} allocations refused");
    figures(
        "alloc_random",
        &[("requests", requests), ("faults", faults)],
    );
}
