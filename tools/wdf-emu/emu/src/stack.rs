//! [`EmuStack`]: a whole machine for the conformance suite and the verbs library — a driver
//! loaded on an emulated KMDF, soft HCAs below it on one fabric, handles through the emulated
//! I/O manager — with the admin actions a controller's owner has (port up or down, surprise
//! removal, hot add) and the address service endpoints use. Its shape follows
//! `wv_inproc::Stack`, so a scenario written for one runs on the other.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use wdk_sys::NTSTATUS;
use wv_client::verbs::OnFabric;
use wv_hal::{Verbs, VerbsError};
use wv_softhca::{ClientMemory, Fabric, LinkLayer};

use crate::controller::{ControllerConfig, SoftController};
use crate::file::EmuFile;
use crate::machine::{DriverEntry, Machine, MachineConfig};
use crate::pnp::{ControllerId, LowerStack};
use crate::verifier::Report;

/// How to build an [`EmuStack`].
#[derive(Clone, Copy, Debug)]
pub struct EmuStackConfig {
    /// Soft HCAs present at start.
    pub devices: usize,
    /// Ports per soft HCA (1 or 2).
    pub ports: u8,
    /// RoCE or InfiniBand ports.
    pub link_layer: LinkLayer,
    /// The machine.
    pub machine: MachineConfig,
}

impl Default for EmuStackConfig {
    fn default() -> Self {
        EmuStackConfig {
            devices: 2,
            ports: 1,
            link_layer: LinkLayer::Ethernet,
            machine: MachineConfig::default(),
        }
    }
}

struct Slot {
    controller: Arc<SoftController>,
    id: ControllerId,
    removed: bool,
}

/// A machine with a driver, its controllers and their fabric.
pub struct EmuStack {
    machine: Machine,
    fabric: Arc<Fabric>,
    slots: Mutex<Vec<Slot>>,
    config: EmuStackConfig,
}

impl std::fmt::Debug for EmuStack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmuStack")
            .field("machine", &self.machine)
            .field("devices", &self.device_guids())
            .finish()
    }
}

/// The memory the soft HCAs let applications register: the process's, as in the in-process
/// stack (a buffer from `wv_client::process_memory()` registers with any device).
fn memory() -> ClientMemory {
    ClientMemory::pool(wv_client::process_memory().clone())
}

impl EmuStack {
    /// Boots a machine (waiting up to a minute for the one before it to go), loads the driver
    /// with `entry`, and brings `config.devices` soft HCAs up below it.
    ///
    /// # Errors
    /// The machine before it is still running, or `DriverEntry` failed (the machine is then
    /// torn down).
    pub fn new(config: EmuStackConfig, entry: DriverEntry) -> Result<EmuStack, String> {
        let Some(machine) = Machine::try_boot(config.machine, Duration::from_secs(60)) else {
            return Err(
                "the previous machine is still running (its test hung and was abandoned)".into(),
            );
        };
        let status: NTSTATUS = machine.load(entry);
        if !wdk_sys::NT_SUCCESS(status) {
            return Err(format!("DriverEntry failed: {status:#010x}"));
        }
        let stack = EmuStack {
            machine,
            fabric: Fabric::new(),
            slots: Mutex::new(Vec::new()),
            config,
        };
        for _ in 0..config.devices {
            stack.add_device();
        }
        Ok(stack)
    }

    /// The machine (PnP, verifier, statistics).
    pub fn machine(&self) -> &Machine {
        &self.machine
    }

    /// The fabric joining the soft HCAs.
    pub fn fabric(&self) -> &Arc<Fabric> {
        &self.fabric
    }

    /// `CreateFile(\\.\WinVerbs)`.
    ///
    /// # Errors
    /// The status the open failed with.
    pub fn open(&self) -> Result<EmuFile, NTSTATUS> {
        self.machine.open(r"\\.\WinVerbs")
    }

    /// Admin, hot add: a new soft HCA joins the fabric and arrives through the PnP manager;
    /// returns its index.
    pub fn add_device(&self) -> usize {
        let mut slots = self.slots.lock();
        let index = slots.len();
        let mut config = ControllerConfig::new(index);
        config.ports = self.config.ports;
        config.link_layer = self.config.link_layer;
        let controller =
            SoftController::new(self.machine.platform(), &self.fabric, memory(), config);
        let id = self
            .machine
            .add_controller(Arc::clone(&controller) as Arc<dyn LowerStack>);
        slots.push(Slot {
            controller,
            id,
            removed: false,
        });
        index
    }

    /// Admin, surprise removal of device `device`: the hardware goes first, then the PnP
    /// manager's surprise removal and removal reach the filter. `false` for a bad index or a
    /// device already removed.
    pub fn remove_device(&self, device: usize) -> bool {
        let (controller, id) = {
            let mut slots = self.slots.lock();
            match slots.get_mut(device) {
                Some(slot) if !slot.removed => {
                    slot.removed = true;
                    (Arc::clone(&slot.controller), slot.id)
                }
                _ => return false,
            }
        };
        controller.hca().surprise_remove();
        self.machine.surprise_remove(id);
        self.machine.remove(id);
        true
    }

    /// Admin: port `port` of device `device` up or down (the soft HCA raises the event).
    ///
    /// # Errors
    /// A bad index or port, or a removed device.
    pub fn set_port_state(&self, device: usize, port: u8, up: bool) -> Result<(), VerbsError> {
        let controller = {
            let slots = self.slots.lock();
            match slots.get(device) {
                Some(slot) if !slot.removed => Arc::clone(&slot.controller),
                Some(_) => return Err(VerbsError::DeviceRemoved),
                None => return Err(VerbsError::InvalidParameter),
            }
        };
        controller.hca().set_port_state(port, up)
    }

    /// The node GUIDs of the devices present, in index order.
    pub fn device_guids(&self) -> Vec<u64> {
        self.slots
            .lock()
            .iter()
            .filter(|s| !s.removed)
            .map(|s| s.controller.hca().guid())
            .collect()
    }

    /// The node GUID of device `device`, removed or not.
    pub fn device_guid(&self, device: usize) -> Option<u64> {
        self.slots
            .lock()
            .get(device)
            .map(|s| s.controller.hca().guid())
    }

    /// How many devices were ever added.
    pub fn device_count(&self) -> usize {
        self.slots.lock().len()
    }

    /// Connection ids alive in device `device`'s connection manager.
    pub fn cm_ids(&self, device: usize) -> Option<usize> {
        self.slots
            .lock()
            .get(device)
            .map(|s| s.controller.hca().cm().ids())
    }

    /// The PnP id of device `device`.
    pub fn controller_id(&self, device: usize) -> Option<ControllerId> {
        self.slots.lock().get(device).map(|s| s.id)
    }

    /// The IPv4 address of `port` of device `device`.
    pub fn address(&self, device: usize, port: u8) -> IpAddr {
        crate::controller::address(device, port)
    }

    /// The IPv6 address of `port` of device `device`.
    pub fn address_v6(&self, device: usize, port: u8) -> IpAddr {
        crate::controller::address_v6(device, port)
    }

    /// Every violation so far (without ending the run).
    pub fn violations(&self) -> Vec<String> {
        self.machine.violations()
    }

    /// Unloads the driver (every device removed first) and returns the verifier's report.
    pub fn unload(self) -> Report {
        self.machine.unload()
    }
}

/// The stack's fabric answers what IBAT and the socket layer answer on Windows.
impl OnFabric for EmuStack {
    fn fabric(&self) -> &Arc<Fabric> {
        &self.fabric
    }
}
