//! The IP-over-IB connection conventions WinVerbs shares with Linux's rdma_cm (spec §3.8):
//! the 36-byte IP-CM header at the start of a REQ's private data, the service id a port maps
//! to, and which bound addresses listen on every address.

use wv_abi::WV_IO_SOCKADDR_DATA;

/// `IB_CMA_HEADER`: `CmaVersion`, `IpVersion` (7:4), `Port`, source and destination address
/// (an IPv4 address in the last 4 of the 16 bytes).
pub(crate) const HEADER_LEN: usize = 36;
/// `IB_CMA_VERSION`.
const CMA_VERSION: u8 = 0x00;
/// `IB_REQ_CM_RDMA_IPV4` / `IB_REQ_CM_RDMA_IPV6` (the IP version in the high nibble).
const IPV4: u8 = 0x40;
const IPV6: u8 = 0x60;
/// `IB_REQ_CM_RDMA_CMP_DST_IP`: what a listen bound to one address compares.
pub(crate) const CMP_DST_IP: u8 = 0x04;
/// `IB_CMA_CM_RESPONSE_TIMEOUT` (4.096 µs × 2^20 ≈ 4.3 s) and `IB_CMA_MAX_CM_RETRIES`.
pub(crate) const CM_RESPONSE_TIMEOUT: u8 = 20;
pub(crate) const MAX_CM_RETRIES: u8 = 15;

/// `WV_AF_INET` (Winsock's `AF_INET`); anything else is read as IPv6, as OFW does.
pub(crate) const AF_INET: u16 = 2;
/// `WV_AF_INET6` (Winsock's `AF_INET6`).
pub(crate) const AF_INET6: u16 = 23;

/// The family of a socket address (`SaFamily`, host order).
pub(crate) fn family(a: &WV_IO_SOCKADDR_DATA) -> u16 {
    a.sa().SaFamily
}

/// The port of a socket address (the same offset for both families), NET16 as stored.
pub(crate) fn port(a: &WV_IO_SOCKADDR_DATA) -> u16 {
    a.sin().SinPort
}

/// The 16 address bytes the header carries: an IPv4 address right-aligned behind zeros.
fn address_bytes(a: &WV_IO_SOCKADDR_DATA) -> [u8; 16] {
    let mut out = [0u8; 16];
    if family(a) == AF_INET {
        out[12..].copy_from_slice(&a.sin().SinAddr.to_ne_bytes());
    } else {
        out = a.sin6().Sin6Addr;
    }
    out
}

/// OFW's `WvFormatCmaHeader`: version, the local address's family and port, `local` as the
/// source and `peer` as the destination.
pub(crate) fn header(local: &WV_IO_SOCKADDR_DATA, peer: &WV_IO_SOCKADDR_DATA) -> [u8; HEADER_LEN] {
    let mut h = [0u8; HEADER_LEN];
    h[0] = CMA_VERSION;
    h[1] = if family(local) == AF_INET { IPV4 } else { IPV6 };
    h[2..4].copy_from_slice(&port(local).to_ne_bytes());
    h[4..20].copy_from_slice(&address_bytes(local));
    h[20..36].copy_from_slice(&address_bytes(peer));
    h
}

