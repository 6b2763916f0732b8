//! What a scenario runs against: an [`Env`], one fresh machine per scenario, and the admin side
//! of that machine, a [`Machine`].
//!
//! The suite needs two faces of a stack. The user face is `CreateFile(\\.\WinVerbs)` and the
//! IOCTLs on the handle ([`Env::open`], a [`RawFile`]); every stack has it. The admin face is
//! what a controller's owner and the host do below and beside the driver: bring a port down,
//! pull a device out, plug one in, answer where an IP address lives (IBAT's role on Windows).
//! A stack whose soft HCAs and fabric are in reach has it ([`Env::machine`]); on a real system
//! it is `None` and the scenarios that need it SKIP.

use std::any::Any;
use std::net::IpAddr;

use wv_client::raw::{IoStatus, RawFile};
use wv_client::verbs::AddressService;

use crate::device::{DeviceSpec, other_device, resolve_device};
use crate::scenarios::raw;

/// One scenario's machine: a loaded driver with its devices, reached through handles.
///
/// The runner builds one per scenario ([`Env::create`], on the scenario's own thread), runs
/// the scenario on it and tears it down ([`Env::finish`]), so ids, port states, removed devices
/// and verifier findings never leak from one scenario into the next.
pub trait Env: Sized + 'static {
    /// What [`Env::create`] needs: the stack's own options (a device choice, a lower edge, …).
    /// Cloned once per scenario.
    type Config: Clone + Send + 'static;
    /// An open handle on the driver.
    type File: RawFile + Send + Sync + 'static;

    /// Builds a fresh machine for one scenario.
    ///
    /// # Errors
    /// Why the stack cannot be built or reached (the scenario FAILs with it).
    fn create(config: &Self::Config) -> Result<Self, String>;

    /// The verifier the machines of `config` run under, if any, in words: what it watched
    /// (for instance "driver → soft HCAs through their C verbs tables"). `Some` makes the
    /// runner add the [`VERIFIER_SCENARIO`](crate::VERIFIER_SCENARIO) line after the
    /// scenarios, built from what each [`Env::finish`] returned.
    fn verifier(config: &Self::Config) -> Option<String>;

    /// CreateFile on the driver: a new file object, a new WinVerbs provider in the driver.
    ///
    /// # Errors
    /// Why the driver (or the system) refused.
    fn open(&self) -> Result<Self::File, String>;

    /// The device single-device scenarios use (`None`: the first GUID_QUERY lists).
    fn device_spec(&self) -> Option<DeviceSpec>;

    /// The machine's admin side (port state, removal, hot add, addresses); `None` on a real
    /// system, where the scenarios that need it SKIP.
    fn machine(&self) -> Option<&dyn Machine> {
        None
    }

    /// A fresh machine like [`Env::create`]'s whose deferred work and timers run only when the
    /// scenario drives them, through [`Machine::clock`], for the scenarios marked
    /// [`Clock::Injected`](crate::Clock::Injected) (timeouts of many seconds checked in no time).
    /// It is the scenario's only machine. `None` when the stack has no injected clock (those
    /// scenarios then SKIP).
    fn create_on_injected_clock(config: &Self::Config) -> Option<Result<Self, String>> {
        let _ = config;
        None
    }

    /// CloseHandle racing an IOCTL the I/O manager has already referenced the file for: the
    /// IOCTL reaches the driver after cleanup. `None` when the stack cannot stage that
    /// (a real system cannot order it deterministically).
    fn close_racing_ioctl(
        &self,
        file: Self::File,
        code: u32,
        input: &[u8],
        output_len: usize,
    ) -> Option<IoStatus> {
        let _ = (file, code, input, output_len);
        None
    }

    /// `len` bytes of memory the devices accept in MEMORY_REGISTER (the driver probes the
    /// caller's pages, so not every address will do): its address and the owner that keeps it
    /// alive until dropped. Every device of the machine must accept it.
    fn buffer(&self, len: usize) -> (u64, Box<dyn Any>);

    /// Tears the machine down (unloads the driver) and returns the verifier's violations of
    /// this machine alone, each a line of text; none on a system without a verifier. Every
    /// handle the scenario opened is closed by then.
    fn finish(self) -> Vec<String>;

    /// The GUID of the device the scenario should use ([`Env::device_spec`], or the first).
    ///
    /// # Errors
    /// No device, or the chosen one is missing.
    fn guid(&self, f: &Self::File) -> Result<u64, String> {
        let guids = raw::guids(f)?;
        let i = resolve_device(&guids, self.device_spec())?;
        Ok(guids[i])
    }

    /// The GUID of another device than [`Env::guid`] when there is one (else the same).
    ///
    /// # Errors
    /// As [`Env::guid`].
    fn other_guid(&self, f: &Self::File) -> Result<u64, String> {
        let guids = raw::guids(f)?;
        let i = resolve_device(&guids, self.device_spec())?;
        Ok(guids[other_device(guids.len(), i)])
    }

    /// The machine's index of device `guid`, for the admin actions.
    ///
    /// # Errors
    /// No admin side, or the device is not the machine's.
    fn device_index(&self, guid: u64) -> Result<usize, String> {
        let machine = self.machine().ok_or("no admin access on this transport")?;
        (0..machine.device_count())
            .find(|&i| machine.device_guid(i) == Some(guid))
            .ok_or_else(|| format!("device {guid:#x} is not one of the stack's"))
    }
}

