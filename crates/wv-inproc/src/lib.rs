//! The in-process WinVerbs stack: the real driver core (`wv-core`) on the host model of KMDF
//! and the I/O manager (`wv-host`), above soft HCAs (`wv-softhca`) joined on one fabric, as a
//! transport of `wv-client`'s raw interface.
//!
//! A [`Stack`] is one "machine": a loaded driver with its lower devices. The driver reaches
//! each soft HCA the way the Windows driver reaches a controller, through OFW's C verbs table
//! (the soft HCA's C face read by `wv-ci`'s `CiVerbs`), unless [`LowerEdge::Direct`] asks for
//! plain Rust trait calls. [`Stack::open`] is `CreateFile(\\.\WinVerbs)`; a [`File`] sends
//! IOCTL bytes exactly as the Windows transport does, and an [`Io`] is its OVERLAPPED;
//! [`open_inproc`] puts `wv-client`'s verbs API on a new handle. The admin actions a
//! controller's owner has (port up or down, surprise removal, hot add) go through the soft HCA
//! and the PnP manager, so the driver sees them as it would see a real controller's.
//!
//! It is a crate of its own so that `wv-client`, the library a Windows program links, carries
//! neither the driver core nor the host model.
//!
//! Memory: every soft HCA of every stack validates registrations against the process-wide
//! [`process_memory`] pool (unless [`MemoryMode::Process`] says otherwise), so a buffer from it
//! can be registered with any device, as any memory of a process can.
#![deny(unsafe_code)]

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use wv_abi::NtStatus;
use wv_ci::{CiCmExport, CiExport, CiVerbs};
use wv_core::{Driver, DriverConfig};
use wv_hal::{Verbs, VerbsError as HalError};
use wv_host::{HostPlatform, IoManager};
pub use wv_softhca::LinkLayer;
use wv_softhca::{ClientMemory, DeviceConfig, Fabric, SoftCm, SoftHca};

use wv_client::raw::IoStatus;
use wv_client::verbs::{OnFabric, Provider, VerbsError};

pub use wv_client::process_memory;
pub use wv_core::QpModifyMode;

/// The soft HCA as the host platform runs it.
pub type Hca = SoftHca<HostPlatform>;
/// The driver core calling the soft HCAs directly.
type DirectDrv = Driver<HostPlatform, Arc<Hca>>;
/// The driver core calling the soft HCAs through their C verbs tables.
type TableDrv = Driver<HostPlatform, CiVerbs>;

/// How the driver core reaches the soft HCAs below it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LowerEdge {
    /// Through OFW's C verbs table: each soft HCA's C face (an `RDMA_INTERFACE_VERBS` of
    /// `extern "system"` functions) read by `wv-ci`'s `CiVerbs`, as winverbs.sys reads a
    /// controller's table on Windows. The default.
    #[default]
    CTable,
    /// Direct Rust trait calls into the soft HCAs.
    Direct,
}

impl LowerEdge {
    /// The name `--lower` takes (`ctable`, `direct`).
    pub fn name(self) -> &'static str {
        match self {
            LowerEdge::CTable => "ctable",
            LowerEdge::Direct => "direct",
        }
    }
}

/// The I/O manager and driver of one machine, for either lower edge.
enum Machine {
    Direct(IoManager<DirectDrv>),
    Table(IoManager<TableDrv>),
}

/// The same call on either kind of machine or file.
macro_rules! either {
    ($value:expr, $enum:ident, $x:ident => $body:expr) => {
        match $value {
            $enum::Direct($x) => $body,
            $enum::Table($x) => $body,
        }
    };
}

/// How to build a [`Stack`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StackConfig {
    /// Soft HCAs present at start (default 2).
    pub devices: usize,
    /// Ports per soft HCA: 1 or 2 (default 1; other values are clamped to that range).
    pub ports_per_device: u8,
    /// PASSIVE_LEVEL worker threads of the platform's pool (default 2; at least 1). Ignored
    /// when `deterministic`.
    pub workers: usize,
    /// How the driver runs QP_MODIFY (default asynchronously, on a work item).
    pub qp_modify: QpModifyMode,
    /// One thread, no worker pool: work items and DPCs run only when someone waits (an
    /// [`Io::wait`], [`Stack::run_until_idle`]). Default `false`.
    pub deterministic: bool,
    /// How the driver reaches the soft HCAs (default: through their C verbs tables).
    pub lower: LowerEdge,
    /// The soft HCAs' firmware command latency in nanoseconds (default 0: commands answer at
    /// once; see `wv_softhca::DeviceConfig::command_latency_ns`).
    pub command_latency_ns: u64,
    /// What the soft HCAs' ports are (default Ethernet, i.e. RoCE; InfiniBand ports have LIDs
    /// and accept paths without a global route).
    pub link_layer: LinkLayer,
    /// What memory the soft HCAs accept for registration (default: the [`process_memory`]
    /// pool).
    pub memory: MemoryMode,
    /// Mixed into the devices' MACs, so node GUIDs and GIDs differ between stacks that must not
    /// look like the same machine (e.g. two processes that each load a stack); 0 gives the
    /// default identities (`02:57:56:…`).
    pub identity: u16,
}

