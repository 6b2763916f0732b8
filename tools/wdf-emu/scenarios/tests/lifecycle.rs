//! The glue's life on a machine: DriverEntry → two controllers → start → IOCTLs → a sleep and
//! a wake (the interfaces given back and taken again) → a surprise removal with requests
//! parked and a QP modify in flight → removal → unload with no pool, object or reference left.

use std::time::Duration;

use wdf_emu::pnp::{ControllerId, PnpState};
use wdf_emu::{Machine, MachineConfig};
use wdf_emu_scenarios::{Rig, boot};
use wv_abi::NtStatus;
use wv_client::verbs::{Pending, Provider, QpAttr, QpInit, QpType, WV_ACCESS_LOCAL_WRITE};
use wv_hal::Verbs;
use wv_softhca::LinkLayer;

fn guid(rig: &Rig, index: usize) -> u64 {
    rig.controllers[index].0.hca().guid()
}

/// Controller `id` has left D0 (`how`): the driver gave both lower interfaces back, and the
/// request it had parked on the device ended with DEVICE_REMOVED.
fn left_d0<T: std::fmt::Debug>(machine: &Machine, id: ControllerId, how: &str, parked: Pending<T>) {
    assert_eq!(machine.lower_references(id), 0, "interfaces released {how}");
    let ended = parked.wait().expect_err("the parked request ends");
    assert_eq!(ended.status, NtStatus::DEVICE_REMOVED, "{how}");
}

fn lifecycle(machine: &Machine, link_layer: LinkLayer) {
    let mut rig = Rig::new(link_layer);
    let a = rig.add(machine, |_| {});
    // Controller b's firmware answers commands after 30 ms, so a modify stays in flight.
    let b = rig.add(machine, |c| c.command_latency_ns = 30_000_000);
    for id in [a, b] {
        assert_eq!(machine.controller_state(id), Some(PnpState::Started));
        assert_eq!(
            machine.lower_references(id),
            2,
            "verbs and CM interfaces taken"
        );
    }

    let provider = Provider::new(machine.open(r"\\.\WinVerbs").expect("CreateFile"));
    let mut guids = provider.device_guids().expect("GUID_QUERY");
    guids.sort_unstable();
    let mut expected = vec![guid(&rig, 0), guid(&rig, 1)];
    expected.sort_unstable();
    assert_eq!(guids, expected);

    // Controller a: objects, and a port notify parked.
    let dev_a = provider.open_device(guid(&rig, 0)).expect("DEVICE_OPEN a");
    let pd_a = dev_a.alloc_pd().expect("PD_ALLOCATE");
    let buf = dev_a.alloc_buffer(4096);
    let mr = pd_a
        .reg_mr(&buf, WV_ACCESS_LOCAL_WRITE)
        .expect("MEMORY_REGISTER");
    let port_notify = dev_a.port_notify(1).expect("DEVICE_NOTIFY");

    // Sleep: self-managed I/O suspends, the core removes the device, both interfaces go back.
    machine.sleep(a);
    left_d0(machine, a, "before D0Exit", port_notify);
    assert_eq!(provider.device_guids().expect("GUID_QUERY").len(), 1);
    drop(mr);
    drop(pd_a);
    drop(dev_a);
    // Wake: taken again; the device opens again.
    machine.wake(a);
    assert_eq!(
        machine.lower_references(a),
        2,
        "interfaces taken again at restart"
    );
    assert_eq!(provider.device_guids().expect("GUID_QUERY").len(), 2);
    let dev_a = provider
        .open_device(guid(&rig, 0))
        .expect("DEVICE_OPEN a after the wake");
    let _pd = dev_a.alloc_pd().expect("PD_ALLOCATE after the wake");

    // Controller b: a CQ notify parked and a QP modify in flight, then the hardware goes.
    let dev_b = provider.open_device(guid(&rig, 1)).expect("DEVICE_OPEN b");
    let pd_b = dev_b.alloc_pd().expect("PD_ALLOCATE b");
    let cq_b = dev_b.create_cq(16).expect("CQ_CREATE b");
    let qp_b = pd_b
        .create_qp(&QpInit::new(QpType::Rc, &cq_b, &cq_b))
        .expect("QP_CREATE b");
    let cq_notify = cq_b.notify(false).expect("CQ_NOTIFY");
    let modify = qp_b
        .modify_async(&QpAttr::init(1, 0, WV_ACCESS_LOCAL_WRITE))
        .expect("QP_MODIFY issued");
    rig.controllers[1].0.hca().surprise_remove();
    machine.surprise_remove(b);
    left_d0(machine, b, "at surprise removal", cq_notify);
    let modified = modify
        .wait_timeout(Duration::from_secs(10))
        .expect("the modify in flight completes");
    if let Err(e) = modified {
        assert!(e.status.is_error(), "{e}");
    }
    machine.remove(b);
    assert_eq!(machine.controller_state(b), Some(PnpState::Removed));
    assert!(machine.filter_device(b).is_none());

    drop(qp_b);
    drop(cq_b);
    drop(pd_b);
    drop(dev_b);
    drop(_pd);
    drop(dev_a);
    drop(provider);
    machine.run_until_idle();
}

#[test]
fn lifecycle_on_roce_ports_leaves_nothing_at_unload() {
    let machine = boot(MachineConfig::default());
    lifecycle(&machine, LinkLayer::Ethernet);
    machine.unload().assert_clean();
}

#[test]
fn lifecycle_on_infiniband_ports_leaves_nothing_at_unload() {
    let machine = boot(MachineConfig::default());
    lifecycle(&machine, LinkLayer::InfiniBand);
    machine.unload().assert_clean();
}
