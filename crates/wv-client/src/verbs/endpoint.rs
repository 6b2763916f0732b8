//! Connection endpoints (`IWVConnectEndpoint`): bind, route, listen, take requests, connect,
//! accept, reject, disconnect, with private data — the bytes winverbs.dll puts in the EP
//! IOCTLs, which librdmacm and NetworkDirect drive on Windows.
//!
//! What winverbs.dll asks of the host before the driver sees an endpoint — which device and
//! port own an address (IBAT's `TranslateAddress`), the path to a peer (IBAT's route), a port
//! (the TCP socket it binds) — comes from an [`AddressService`]; a machine [`OnFabric`] (the
//! in-process stacks, `wv_inproc::Stack` and the emulated KMDF's) has its fabric's.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::sync::{Arc, Mutex};

use wv_abi::consts::{WV_IO_EP_OPTION_ROUTE, WV_IO_EP_TYPE_CONNECT};
use wv_abi::ioctl::*;
use wv_abi::{
    IB_PATH_REC, NtStatus, WV_IO_CONNECT_PARAM, WV_IO_DEVICE_ADDRESS, WV_IO_EP_ACCEPT,
    WV_IO_EP_ATTRIBUTES, WV_IO_EP_BIND, WV_IO_EP_CONNECT, WV_IO_EP_DISCONNECT,
    WV_IO_EP_GET_REQUEST, WV_IO_EP_LISTEN, WV_IO_ID, WV_IO_SOCKADDR_DATA, WV_IO_SOCKADDR_IN,
    WV_IO_SOCKADDR_IN6,
};
use wv_softhca::abi::QpStateOut;
use wv_softhca::{AddressError, Fabric};
use zerocopy::IntoBytes;

use super::error::{
    Result, STATUS_ADDRESS_ALREADY_EXISTS, STATUS_HOST_UNREACHABLE, STATUS_INVALID_ADDRESS,
    VerbsError,
};
use super::{Handle, Kind, Pending, Provider, Qp, ioctl, parse, pending, pending_or_error};
use crate::raw::RawFile;

/// Winsock's `AF_INET` and `AF_INET6`, as `SOCKADDR`s carry them.
pub const AF_INET: u16 = 2;
/// See [`AF_INET`].
pub const AF_INET6: u16 = 23;

/// Private data bytes the connect parameters carry (`WV_IO_CONNECT_PARAM.Data`).
pub const MAX_PRIVATE_DATA: usize = 56;

/// Where an address lives: `WV_DEVICE_ADDRESS` (host order here).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceAddress {
    /// The device's node GUID, as GUID_QUERY lists it.
    pub device_guid: u64,
    /// Partition key.
    pub pkey: u16,
    /// Port number, 1-based.
    pub port: u8,
}

/// Why a port could not be reserved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PortError {
    /// Taken on that address.
    InUse,
    /// No address of the host is this one.
    Unknown,
    /// No free port (port 0).
    Exhausted,
}

/// A reserved port: kept for as long as the endpoint bound to it lives.
pub struct PortReservation {
    port: u16,
    _hold: Box<dyn Send + Sync>,
}

impl fmt::Debug for PortReservation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PortReservation")
            .field("port", &self.port)
            .finish()
    }
}

impl PortReservation {
    /// A reservation of `port`, held by `hold` (dropped when the endpoint goes).
    pub fn new(port: u16, hold: Box<dyn Send + Sync>) -> Self {
        PortReservation { port, _hold: hold }
    }
    /// The port.
    pub fn port(&self) -> u16 {
        self.port
    }
}

/// What the host answers about IP addresses (IBAT and the socket layer on Windows).
pub trait AddressService {
    /// Which device and port own `ip`.
    fn locate(&self, ip: IpAddr) -> Option<DeviceAddress>;
    /// The path from `src` (unspecified: the host picks) to `dst`.
    fn resolve_path(&self, src: IpAddr, dst: IpAddr) -> Option<IB_PATH_REC>;
    /// Reserves `port` on `ip` (port 0: a free one).
    ///
    /// # Errors
    /// Why not.
    fn reserve_port(
        &self,
        ip: IpAddr,
        port: u16,
    ) -> core::result::Result<PortReservation, PortError>;
}