/// What memory the in-process soft HCAs accept for registration.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MemoryMode {
    /// Buffers of [`process_memory`] only (what [`wv_client::verbs::Device::alloc_buffer`] gives):
    /// copies by pointer, the fast path of the harness and the benchmarks.
    #[default]
    Pool,
    /// Any memory of this process, validated at registration as the kernel's probe-and-lock
    /// does and reached through the kernel's cross-address-space copies
    /// (`wv_softhca::dma::process`): what a libibverbs application registers (malloc, mmap).
    #[cfg(target_os = "linux")]
    Process,
}

impl Default for StackConfig {
    fn default() -> Self {
        StackConfig {
            devices: 2,
            ports_per_device: 1,
            workers: 2,
            qp_modify: QpModifyMode::Async,
            deterministic: false,
            lower: LowerEdge::CTable,
            command_latency_ns: 0,
            link_layer: LinkLayer::Ethernet,
            memory: MemoryMode::Pool,
            identity: 0,
        }
    }
}

/// Why an admin action on a [`Stack`] failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StackError {
    /// No device has this index.
    NoSuchDevice(usize),
    /// The device was removed.
    DeviceRemoved(usize),
    /// The device has no such port (ports are 1-based).
    BadPort {
        /// The device index.
        device: usize,
        /// The port asked for.
        port: u8,
    },
}

impl core::fmt::Display for StackError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            StackError::NoSuchDevice(d) => write!(f, "no soft HCA with index {d}"),
            StackError::DeviceRemoved(d) => write!(f, "soft HCA {d} was removed"),
            StackError::BadPort { device, port } => {
                write!(f, "soft HCA {device} has no port {port}")
            }
        }
    }
}

impl std::error::Error for StackError {}

/// One soft HCA of the stack: present until removed (indices stay stable).
struct Slot {
    hca: Arc<Hca>,
    /// Its C faces (verbs and CM), when the driver reaches it through the tables.
    table: Option<CiExport<Hca>>,
    cm_table: Option<CiCmExport<SoftCm>>,
    removed: bool,
}

/// One in-process machine: the WinVerbs driver core loaded on the host platform, with soft
/// HCAs below it joined on one fabric.
///
/// Dropping it unloads the driver: the devices still present are removed and the host
/// verifier's teardown checks run (they panic on a violation, as Driver Verifier would
/// bugcheck). Close every [`File`] first; [`Stack::unload`] reports instead of panicking.
pub struct Stack {
    // Declared first so it drops first: unload runs while the soft HCAs still exist.
    io: Machine,
    platform: HostPlatform,
    fabric: Arc<Fabric>,
    slots: Mutex<Vec<Slot>>,
    ports: u8,
    command_latency_ns: u64,
    link_layer: LinkLayer,
    memory: MemoryMode,
    identity: u16,
}

impl core::fmt::Debug for Stack {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Stack")
            .field("platform", &self.platform)
            .field("devices", &self.device_guids())
            .finish()
    }
}

impl Stack {
    /// Loads the driver and brings `config.devices` soft HCAs up below it (each joins the
    /// fabric, then arrives through the PnP manager).
    pub fn new(config: StackConfig) -> Stack {
        let platform = if config.deterministic {
            HostPlatform::deterministic()
        } else {
            HostPlatform::threaded(config.workers.max(1))
        };
        let driver_config = DriverConfig {
            qp_modify: config.qp_modify,
            ..DriverConfig::default()
        };
        let io = match config.lower {
            LowerEdge::Direct => Machine::Direct(IoManager::new(
                platform.clone(),
                Arc::new(DirectDrv::new(platform.clone(), driver_config)),
            )),
            LowerEdge::CTable => Machine::Table(IoManager::new(
                platform.clone(),
                Arc::new(TableDrv::new(platform.clone(), driver_config)),
            )),
        };
        let stack = Stack {
            io,
            platform,
            fabric: Fabric::new(),
            slots: Mutex::new(Vec::new()),
            ports: config.ports_per_device.clamp(1, 2),
            command_latency_ns: config.command_latency_ns,
            link_layer: config.link_layer,
            memory: config.memory,
            identity: config.identity,
        };
        for _ in 0..config.devices {
            stack.add_device();
        }
        stack
    }

