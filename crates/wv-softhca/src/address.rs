//! IP addressing on a fabric: what IBAT does for WinVerbs on Windows (and the IPoIB neighbour
//! and route tables for Linux's rdma_cm).
//!
//! * An IP address is assigned to a port of a soft HCA ([`Fabric::assign_address`]); the
//!   port's GID table gets the matching GID (`::ffff:a.b.c.d` for IPv4, the address itself for
//!   IPv6), so a path between two addresses is a path between two GIDs.
//! * [`Fabric::locate`] says which device and port own an address (`WV_DEVICE_ADDRESS`:
//!   what `IWVProvider::TranslateAddress` fills EP_BIND's `Device` with).
//! * [`Fabric::resolve_path`] is the path record between two addresses (what the endpoint
//!   hands EP_MODIFY with `WV_IO_EP_OPTION_ROUTE`).
//! * [`Fabric::reserve_port`] is the fabric's port space (the role of the TCP socket
//!   winverbs.dll binds before EP_BIND): a port is taken once per address, a wildcard address
//!   takes it on every address, and port 0 picks a free ephemeral port.

use alloc::sync::{Arc, Weak};
use alloc::vec::Vec;
use core::net::IpAddr;

use wv_abi::IB_PATH_REC;
use wv_hal::{DeviceModelPlatform, Gid};

use crate::device::{Device, LinkLayer, ipv4_gid};
use crate::fabric::Fabric;
use crate::fallible;
use crate::verbs_impl::SoftHca;

/// The first port [`Fabric::reserve_port`] picks for port 0 (IANA's dynamic range).
pub const EPHEMERAL_FIRST: u16 = 49152;

/// The packet lifetime the fabric's paths advertise (`4.096 µs × 2^13` ≈ 34 ms): it sets
/// the QPs' ACK timeout and the CM's waits.
pub const PATH_PACKET_LIFE: u8 = 13;

/// Why an address operation failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AddressError {
    /// No live device port owns the address.
    Unknown,
    /// The address is already assigned.
    Assigned,
    /// The port's GID table is full, or the port does not exist.
    NoGid,
    /// The port is taken on that address.
    InUse,
    /// Every ephemeral port is taken.
    NoFreePort,
    /// Out of memory.
    NoMemory,
}

impl core::fmt::Display for AddressError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            AddressError::Unknown => "no device owns the address",
            AddressError::Assigned => "the address is already assigned",
            AddressError::NoGid => "no room for the address's GID on the port",
            AddressError::InUse => "the port is in use on that address",
            AddressError::NoFreePort => "no free ephemeral port",
            AddressError::NoMemory => "out of memory",
        })
    }
}

/// Where an address lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Location {
    /// The device's node GUID (network order as stored, as `WV_DEVICE_ADDRESS.DeviceGuid`).
    pub device_guid: u64,
    /// Port number, 1-based.
    pub port: u8,
    /// The partition key (host order): the default partition.
    pub pkey: u16,
    /// The GID the address maps to.
    pub gid: Gid,
    /// The port's LID.
    pub lid: u16,
}

pub(crate) struct Assigned {
    ip: IpAddr,
    dev: Weak<Device>,
    port: u8,
    gid: Gid,
}

/// The fabric's addresses and port space.
#[derive(Default)]
pub(crate) struct AddressBook {
    assigned: Vec<Assigned>,
    /// Reserved `(address, port)`s; an unspecified address reserves the port everywhere.
    reserved: Vec<(IpAddr, u16)>,
    /// Where the next ephemeral search starts.
    next_ephemeral: u16,
}

impl AddressBook {
    pub(crate) const fn new() -> AddressBook {
        AddressBook {
            assigned: Vec::new(),
            reserved: Vec::new(),
            next_ephemeral: EPHEMERAL_FIRST,
        }
    }

    fn live(&self, ip: IpAddr) -> Option<(&Assigned, Arc<Device>)> {
        self.assigned.iter().find_map(|a| {
            let dev = a.dev.upgrade().filter(|d| !d.is_removed())?;
            (a.ip == ip).then_some((a, dev))
        })
    }

    /// The first live address: where a connection without a source address leaves from.
    fn first(&self, v6: bool) -> Option<(&Assigned, Arc<Device>)> {
        self.assigned.iter().find_map(|a| {
            let dev = a.dev.upgrade().filter(|d| !d.is_removed())?;
            (a.ip.is_ipv6() == v6).then_some((a, dev))
        })
    }

    fn taken(&self, ip: IpAddr, port: u16) -> bool {
        self.reserved
            .iter()
            .any(|&(i, p)| p == port && (i == ip || i.is_unspecified() || ip.is_unspecified()))
    }
}

/// The GID an address maps to.
pub fn address_gid(ip: IpAddr) -> Gid {
    match ip {
        IpAddr::V4(v4) => ipv4_gid(v4.octets()),
        IpAddr::V6(v6) => v6.octets(),
    }
}

/// A loopback address stands for the source itself.
fn is_loopback(ip: IpAddr) -> bool {
    ip.is_loopback()
}

/// A reserved port; dropping it gives the port back.
#[derive(Debug)]
pub struct PortLease {
    fabric: Weak<Fabric>,
    ip: IpAddr,
    port: u16,
}

impl PortLease {
    /// The port (host order).
    pub fn port(&self) -> u16 {
        self.port
    }
    /// The address it was reserved on.
    pub fn address(&self) -> IpAddr {
        self.ip
    }
}

impl Drop for PortLease {
    fn drop(&mut self) {
        if let Some(fabric) = self.fabric.upgrade() {
            let mut book = fabric.addresses.lock();
            if let Some(at) = book
                .reserved
                .iter()
                .position(|&r| r == (self.ip, self.port))
            {
                book.reserved.swap_remove(at);
            }
        }
    }
}

