//! Which driver and which device a command runs on: `--transport inproc|windows` and
//! `--device <index|GUID>`, shared by every command.
//!
//! * `inproc` (the default): the real driver core, loaded in this process on the host model of
//!   KMDF above the built-in soft HCAs (two devices on one fabric unless a command asks for
//!   another shape). Nothing needs to be installed.
//! * `windows` (Windows builds only): the installed driver, through `\\.\WinVerbs`.
//! * `service` (Linux): the device service `wvd`, which hosts the same stack in a process of
//!   its own for every process of the machine: `check` starts a fresh one per scenario (the
//!   program `--wvd` names), the other commands connect to the one running on its default
//!   socket (`WVD_SOCKET`).
//!
//! A device is named by its index in GUID_QUERY order (`0`, `1`, …) or by its node GUID in hex
//! (`0x0257560000000001`, `0257560000000001` or the ibv_devinfo form
//! `0257:5600:0000:0001`): a value with a `0x` prefix, a colon, a hex letter or 16 digits is a
//! GUID, any other all-decimal value an index.

use std::fmt;
use std::net::IpAddr;

use clap::{Args, ValueEnum};
pub use wv_check::{DeviceSpec, format_guid, other_device};
use wv_client::raw::{RawFile, RawIo};
use wv_client::verbs::AddressService;
use wv_inproc::{LinkLayer, LowerEdge, Stack, StackConfig};

/// The transports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum Transport {
    /// The driver core in this process, above the built-in soft HCAs.
    #[default]
    Inproc,
    /// The installed driver through `\\.\WinVerbs` (Windows builds only).
    Windows,
    /// The device service `wvd` (Linux builds only).
    Service,
}

/// How the in-process driver reaches its soft HCAs (`--lower`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum Lower {
    /// Through OFW's C verbs table (`ci_interface_t`), as on Windows.
    #[default]
    Ctable,
    /// Direct Rust trait calls.
    Direct,
}

impl Lower {
    /// The stack's setting.
    pub fn edge(self) -> LowerEdge {
        match self {
            Lower::Ctable => LowerEdge::CTable,
            Lower::Direct => LowerEdge::Direct,
        }
    }
}

/// What the in-process soft HCAs' ports are (`--link-layer`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum Link {
    /// RoCE v1: every path carries a GRH, ports have no LID.
    #[default]
    Ethernet,
    /// InfiniBand: ports have LIDs, paths may route by LID alone.
    #[value(name = "ib")]
    InfiniBand,
}

impl Link {
    /// The stack's setting.
    pub fn layer(self) -> LinkLayer {
        match self {
            Link::Ethernet => LinkLayer::Ethernet,
            Link::InfiniBand => LinkLayer::InfiniBand,
        }
    }
}

/// The name of a device (`hca_id`, the benchmarks' `Device`): its user-mode provider
/// library's name without the trailing `u` (WinOFED names its libraries `mlx4u`, `softhcau`)
/// and the device's index, with `_` between them when the name ends in a digit, as Linux names
/// devices (`softhca0`, `mlx4_0`).
pub fn device_name(library: &str, index: usize) -> String {
    let base = library.strip_suffix('u').unwrap_or(library);
    if base.ends_with(|c: char| c.is_ascii_digit()) {
        format!("{base}_{index}")
    } else {
        format!("{base}{index}")
    }
}

/// LIBRARY_QUERY: the user-mode provider library of device `guid` (without `.dll`).
///
/// # Errors
/// The IOCTL's failure.
pub fn library_name<F: RawFile>(f: &F, guid: u64) -> Result<String, String> {
    let st = f
        .device_io_control(
            wv_abi::ioctl::WV_IOCTL_LIBRARY_QUERY,
            &guid.to_ne_bytes(),
            28,
        )
        .wait();
    if !wv_abi::NtStatus(st.status).is_success() {
        return Err(format!(
            "LIBRARY_QUERY failed: {}",
            wv_abi::NtStatus(st.status)
        ));
    }
    Ok(
        String::from_utf8_lossy(st.output.split(|&b| b == 0).next().unwrap_or_default())
            .into_owned(),
    )
}

