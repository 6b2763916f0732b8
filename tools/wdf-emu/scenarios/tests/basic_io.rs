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

/// KMDF marks every IRP it dispatches pending and returns `STATUS_PENDING` from its dispatch
/// routine, also when the driver completed the request before returning: a Windows caller
/// sees `ERROR_IO_PENDING` for every IOCTL of this driver. The glue still completes the
/// inline class inside the dispatch; requests that wait (a parked notify, a QP modify on a
/// work item) do not.
#[test]
fn kmdf_pending() {
    let machine = boot(MachineConfig::default());
    let mut rig = Rig::new(LinkLayer::Ethernet);
    rig.add(&machine, |_| {});
    let file = machine.open(r"\\.\WinVerbs").expect("open");
    let io = file.device_io_control(wv_abi::ioctl::WV_IOCTL_GUID_QUERY, &[], 40);
    assert!(io.pending(), "the I/O manager saw STATUS_PENDING");
    assert!(io.completed_at_return(), "completed inside the dispatch");
    assert_eq!(io.wait().status, 0);
    // An unknown code goes through the queue and fails there, in the caller's thread.
    let io = file.device_io_control(0x0022_0000, &[], 0);
    assert!(io.pending() && io.completed_at_return());
    drop(file);
    machine.unload().assert_clean();
}
