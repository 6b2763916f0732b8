//! The conformance suite through the KMDF driver: every scenario of `wv-check` on a fresh
//! emulated machine (the driver loaded on the emulated KMDF, two soft HCAs with two ports each
//! below it, reached through their C tables), on RoCE and then on InfiniBand ports; each
//! machine's verifier findings end up in the suite's verifier line. Prints one line per
//! scenario, a summary per link layer and `<runner> conformance: N passed, N failed` (exit
//! status 1 on any failure).
//!
//! The driver is whatever the scenarios library loads (`wdf_emu_scenarios::winverbs_entry`):
//! here the glue compiled for the host; tools/sys-loader compiles this same file against its
//! library, which loads the linked winverbs.sys.
//!
//! Usage: `wdf-emu-conformance [FILTER]` (only the scenarios whose name contains FILTER).
//!
//! **Pending and inline.** KMDF marks every IRP it dispatches pending — into a queue or to
//! `EvtIoInCallerContext` — and its dispatch returns `STATUS_PENDING` even when the driver has
//! completed the request by then (`FxPkgIo::DispatchToInCallerContextCallback`,
//! `FxIoQueue::QueueRequest`); the emulation does the same (`EmuIo::pending`). So on Windows a
//! caller of this driver (and of OFW's, also a KMDF driver) gets `ERROR_IO_PENDING` from every
//! `DeviceIoControl`, while the suite requires the IOCTLs of the spec's inline class to complete
//! inline. The suite runs here with "inline" read as "complete when `DeviceIoControl` returned"
//! (`EmuIo::completed_at_return`): it checks that the glue completes those requests before
//! returning, which is what a KMDF driver can do, and leaves the I/O manager's pending mark
//! aside. The scenarios crate's `kmdf_pending` test pins the pending mark itself.

use std::any::Any;
use std::net::IpAddr;
use std::process::ExitCode;

use std::time::Duration;

use wdf_emu::{EmuFile, EmuIo, EmuStack, EmuStackConfig, MachineConfig};
use wdf_emu_scenarios::{DRIVER, RUNNER, winverbs_entry};
use wv_check::{DeviceSpec, Env, InjectedClock, Machine, run_suite, summary_line, tally};
use wv_client::raw::{IoStatus, RawFile, RawIo};
use wv_client::verbs::AddressService;
use wv_hal::Platform as _;
use wv_softhca::LinkLayer;

/// What every machine of a run is.
#[derive(Clone, Copy, Debug)]
struct EmuConfig {
    link_layer: LinkLayer,
}

impl EmuConfig {
    fn describe(self) -> String {
        let ports = match self.link_layer {
            LinkLayer::Ethernet => "",
            LinkLayer::InfiniBand => " with InfiniBand ports",
        };
        format!("{DRIVER} on the emulated KMDF → soft HCAs{ports} through their C verbs tables")
    }
}

/// A handle whose requests count as pending when they had not completed by the time
/// `DeviceIoControl` returned (see the module documentation).
struct AtReturn(EmuFile);

/// A request of an [`AtReturn`] handle.
struct AtReturnIo(EmuIo);

impl RawFile for AtReturn {
    type Io = AtReturnIo;

    fn device_io_control(&self, code: u32, input: &[u8], output_len: usize) -> AtReturnIo {
        AtReturnIo(self.0.device_io_control(code, input, output_len))
    }

    fn cancel_io_ex(&self, io: &AtReturnIo) -> bool {
        self.0.cancel_io_ex(&io.0)
    }
}

impl RawIo for AtReturnIo {
    fn pending(&self) -> bool {
        !self.0.completed_at_return()
    }

    fn wait(self) -> IoStatus {
        self.0.wait()
    }

    fn wait_timeout(&self, timeout: Duration) -> Option<IoStatus> {
        RawIo::wait_timeout(&self.0, timeout)
    }

    fn is_complete(&self) -> bool {
        RawIo::is_complete(&self.0)
    }
}

/// The machine's admin side.
struct Admin(EmuStack);

/// One scenario's machine.
struct EmuEnv {
    admin: Admin,
}

impl EmuEnv {
    /// The suite's shape (two soft HCAs with two ports each) on a machine of `machine`.
    fn boot(config: &EmuConfig, machine: MachineConfig) -> Result<Self, String> {
        let stack = EmuStack::new(
            EmuStackConfig {
                devices: 2,
                ports: 2,
                link_layer: config.link_layer,
                machine,
            },
            winverbs_entry(),
        )?;
        Ok(EmuEnv {
            admin: Admin(stack),
        })
    }
}

