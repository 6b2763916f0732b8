//! The in-process stack as an [`Env`]: a new [`Stack`] (the driver core on the host model of
//! KMDF, two soft HCAs on one fabric, threaded platform) for every scenario, with the stack as
//! its [`Machine`] and the host model's verifier.

use std::any::Any;
use std::net::IpAddr;

use wv_client::raw::IoStatus;
use wv_client::verbs::AddressService;
use wv_hal::Platform;
use wv_inproc::{LinkLayer, LowerEdge, Stack, StackConfig};

use crate::device::{DeviceSpec, resolve_device};
use crate::env::{Env, InjectedClock, Machine};

/// How the in-process machines are built.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct InprocConfig {
    /// The device single-device scenarios use (default: the first).
    pub device: Option<DeviceSpec>,
    /// How the driver reaches the soft HCAs (default: through their C verbs tables).
    pub lower: LowerEdge,
    /// The soft HCAs' ports (default: Ethernet, i.e. RoCE).
    pub link_layer: LinkLayer,
}

impl InprocConfig {
    /// Checks `device` against the devices a machine of this configuration has (on a
    /// throw-away stack), so a bad choice is one clear error before the suite runs instead of
    /// a failure in every scenario.
    ///
    /// # Errors
    /// The device does not exist; the message lists those that do.
    pub fn validate(&self) -> Result<(), String> {
        let Some(spec) = self.device else {
            return Ok(());
        };
        let stack = Stack::new(InprocEnv::stack_config(self));
        let found = resolve_device(&stack.device_guids(), Some(spec)).map(|_| ());
        let _ = stack.unload();
        found
    }

    /// How the driver reaches the soft HCAs, in words (also the verifier's description).
    pub fn describe(&self) -> &'static str {
        match (self.lower, self.link_layer) {
            (LowerEdge::CTable, LinkLayer::Ethernet) => {
                "driver → soft HCAs through their C verbs tables"
            }
            (LowerEdge::Direct, LinkLayer::Ethernet) => "driver → soft HCAs by direct calls",
            (LowerEdge::CTable, LinkLayer::InfiniBand) => {
                "driver → soft HCAs with InfiniBand ports through their C verbs tables"
            }
            (LowerEdge::Direct, LinkLayer::InfiniBand) => {
                "driver → soft HCAs with InfiniBand ports by direct calls"
            }
        }
    }
}

/// A fresh in-process stack.
pub struct InprocEnv {
    stack: Stack,
    device: Option<DeviceSpec>,
}

impl InprocEnv {
    /// The stack every scenario gets: two soft HCAs with two ports each (the second port lets
    /// the port-event scenario order events deterministically), QP modify asynchronous, a
    /// threaded platform (real waits, as on Windows).
    pub fn stack_config(config: &InprocConfig) -> StackConfig {
        StackConfig {
            devices: 2,
            ports_per_device: 2,
            lower: config.lower,
            link_layer: config.link_layer,
            ..StackConfig::default()
        }
    }
}

impl Env for InprocEnv {
    type Config = InprocConfig;
    type File = wv_inproc::File;

    fn create(config: &InprocConfig) -> Result<Self, String> {
        Ok(InprocEnv {
            stack: Stack::new(Self::stack_config(config)),
            device: config.device,
        })
    }

    fn verifier(config: &InprocConfig) -> Option<String> {
        Some(config.describe().to_owned())
    }

    fn open(&self) -> Result<Self::File, String> {
        self.stack
            .open()
            .map_err(|s| format!("CreateFile on the in-process driver: {s}"))
    }

    fn device_spec(&self) -> Option<DeviceSpec> {
        self.device
    }

    fn machine(&self) -> Option<&dyn Machine> {
        Some(&self.stack)
    }

    fn create_on_injected_clock(config: &InprocConfig) -> Option<Result<Self, String>> {
        // The suite's shape on the configured lower edge and link layer, one thread: work
        // items, DPCs and timers run only when the scenario drives them.
        let stack = Stack::new(StackConfig {
            deterministic: true,
            ..Self::stack_config(config)
        });
        Some(Ok(InprocEnv {
            stack,
            device: config.device,
        }))
    }

    fn close_racing_ioctl(
        &self,
        file: Self::File,
        code: u32,
        input: &[u8],
        output_len: usize,
    ) -> Option<IoStatus> {
        Some(file.close_racing_ioctl(code, input, output_len).wait())
    }

    fn buffer(&self, len: usize) -> (u64, Box<dyn Any>) {
        // The in-process soft HCAs accept registrations of the process-wide pool only, as a
        // kernel's probe accepts only mapped pages.
        let b = wv_inproc::process_memory().alloc(len);
        (b.addr(), Box::new(b))
    }

    fn finish(self) -> Vec<String> {
        self.stack.unload()
    }
}

/// The stack's admin actions and fabric are the machine's.
impl Machine for Stack {
    fn device_guids(&self) -> Vec<u64> {
        Stack::device_guids(self)
    }

    fn device_count(&self) -> usize {
        Stack::device_count(self)
    }

    fn device_guid(&self, index: usize) -> Option<u64> {
        Stack::device_guid(self, index)
    }

    fn set_port_state(&self, index: usize, port: u8, up: bool) -> Result<(), String> {
        Stack::set_port_state(self, index, port, up).map_err(|e| e.to_string())
    }

    fn remove_device(&self, index: usize) -> bool {
        Stack::remove_device(self, index)
    }

    fn add_device(&self) -> usize {
        Stack::add_device(self)
    }

    fn addresses(&self) -> &dyn AddressService {
        self
    }

    fn address(&self, index: usize, port: u8) -> IpAddr {
        Stack::address(self, index, port)
    }

    fn cm_ids(&self, index: usize) -> Option<usize> {
        self.hca(index).map(|hca| hca.cm().ids())
    }

    fn clock(&self) -> Option<&dyn InjectedClock> {
        self.platform()
            .is_deterministic()
            .then_some(self as &dyn InjectedClock)
    }
}

/// The host model's deterministic mode: one thread, work runs when the caller says.
impl InjectedClock for Stack {
    fn now_ns(&self) -> u64 {
        self.platform().now_ns()
    }

    fn run_until_idle(&self) {
        Stack::run_until_idle(self);
    }

    fn run_next_timer(&self) -> bool {
        self.platform().run_next_timer()
    }
}
