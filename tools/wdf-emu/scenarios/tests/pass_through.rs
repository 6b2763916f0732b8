//! A controller without a verbs interface for WinVerbs: the filter passes it through (the start
//! succeeds, nothing is taken, the reason is logged); and KMDF's rule that a filter's failed
//! AddDevice is not the stack's failure.

use wdf_emu::pnp::PnpState;
use wdf_emu::{FaultPlan, MachineConfig};
use wdf_emu_scenarios::{Rig, boot};
use wv_client::verbs::Provider;
use wv_softhca::LinkLayer;

#[test]
fn a_controller_without_the_verbs_interface_is_passed_through() {
    let machine = boot(MachineConfig::default());
    let mut rig = Rig::new(LinkLayer::Ethernet);
    let plain = rig.add(&machine, |c| c.verbs = false);
    assert_eq!(
        machine.controller_state(plain),
        Some(PnpState::Started),
        "the start succeeds"
    );
    assert!(
        machine.filter_device(plain).is_some(),
        "the filter is on the stack"
    );
    assert_eq!(machine.lower_references(plain), 0, "nothing taken");
    assert!(
        machine.debug_log().iter().any(
            |l| l.contains("passes its controller through") && l.contains("no verbs interface")
        ),
        "the reason is logged: {:?}",
        machine.debug_log()
    );
    let provider = Provider::new(machine.open(r"\\.\WinVerbs").expect("CreateFile"));
    assert!(provider.device_guids().expect("GUID_QUERY").is_empty());
    drop(provider);
    machine.unload().assert_clean();
}

#[test]
fn a_filter_whose_add_device_fails_does_not_fail_the_stack() {
    let machine = boot(MachineConfig::default());
    let mut rig = Rig::new(LinkLayer::Ethernet);
    // The control device cannot be created: the first controller's AddDevice fails, without a
    // device; KMDF turns that into success for a filter, which simply does not attach.
    machine.faults().arm(FaultPlan::FailNth(1));
    let a = rig.add(&machine, |_| {});
    let sites = machine.faults().disarm();
    assert_eq!(
        sites.first(),
        Some(&"WdfControlDeviceInitAllocate"),
        "{sites:?}"
    );
    assert!(matches!(machine.controller_state(a), Some(PnpState::NotAttached(s)) if s < 0));
    assert!(machine.filter_device(a).is_none());
    assert!(
        machine
            .debug_log()
            .iter()
            .any(|l| l.contains("the filter does not attach to this controller")),
        "the failure is logged: {:?}",
        machine.debug_log()
    );
    assert_eq!(
        machine.stat("filter AddDevice failures turned into success"),
        1
    );
    // The next controller tries again and attaches.
    let b = rig.add(&machine, |_| {});
    assert_eq!(machine.controller_state(b), Some(PnpState::Started));
    assert_eq!(machine.lower_references(b), 2);
    machine.unload().assert_clean();
}
