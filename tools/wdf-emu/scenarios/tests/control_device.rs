//! The control device `\Device\WinVerbs`: it exists while a controller is below the filter or
//! a handle is open, a create racing its deletion is refused cleanly, and a controller that
//! arrives while only a handle keeps it finds and reuses it.

use wdf_emu::pnp::PnpState;
use wdf_emu::{EmuFile, Machine, MachineConfig};
use wdf_emu_scenarios::{Rig, boot};
use wv_abi::NtStatus;
use wv_client::verbs::Provider;
use wv_softhca::LinkLayer;

const PATH: &str = r"\\.\WinVerbs";

fn control_devices(machine: &wdf_emu::Machine) -> usize {
    machine.devices().iter().filter(|d| d.control).count()
}

/// A machine whose one controller went while a handle stayed open: the handle alone keeps the
/// control device (the rig, to add controllers to it).
fn handle_outliving_its_controller() -> (Machine, Rig, EmuFile) {
    let machine = boot(MachineConfig::default());
    let mut rig = Rig::new(LinkLayer::Ethernet);
    let a = rig.add(&machine, |_| {});
    let file = machine.open(PATH).expect("CreateFile");
    machine.remove(a);
    machine.run_until_idle();
    (machine, rig, file)
}

#[test]
fn a_create_racing_the_deletion_is_refused_and_nothing_leaks() {
    let machine = boot(MachineConfig::default());
    let mut rig = Rig::new(LinkLayer::Ethernet);
    let a = rig.add(&machine, |_| {});
    assert_eq!(control_devices(&machine), 1);
    // The I/O manager has found the device and the framework counted the open; before
    // EvtDeviceFileCreate runs, the last controller goes and its cleanup deletes the device.
    let opened = machine.open_racing(PATH, || machine.remove(a));
    assert_eq!(
        opened.err().map(|s| NtStatus(s as u32)),
        Some(NtStatus::NO_SUCH_DEVICE),
        "the create after the confirmed deletion is refused"
    );
    machine.run_until_idle();
    assert_eq!(
        control_devices(&machine),
        0,
        "deleted once the refused create ended"
    );
    assert!(machine.open(PATH).is_err(), "no device, no link");
    machine.unload().assert_clean();
}

#[test]
fn an_open_handle_keeps_the_device_past_the_last_controller() {
    let (machine, _rig, file) = handle_outliving_its_controller();
    assert_eq!(control_devices(&machine), 1, "kept for the open handle");
    // The handle still works: GUID_QUERY answers an empty list.
    let st = file
        .device_io_control(wv_abi::ioctl::WV_IOCTL_GUID_QUERY, &[], 40)
        .wait();
    assert_eq!(
        (st.status, st.information, &st.output[..]),
        (0, 8, &[0u8; 8][..])
    );
    drop(file);
    machine.run_until_idle();
    assert_eq!(control_devices(&machine), 0, "deleted after the last close");
    machine.unload().assert_clean();
}

/// Why the glue defers the control device's deletion to the last close itself instead of
/// deleting it in the last filter's cleanup and leaving the wait for handles to KMDF: KMDF
/// keeps a deleted control device's symbolic link until its last handle closes, so a
/// controller that arrives meanwhile (a disable/enable, a re-enumeration) could not create a
/// new `\DosDevices\WinVerbs` and its AddDevice would fail — the filter silently absent. The
/// glue's device stays and is reused.
#[test]
fn a_controller_arriving_while_a_handle_keeps_the_device_reuses_it() {
    let (machine, mut rig, file) = handle_outliving_its_controller();
    let provider = Provider::new(file);
    let b = rig.add(&machine, |_| {});
    assert_eq!(machine.controller_state(b), Some(PnpState::Started));
    assert!(
        machine.filter_device(b).is_some(),
        "the filter attached to the new controller"
    );
    assert_eq!(machine.lower_references(b), 2);
    assert_eq!(control_devices(&machine), 1, "one control device, reused");
    let guids = provider
        .device_guids()
        .expect("GUID_QUERY through the old handle");
    assert_eq!(guids.len(), 1);
    provider
        .open_device(guids[0])
        .expect("DEVICE_OPEN on the new controller");
    drop(provider);
    machine.unload().assert_clean();
}
