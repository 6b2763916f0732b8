//! The first IOCTLs through the glue: a handle, the device list, a device, a PD, a CQ, a
//! parked CQ notify cancelled by the close.

use wdf_emu::MachineConfig;
use wdf_emu_scenarios::{Rig, boot};
use wv_client::verbs::Provider;
use wv_softhca::LinkLayer;

#[test]
fn open_list_devices_and_park_a_notify() {
    let machine = boot(MachineConfig::default());
    let mut rig = Rig::new(LinkLayer::Ethernet);
    let a = rig.add(&machine, |_| {});
    let b = rig.add(&machine, |_| {});
    assert_eq!(machine.lower_references(a), 2, "{:?}", machine.violations());
    assert_eq!(machine.lower_references(b), 2);
    let file = machine.open(r"\\.\WinVerbs").expect("open");
    let provider = Provider::new(file);
    let guids = provider.device_guids().expect("GUID_QUERY");
    assert_eq!(guids.len(), 2);
    let device = provider.open_device(guids[0]).expect("DEVICE_OPEN");
    let pd = device.alloc_pd().expect("PD_ALLOCATE");
    let cq = device.create_cq(16).expect("CQ_CREATE");
    let notify = cq.notify(false).expect("CQ_NOTIFY");
    assert!(!notify.is_complete());
    drop(pd);
    drop(notify);
    drop(cq);
    drop(device);
    drop(provider);
    machine.run_until_idle();
    let report = machine.unload();
    report.assert_clean();
}
