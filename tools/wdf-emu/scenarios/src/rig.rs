//! What every scenario needs whichever driver it loads: a machine with the driver loaded
//! ([`boot`], through the library's `winverbs_entry`) and soft HCAs below it ([`Rig`]). The
//! scenarios library of tools/wdf-emu (the glue linked in) and of tools/sys-loader (the linked
//! image) both include this file.

use std::sync::Arc;

use wdf_emu::controller::{ControllerConfig, SoftController};
use wdf_emu::{ControllerId, Machine, MachineConfig};
use wv_softhca::{ClientMemory, Fabric, LinkLayer};

use crate::winverbs_entry;

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