/// A machine whose soft HCAs are joined on one fabric: the fabric's address book is its
/// [`AddressService`], so every such machine answers the way the others do.
pub trait OnFabric {
    /// The fabric joining the machine's soft HCAs.
    fn fabric(&self) -> &Arc<Fabric>;
}

/// The fabric answers what IBAT and the socket layer answer on Windows.
impl<T: OnFabric + ?Sized> AddressService for T {
    fn locate(&self, ip: IpAddr) -> Option<DeviceAddress> {
        self.fabric().locate(ip).map(|l| DeviceAddress {
            device_guid: l.device_guid,
            pkey: l.pkey,
            port: l.port,
        })
    }

    fn resolve_path(&self, src: IpAddr, dst: IpAddr) -> Option<IB_PATH_REC> {
        self.fabric().resolve_path(src, dst).ok()
    }

    fn reserve_port(
        &self,
        ip: IpAddr,
        port: u16,
    ) -> core::result::Result<PortReservation, PortError> {
        match self.fabric().reserve_port(ip, port) {
            Ok(lease) => Ok(PortReservation::new(lease.port(), Box::new(lease))),
            Err(AddressError::InUse) => Err(PortError::InUse),
            Err(AddressError::NoFreePort) => Err(PortError::Exhausted),
            Err(_) => Err(PortError::Unknown),
        }
    }
}

/// Connect parameters (`WV_CONNECT_PARAM`): private data and the QP's read limits and retries.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConnectParam {
    /// Private data (at most [`MAX_PRIVATE_DATA`] bytes reach the driver unchecked; more is
    /// the driver's `STATUS_INVALID_BUFFER_SIZE`).
    pub private_data: Vec<u8>,
    /// RDMA reads/atomics this side accepts as responder.
    pub responder_resources: u64,
    /// RDMA reads/atomics this side issues.
    pub initiator_depth: u64,
    /// Transport retries.
    pub retry_count: u8,
    /// RNR retries.
    pub rnr_retry_count: u8,
}

impl ConnectParam {
    /// winverbs.dll's `WvIoConvertConnParam`: `DataLength` is the caller's length (as a byte;
    /// the driver refuses more than 56), the data as much as fits.
    fn to_io(&self) -> WV_IO_CONNECT_PARAM {
        let mut io = WV_IO_CONNECT_PARAM {
            ResponderResources: self.responder_resources,
            InitiatorDepth: self.initiator_depth,
            RetryCount: self.retry_count,
            RnrRetryCount: self.rnr_retry_count,
            DataLength: self.private_data.len().min(255) as u8,
            ..WV_IO_CONNECT_PARAM::default()
        };
        let n = self.private_data.len().min(MAX_PRIVATE_DATA);
        io.Data[..n].copy_from_slice(&self.private_data[..n]);
        io
    }

    fn from_io(io: &WV_IO_CONNECT_PARAM) -> Self {
        let n = usize::from(io.DataLength).min(MAX_PRIVATE_DATA);
        ConnectParam {
            private_data: io.Data[..n].to_vec(),
            responder_resources: io.ResponderResources,
            initiator_depth: io.InitiatorDepth,
            retry_count: io.RetryCount,
            rnr_retry_count: io.RnrRetryCount,
        }
    }
}

/// What EP_QUERY reports (`WV_CONNECT_ATTRIBUTES`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnectAttributes {
    /// Local address (`None`: not an IP address).
    pub local: Option<SocketAddr>,
    /// Peer address.
    pub peer: Option<SocketAddr>,
    /// The device and port.
    pub device: DeviceAddress,
    /// The connect parameters: the peer's private data once connected.
    pub param: ConnectParam,
}

