//! [`SoftController`]: a soft HCA as the stack below the filter — the controller's function
//! driver answering `IRP_MN_QUERY_INTERFACE` with the soft HCA's C tables
//! (`GUID_RDMA_INTERFACE_VERBS`, and the CM interface ibbus answers on a real stack), counting
//! the references its interfaces hold, as WinOFED's mlx4_bus does. The tables are in the
//! asking driver's calling convention: the host's for the glue compiled for the host, the
//! Windows x64 one for a loaded image (`wv_ci::Convention`).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use wdk_sys::NTSTATUS;
use wv_ci::{
    CiCmExport, CiExport, GUID, GUID_INFINIBAND_INTERFACE_CM, GUID_RDMA_INTERFACE_VERBS,
    INFINIBAND_INTERFACE_CM_VERSION, RDMA_INTERFACE_VERBS_VERSION,
};
use wv_host::HostPlatform;
use wv_softhca::{ClientMemory, DeviceConfig, Fabric, LinkLayer, SoftCm, SoftHca};

use crate::pnp::{Guid, InterfaceQuery, LowerStack};

/// The soft HCA on the emulated machine's platform.
pub type Hca = SoftHca<HostPlatform>;

fn same(a: &Guid, b: &GUID) -> bool {
    a.data1 == b.Data1 && a.data2 == b.Data2 && a.data3 == b.Data3 && a.data4 == b.Data4
}

/// How to build a [`SoftController`].
#[derive(Clone, Copy, Debug)]
pub struct ControllerConfig {
    /// Its index: names it, and gives it its MAC, node GUID and addresses.
    pub index: usize,
    /// Ports (1 or 2).
    pub ports: u8,
    /// Ethernet (RoCE) or InfiniBand ports.
    pub link_layer: LinkLayer,
    /// Whether it answers the verbs query (a controller without IB ports does not).
    pub verbs: bool,
    /// Whether the stack answers the CM query.
    pub cm: bool,
    /// The firmware's command latency (see `wv_softhca::DeviceConfig::command_latency_ns`).
    pub command_latency_ns: u64,
}

impl ControllerConfig {
    /// Controller `index` with one RoCE port and both interfaces.
    pub fn new(index: usize) -> Self {
        ControllerConfig {
            index,
            ports: 1,
            link_layer: LinkLayer::Ethernet,
            verbs: true,
            cm: true,
            command_latency_ns: 0,
        }
    }
}

/// A soft HCA and the function driver above it.
pub struct SoftController {
    hca: Arc<Hca>,
    verbs: Option<CiExport<Hca>>,
    cm: Option<CiCmExport<SoftCm>>,
    name: String,
}

impl std::fmt::Debug for SoftController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SoftController")
            .field("name", &self.name)
            .finish()
    }
}

impl SoftController {
    /// A soft HCA on `platform`, joined to `fabric` with its addresses assigned (as IPoIB comes
    /// up with the port), registering memory from `memory`.
    pub fn new(
        platform: &HostPlatform,
        fabric: &Arc<Fabric>,
        memory: ClientMemory,
        config: ControllerConfig,
    ) -> Arc<SoftController> {
        let n = config.index + 1;
        let mac = [0x02, 0x57, 0x56, (n >> 16) as u8, (n >> 8) as u8, n as u8];
        let name = format!("softhca{}", config.index);
        let mut device = DeviceConfig::new(&name, mac);
        let ports = config.ports.clamp(1, 2);
        device.ports = ports;
        device.link_layer = config.link_layer;
        device.command_latency_ns = config.command_latency_ns;
        let hca = SoftHca::new(Arc::new(platform.clone()), device, memory);
        fabric.attach(&hca);
        for port in 1..=ports {
            for ip in [address(config.index, port), address_v6(config.index, port)] {
                let _ = fabric.assign_address(&hca, port, ip);
            }
        }
        let verbs = if config.verbs {
            hca.c_interface().ok()
        } else {
            None
        };
        let cm = if config.cm {
            hca.c_cm_interface().ok()
        } else {
            None
        };
        Arc::new(SoftController {
            hca,
            verbs,
            cm,
            name,
        })
    }

    /// The soft HCA (admin actions: port state, surprise removal).
    pub fn hca(&self) -> &Arc<Hca> {
        &self.hca
    }
}

/// The IPv4 address controller `index` gives `port` (`10.x.y.port`), as the in-process stack
/// does.
pub fn address(index: usize, port: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(10, (index >> 8) as u8, index as u8, port))
}

/// The IPv6 address controller `index` gives `port`.
pub fn address_v6(index: usize, port: u8) -> IpAddr {
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

/// What a `IRP_MN_QUERY_INTERFACE` asked for: the interface's version, and the caller's buffer.
struct Asked {
    version: u16,
    size: u16,
    interface: *mut u8,
}

impl Asked {
    /// Writes the table `export` makes into the caller's buffer, as the bus driver does: only
    /// an exported interface, at the one version it exports (`exported`), into a buffer that
    /// holds the whole structure; the table is made only then (making it counts a consumer).
    ///
    /// # Safety
    /// `interface` is `size` writable bytes.
    unsafe fn hand_out<E, T>(
        &self,
        export: Option<&E>,
        exported: u16,
        table: impl FnOnce(&E) -> T,
    ) -> NTSTATUS {
        let Some(export) = export else {
            return wdk_sys::STATUS_NOT_SUPPORTED;
        };
        if self.version != exported {
            return wdk_sys::STATUS_NOT_SUPPORTED;
        }
        if usize::from(self.size) < size_of::<T>() {
            return wdk_sys::STATUS_BUFFER_TOO_SMALL;
        }
        let table = table(export);
        // SAFETY: the caller's `size` bytes hold the whole structure (checked above).
        unsafe { self.interface.cast::<T>().write_unaligned(table) };
        wdk_sys::STATUS_SUCCESS
    }
}

impl LowerStack for SoftController {
    unsafe fn query_interface(&self, query: &InterfaceQuery) -> NTSTATUS {
        let asked = Asked {
            version: query.version,
            size: query.size,
            interface: query.interface,
        };
        let guid = &query.guid;
        if same(guid, &GUID_RDMA_INTERFACE_VERBS) {
            // SAFETY: the caller's promise.
            return unsafe {
                asked.hand_out(self.verbs.as_ref(), RDMA_INTERFACE_VERBS_VERSION, |e| {
                    e.interface_in(query.convention)
                })
            };
        }
        if same(guid, &GUID_INFINIBAND_INTERFACE_CM) {
            // SAFETY: the caller's promise.
            return unsafe {
                asked.hand_out(self.cm.as_ref(), INFINIBAND_INTERFACE_CM_VERSION, |e| {
                    e.interface_in(query.convention)
                })
            };
        }
        wdk_sys::STATUS_NOT_SUPPORTED
    }

    fn references(&self) -> usize {
        self.verbs.as_ref().map_or(0, CiExport::consumers)
            + self.cm.as_ref().map_or(0, CiCmExport::consumers)
    }

    fn name(&self) -> String {
        self.name.clone()
    }
}
