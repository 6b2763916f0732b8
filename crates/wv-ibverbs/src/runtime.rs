//! The process's stack and device list: brought up on first use (`ibv_get_device_list`).
//!
//! Transport (`WV_IBVERBS_TRANSPORT`):
//! * unset or `auto` (the default off Windows): the device service `wvd` when one listens on
//!   its socket (`WVD_SOCKET`, else the user's default; see `wv_client::service`), so every
//!   process of the machine shares its fabric; otherwise the in-process stack below.
//! * `service`: the device service, started on first use if none listens (`wvd --background
//!   --idle-exit 30`: the program `WV_WVD` names, else the `wvd` beside this library, else
//!   `wvd` on `PATH`).
//! * `inproc`: the library loads the WinVerbs driver core on the host model of KMDF above soft
//!   HCAs joined on one fabric, in this process (`wv_inproc::Stack`), registering
//!   application memory as the process's (`MemoryMode::Process`). Its shape:
//!   `WV_IBVERBS_DEVICES` soft HCAs (default 2), `WV_IBVERBS_PORTS` ports each (1 or 2,
//!   default 1), `WV_IBVERBS_LINK_LAYER` `ethernet` (RoCE, the default) or `ib`;
//!   `WV_IBVERBS_IDENTITY` (a number) fixes the devices' MAC, node GUID and GIDs, which
//!   otherwise derive from the process id, so two processes never present the same identity
//!   (a peer in another process is another machine to them: only the service joins them).
//! * `windows` (Windows builds): `\\.\WinVerbs`, the installed driver.
//!
//! Anything else gives an empty device list and a message on stderr.

#[cfg(not(windows))]
use std::sync::Arc;
use std::sync::OnceLock;

use wv_client::raw::RawFile;
use wv_client::verbs::{Device, Provider};

use crate::abi::{IBV_NODE_CA, IBV_SYSFS_NAME_MAX, IBV_TRANSPORT_IB, ibv_device};

/// The transport's file type: the in-process stack's or the device service's.
#[cfg(not(windows))]
pub use crate::transport::File;
/// The transport's file type.
#[cfg(windows)]
pub type File = wv_client::windows::File;

/// One RDMA device of the list: the C `ibv_device` first (its address is what applications
/// hold), then what opening it needs.
#[repr(C)]
pub struct DeviceEntry {
    /// The C struct applications hold.
    pub c: ibv_device,
    /// The node GUID (network order, as GUID_QUERY reports it).
    pub guid: u64,
    /// Its position in the list.
    pub index: usize,
    /// `softhcaN`.
    pub name: String,
}

/// The process's stack: the provider handle and the devices below it (never changed after
/// bring-up, so the `ibv_device` addresses handed out stay valid for the process's life).
pub struct Runtime {
    /// The WinVerbs handle every context opens its device through.
    pub provider: Provider<File>,
    /// The devices, in GUID_QUERY's order.
    pub devices: Vec<DeviceEntry>,
    /// The in-process stack (never unloaded: it lives as long as the process); `None` through
    /// the device service.
    #[cfg(not(windows))]
    pub stack: Option<Arc<wv_inproc::Stack>>,
}

// SAFETY: the raw pointers inside `ibv_device` (none are set: the `_ops` are null) make it
// !Send/!Sync by default; the entries are immutable after creation.
unsafe impl Send for Runtime {}
// SAFETY: see `Send`.
unsafe impl Sync for Runtime {}

static RUNTIME: OnceLock<Result<Runtime, String>> = OnceLock::new();

#[cfg(not(windows))]
fn env_num(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| {
        let v = v.trim();
        v.strip_prefix("0x")
            .map_or_else(|| v.parse().ok(), |h| u64::from_str_radix(h, 16).ok())
    })
}

/// The runtime, brought up on first call; `Err` (reported once on stderr) when the transport
/// cannot be opened.
pub fn get() -> Result<&'static Runtime, &'static str> {
    let r = RUNTIME.get_or_init(|| {
        let r = bring_up();
        if let Err(e) = &r {
            eprintln!("libibverbs (WinVerbs): {e}");
        }
        r
    });
    r.as_ref().map_err(|e| e.as_str())
}

/// A transport chosen by the program itself (see [`choose_transport`]).
static CHOSEN: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);

/// Chooses the transport as `WV_IBVERBS_TRANSPORT` would (and over it), for a program that
/// links the library as a Rust crate (its tests). Takes effect only before the first
/// `ibv_get_device_list`; returns whether it did.
pub fn choose_transport(name: &str) -> bool {
    if RUNTIME.get().is_some() {
        return false;
    }
    *CHOSEN.lock().unwrap_or_else(|e| e.into_inner()) = Some(name.to_owned());
    RUNTIME.get().is_none()
}

fn transport() -> String {
    if let Some(t) = CHOSEN.lock().unwrap_or_else(|e| e.into_inner()).clone() {
        return t;
    }
    std::env::var("WV_IBVERBS_TRANSPORT").unwrap_or_else(|_| {
        if cfg!(windows) {
            "windows".into()
        } else {
            "auto".into()
        }
    })
}

