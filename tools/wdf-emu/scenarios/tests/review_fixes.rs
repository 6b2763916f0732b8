//! The review's findings on the glue, each executed: a kernel-mode sender without a file object,
//! the inline (memory-pinning) IOCTLs from a kernel-mode sender or a raised IRQL, the file
//! object class, and the driver's PASSIVE_LEVEL lock.

use wdf_emu::file::KernelSender;
use wdf_emu::{Machine, MachineConfig};
use wdf_emu_scenarios::{Rig, boot};
use wv_abi::NtStatus;
use wv_abi::ioctl::*;
use wv_client::verbs::Provider;
use wv_hal::{Irql, Verbs};
use wv_softhca::LinkLayer;

const INVALID_DEVICE_REQUEST: u32 = NtStatus::INVALID_DEVICE_REQUEST.0;

fn machine_with_a_controller() -> (Machine, Rig) {
    let machine = boot(MachineConfig::default());
    let mut rig = Rig::new(LinkLayer::Ethernet);
    rig.add(&machine, |_| {});
    (machine, rig)
}

/// `IoBuildDeviceIoControlRequest` to `\Device\WinVerbs` has no FILE_OBJECT: the request's
/// file object is NULL, and looking up a context on it is KMDF's `FxPointerNotNull` bug check.
/// The glue refuses the request instead.
#[test]
fn a_kernel_mode_sender_without_a_file_object_is_refused_not_a_bug_check() {
    let (machine, _rig) = machine_with_a_controller();
    for (irql, code) in [
        (Irql::Passive, WV_IOCTL_GUID_QUERY),
        (Irql::Passive, WV_IOCTL_CQ_NOTIFY),
        (Irql::Dispatch, WV_IOCTL_GUID_QUERY),
        (Irql::Dispatch, 0x1234_5678),
    ] {
        let st = machine
            .kernel_ioctl(
                KernelSender::Device(r"\Device\WinVerbs"),
                irql,
                code,
                &[0; 16],
                40,
            )
            .wait();
        assert_eq!(
            st.status,
            INVALID_DEVICE_REQUEST,
            "{code:#x} at {}",
            irql.name()
        );
    }
    assert!(!machine.is_dead(), "{:?}", machine.violations());
    machine.unload().assert_clean();
}

/// The inline IOCTLs pin or map the caller's memory: from a kernel-mode sender, or at
/// DISPATCH_LEVEL (where the control device's PASSIVE_LEVEL queue would run them on a system
/// worker thread, in the System process), they are refused; requests that park still work.
#[test]
fn the_inline_class_needs_an_application_at_passive_level() {
    let (machine, rig) = machine_with_a_controller();
    let file = machine.open(r"\\.\WinVerbs").expect("CreateFile");
    let mut guid = rig.controllers[0].0.hca().guid().to_ne_bytes().to_vec();
    guid.extend_from_slice(&[0; 8]);
    for irql in [Irql::Passive, Irql::Dispatch] {
        let st = machine
            .kernel_ioctl(
                KernelSender::File(&file),
                irql,
                WV_IOCTL_DEVICE_OPEN,
                &guid,
                264,
            )
            .wait();
        assert_eq!(
            st.status,
            INVALID_DEVICE_REQUEST,
            "DEVICE_OPEN at {}",
            irql.name()
        );
    }
    // The same handle from user mode opens the device.
    let st = file
        .device_io_control(WV_IOCTL_DEVICE_OPEN, &guid, 264)
        .wait();
    assert_eq!(st.status, 0);
    let device = u64::from_ne_bytes(st.output[..8].try_into().unwrap());
    // A kernel-mode DEVICE_NOTIFY at DISPATCH_LEVEL is queued (to a worker) and parks.
    let mut id = device.to_ne_bytes().to_vec();
    id.extend_from_slice(&[0, 0, 0, 0, 1, 0, 0, 0]);
    let parked = machine.kernel_ioctl(
        KernelSender::File(&file),
        Irql::Dispatch,
        WV_IOCTL_DEVICE_NOTIFY,
        &id,
        4,
    );
    machine.run_until_idle();
    assert!(parked.try_result().is_none(), "parked");
    assert!(
        machine.stat("deferred presentations") >= 1,
        "presented from a worker"
    );
    drop(file);
    assert_eq!(parked.wait().status, NtStatus::CANCELLED.0);
    assert!(!machine.is_dead(), "{:?}", machine.violations());
    machine.unload().assert_clean();
}

/// The framework finds a request's file object through the FILE_OBJECT's FsContext, not by
/// searching every open handle under the device's lock on each request.
#[test]
fn file_objects_are_found_through_fs_context() {
    let (machine, _rig) = machine_with_a_controller();
    let control = machine
        .devices()
        .into_iter()
        .find(|d| d.control)
        .expect("control device");
    assert_eq!(
        control.file_object_class,
        Some(wdk_sys::_WDF_FILEOBJECT_CLASS::WdfFileObjectWdfCanUseFsContext)
    );
    let files: Vec<_> = (0..4)
        .map(|_| machine.open(r"\\.\WinVerbs").expect("open"))
        .collect();
    for f in &files {
        assert_eq!(
            f.device_io_control(WV_IOCTL_GUID_QUERY, &[], 40)
                .wait()
                .status,
            0
        );
    }
    assert_eq!(machine.stat("file lookups by search"), 0);
    drop(files);
    machine.unload().assert_clean();
}

/// The lock that serialises the control device's creation and deletion is a framework wait
/// lock (KMDF Verifier sees it), taken and released in the callbacks that need it.
#[test]
fn the_passive_lock_is_a_wait_lock() {
    let (machine, _rig) = machine_with_a_controller();
    assert!(machine.stat("wait lock acquisitions") >= 1);
    machine.unload().assert_clean();
}

/// The suspend waits for the stop in bounded slices and logs a wait that lasts: here the system
/// worker threads are busy for 2.2 s, so the stop (run on one of them) starts late.
#[test]
fn a_slow_suspend_is_logged_and_still_gives_everything_back() {
    let (machine, rig) = machine_with_a_controller();
    let a = rig.controllers[0].1;
    let provider = Provider::new(machine.open(r"\\.\WinVerbs").expect("CreateFile"));
    let device = provider
        .open_device(rig.controllers[0].0.hca().guid())
        .expect("DEVICE_OPEN");
    let notify = device.port_notify(1).expect("DEVICE_NOTIFY");
    machine.delay_work_items(std::time::Duration::from_millis(2200));
    machine.sleep(a);
    machine.delay_work_items(std::time::Duration::ZERO);
    assert_eq!(
        machine.lower_references(a),
        0,
        "the interfaces went back before D0Exit"
    );
    assert_eq!(
        notify.wait().expect_err("ended").status,
        NtStatus::DEVICE_REMOVED
    );
    let log = machine.debug_log();
    for seconds in [1, 2] {
        assert!(
            log.iter()
                .any(|l| l.contains(&format!("the suspend has waited {seconds} s"))),
            "{log:?}"
        );
    }
    machine.wake(a);
    drop(device);
    drop(provider);
    machine.unload().assert_clean();
}
