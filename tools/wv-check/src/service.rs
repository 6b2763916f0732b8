//! The device service as an [`Env`] (Linux): every scenario gets a fresh `wvd` — a process of
//! its own hosting the driver core on the host model of KMDF above two soft HCAs with two
//! ports each — on a private socket, and talks to it only through the service transport
//! (`wv_client::service`): IOCTL frames on the socket, rings in the memory the service shares
//! with this process, registrations of this process's memory reached by the service through
//! the kernel. The machine's admin side is the service's admin protocol; the verifier is the
//! service's host model, whose findings the unload returns.

use std::any::Any;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use wv_client::service::File;
use wv_client::service::proto::{Admin, AdminReply};
use wv_client::verbs::AddressService;
use wv_inproc::LinkLayer;

use crate::device::DeviceSpec;
use crate::env::{Env, Machine};

/// How the service machines are started.
#[derive(Clone, Debug)]
pub struct ServiceConfig {
    /// The `wvd` program.
    pub wvd: PathBuf,
    /// The device single-device scenarios use (default: the first).
    pub device: Option<DeviceSpec>,
    /// The soft HCAs' ports (default: Ethernet, i.e. RoCE).
    pub link_layer: LinkLayer,
}

impl ServiceConfig {
    /// `wvd` beside the running program (the workspace's target directory), unless `$WV_WVD`
    /// names it.
    pub fn beside_this_program() -> PathBuf {
        if let Some(p) = std::env::var_os("WV_WVD").filter(|p| !p.is_empty()) {
            return PathBuf::from(p);
        }
        std::env::current_exe()
            .ok()
            .and_then(|p| p.parent().map(|d| d.join("wvd")))
            .unwrap_or_else(|| PathBuf::from("wvd"))
    }
}

/// A fresh service for one scenario.
pub struct ServiceEnv {
    child: Child,
    dir: PathBuf,
    socket: PathBuf,
    /// The admin handle (`None` only once `finish` has closed it).
    admin: Option<File>,
    device: Option<DeviceSpec>,
}