impl Env for EmuEnv {
    type Config = EmuConfig;
    type File = AtReturn;

    fn create(config: &EmuConfig) -> Result<Self, String> {
        EmuEnv::boot(config, MachineConfig::default())
    }

    fn create_on_injected_clock(config: &EmuConfig) -> Option<Result<Self, String>> {
        // One thread: work items, DPCs and the soft HCAs' timers run only when the scenario
        // drives them (Machine::clock).
        Some(EmuEnv::boot(config, MachineConfig::deterministic()))
    }

    fn verifier(config: &EmuConfig) -> Option<String> {
        Some(config.describe())
    }

    fn open(&self) -> Result<AtReturn, String> {
        self.admin
            .0
            .open()
            .map(AtReturn)
            .map_err(|s| format!("CreateFile on the emulated machine: {:#010x}", s as u32))
    }

    fn device_spec(&self) -> Option<DeviceSpec> {
        None
    }

    fn machine(&self) -> Option<&dyn Machine> {
        Some(&self.admin)
    }

    fn close_racing_ioctl(
        &self,
        file: AtReturn,
        code: u32,
        input: &[u8],
        output_len: usize,
    ) -> Option<IoStatus> {
        Some(file.0.close_racing_ioctl(code, input, output_len).wait())
    }

    fn buffer(&self, len: usize) -> (u64, Box<dyn Any>) {
        // The soft HCAs accept registrations of the process-wide pool only.
        let b = wv_client::process_memory().alloc(len);
        (b.addr(), Box::new(b))
    }

    fn finish(self) -> Vec<String> {
        self.admin.0.unload().violations
    }
}

impl Machine for Admin {
    fn device_guids(&self) -> Vec<u64> {
        self.0.device_guids()
    }

    fn device_count(&self) -> usize {
        self.0.device_count()
    }

    fn device_guid(&self, index: usize) -> Option<u64> {
        self.0.device_guid(index)
    }

    fn set_port_state(&self, index: usize, port: u8, up: bool) -> Result<(), String> {
        self.0
            .set_port_state(index, port, up)
            .map_err(|e| format!("{e:?}"))
    }

    fn remove_device(&self, index: usize) -> bool {
        self.0.remove_device(index)
    }

    fn add_device(&self) -> usize {
        self.0.add_device()
    }

    fn addresses(&self) -> &dyn AddressService {
        &self.0
    }

    fn address(&self, index: usize, port: u8) -> IpAddr {
        self.0.address(index, port)
    }

    fn cm_ids(&self, index: usize) -> Option<usize> {
        self.0.cm_ids(index)
    }

    fn clock(&self) -> Option<&dyn InjectedClock> {
        self.0
            .machine()
            .platform()
            .is_deterministic()
            .then_some(self as &dyn InjectedClock)
    }
}

/// The deterministic machine's clock: the host platform's injected time and deferred work,
/// which the soft HCAs' timers and the glue's work items share.
impl InjectedClock for Admin {
    fn now_ns(&self) -> u64 {
        self.0.machine().platform().now_ns()
    }

    fn run_until_idle(&self) {
        self.0.machine().run_until_idle();
    }

    fn run_next_timer(&self) -> bool {
        self.0.machine().platform().run_next_timer()
    }
}

fn main() -> ExitCode {
    let filter = std::env::args().nth(1);
    let mut all = Vec::new();
    for link_layer in [LinkLayer::Ethernet, LinkLayer::InfiniBand] {
        let config = EmuConfig { link_layer };
        println!(
            "Conformance checks through the driver ({}; inline = complete when DeviceIoControl \
             returned)",
            config.describe()
        );
        let results = run_suite::<EmuEnv>(&config, filter.as_deref(), &mut |r| {
            println!("  {}", r.line());
        });
        println!("  {}", summary_line(&results));
        all.extend(results);
    }
    let (passed, failed, skipped) = tally(&all);
    println!(
        "{RUNNER} conformance: {passed} passed, {failed} failed{}",
        if skipped > 0 {
            format!(" ({skipped} skipped)")
        } else {
            String::new()
        }
    );
    if failed == 0 && passed > 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