    fn slots(&self) -> MutexGuard<'_, Vec<Slot>> {
        // A panic while holding this lock leaves the list consistent (every update is a single
        // push or flag store), so a poisoned lock is still usable.
        self.slots.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The sum of `count` over the devices, a device without the counted thing left out.
    fn sum_over_slots(&self, count: impl Fn(&Slot) -> Option<usize>) -> usize {
        self.slots().iter().filter_map(count).sum()
    }

    /// CreateFile on `\\.\WinVerbs`: a new handle, i.e. a new WinVerbs provider in the driver.
    ///
    /// # Errors
    /// The driver's status when it refuses the create.
    pub fn open(&self) -> Result<File, NtStatus> {
        match &self.io {
            Machine::Direct(io) => io.open().map(|f| File {
                inner: FileInner::Direct(f),
            }),
            Machine::Table(io) => io.open().map(|f| File {
                inner: FileInner::Table(f),
            }),
        }
    }

    /// How the driver reaches the soft HCAs.
    pub fn lower_edge(&self) -> LowerEdge {
        match self.io {
            Machine::Direct(_) => LowerEdge::Direct,
            Machine::Table(_) => LowerEdge::CTable,
        }
    }

    /// Admin: brings `port` of device `device` up or down. The soft HCA raises PORT_ACTIVE or
    /// PORT_ERR through its async-event ring and interrupt, as a real controller does, so
    /// parked DEVICE_NOTIFY requests complete with `WV_IO_EVENT_STATE`.
    ///
    /// # Errors
    /// A bad index or port, or a removed device.
    pub fn set_port_state(&self, device: usize, port: u8, up: bool) -> Result<(), StackError> {
        let hca = self.live_hca(device)?;
        match hca.set_port_state(port, up) {
            Ok(()) => Ok(()),
            Err(HalError::DeviceRemoved) => Err(StackError::DeviceRemoved(device)),
            Err(_) => Err(StackError::BadPort { device, port }),
        }
    }

    /// Admin: surprise removal of device `device`. The hardware disappears first (the soft HCA
    /// stops its data path and raises nothing more), then the PnP removal reaches the driver,
    /// which completes every request parked on the device with `STATUS_DEVICE_REMOVED` and
    /// invalidates its handles. Returns `false` for a bad index or a device already removed.
    pub fn remove_device(&self, device: usize) -> bool {
        let hca = {
            let mut slots = self.slots();
            match slots.get_mut(device) {
                Some(slot) if !slot.removed => {
                    slot.removed = true;
                    slot.hca.clone()
                }
                _ => return false,
            }
        };
        hca.surprise_remove();
        either!(&self.io, Machine, io => io.remove(hca.guid()));
        true
    }

    /// Admin: hot add. A new soft HCA joins the fabric and arrives through the PnP manager;
    /// returns its index.
    pub fn add_device(&self) -> usize {
        let mut slots = self.slots();
        let index = slots.len();
        let n = index + 1;
        // A locally administered MAC per device: the node GUID and GID 0 derive from it, so a
        // given index has the same identity in every run.
        let [hi, lo] = self.identity.to_be_bytes();
        let mac = [
            0x02,
            0x57 ^ hi,
            0x56 ^ lo,
            (n >> 16) as u8,
            (n >> 8) as u8,
            n as u8,
        ];
        let mut config = DeviceConfig::new(&format!("softhca{index}"), mac);
        config.ports = self.ports;
        config.command_latency_ns = self.command_latency_ns;
        config.link_layer = self.link_layer;
        let memory = match self.memory {
            MemoryMode::Pool => ClientMemory::pool(process_memory().clone()),
            #[cfg(target_os = "linux")]
            MemoryMode::Process => ClientMemory::process(),
        };
        let hca = SoftHca::new(Arc::new(self.platform.clone()), config, memory);
        self.fabric.attach(&hca);
        // Its addresses, before the driver sees it (as IPoIB comes up with the port).
        for port in 1..=self.ports {
            for ip in [address(index, port), address_v6(index, port)] {
                let _ = self.fabric.assign_address(&hca, port, ip);
            }
        }
        // The core accepts every arrival; a refusal (or a table the adapter refuses) would
        // leave the device present but unknown to the driver, which GUID_QUERY then shows.
        // The connection manager comes with the verbs, from the same stack.
        let (table, cm_table) = match &self.io {
            Machine::Direct(io) => {
                let _ = io.arrive_with_cm(hca.clone(), Some(Arc::new(hca.cm())));
                (None, None)
            }
            Machine::Table(io) => {
                let table = hca.c_interface().ok();
                let cm_table = hca.c_cm_interface().ok();
                if let Some(lower) = table.as_ref().and_then(|t| t.open().ok()) {
                    let cm = cm_table.as_ref().and_then(|t| t.open().ok());
                    let _ = io.arrive_with_cm(lower, cm);
                }
                (table, cm_table)
            }
        };
        slots.push(Slot {
            hca,
            table,
            cm_table,
            removed: false,
        });
        index
    }