/// Starts `wvd` on a socket in a new private directory and connects its admin handle.
fn start(config: &ServiceConfig) -> Result<(Child, PathBuf, PathBuf, File), String> {
    static N: AtomicU64 = AtomicU64::new(0);
    let dir = std::env::temp_dir().join(format!(
        "wv-check-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let socket = dir.join("socket");
    let link = match config.link_layer {
        LinkLayer::Ethernet => "ethernet",
        LinkLayer::InfiniBand => "ib",
    };
    let mut child = Command::new(&config.wvd)
        .arg("--socket")
        .arg(&socket)
        .args(["--devices", "2", "--ports", "2", "--link-layer", link])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| {
            format!(
                "cannot start {} ({e}): build it first (cargo build -p wvd) or name it with WV_WVD",
                config.wvd.display()
            )
        })?;
    let start = Instant::now();
    loop {
        match File::connect(&socket) {
            Ok(admin) => return Ok((child, dir, socket, admin)),
            Err(e) if start.elapsed() > Duration::from_secs(10) => {
                let _ = child.kill();
                let _ = child.wait();
                let _ = std::fs::remove_dir_all(&dir);
                return Err(format!(
                    "the service on {} never answered: {e}",
                    socket.display()
                ));
            }
            Err(_) => {
                if let Ok(Some(st)) = child.try_wait() {
                    let _ = std::fs::remove_dir_all(&dir);
                    return Err(format!("{} exited at start ({st})", config.wvd.display()));
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    }
}

impl ServiceEnv {
    fn admin(&self) -> &File {
        match &self.admin {
            Some(f) => f,
            None => unreachable!("the admin handle lives until finish"),
        }
    }

    fn ask(&self, a: &Admin) -> Option<AdminReply> {
        self.admin().admin(a).ok()
    }

    fn num(&self, a: &Admin) -> Option<u64> {
        match self.ask(a)? {
            AdminReply::Num(n) => Some(n),
            _ => None,
        }
    }

    /// The socket the service listens on.
    pub fn socket(&self) -> &Path {
        &self.socket
    }
}

impl Env for ServiceEnv {
    type Config = ServiceConfig;
    type File = File;

    fn create(config: &ServiceConfig) -> Result<Self, String> {
        let (child, dir, socket, admin) = start(config)?;
        Ok(ServiceEnv {
            child,
            dir,
            socket,
            admin: Some(admin),
            device: config.device,
        })
    }

    fn verifier(config: &ServiceConfig) -> Option<String> {
        Some(match config.link_layer {
            LinkLayer::Ethernet => "wvd: driver → soft HCAs through their C verbs tables".into(),
            LinkLayer::InfiniBand => {
                "wvd: driver → soft HCAs with InfiniBand ports through their C verbs tables".into()
            }
        })
    }

    fn open(&self) -> Result<File, String> {
        File::connect(&self.socket).map_err(|e| format!("connecting to the service: {e}"))
    }

    fn device_spec(&self) -> Option<DeviceSpec> {
        self.device
    }

    fn machine(&self) -> Option<&dyn Machine> {
        Some(self)
    }

    fn buffer(&self, len: usize) -> (u64, Box<dyn Any>) {
        // Any memory of this process: the service probes and reaches it through the kernel.
        let v = vec![0u64; len.div_ceil(8).max(1)];
        (v.as_ptr() as u64, Box::new(v))
    }

    fn finish(mut self) -> Vec<String> {
        let mut found = match self.admin().admin(&Admin::Unload) {
            Ok(AdminReply::Lines(l)) => l,
            Ok(other) => vec![format!("wvd: unload answered {other:?}")],
            Err(e) => vec![format!("wvd: unload failed: {e}")],
        };
        self.admin = None;
        let start = Instant::now();
        loop {
            match self.child.try_wait() {
                Ok(Some(st)) if st.success() => break,
                Ok(Some(st)) => {
                    found.push(format!("wvd exited with {st}"));
                    break;
                }
                _ if start.elapsed() > Duration::from_secs(10) => {
                    found.push("wvd did not exit after its unload".into());
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    break;
                }
                _ => std::thread::sleep(Duration::from_millis(5)),
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
        found
    }
}

impl Machine for ServiceEnv {
    fn device_guids(&self) -> Vec<u64> {
        match self.ask(&Admin::DeviceGuids) {
            Some(AdminReply::Guids(g)) => g,
            _ => Vec::new(),
        }
    }

    fn device_count(&self) -> usize {
        self.num(&Admin::DeviceCount).unwrap_or(0) as usize
    }

    fn device_guid(&self, index: usize) -> Option<u64> {
        self.num(&Admin::DeviceGuid(index as u64))
    }

    fn set_port_state(&self, index: usize, port: u8, up: bool) -> Result<(), String> {
        match self.admin().admin(&Admin::SetPortState {
            index: index as u64,
            port,
            up,
        }) {
            Ok(AdminReply::Ok) => Ok(()),
            Ok(AdminReply::Refused(r)) => Err(r),
            Ok(other) => Err(format!("unexpected answer {other:?}")),
            Err(e) => Err(e.to_string()),
        }
    }

    fn remove_device(&self, index: usize) -> bool {
        self.num(&Admin::RemoveDevice(index as u64)) == Some(1)
    }

    fn add_device(&self) -> usize {
        self.num(&Admin::AddDevice).unwrap_or(u64::MAX) as usize
    }

    fn addresses(&self) -> &dyn AddressService {
        self.admin()
    }

    fn address(&self, index: usize, port: u8) -> IpAddr {
        match self.ask(&Admin::Address {
            index: index as u64,
            port,
        }) {
            Some(AdminReply::Ip(ip)) => ip,
            _ => IpAddr::from([0, 0, 0, 0]),
        }
    }

    fn cm_ids(&self, index: usize) -> Option<usize> {
        self.num(&Admin::CmIds(index as u64)).map(|n| n as usize)
    }
}

impl Drop for ServiceEnv {
    fn drop(&mut self) {
        // `finish` normally ends the service; a scenario that panicked leaves it to this.
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