/// The addresses a received header names, from the receiving side: `(local, peer)`, the
/// peer's port from the header (OFW's `WvEpGetIbRequest`).
pub(crate) fn addresses(pdata: &[u8]) -> (WV_IO_SOCKADDR_DATA, WV_IO_SOCKADDR_DATA) {
    let mut h = [0u8; HEADER_LEN];
    let n = pdata.len().min(HEADER_LEN);
    h[..n].copy_from_slice(&pdata[..n]);
    let port = u16::from_ne_bytes([h[2], h[3]]);
    let (mut local, mut peer) = (
        WV_IO_SOCKADDR_DATA::default(),
        WV_IO_SOCKADDR_DATA::default(),
    );
    if h[1] >> 4 == 4 {
        let mut sin = local.sin();
        sin.SinFamily = AF_INET;
        sin.SinAddr = u32::from_ne_bytes([h[32], h[33], h[34], h[35]]);
        local.set_sin(&sin);
        let mut sin = peer.sin();
        sin.SinFamily = AF_INET;
        sin.SinAddr = u32::from_ne_bytes([h[16], h[17], h[18], h[19]]);
        sin.SinPort = port;
        peer.set_sin(&sin);
    } else {
        let mut sin6 = local.sin6();
        sin6.Sin6Family = AF_INET6;
        sin6.Sin6Addr.copy_from_slice(&h[20..36]);
        local.set_sin6(&sin6);
        let mut sin6 = peer.sin6();
        sin6.Sin6Family = AF_INET6;
        sin6.Sin6Addr.copy_from_slice(&h[4..20]);
        sin6.Sin6Port = port;
        peer.set_sin6(&sin6);
    }
    (local, peer)
}

/// OFW's `WvGetServiceId`, in host order: the endpoint type (the rdma_cm port space) above
/// the port.
pub(crate) fn service_id(ep_type: u16, address: &WV_IO_SOCKADDR_DATA) -> u64 {
    (u64::from(ep_type) << 16) + u64::from(u16::from_be(port(address)))
}

/// OFW's `WvAnyAddress`: 0.0.0.0, any 127.x.x.x, or `::` listens on every address.
pub(crate) fn any_address(a: &WV_IO_SOCKADDR_DATA) -> bool {
    if family(a) == AF_INET {
        let addr = a.sin().SinAddr.to_ne_bytes();
        addr == [0; 4] || addr[0] == 0x7f
    } else {
        a.sin6().Sin6Addr == [0; 16]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ipv4(addr: [u8; 4], port: u16) -> WV_IO_SOCKADDR_DATA {
        let mut a = WV_IO_SOCKADDR_DATA::default();
        let mut sin = a.sin();
        sin.SinFamily = AF_INET;
        sin.SinPort = port.to_be();
        sin.SinAddr = u32::from_ne_bytes(addr);
        a.set_sin(&sin);
        a
    }

    #[test]
    fn the_header_round_trips_from_the_other_side() {
        let local = ipv4([10, 0, 0, 1], 7174);
        let peer = ipv4([10, 0, 0, 2], 5000);
        let h = header(&local, &peer);
        assert_eq!(&h[..4], &[0x00, 0x40, 0x1C, 0x06]);
        assert_eq!(&h[16..20], &[10, 0, 0, 1]);
        assert_eq!(&h[32..36], &[10, 0, 0, 2]);
        // The receiver sees itself as the destination and the sender's port.
        let (l, p) = addresses(&h);
        assert_eq!(l.sin().SinAddr, peer.sin().SinAddr);
        assert_eq!(p.sin().SinAddr, local.sin().SinAddr);
        assert_eq!(p.sin().SinPort, 7174u16.to_be());
        assert_eq!(service_id(0x0106, &peer), 0x0106_1388);
    }

    #[test]
    fn any_addresses() {
        assert!(any_address(&ipv4([0, 0, 0, 0], 1)));
        assert!(any_address(&ipv4([127, 0, 0, 1], 1)));
        assert!(!any_address(&ipv4([10, 0, 0, 1], 1)));
        let mut v6 = WV_IO_SOCKADDR_DATA::default();
        let mut sin6 = v6.sin6();
        sin6.Sin6Family = AF_INET6;
        v6.set_sin6(&sin6);
        assert!(any_address(&v6));
        sin6.Sin6Addr[15] = 1;
        v6.set_sin6(&sin6);
        assert!(!any_address(&v6));
        let (l, p) = addresses(&header(&v6, &v6));
        assert_eq!(l.sa().SaFamily, AF_INET6);
        assert_eq!(p.sin6().Sin6Addr[15], 1);
    }
}
