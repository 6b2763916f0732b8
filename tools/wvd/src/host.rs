//! The hosting seam: what the service serves its clients from. Today the in-process stack of
//! `wv-client` (the driver core on the host model of KMDF above soft HCAs on one fabric);
//! another host (the glue on an emulated KMDF, a loaded `winverbs.sys`) would implement the
//! same few calls: open a handle, issue and cancel IOCTLs on it, answer the machine's admin
//! actions and address questions, report what it holds, unload.

use std::net::IpAddr;
use std::sync::Mutex;

use wv_abi::NtStatus;
use wv_client::service::proto::{Admin, AdminReply};
use wv_inproc::{LinkLayer, MemoryMode, Stack, StackConfig};
use wv_softhca::{AddressError, PortLease};
use zerocopy::IntoBytes;

/// A handle on the hosted driver.
pub type HostFile = wv_inproc::File;
/// A request on it.
pub type HostIo = wv_inproc::Io;

/// How the hosted machine is built.
#[derive(Clone, Copy, Debug)]
pub struct HostConfig {
    /// Soft HCAs.
    pub devices: usize,
    /// Ports per soft HCA.
    pub ports: u8,
    /// Their link layer.
    pub link_layer: LinkLayer,
    /// Mixed into their MACs (node GUIDs, GIDs).
    pub identity: u16,
    /// PASSIVE_LEVEL worker threads.
    pub workers: usize,
}

/// The hosted machine.
pub struct Host {
    /// `None` once unloaded.
    stack: Mutex<Option<Stack>>,
}

impl Host {
    /// Loads the driver with its soft HCAs. Client memory is reached per process: the
    /// service attaches each connection's thread to its client, whose registrations then pin
    /// that process's memory.
    pub fn new(c: HostConfig) -> Host {
        let stack = Stack::new(StackConfig {
            devices: c.devices,
            ports_per_device: c.ports,
            workers: c.workers,
            link_layer: c.link_layer,
            memory: MemoryMode::Process,
            identity: c.identity,
            ..StackConfig::default()
        });
        Host {
            stack: Mutex::new(Some(stack)),
        }
    }

    fn with<T>(&self, f: impl FnOnce(&Stack) -> T) -> Option<T> {
        let g = self.stack.lock().unwrap_or_else(|e| e.into_inner());
        g.as_ref().map(f)
    }

    /// CreateFile.
    ///
    /// # Errors
    /// The driver's refusal; `STATUS_NO_SUCH_DEVICE` once unloaded.
    pub fn open(&self) -> Result<HostFile, NtStatus> {
        self.with(Stack::open)
            .unwrap_or(Err(NtStatus::NO_SUCH_DEVICE))
    }

    /// Reserves a port of the fabric's port space (held by the lease).
    pub fn reserve_port(&self, ip: IpAddr, port: u16) -> Result<PortLease, AdminReply> {
        match self.with(|s| s.fabric().reserve_port(ip, port)) {
            Some(Ok(lease)) => Ok(lease),
            Some(Err(AddressError::InUse)) => Err(AdminReply::Refused("in use".into())),
            Some(Err(AddressError::NoFreePort)) => Err(AdminReply::Refused("exhausted".into())),
            Some(Err(e)) => Err(AdminReply::Refused(e.to_string())),
            None => Err(AdminReply::Refused("unloaded".into())),
        }
    }

    /// Answers an admin action or address question (not the reservations nor unload, which
    /// the connection and the server handle).
    pub fn admin(&self, a: &Admin) -> AdminReply {
        self.with(|s| answer(s, a))
            .unwrap_or_else(|| AdminReply::Refused("the driver is unloaded".into()))
    }

    /// What the machine holds: the driver's files, requests and queues (the host verifier's
    /// live counts) and the soft HCAs' objects, summed over the devices.
    pub fn counts(&self) -> Vec<(String, u64)> {
        self.with(|s| {
            let v = s.platform().verifier();
            let mut c = vec![
                ("driver files".to_string(), v.live_files() as u64),
                ("driver requests".to_string(), v.live_requests() as u64),
                ("driver queues".to_string(), v.live_queues() as u64),
            ];
            let mut sum = [0u64; 8];
            let mut cm = 0u64;
            for i in 0..s.device_count() {
                if let Some(h) = s.hca(i) {
                    let o = h.objects();
                    for (k, n) in [o.contexts, o.pds, o.mrs, o.mws, o.ahs, o.cqs, o.srqs, o.qps]
                        .into_iter()
                        .enumerate()
                    {
                        sum[k] += u64::from(n);
                    }
                    cm += h.cm().ids() as u64;
                }
            }
            for (name, n) in ["contexts", "pds", "mrs", "mws", "ahs", "cqs", "srqs", "qps"]
                .into_iter()
                .zip(sum)
            {
                c.push((format!("soft HCA {name}"), n));
            }
            c.push(("CM ids".to_string(), cm));
            c
        })
        .unwrap_or_default()
    }

    /// Unloads the driver: its verifier's findings (and the handles still open, which keep it
    /// loaded, reported as one).
    pub fn unload(&self) -> Vec<String> {
        let stack = self.stack.lock().unwrap_or_else(|e| e.into_inner()).take();
        stack.map(Stack::unload).unwrap_or_default()
    }
}

fn answer(s: &Stack, a: &Admin) -> AdminReply {
    let index = |i: u64| usize::try_from(i).unwrap_or(usize::MAX);
    match a {
        Admin::DeviceGuids => AdminReply::Guids(s.device_guids()),
        Admin::DeviceCount => AdminReply::Num(s.device_count() as u64),
        Admin::DeviceGuid(i) => s
            .device_guid(index(*i))
            .map_or(AdminReply::None, AdminReply::Num),
        Admin::SetPortState { index: i, port, up } => {
            match s.set_port_state(index(*i), *port, *up) {
                Ok(()) => AdminReply::Ok,
                Err(e) => AdminReply::Refused(e.to_string()),
            }
        }
        Admin::RemoveDevice(i) => AdminReply::Num(u64::from(s.remove_device(index(*i)))),
        Admin::AddDevice => AdminReply::Num(s.add_device() as u64),
        Admin::Address { index: i, port } => AdminReply::Ip(s.address(index(*i), *port)),
        Admin::CmIds(i) => s
            .hca(index(*i))
            .map_or(AdminReply::None, |h| AdminReply::Num(h.cm().ids() as u64)),
        Admin::Locate(ip) => {
            s.fabric()
                .locate(*ip)
                .map_or(AdminReply::None, |l| AdminReply::Located {
                    guid: l.device_guid,
                    pkey: l.pkey,
                    port: l.port,
                })
        }
        Admin::ResolvePath(a, b) => match s.fabric().resolve_path(*a, *b) {
            Ok(p) => AdminReply::Path(p.as_bytes().to_vec()),
            Err(_) => AdminReply::None,
        },
        Admin::ReservePort(..) | Admin::ReleasePort(_) | Admin::Stats | Admin::Unload => {
            AdminReply::Refused("not a host question".into())
        }
    }
}