/// The admin side of a machine: its devices by index (stable for the machine's life: a
/// removed device keeps its index, a hot-added one gets the next), the actions of the
/// controllers' owner, and the host's address service.
///
/// Every call is made from the scenario's thread while the driver is live; each action takes
/// effect through the devices (an interrupt, a PnP removal or arrival) before it returns, as the
/// scenarios then check what the driver made of it.
pub trait Machine {
    /// Node GUIDs of the devices present (not removed), in index order: what GUID_QUERY must
    /// list.
    fn device_guids(&self) -> Vec<u64>;
    /// How many devices were ever added (removed ones keep their index).
    fn device_count(&self) -> usize;
    /// The node GUID of device `index`, removed or not.
    fn device_guid(&self, index: usize) -> Option<u64>;

    /// Brings `port` of device `index` up or down; the device raises the port event through
    /// its event ring and interrupt, as a real controller does.
    ///
    /// # Errors
    /// A bad index or port, or a removed device, in words.
    fn set_port_state(&self, index: usize, port: u8, up: bool) -> Result<(), String>;
    /// Surprise removal of device `index`: the hardware goes, then the PnP removal reaches the
    /// driver. `false` for a bad index or a device already removed.
    fn remove_device(&self, index: usize) -> bool;
    /// Hot add: a new device joins the fabric and arrives through PnP; returns its index.
    fn add_device(&self) -> usize;

    /// What the host answers about IP addresses (IBAT and the socket layer on Windows): the
    /// endpoints' bind, route and port reservations go through it.
    fn addresses(&self) -> &dyn AddressService;
    /// The IPv4 address of `port` of device `index`, which [`Machine::addresses`] locates.
    fn address(&self, index: usize, port: u8) -> IpAddr;
    /// Connection ids alive in device `index`'s connection manager (its listeners and
    /// connections, and requests from peers no listener took yet); `None` for a bad index.
    fn cm_ids(&self, index: usize) -> Option<usize>;

    /// The injected clock, on a machine built by [`Env::create_on_injected_clock`]; `None` on a
    /// machine whose work runs on its own.
    fn clock(&self) -> Option<&dyn InjectedClock> {
        None
    }
}

/// A clock and a deferred-work queue that only move when the scenario moves them.
pub trait InjectedClock {
    /// The machine's time in nanoseconds.
    fn now_ns(&self) -> u64;
    /// Runs deferred work (work items, DPCs) until none is left.
    fn run_until_idle(&self);
    /// Advances time to the earliest armed timer, fires it and runs the work it queued;
    /// `false` when no timer is armed.
    fn run_next_timer(&self) -> bool;
}