/// The options every command flattens in.
#[derive(Args, Clone, Debug, Default)]
pub struct TargetArgs {
    /// Where the driver is: `inproc` = the driver core in this process above the built-in soft
    /// HCAs (nothing to install); `windows` = the installed driver, `\\.\WinVerbs` (Windows
    /// builds only).
    #[arg(long, value_enum, default_value_t = Transport::Inproc)]
    pub transport: Transport,
    /// Device to use, by index (0, 1, …) or node GUID (0x0257560000000001 or
    /// 0257:5600:0000:0001). Benchmarks run their server side on it and their client side on
    /// the next device (or on the same one when there is only one). Default: the first.
    #[arg(short = 'd', long, value_name = "INDEX|GUID")]
    pub device: Option<DeviceSpec>,
    /// How the in-process driver reaches the soft HCAs: `ctable` = through each soft HCA's C
    /// verbs table (`ci_interface_t`), as winverbs.sys reaches a controller on Windows;
    /// `direct` = Rust trait calls. Ignored by the windows transport.
    #[arg(long, value_enum, default_value_t = Lower::Ctable)]
    pub lower: Lower,
    /// The in-process soft HCAs' link layer: `ethernet` (RoCE v1) or `ib` (InfiniBand, as the
    /// fabrics WinOFED was written for). Ignored by the windows transport.
    #[arg(long, value_enum, default_value_t = Link::Ethernet)]
    pub link_layer: Link,
    /// The `wvd` program `check --transport service` starts for each scenario (default:
    /// `$WV_WVD`, else `wvd` beside this program; build it with `cargo build -p wvd`).
    #[arg(long, value_name = "PATH")]
    pub wvd: Option<std::path::PathBuf>,
}

/// Why a target could not be opened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TargetError(pub String);

impl fmt::Display for TargetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TargetError {}

impl TargetError {
    /// `--transport windows` in a build for another system.
    #[cfg(not(windows))]
    pub fn no_windows_transport() -> TargetError {
        TargetError(
            "the windows transport (\\\\.\\WinVerbs) exists only in Windows builds of \
             wvharness; on this system use --transport inproc (the default)"
                .into(),
        )
    }
}

impl TargetError {
    /// `--transport service` in a build for another system.
    #[cfg(not(target_os = "linux"))]
    pub fn no_service_transport() -> TargetError {
        TargetError("the service transport (wvd) exists only in Linux builds of wvharness".into())
    }
}

impl From<TargetError> for std::io::Error {
    fn from(e: TargetError) -> Self {
        std::io::Error::other(e.0)
    }
}

/// Something that opens handles on the driver: `CreateFile(\\.\WinVerbs)` or its in-process
/// equivalent. Each call is a new file object (a new WinVerbs provider in the driver), as a
/// new process's would be.
pub trait Opener: Sync {
    /// An open handle.
    type File: RawFile + Send + Sync + 'static;
    /// Opens a handle.
    ///
    /// # Errors
    /// Why the driver (or the OS) refused.
    fn open_file(&self) -> Result<Self::File, TargetError>;

    /// What the host answers about IP addresses, for the endpoint commands (IBAT and the
    /// socket layer on Windows, which this harness does not reach: `None` there).
    fn addresses(&self) -> Option<&dyn AddressService> {
        None
    }

    /// The IPv4 address of port 1 of device `index` (GUID_QUERY order), when known.
    fn device_address(&self, index: usize) -> Option<IpAddr> {
        let _ = index;
        None
    }
}

impl Opener for Stack {
    type File = wv_inproc::File;
    fn open_file(&self) -> Result<Self::File, TargetError> {
        self.open()
            .map_err(|s| TargetError(format!("opening the in-process driver failed: {s}")))
    }

    fn addresses(&self) -> Option<&dyn AddressService> {
        Some(self)
    }

    fn device_address(&self, index: usize) -> Option<IpAddr> {
        let guid = *self.device_guids().get(index)?;
        let at = (0..self.device_count()).find(|&i| self.device_guid(i) == Some(guid))?;
        Some(self.address(at, 1))
    }
}

/// Opens the installed driver's `\\.\WinVerbs`.
#[cfg(windows)]
pub struct WindowsOpener;

#[cfg(windows)]
impl Opener for WindowsOpener {
    type File = wv_client::windows::File;
    fn open_file(&self) -> Result<Self::File, TargetError> {
        wv_client::windows::File::open().map_err(|e| {
            TargetError(format!(
                "cannot open \\\\.\\WinVerbs ({e}): is the WinVerbs driver installed and an RDMA \
                 controller started?"
            ))
        })
    }
}

/// Connects to the running device service (its default socket, `WVD_SOCKET`).
#[cfg(target_os = "linux")]
pub struct ServiceOpener {
    admin: wv_client::service::File,
}

#[cfg(target_os = "linux")]
impl ServiceOpener {
    fn connect() -> Result<ServiceOpener, TargetError> {
        let path = wv_client::service::default_socket_path();
        wv_client::service::File::connect(&path)
            .map(|admin| ServiceOpener { admin })
            .map_err(|e| {
                TargetError(format!(
                    "no device service on {} ({e}): start one with `wvd`",
                    path.display()
                ))
            })
    }
}

