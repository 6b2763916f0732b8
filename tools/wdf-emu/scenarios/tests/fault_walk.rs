//! Every WDF call and every kernel allocation the glue makes, failed once in turn: the same
//! scenario (load, two controllers, a handle, IOCTLs that park, one that queues a work item,
//! a close, a surprise removal, unload) runs once counting the fallible calls it reaches, then
//! once per call with exactly that one failing. Each run must end every request with a status
//! (none dropped, none hung), leave nothing at unload, and break no rule.
//!
//! The machine is deterministic: everything the driver does runs on the test's thread, in one
//! order, so the N-th call is the same call in every run.

use std::collections::BTreeMap;

use wdf_emu::{FaultPlan, Machine, MachineConfig};
use wdf_emu_scenarios::{Rig, winverbs_entry};
use wv_abi::NtStatus;
use wv_client::verbs::{Provider, QpAttr, QpInit, QpType, VerbsError, WV_ACCESS_LOCAL_WRITE};
use wv_hal::Verbs;
use wv_softhca::LinkLayer;

/// `STATUS_INTERNAL_ERROR`: a request the glue dropped; `STATUS_IO_TIMEOUT`: one that hung.
const DROPPED: NtStatus = NtStatus(0xC000_00E5);
const HUNG: NtStatus = NtStatus(0xC000_00B5);

/// Records a result that is no clean status: a dropped or a hung request.
fn check<T>(what: &str, result: &Result<T, VerbsError>, problems: &mut Vec<String>) {
    if let Err(e) = result {
        if std::env::var_os("WALK_TRACE").is_some() {
            eprintln!("{what}: {e}");
        }
        if e.status == DROPPED || e.status == HUNG {
            problems.push(format!("{what}: {e}"));
        }
    }
}

/// The scenario; returns what went wrong with the requests.
fn scenario(machine: &Machine) -> Vec<String> {
    let mut problems = Vec::new();
    if !wdk_sys::NT_SUCCESS(machine.load(winverbs_entry())) {
        return problems;
    }
    let mut rig = Rig::new(LinkLayer::Ethernet);
    let a = rig.add(machine, |_| {});
    let _b = rig.add(machine, |_| {});
    if let Ok(file) = machine.open(r"\\.\WinVerbs") {
        let provider = Provider::new(file);
        let guids = provider.device_guids();
        check("GUID_QUERY", &guids, &mut problems);
        let guid = rig.controllers[0].0.hca().guid();
        let device = provider.open_device(guid);
        check("DEVICE_OPEN", &device, &mut problems);
        if let Ok(device) = device {
            let port_notify = device.port_notify(1);
            check("DEVICE_NOTIFY", &port_notify, &mut problems);
            let pd = device.alloc_pd();
            check("PD_ALLOCATE", &pd, &mut problems);
            let cq = device.create_cq(16);
            check("CQ_CREATE", &cq, &mut problems);
            let mut cq_notify = None;
            if let (Ok(pd), Ok(cq)) = (&pd, &cq) {
                let notify = cq.notify(false);
                check("CQ_NOTIFY", &notify, &mut problems);
                let qp = pd.create_qp(&QpInit::new(QpType::Rc, cq, cq));
                check("QP_CREATE", &qp, &mut problems);
                if let Ok(qp) = &qp {
                    check(
                        "QP_MODIFY",
                        &qp.modify(&QpAttr::init(1, 0, WV_ACCESS_LOCAL_WRITE)),
                        &mut problems,
                    );
                }
                drop(qp);
                cq_notify = notify.ok();
            }
            // The parked CQ notify ends when its CQ is destroyed.
            drop((cq, pd));
            if let Some(notify) = cq_notify {
                check("CQ_NOTIFY at CQ_DESTROY", &notify.wait(), &mut problems);
            }
            // The parked port notify ends with the handle.
            drop(device);
            drop(provider);
            if let Ok(port_notify) = port_notify {
                check("DEVICE_NOTIFY at close", &port_notify.wait(), &mut problems);
            }
        }
    }
    rig.controllers[0].0.hca().surprise_remove();
    machine.surprise_remove(a);
    machine.remove(a);
    problems
}

#[test]
fn every_wdf_call_and_kernel_allocation_can_fail() {
    // The count.
    let machine = Machine::boot(MachineConfig::deterministic());
    machine.faults().arm(FaultPlan::Count);
    let problems = scenario(&machine);
    let sites = machine.faults().disarm();
    assert!(problems.is_empty(), "{problems:?}");
    machine.unload().assert_clean();
    assert!(
        sites.len() > 10,
        "the scenario reaches the fallible calls: {sites:?}"
    );
    let mut kinds: BTreeMap<&str, usize> = BTreeMap::new();
    for site in &sites {
        *kinds.entry(site).or_default() += 1;
    }
    eprintln!("{} fallible calls: {kinds:?}", sites.len());

    let mut failures = Vec::new();
    for n in 1..=sites.len() {
        let machine = Machine::boot(MachineConfig::deterministic());
        machine.faults().arm(FaultPlan::FailNth(n));
        let problems = scenario(&machine);
        let failed = machine.faults().failed();
        machine.faults().disarm();
        let report = machine.unload();
        if failed.is_none() {
            failures.push(format!(
                "run {n}: the call to fail ({}) was not reached",
                sites[n - 1]
            ));
        }
        if !problems.is_empty() || !report.is_clean() {
            failures.push(format!(
                "run {n}, {} failed: requests {problems:?}; {report}",
                sites[n - 1]
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[global_allocator]
static ALLOC: wv_host::LowResources = wv_host::LowResources;

/// The same scenario with each of the driver's own heap allocations refused once in turn (the
/// Rust allocations of the glue and the core: `KArc::try_new`, `try_reserve`, … — on Windows
/// `ExAllocatePool2` through the global allocator), by `wv-host`'s low-resources simulation.
#[test]
fn every_heap_allocation_of_the_driver_can_fail() {
    use wv_host::low_resources::{self, Plan};
    let machine = Machine::boot(MachineConfig::deterministic());
    low_resources::arm(Plan::Count);
    let problems = scenario(&machine);
    let tally = low_resources::disarm();
    assert!(problems.is_empty(), "{problems:?}");
    machine.unload().assert_clean();
    assert!(tally.seen > 10, "{tally:?}");
    assert_eq!(
        tally.under_spin_lock, 0,
        "allocations under a spin lock: {tally:?}"
    );
    eprintln!("{} heap allocations in driver code", tally.seen);

    let mut failures = Vec::new();
    for n in 1..=tally.seen {
        let machine = Machine::boot(MachineConfig::deterministic());
        low_resources::arm(Plan::FailNth(n));
        let problems = scenario(&machine);
        let tally = low_resources::disarm();
        let report = machine.unload();
        if tally.refused != 1 {
            failures.push(format!("run {n}: the allocation to refuse was not reached"));
        }
        if !problems.is_empty() || !report.is_clean() {
            failures.push(format!("run {n}: requests {problems:?}; {report}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