/// A socket address as `SOCKADDR_IN`/`SOCKADDR_IN6` in `WV_IO_SOCKADDR_DATA`.
pub fn sockaddr(addr: SocketAddr) -> WV_IO_SOCKADDR_DATA {
    let mut data = WV_IO_SOCKADDR_DATA::default();
    match addr {
        SocketAddr::V4(a) => data.set_sin(&WV_IO_SOCKADDR_IN {
            SinFamily: AF_INET,
            SinPort: a.port().to_be(),
            SinAddr: u32::from_ne_bytes(a.ip().octets()),
            SinZero: [0; 8],
        }),
        SocketAddr::V6(a) => data.set_sin6(&WV_IO_SOCKADDR_IN6 {
            Sin6Family: AF_INET6,
            Sin6Port: a.port().to_be(),
            Sin6FlowInfo: a.flowinfo(),
            Sin6Addr: a.ip().octets(),
            Sin6ScopeId: a.scope_id(),
        }),
    }
    data
}

/// The socket address in `WV_IO_SOCKADDR_DATA` (`None` for another family).
pub fn socket_addr(data: &WV_IO_SOCKADDR_DATA) -> Option<SocketAddr> {
    match data.family() {
        AF_INET => {
            let sin = data.sin();
            Some(SocketAddr::V4(SocketAddrV4::new(
                Ipv4Addr::from(sin.SinAddr.to_ne_bytes()),
                u16::from_be(sin.SinPort),
            )))
        }
        AF_INET6 => {
            let sin6 = data.sin6();
            Some(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(sin6.Sin6Addr),
                u16::from_be(sin6.Sin6Port),
                sin6.Sin6FlowInfo,
                sin6.Sin6ScopeId,
            )))
        }
        _ => None,
    }
}

/// A connection endpoint. Cloning shares it; the last clone destroys it (EP_DESTROY), which
/// ends its parked requests.
pub type Endpoint<F> = Handle<F, EpParts>;

/// What the library keeps with an endpoint: the port it is bound to, held while it lives.
pub struct EpParts {
    port: Mutex<Option<PortReservation>>,
}

impl Kind for EpParts {
    const NAME: &'static str = "Endpoint";
    const DESTROY: u32 = WV_IOCTL_EP_DESTROY;
}

impl<F: RawFile + Send + Sync + 'static> Provider<F> {
    /// A new connection endpoint (EP_CREATE, `WV_IO_EP_TYPE_CONNECT`).
    ///
    /// # Errors
    /// The status of EP_CREATE.
    pub fn create_endpoint(&self) -> Result<Endpoint<F>> {
        const OP: &str = "EP_CREATE";
        let st = ioctl(
            &*self.file,
            OP,
            WV_IOCTL_EP_CREATE,
            &WV_IO_EP_TYPE_CONNECT.to_ne_bytes(),
            size_of::<u64>(),
        )?;
        let id: u64 = parse(OP, &st.output)?;
        Ok(Handle::new(
            Arc::clone(&self.file),
            id,
            EpParts {
                port: Mutex::new(None),
            },
        ))
    }
}