#[cfg(target_os = "linux")]
impl Opener for ServiceOpener {
    type File = wv_client::service::File;
    fn open_file(&self) -> Result<Self::File, TargetError> {
        let path = wv_client::service::default_socket_path();
        wv_client::service::File::connect(&path)
            .map_err(|e| TargetError(format!("connecting to the device service failed: {e}")))
    }

    fn addresses(&self) -> Option<&dyn AddressService> {
        Some(&self.admin)
    }

    fn device_address(&self, index: usize) -> Option<IpAddr> {
        use wv_client::service::proto::{Admin, AdminReply};
        let guids = match self.admin.admin(&Admin::DeviceGuids).ok()? {
            AdminReply::Guids(g) => g,
            _ => return None,
        };
        let guid = *guids.get(index)?;
        let count = match self.admin.admin(&Admin::DeviceCount).ok()? {
            AdminReply::Num(n) => n,
            _ => return None,
        };
        let at = (0..count).find(|&i| {
            matches!(self.admin.admin(&Admin::DeviceGuid(i)), Ok(AdminReply::Num(g)) if g == guid)
        })?;
        match self
            .admin
            .admin(&Admin::Address { index: at, port: 1 })
            .ok()?
        {
            AdminReply::Ip(ip) => Some(ip),
            _ => None,
        }
    }
}

/// A command's work on a target, generic over the transport (closures cannot be generic, so
/// this is a trait).
pub trait TargetTask {
    /// What the work returns.
    type Output;
    /// Does the work; `opener` opens handles, `device` is the `--device` choice.
    fn run<O: Opener>(self, opener: &O, device: Option<DeviceSpec>) -> Self::Output;
}

/// An opened target.
pub enum Target {
    /// The in-process stack.
    Inproc(Stack),
    /// The installed driver.
    #[cfg(windows)]
    Windows(WindowsOpener),
    /// The running device service.
    #[cfg(target_os = "linux")]
    Service(ServiceOpener),
}

impl Target {
    /// Opens the target the options name; `config` shapes an in-process stack.
    ///
    /// # Errors
    /// The Windows transport on a non-Windows build.
    pub fn open(
        args: &TargetArgs,
        config: StackConfig,
    ) -> Result<(Target, Option<DeviceSpec>), TargetError> {
        let target = match args.transport {
            Transport::Inproc => Target::Inproc(Stack::new(StackConfig {
                lower: args.lower.edge(),
                link_layer: args.link_layer.layer(),
                ..config
            })),
            #[cfg(windows)]
            Transport::Windows => Target::Windows(WindowsOpener),
            #[cfg(not(windows))]
            Transport::Windows => return Err(TargetError::no_windows_transport()),
            #[cfg(target_os = "linux")]
            Transport::Service => Target::Service(ServiceOpener::connect()?),
            #[cfg(not(target_os = "linux"))]
            Transport::Service => return Err(TargetError::no_service_transport()),
        };
        Ok((target, args.device))
    }

    /// Runs `task` on this target.
    pub fn run<T: TargetTask>(&self, task: T, device: Option<DeviceSpec>) -> T::Output {
        match self {
            Target::Inproc(s) => task.run(s, device),
            #[cfg(windows)]
            Target::Windows(w) => task.run(w, device),
            #[cfg(target_os = "linux")]
            Target::Service(o) => task.run(o, device),
        }
    }
}

/// The two devices of a command with a server and a client side (rping, conn): the one
/// `device` names serves, the next one (wrapping) is the client's. Returns their indexes.
///
/// # Errors
/// The provider cannot be opened or list its devices, or `device` names none of them.
pub fn server_and_client<O: Opener>(
    opener: &O,
    device: Option<DeviceSpec>,
) -> Result<(usize, usize), String> {
    let provider = wv_client::verbs::Provider::new(opener.open_file().map_err(|e| e.0)?);
    let guids = provider
        .device_guids()
        .map_err(|e| format!("listing devices: {e}"))?;
    drop(provider);
    let server_ix = resolve_device(&guids, device).map_err(|e| e.0)?;
    Ok((server_ix, (server_ix + 1) % guids.len()))
}

/// What a side's thread returned; a panic in it is an error naming the side.
pub fn joined<T>(
    side: std::thread::ScopedJoinHandle<'_, Result<T, String>>,
    name: &str,
) -> Result<T, String> {
    side.join()
        .unwrap_or_else(|_| Err(format!("the {name} thread panicked")))
}

/// Picks a device from the GUIDs GUID_QUERY returned: returns its index.
///
/// # Errors
/// No device at all, an index out of range, or a GUID not present (the message lists what is).
pub fn resolve_device(guids: &[u64], spec: Option<DeviceSpec>) -> Result<usize, TargetError> {
    wv_check::resolve_device(guids, spec).map_err(TargetError)
}
