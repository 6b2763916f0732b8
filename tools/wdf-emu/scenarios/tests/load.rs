//! The driver loads and unloads: DriverEntry → WdfDriverCreate → EvtDriverUnload, with nothing
//! left behind.

use wdf_emu::MachineConfig;
use wdf_emu_scenarios::boot;

#[test]
fn driver_entry_creates_the_driver_and_unload_leaves_nothing() {
    let machine = boot(MachineConfig::default());
    assert!(machine.is_loaded());
    assert!(
        machine.stat("pool allocations") > 0,
        "the driver's globals live in pool"
    );
    let report = machine.unload();
    report.assert_clean();
}