impl<F: RawFile + Send + Sync + 'static> Endpoint<F> {
    /// Binds to `addr` (`BindAddress`): a port from `net` (port 0: a free one), the device
    /// that owns the address (none for a wildcard address), then EP_BIND. Returns the address
    /// bound, with its port.
    ///
    /// # Errors
    /// `STATUS_INVALID_ADDRESS` for an address no port owns, `STATUS_ADDRESS_ALREADY_EXISTS`
    /// for a taken port, or the status of EP_BIND.
    pub fn bind(&self, addr: SocketAddr, net: &dyn AddressService) -> Result<SocketAddr> {
        const OP: &str = "EP_BIND";
        let device = if addr.ip().is_unspecified() {
            WV_IO_DEVICE_ADDRESS::default()
        } else {
            let d = net
                .locate(addr.ip())
                .ok_or(VerbsError::new("TranslateAddress", STATUS_INVALID_ADDRESS))?;
            WV_IO_DEVICE_ADDRESS {
                DeviceGuid: d.device_guid,
                Pkey: d.pkey.to_be(),
                PortNumber: d.port,
                Reserved: [0; 5],
            }
        };
        let reservation = net.reserve_port(addr.ip(), addr.port()).map_err(|e| {
            let status = match e {
                PortError::Unknown => STATUS_INVALID_ADDRESS,
                PortError::InUse | PortError::Exhausted => STATUS_ADDRESS_ALREADY_EXISTS,
            };
            VerbsError::new("bind", status)
        })?;
        let mut bound = addr;
        bound.set_port(reservation.port());
        let bind = WV_IO_EP_BIND {
            Id: self.id(),
            Address: sockaddr(bound),
            Device: device,
        };
        ioctl(
            &**self.file(),
            OP,
            WV_IOCTL_EP_BIND,
            bind.as_bytes(),
            size_of::<WV_IO_EP_BIND>(),
        )?;
        *self.parts().port.lock().unwrap_or_else(|e| e.into_inner()) = Some(reservation);
        Ok(bound)
    }

    /// Sets the route to connect over (EP_MODIFY with `WV_IO_EP_OPTION_ROUTE`).
    ///
    /// # Errors
    /// The status of EP_MODIFY (`STATUS_NOT_SUPPORTED` unless bound).
    pub fn set_route(&self, path: &IB_PATH_REC) -> Result<()> {
        let mut bytes = WV_IO_ID::new(self.id(), WV_IO_EP_OPTION_ROUTE)
            .as_bytes()
            .to_vec();
        bytes.extend_from_slice(path.as_bytes());
        ioctl(&**self.file(), "EP_MODIFY", WV_IOCTL_EP_MODIFY, &bytes, 0).map(|_| ())
    }

    /// Resolves the path from `local` to `peer` with `net` and sets it as the route
    /// (librdmacm's `rdma_resolve_route`). Returns the path.
    ///
    /// # Errors
    /// `STATUS_HOST_UNREACHABLE` without a path, or the status of EP_MODIFY.
    pub fn resolve_route(
        &self,
        local: IpAddr,
        peer: IpAddr,
        net: &dyn AddressService,
    ) -> Result<IB_PATH_REC> {
        let path = net
            .resolve_path(local, peer)
            .ok_or(VerbsError::new("ResolveRoute", STATUS_HOST_UNREACHABLE))?;
        self.set_route(&path)?;
        Ok(path)
    }

    /// Listens (EP_LISTEN) with room for `backlog` requests nobody asked for yet (0: the
    /// driver's default).
    ///
    /// # Errors
    /// The status of EP_LISTEN.
    pub fn listen(&self, backlog: u64) -> Result<()> {
        let l = WV_IO_EP_LISTEN {
            Id: self.id(),
            Backlog: backlog,
        };
        ioctl(
            &**self.file(),
            "EP_LISTEN",
            WV_IOCTL_EP_LISTEN,
            l.as_bytes(),
            size_of::<WV_IO_EP_LISTEN>(),
        )
        .map(|_| ())
    }

    /// Waits for a connection request and gives it to `new` (an idle endpoint of the same
    /// handle), which then answers it with [`Endpoint::accept`] or [`Endpoint::reject`].
    ///
    /// # Errors
    /// An inline failure of EP_GET_REQUEST.
    pub fn get_request(&self, new: &Endpoint<F>) -> Result<Pending<()>> {
        let g = WV_IO_EP_GET_REQUEST {
            Id: self.id(),
            EpId: new.id(),
        };
        let io = self
            .file()
            .device_io_control(WV_IOCTL_EP_GET_REQUEST, g.as_bytes(), 0);
        pending_or_error(self.file(), io, "EP_GET_REQUEST", pending::finish_unit)
    }

    /// Connects `qp` to `peer` (EP_CONNECT); completes when the peer's REP came (then
    /// [`Endpoint::accept`] finishes the handshake), with `STATUS_CONNECTION_REFUSED` when it
    /// rejected, `STATUS_TIMEOUT` when nobody answered.
    ///
    /// # Errors
    /// An inline failure of EP_CONNECT.
    pub fn connect(
        &self,
        qp: &Qp<F>,
        peer: SocketAddr,
        param: &ConnectParam,
    ) -> Result<Pending<()>> {
        let c = WV_IO_EP_CONNECT {
            Id: self.id(),
            QpId: qp.id(),
            PeerAddress: sockaddr(peer),
            Param: param.to_io(),
        };
        let io = self
            .file()
            .device_io_control(WV_IOCTL_EP_CONNECT, c.as_bytes(), 0);
        pending_or_error(self.file(), io, "EP_CONNECT", finish_connected)
    }

    /// Accepts (EP_ACCEPT) with `qp`: on the active side after the REP (sends the RTU), on
    /// the passive side after a request (sends the REP; completes with the RTU).
    ///
    /// # Errors
    /// An inline failure of EP_ACCEPT.
    pub fn accept(&self, qp: &Qp<F>, param: &ConnectParam) -> Result<Pending<()>> {
        let a = WV_IO_EP_ACCEPT {
            Id: self.id(),
            QpId: qp.id(),
            Param: param.to_io(),
        };
        let io = self.file().device_io_control(
            WV_IOCTL_EP_ACCEPT,
            a.as_bytes(),
            size_of::<QpStateOut>(),
        );
        pending_or_error(self.file(), io, "EP_ACCEPT", finish_connected)
    }

    /// Rejects the request (or the REP) with private data (EP_REJECT).
    ///
    /// # Errors
    /// The status of EP_REJECT.
    pub fn reject(&self, private_data: &[u8]) -> Result<()> {
        let mut bytes = WV_IO_ID::new(self.id(), 0).as_bytes().to_vec();
        bytes.extend_from_slice(private_data);
        ioctl(&**self.file(), "EP_REJECT", WV_IOCTL_EP_REJECT, &bytes, 0).map(|_| ())
    }

    /// Disconnects (EP_DISCONNECT): a DREQ, or the DREP to the peer's; `qp` goes to ERROR
    /// when the exchange is over, also when the peer never answered the DREQ (the request
    /// then ends with the QP modify's status, as OFW's does).
    ///
    /// # Errors
    /// An inline failure of EP_DISCONNECT.
    pub fn disconnect(&self, qp: Option<&Qp<F>>) -> Result<Pending<()>> {
        let d = WV_IO_EP_DISCONNECT {
            Id: self.id(),
            QpId: qp.map_or(0, Qp::id),
        };
        let io = self.file().device_io_control(
            WV_IOCTL_EP_DISCONNECT,
            d.as_bytes(),
            size_of::<QpStateOut>(),
        );
        pending_or_error(self.file(), io, "EP_DISCONNECT", pending::finish_unit)
    }

    /// Completes when the peer disconnects (EP_DISCONNECT_NOTIFY).
    ///
    /// # Errors
    /// An inline failure of EP_DISCONNECT_NOTIFY.
    pub fn notify_disconnect(&self) -> Result<Pending<()>> {
        let io = self.file().device_io_control(
            WV_IOCTL_EP_DISCONNECT_NOTIFY,
            &self.id().to_ne_bytes(),
            0,
        );
        pending_or_error(
            self.file(),
            io,
            "EP_DISCONNECT_NOTIFY",
            pending::finish_unit,
        )
    }

    /// EP_QUERY.
    ///
    /// # Errors
    /// The status of EP_QUERY.
    pub fn query(&self) -> Result<ConnectAttributes> {
        let a: WV_IO_EP_ATTRIBUTES = self.query_as("EP_QUERY", WV_IOCTL_EP_QUERY)?;
        Ok(ConnectAttributes {
            local: socket_addr(&a.LocalAddress),
            peer: socket_addr(&a.PeerAddress),
            device: DeviceAddress {
                device_guid: a.Device.DeviceGuid,
                pkey: u16::from_be(a.Device.Pkey),
                port: a.Device.PortNumber,
            },
            param: ConnectParam::from_io(&a.connect()),
        })
    }

    /// EP_CANCEL: ends this endpoint's parked requests with `STATUS_CANCELLED`.
    ///
    /// # Errors
    /// The status of EP_CANCEL.
    pub fn cancel(&self) -> Result<()> {
        self.command("EP_CANCEL", WV_IOCTL_EP_CANCEL)
    }
}

/// CONNECT and ACCEPT: success, or the error (`STATUS_TIMEOUT` is a success code that means
/// nobody answered, so it is the error here).
fn finish_connected(op: &'static str, st: &crate::raw::IoStatus) -> Result<()> {
    let status = pending::check(op, st)?;
    if status == NtStatus::TIMEOUT {
        return Err(VerbsError::new(op, status));
    }
    Ok(())
}
