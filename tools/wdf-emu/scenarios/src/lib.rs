//! What the glue's scenarios share: loading the WinVerbs glue (driver/, linked from the mirror
//! package) on an emulated machine, and soft HCAs below it.

use std::sync::Arc;

use wdf_emu::controller::{ControllerConfig, SoftController};
use wdf_emu::{ControllerId, Machine, MachineConfig};
use wdk_sys::{NTSTATUS, PCUNICODE_STRING, PDRIVER_OBJECT};
use wv_softhca::{ClientMemory, Fabric, LinkLayer};

// The glue is linked for its exported `DriverEntry`; nothing else of it is named here.
use winverbs as _;

unsafe extern "C" {
    /// The glue's entry point (`driver/entry.rs`, exported as `DriverEntry`).
    fn DriverEntry(driver: PDRIVER_OBJECT, registry_path: PCUNICODE_STRING) -> NTSTATUS;
}

/// `DriverEntry` as the machine calls it.
pub fn winverbs_entry() -> wdf_emu::DriverEntry {
    Box::new(|driver, path| {
        // SAFETY: the machine passes its driver object and registry path, once per load, at
        // PASSIVE_LEVEL: DriverEntry's contract.
        unsafe { DriverEntry(driver, path) }
    })
}

/// A machine with the WinVerbs driver loaded (panics if `DriverEntry` fails).
pub fn boot(config: MachineConfig) -> Machine {
    let machine = Machine::boot(config);
    let status = machine.load(winverbs_entry());
    assert!(
        wdk_sys::NT_SUCCESS(status),
        "DriverEntry failed: {status:#x}; {:?}",
        machine.violations()
    );
    machine
}

/// Soft HCAs for a machine: their fabric and how to add one.
pub struct Rig {
    /// The fabric joining them.
    pub fabric: Arc<Fabric>,
    /// What they are.
    pub link_layer: LinkLayer,
    /// The controllers added so far, with their PnP ids.
    pub controllers: Vec<(Arc<SoftController>, ControllerId)>,
}

impl Rig {
    /// No controller yet.
    pub fn new(link_layer: LinkLayer) -> Self {
        Rig {
            fabric: Fabric::new(),
            link_layer,
            controllers: Vec::new(),
        }
    }

    /// A soft HCA arrives below the filter (PnP enumeration, AddDevice, start).
    pub fn add(
        &mut self,
        machine: &Machine,
        configure: impl FnOnce(&mut ControllerConfig),
    ) -> ControllerId {
        let mut config = ControllerConfig::new(self.controllers.len());
        config.link_layer = self.link_layer;
        configure(&mut config);
        let controller = SoftController::new(
            machine.platform(),
            &self.fabric,
            ClientMemory::pool(wv_client::process_memory().clone()),
            config,
        );
        let id = machine.add_controller(Arc::clone(&controller) as Arc<dyn wdf_emu::LowerStack>);
        self.controllers.push((controller, id));
        id
    }
}
