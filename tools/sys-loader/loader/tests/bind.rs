//! The linked image on the emulated KMDF, with nothing below it: FxDriverEntry binds to the
//! framework (1.31, 458 functions), DriverEntry creates the driver, the unload runs the
//! framework's unload through the stub's, which unbinds; nothing is left. And a DriverEntry
//! that fails is unbound by the stub at once.

use std::sync::{Arc, OnceLock};

use sys_loader::wdfldr::{self, Event};
use sys_loader::{LoadedImage, image_path};
use wdf_emu::{FaultPlan, Machine, MachineConfig};

fn image() -> &'static Arc<LoadedImage> {
    static IMAGE: OnceLock<Arc<LoadedImage>> = OnceLock::new();
    IMAGE.get_or_init(|| LoadedImage::load(&image_path()).unwrap_or_else(|e| panic!("{e}")))
}

#[test]
fn the_stub_finds_driver_unload_where_the_bindings_put_it() {
    // The stub writes DriverObject->DriverUnload at a fixed x64 offset.
    assert_eq!(
        std::mem::offset_of!(wdk_sys::DRIVER_OBJECT, DriverUnload),
        0x68
    );
}

#[test]
fn the_image_binds_runs_and_unloads_clean() {
    let machine = Machine::boot(MachineConfig::deterministic());
    let status = machine.load(image().entry());
    assert_eq!(status, 0, "{:?}", machine.violations());
    let events = wdfldr::events();
    let [
        Event::Bound {
            component,
            version,
            functions,
            info,
            registry_path,
        },
    ] = events.as_slice()
    else {
        panic!("one bind expected: {events:?}");
    };
    assert_eq!(component, "KmdfLibrary");
    assert_eq!(*version, (1, 31, 0));
    assert_eq!(*functions, 458);
    assert!(image().contains(*info), "the bind info is the image's own");
    assert_eq!(*registry_path, machine.registry_path());
    assert!(machine.stat("WdfDriverCreate") == 1 && machine.stat("WdfWaitLockCreate") == 1);
    // The stub put its unload routine in front of the framework's.
    // SAFETY: the machine's driver object; nothing of the driver runs now.
    let unload = unsafe { (*machine.driver_object()).DriverUnload }.expect("an unload routine");
    assert!(
        image().contains(unload as usize),
        "DriverUnload is the image's stub"
    );

    machine.unload().assert_clean();
    let events = wdfldr::events();
    assert!(
        matches!(events.as_slice(), [Event::Bound { .. }, Event::Unbound { info: i, .. }] if *i == *info),
        "{events:?}"
    );
}

#[test]
fn a_failed_driver_entry_is_unbound_by_the_stub() {
    let machine = Machine::boot(MachineConfig::deterministic());
    // WdfDriverCreate, the first fallible call of DriverEntry, fails.
    machine.faults().arm(FaultPlan::FailNth(1));
    let status = machine.load(image().entry());
    machine.faults().disarm();
    assert_eq!(status as u32, 0xC000_009A, "STATUS_INSUFFICIENT_RESOURCES");
    assert!(
        machine.violations().is_empty(),
        "{:?}",
        machine.violations()
    );
    let events = wdfldr::events();
    assert!(
        matches!(
            events.as_slice(),
            [Event::Bound { .. }, Event::Unbound { .. }]
        ),
        "{events:?}"
    );
    drop(machine);
    // The next load starts from the image's initial data.
    let machine = Machine::boot(MachineConfig::deterministic());
    assert_eq!(machine.load(image().entry()), 0);
    machine.unload().assert_clean();
}

#[test]
fn the_loader_provides_every_routine_the_allowlist_names() {
    let defs = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../kmdf-link/def");
    let provided = sys_loader::imports::provided();
    let mut checked = 0;
    for file in ["ntoskrnl.def", "WDFLDR.def"] {
        let text = std::fs::read_to_string(defs.join(file)).expect("def file");
        let module = text
            .lines()
            .find_map(|l| l.trim().strip_prefix("LIBRARY "))
            .expect("LIBRARY line")
            .trim();
        let exports = text.lines().skip_while(|l| l.trim() != "EXPORTS").skip(1);
        for name in exports
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with(';'))
        {
            assert!(
                provided.contains(&format!("{module}!{name}")),
                "{module}!{name} is not provided"
            );
            checked += 1;
        }
    }
    assert!(checked >= 21, "{checked}");
}