impl Fabric {
    /// Assigns `ip` to `port` of `hca` (which must be on this fabric) and puts its GID in
    /// the port's GID table.
    ///
    /// # Errors
    /// [`AddressError::Assigned`] for an address already assigned, [`AddressError::NoGid`]
    /// when the port does not exist or its GID table is full.
    pub fn assign_address<P: DeviceModelPlatform>(
        &self,
        hca: &SoftHca<P>,
        port: u8,
        ip: IpAddr,
    ) -> Result<(), AddressError> {
        let dev = hca.device();
        // The book grows with its lock released.
        let mut book = fallible::with_room_in(|| self.addresses.lock(), |b| Some(&mut b.assigned))
            .map_err(|_| AddressError::NoMemory)?;
        if book.live(ip).is_some() {
            return Err(AddressError::Assigned);
        }
        // RoCE: the address becomes one of the port's GIDs. InfiniBand: the port keeps its
        // GIDs and the address resolves to GID 0, as IPoIB's address does through IBAT.
        let gid = match dev.link_layer() {
            LinkLayer::Ethernet => {
                let gid = address_gid(ip);
                dev.add_gid(port, gid).map_err(|_| AddressError::NoGid)?;
                gid
            }
            LinkLayer::InfiniBand => dev.sgid(port, 0).ok_or(AddressError::NoGid)?,
        };
        book.assigned.push(Assigned {
            ip,
            dev: Arc::downgrade(dev),
            port,
            gid,
        });
        Ok(())
    }

    /// Every live address with its location, in assignment order.
    pub fn addresses(&self) -> Vec<(IpAddr, Location)> {
        let book = self.addresses.lock();
        book.assigned
            .iter()
            .filter_map(|a| Some((a.ip, self.location_of(a)?)))
            .collect()
    }

    fn location_of(&self, a: &Assigned) -> Option<Location> {
        let dev = a.dev.upgrade().filter(|d| !d.is_removed())?;
        Some(Location {
            device_guid: dev.guid,
            port: a.port,
            pkey: 0xFFFF,
            gid: a.gid,
            lid: dev.lid(a.port),
        })
    }

    /// Which device and port own `ip` (IBAT's address translation).
    pub fn locate(&self, ip: IpAddr) -> Option<Location> {
        let book = self.addresses.lock();
        let (a, _) = book.live(ip)?;
        self.location_of(a)
    }

    /// The path from `src` to `dst`. An unspecified `src` leaves from the first address of
    /// `dst`'s family; a loopback `dst` is `src` itself.
    ///
    /// # Errors
    /// [`AddressError::Unknown`] when no live device owns either address.
    pub fn resolve_path(&self, src: IpAddr, dst: IpAddr) -> Result<IB_PATH_REC, AddressError> {
        let book = self.addresses.lock();
        let (s, sdev) = if src.is_unspecified() {
            book.first(dst.is_ipv6())
        } else {
            book.live(src)
        }
        .ok_or(AddressError::Unknown)?;
        let (d, ddev) = if is_loopback(dst) {
            (s, sdev.clone())
        } else {
            book.live(dst).ok_or(AddressError::Unknown)?
        };
        Ok(IB_PATH_REC {
            dgid: d.gid,
            sgid: s.gid,
            dlid: ddev.lid(d.port).to_be(),
            slid: sdev.lid(s.port).to_be(),
            // Hop limit 1: one subnet.
            hop_flow_raw: 1u32.to_be(),
            tclass: 0,
            // Reversible, one path.
            num_path: 0x81,
            pkey: 0xFFFFu16.to_be(),
            qos_class_sl: 0,
            // Selector "exactly" (2 << 6) with the value.
            mtu: 0x80 | crate::device::PORT_MTU as u8,
            rate: 0x80 | 7,
            pkt_life: 0x80 | PATH_PACKET_LIFE,
            ..IB_PATH_REC::default()
        })
    }

    /// Reserves `port` on `ip` (port 0: a free ephemeral port). An unspecified `ip` reserves
    /// the port on every address.
    ///
    /// # Errors
    /// [`AddressError::InUse`] for a taken port, [`AddressError::NoFreePort`] when port 0
    /// finds none, [`AddressError::Unknown`] for a specified address no device owns.
    pub fn reserve_port(
        self: &Arc<Self>,
        ip: IpAddr,
        port: u16,
    ) -> Result<PortLease, AddressError> {
        // The book grows with its lock released.
        let mut book = fallible::with_room_in(|| self.addresses.lock(), |b| Some(&mut b.reserved))
            .map_err(|_| AddressError::NoMemory)?;
        if !ip.is_unspecified() && !is_loopback(ip) && book.live(ip).is_none() {
            return Err(AddressError::Unknown);
        }
        let port = if port == 0 {
            let span = u32::from(u16::MAX - EPHEMERAL_FIRST) + 1;
            let start = book.next_ephemeral.max(EPHEMERAL_FIRST);
            let found = (0..span)
                .map(|i| {
                    let off = (u32::from(start - EPHEMERAL_FIRST) + i) % span;
                    EPHEMERAL_FIRST + off as u16
                })
                .find(|&p| !book.taken(ip, p))
                .ok_or(AddressError::NoFreePort)?;
            book.next_ephemeral = found.checked_add(1).unwrap_or(EPHEMERAL_FIRST);
            found
        } else if book.taken(ip, port) {
            return Err(AddressError::InUse);
        } else {
            port
        };
        book.reserved.push((ip, port));
        Ok(PortLease {
            fabric: Arc::downgrade(self),
            ip,
            port,
        })
    }
}