    /// The node GUIDs of the devices present (not removed), in index order, as GUID_QUERY
    /// reports them.
    pub fn device_guids(&self) -> Vec<u64> {
        self.slots()
            .iter()
            .filter(|s| !s.removed)
            .map(|s| s.hca.guid())
            .collect()
    }

    /// The node GUID of device `device`, removed or not.
    pub fn device_guid(&self, device: usize) -> Option<u64> {
        self.slots().get(device).map(|s| s.hca.guid())
    }

    /// References the driver holds on the soft HCAs' C verbs tables (one per device it uses;
    /// 0 with [`LowerEdge::Direct`]). Removal and unload must give each back.
    pub fn table_references(&self) -> usize {
        self.sum_over_slots(|s| s.table.as_ref().map(CiExport::consumers))
    }

    /// References the driver holds on the soft HCAs' CM tables (one per device it uses; 0
    /// with [`LowerEdge::Direct`]). Removal and unload must give each back.
    pub fn cm_table_references(&self) -> usize {
        self.sum_over_slots(|s| s.cm_table.as_ref().map(CiCmExport::consumers))
    }

    /// The IPv4 address of `port` of device `device` (`10.x.y.port`, `x.y` the index),
    /// assigned when the device was added.
    pub fn address(&self, device: usize, port: u8) -> IpAddr {
        address(device, port)
    }

    /// The IPv6 address of `port` of device `device` (`fd57:5600::index:port`).
    pub fn address_v6(&self, device: usize, port: u8) -> IpAddr {
        address_v6(device, port)
    }

    /// How many devices were ever added (removed ones keep their index).
    pub fn device_count(&self) -> usize {
        self.slots().len()
    }

    /// The soft HCA of device `device` (for its own admin and diagnostic calls).
    pub fn hca(&self, device: usize) -> Option<Arc<Hca>> {
        self.slots().get(device).map(|s| s.hca.clone())
    }

    fn live_hca(&self, device: usize) -> Result<Arc<Hca>, StackError> {
        match self.slots().get(device) {
            None => Err(StackError::NoSuchDevice(device)),
            Some(s) if s.removed => Err(StackError::DeviceRemoved(device)),
            Some(s) => Ok(s.hca.clone()),
        }
    }

    /// The fabric joining the devices (fault injection, link statistics).
    pub fn fabric(&self) -> &Arc<Fabric> {
        &self.fabric
    }

    /// The host platform the driver runs on.
    pub fn platform(&self) -> &HostPlatform {
        &self.platform
    }

    /// Runs deferred work until none is left (deterministic mode), or waits until the worker
    /// pool is idle (threaded mode).
    pub fn run_until_idle(&self) {
        self.platform.run_until_idle();
    }

    /// Every verifier violation recorded so far (IRQL rules, double or missing completions,
    /// leaks found at teardown), oldest first. Empty on a clean run.
    pub fn verifier_violations(&self) -> Vec<String> {
        self.platform.verifier().violations()
    }

    /// Unloads the driver and returns every verifier violation of the run instead of
    /// panicking on them: the devices are removed, deferred work settles, and requests, queues
    /// and files still alive are reported. If any are (a handle still open), the driver stays
    /// loaded — its host model is leaked instead of torn down under them, as Windows cannot
    /// unload a driver with open handles — so the caller gets the report, not a panic.
    pub fn unload(self) -> Vec<String> {
        let guids: Vec<u64> = self
            .slots()
            .iter()
            .filter(|s| !s.removed)
            .map(|s| s.hca.guid())
            .collect();
        for guid in guids {
            either!(&self.io, Machine, io => io.remove(guid));
        }
        self.platform.run_until_idle();
        let verifier = self.platform.verifier();
        let mut found = verifier.take_violations();
        let (r, q, f) = (
            verifier.live_requests(),
            verifier.live_queues(),
            verifier.live_files(),
        );
        if r + q + f != 0 {
            found.push(format!(
                "verifier: {r} requests / {q} queues / {f} files alive at unload"
            ));
            let Stack { io, .. } = self;
            std::mem::forget(io);
        }
        // Otherwise dropping `self` runs the teardown checks, now on a clean log.
        found
    }
}