#[cfg(not(windows))]
fn bring_up() -> Result<Runtime, String> {
    use wv_client::service;
    let t = transport();
    let path = service::default_socket_path();
    let file = match t.as_str() {
        "inproc" => None,
        "auto" => match service::File::connect(&path) {
            Ok(f) => Some(f),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused
                ) =>
            {
                None
            }
            Err(e) => {
                return Err(format!(
                    "the device service on {} cannot be used ({e}); set \
                     WV_IBVERBS_TRANSPORT=inproc to use an in-process stack",
                    path.display()
                ));
            }
        },
        "service" => {
            let beside = crate::transport::library_dir()
                .map(|d| vec![d.join("wvd")])
                .unwrap_or_default();
            Some(
                service::connect_or_start(&path, &beside)
                    .map_err(|e| format!("the device service on {}: {e}", path.display()))?,
            )
        }
        other => {
            return Err(format!(
                "WV_IBVERBS_TRANSPORT={other}: expected `auto`, `service` or `inproc`"
            ));
        }
    };
    if let Some(file) = file {
        let provider = wv_client::verbs::Provider::new(File::Service(file));
        let devices = list_devices(&provider)?;
        return Ok(Runtime {
            provider,
            devices,
            stack: None,
        });
    }
    inproc()
}

#[cfg(not(windows))]
fn inproc() -> Result<Runtime, String> {
    use wv_inproc::{LinkLayer, MemoryMode, Stack, StackConfig};
    let devices = env_num("WV_IBVERBS_DEVICES").unwrap_or(2).clamp(1, 16) as usize;
    let ports = env_num("WV_IBVERBS_PORTS").unwrap_or(1).clamp(1, 2) as u8;
    let link_layer = match std::env::var("WV_IBVERBS_LINK_LAYER").as_deref() {
        Ok("ib") | Ok("infiniband") => LinkLayer::InfiniBand,
        Ok("ethernet") | Ok("roce") | Err(_) => LinkLayer::Ethernet,
        Ok(other) => {
            return Err(format!(
                "WV_IBVERBS_LINK_LAYER={other}: expected `ethernet` or `ib`"
            ));
        }
    };
    // SAFETY: getpid has no preconditions.
    let pid = unsafe { libc::getpid() } as u64;
    let identity = env_num("WV_IBVERBS_IDENTITY").unwrap_or(pid) as u16;
    let stack = Arc::new(Stack::new(StackConfig {
        devices,
        ports_per_device: ports,
        link_layer,
        memory: MemoryMode::Process,
        identity,
        ..StackConfig::default()
    }));
    let file = stack.open().map_err(|s| format!("CreateFile: {s}"))?;
    let provider = wv_client::verbs::Provider::new(File::Inproc(file));
    let devices = list_devices(&provider)?;
    Ok(Runtime {
        provider,
        devices,
        stack: Some(stack),
    })
}

#[cfg(windows)]
fn bring_up() -> Result<Runtime, String> {
    let t = transport();
    if t != "windows" {
        return Err(format!(
            "WV_IBVERBS_TRANSPORT={t}: Windows builds use the installed driver (windows)"
        ));
    }
    let provider = wv_client::verbs::open_windows().map_err(|e| e.to_string())?;
    let devices = list_devices(&provider)?;
    Ok(Runtime { provider, devices })
}

fn copy_name(dst: &mut [u8], s: &str) {
    let n = s.len().min(dst.len() - 1);
    dst[..n].copy_from_slice(&s.as_bytes()[..n]);
    dst[n] = 0;
}

fn list_devices<F: RawFile + Send + Sync + 'static>(
    provider: &Provider<F>,
) -> Result<Vec<DeviceEntry>, String> {
    let guids = provider.device_guids().map_err(|e| e.to_string())?;
    Ok(guids
        .into_iter()
        .enumerate()
        .map(|(index, guid)| {
            let name = format!("softhca{index}");
            let mut c = ibv_device {
                _ops: crate::abi::_ibv_device_ops {
                    _dummy1: None,
                    _dummy2: None,
                },
                node_type: IBV_NODE_CA,
                transport_type: IBV_TRANSPORT_IB,
                name: [0; IBV_SYSFS_NAME_MAX],
                dev_name: [0; IBV_SYSFS_NAME_MAX],
                dev_path: [0; crate::abi::IBV_SYSFS_PATH_MAX],
                ibdev_path: [0; crate::abi::IBV_SYSFS_PATH_MAX],
            };
            copy_name(&mut c.name, &name);
            copy_name(&mut c.dev_name, &format!("uverbs{index}"));
            copy_name(
                &mut c.dev_path,
                &format!("/sys/class/infiniband_verbs/uverbs{index}"),
            );
            copy_name(&mut c.ibdev_path, &format!("/sys/class/infiniband/{name}"));
            DeviceEntry {
                c,
                guid,
                index,
                name,
            }
        })
        .collect())
}

/// The entry whose `ibv_device` is at `dev`, if it is one of ours.
pub fn entry(dev: *const ibv_device) -> Option<&'static DeviceEntry> {
    let rt = get().ok()?;
    rt.devices.iter().find(|d| core::ptr::eq(&d.c, dev))
}

/// The entry named `name`.
pub fn entry_by_name(name: &str) -> Option<&'static DeviceEntry> {
    get().ok()?.devices.iter().find(|d| d.name == name)
}

/// Opens the device of `entry` (DEVICE_OPEN through the provider).
///
/// # Errors
/// The errno of the failed open.
pub fn open(entry: &DeviceEntry) -> Result<Device<File>, i32> {
    let rt = get().map_err(|_| crate::errno::ENODEV)?;
    rt.provider
        .open_device(entry.guid)
        .map_err(|e| crate::errno::of(&e))
}
