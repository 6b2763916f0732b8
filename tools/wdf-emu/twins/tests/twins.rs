//! Each planted mistake is caught by the emulation's verifier with a message naming the DDI
//! and the rule; the fixed twin runs clean.

use std::time::Duration;

use wdf_emu::{Machine, MachineConfig, Report};
use wdf_emu_twins::{Mistake, driver_entry, plant};

const PATH: &str = r"\\.\WdfEmuTwin";
const CODE: u32 = 0x0022_2000;

/// Loads the twin with `mistake`, sends one IOCTL, closes, unloads; returns the verifier's
/// report and the IOCTL's result.
fn run(mistake: Mistake) -> (Report, wv_client::raw::IoStatus) {
    let machine = Machine::boot(MachineConfig {
        hang_timeout: Duration::from_millis(300),
        ..MachineConfig::default()
    });
    // Planted while this test holds the process's one machine.
    plant(mistake);
    let status = machine.load(wdf_emu::DriverEntry::host(|driver, path| {
        // SAFETY: the machine's driver object and registry path, once per load.
        unsafe { driver_entry(driver, path) }
    }));
    assert!(wdk_sys_status_ok(status), "DriverEntry failed: {status:#x}");
    let file = machine.open(PATH).expect("open the twin");
    let result = file.device_io_control(CODE, &[1, 2, 3, 4], 8).wait();
    drop(file);
    machine.run_until_idle();
    (machine.unload(), result)
}

fn wdk_sys_status_ok(status: i32) -> bool {
    status >= 0
}

#[test]
fn the_fixed_twin_is_clean() {
    let (report, result) = run(Mistake::None);
    report.assert_clean();
    assert_eq!((result.status, result.information), (0, 4));
}

#[test]
fn a_double_completion_is_caught() {
    let (report, _) = run(Mistake::DoubleCompletion);
    assert!(
        report.contains("WdfRequestCompleteWithInformation")
            && report.contains("already completed"),
        "{report}"
    );
    assert!(
        report.contains("bug check 0x10d (WDF_VIOLATION)"),
        "{report}"
    );
}

#[test]
fn a_missing_completion_is_caught() {
    let (report, result) = run(Mistake::MissingCompletion);
    assert!(report.contains("never completed (hung"), "{report}");
    assert!(report.contains("leak: WDFREQUEST"), "{report}");
    assert_eq!(
        result.status, 0xC000_00B5,
        "the hung request ends the wait with STATUS_IO_TIMEOUT"
    );
}

#[test]
fn a_ddi_at_the_wrong_irql_is_caught() {
    let (report, _) = run(Mistake::DdiAtWrongIrql);
    assert!(
        report.contains(
            "WdfDeviceCreateSymbolicLink called at DISPATCH_LEVEL; its maximum is PASSIVE_LEVEL"
        ),
        "{report}"
    );
}

#[test]
fn a_leaked_object_is_caught() {
    let (report, _) = run(Mistake::LeakedObject);
    assert!(
        report.contains("leak: WDFQUEUE") && report.contains("at twins/src/lib.rs"),
        "{report}"
    );
}

#[test]
fn leaked_pool_is_caught() {
    let (report, _) = run(Mistake::LeakedPool);
    assert!(
        report.contains("pool allocation(s) of 64 bytes with tag 'Twin' not freed at unload"),
        "{report}"
    );
}