/// The IPv4 address a stack gives `port` of device `index`.
fn address(index: usize, port: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(10, (index >> 8) as u8, index as u8, port))
}

/// The IPv6 address a stack gives `port` of device `index`.
fn address_v6(index: usize, port: u8) -> IpAddr {
    IpAddr::V6(Ipv6Addr::new(
        0xfd57,
        0x5600,
        0,
        0,
        0,
        0,
        index as u16,
        u16::from(port),
    ))
}

/// `wv-client`'s verbs API over a new handle of `stack`.
///
/// # Errors
/// The driver's status of CreateFile, as `CreateFile`.
pub fn open_inproc(stack: &Stack) -> Result<Provider<File>, VerbsError> {
    stack
        .open()
        .map(Provider::new)
        .map_err(|status| VerbsError::new("CreateFile", status))
}

/// The stack's fabric answers what IBAT and the socket layer answer on Windows.
impl OnFabric for Stack {
    fn fabric(&self) -> &Arc<Fabric> {
        &self.fabric
    }
}

/// An open handle to the in-process `\\.\WinVerbs` (one file object, one WinVerbs provider).
/// Dropping it is CloseHandle: parked requests are cancelled, the driver cleans up every object
/// created through it, and the file closes once its last request has ended.
pub struct File {
    inner: FileInner,
}

enum FileInner {
    Direct(wv_host::File<DirectDrv>),
    Table(wv_host::File<TableDrv>),
}

impl core::fmt::Debug for File {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        either!(&self.inner, FileInner, x => x.fmt(f))
    }
}

impl File {
    /// DeviceIoControl with an OVERLAPPED: `input` is the input buffer, `output_len` the output
    /// buffer's size (METHOD_BUFFERED: one system buffer of the larger size). The driver runs
    /// on this thread; the [`Io`] says whether it completed the request inline.
    pub fn device_io_control(&self, code: u32, input: &[u8], output_len: usize) -> Io {
        Io {
            inner: either!(&self.inner, FileInner, f => f.device_io_control(code, input, output_len)),
        }
    }

    /// CancelIoEx for one request of this file: returns whether a cancellable request was
    /// found (a parked one completes with `STATUS_CANCELLED`).
    pub fn cancel_io_ex(&self, io: &Io) -> bool {
        either!(&self.inner, FileInner, f => f.cancel_io_ex(&io.inner))
    }

    /// CloseHandle of this (last) handle racing a DeviceIoControl that the I/O manager has
    /// already referenced the file object for on another thread: the driver's cleanup runs
    /// first, then the IOCTL reaches it for the cleaned-up file. A conformance check uses it to
    /// see `STATUS_FILE_CLOSED`, an interleaving a real system cannot order on demand.
    pub fn close_racing_ioctl(self, code: u32, input: &[u8], output_len: usize) -> Io {
        Io {
            inner: either!(self.inner, FileInner, f => f.close_racing_ioctl(code, input, output_len)),
        }
    }
}

/// One in-process IOCTL in flight (an OVERLAPPED). It outlives its [`File`].
pub struct Io {
    inner: wv_host::Io,
}

impl core::fmt::Debug for Io {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        self.inner.fmt(f)
    }
}

impl Io {
    /// `true` when the driver pended the request (ERROR_IO_PENDING), `false` when it completed
    /// it inline.
    pub fn pending(&self) -> bool {
        self.inner.pending()
    }

    /// Waits for the request to end (`GetOverlappedResult(bWait = TRUE)`).
    ///
    /// # Panics
    /// In deterministic mode only, when the request is still pending once no deferred work is
    /// left: that wait could never end (threaded mode would hang instead).
    pub fn wait(self) -> IoStatus {
        self.inner.wait()
    }

    /// Waits at most `timeout` (deterministic mode runs the deferred work and does not wait);
    /// `None` while still pending.
    pub fn wait_timeout(&self, timeout: Duration) -> Option<IoStatus> {
        self.inner.wait_timeout(timeout)
    }

    /// Whether the request has ended (`HasOverlappedIoCompleted`); runs nothing.
    pub fn is_complete(&self) -> bool {
        self.inner.is_complete()
    }

    /// The final status if the request has ended (`GetOverlappedResult(bWait = FALSE)`).
    pub fn try_result(&self) -> Option<IoStatus> {
        self.inner.try_result()
    }
}

wv_client::raw_by_inherent!(File, Io);
