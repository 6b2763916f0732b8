//! IP addressing on a fabric: addresses on ports, their GIDs, path resolution and the port
//! space.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::common::*;
use wv_abi::IB_PATH_REC;
use wv_hal::Verbs;
use wv_softhca::address::{EPHEMERAL_FIRST, address_gid};
use wv_softhca::*;

fn v4(a: u8, b: u8, c: u8, d: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(a, b, c, d))
}

/// [`deterministic_pair`] with an IPv4 address on port 1 of each device: 10.0.0.1 on the first,
/// 10.0.1.1 on the second.
fn addressed_pair() -> (
    wv_host::HostPlatform,
    std::sync::Arc<Fabric>,
    Node,
    Node,
    IpAddr,
    IpAddr,
) {
    let (p, f, a, b) = deterministic_pair();
    let (ia, ib) = (v4(10, 0, 0, 1), v4(10, 0, 1, 1));
    f.assign_address(&a.hca, 1, ia).unwrap();
    f.assign_address(&b.hca, 1, ib).unwrap();
    (p, f, a, b, ia, ib)
}

#[test]
fn an_address_is_a_gid_on_its_port_and_resolves_to_a_path() {
    let (p, f, a, b, ia, ib) = addressed_pair();
    let i6 = IpAddr::V6(Ipv6Addr::new(0xfd57, 0x5600, 0, 0, 0, 0, 1, 1));
    f.assign_address(&b.hca, 1, i6).unwrap();
    assert_eq!(f.assign_address(&a.hca, 1, ib), Err(AddressError::Assigned));
    assert_eq!(
        f.assign_address(&a.hca, 3, v4(10, 9, 9, 9)),
        Err(AddressError::NoGid)
    );
    // The GIDs are in the ports' tables.
    let gids: Vec<_> = (0..4).map(|i| b.hca.query_gid(1, i).unwrap()).collect();
    assert!(gids.contains(&address_gid(ib)));
    assert!(gids.contains(&address_gid(i6)));
    assert_eq!(&address_gid(ib)[10..], &[0xFF, 0xFF, 10, 0, 1, 1]);

    let at = f.locate(ib).unwrap();
    assert_eq!(
        (at.device_guid, at.port, at.pkey),
        (b.hca.guid(), 1, 0xFFFF)
    );
    assert_eq!((at.gid, at.lid), (address_gid(ib), b.hca.lid(1)));
    assert_eq!(f.locate(v4(10, 0, 2, 1)), None);

    let path: IB_PATH_REC = f.resolve_path(ia, ib).unwrap();
    assert_eq!((path.sgid, path.dgid), (address_gid(ia), address_gid(ib)));
    assert_eq!(u16::from_be(path.slid), a.hca.lid(1));
    assert_eq!(u16::from_be(path.dlid), b.hca.lid(1));
    assert_eq!(u16::from_be(path.pkey), 0xFFFF);
    assert_eq!(path.mtu & 0x3F, 5, "4096, the ports' MTU");
    // No source: the first address of the family; loopback: the source itself.
    let path = f.resolve_path(v4(0, 0, 0, 0), ib).unwrap();
    assert_eq!(path.sgid, address_gid(ia));
    let path = f.resolve_path(ib, v4(127, 0, 0, 1)).unwrap();
    assert_eq!((path.sgid, path.dgid), (address_gid(ib), address_gid(ib)));
    let path = f
        .resolve_path(IpAddr::V6(Ipv6Addr::UNSPECIFIED), i6)
        .unwrap();
    assert_eq!(path.dgid, address_gid(i6));
    assert_eq!(
        f.resolve_path(ia, v4(10, 0, 2, 1)).err(),
        Some(AddressError::Unknown)
    );
    assert_eq!(f.addresses().len(), 3);

    // A removed device's addresses are gone.
    b.hca.surprise_remove();
    assert_eq!(f.locate(ib), None);
    assert_eq!(f.resolve_path(ia, ib).err(), Some(AddressError::Unknown));
    assert_eq!(f.addresses().len(), 1);
    settle(&p);
}

#[test]
fn the_port_space_takes_a_port_once_per_address() {
    let (p, f, _a, _b, ia, ib) = addressed_pair();
    let any = v4(0, 0, 0, 0);

    let l1 = f.reserve_port(ia, 7174).unwrap();
    assert_eq!(f.reserve_port(ia, 7174).err(), Some(AddressError::InUse));
    let l2 = f.reserve_port(ib, 7174).unwrap();
    assert_eq!(
        f.reserve_port(any, 7174).err(),
        Some(AddressError::InUse),
        "a wildcard needs the port everywhere"
    );
    let w = f.reserve_port(any, 7175).unwrap();
    assert_eq!(f.reserve_port(ia, 7175).err(), Some(AddressError::InUse));
    assert_eq!(
        f.reserve_port(v4(10, 0, 2, 1), 1).err(),
        Some(AddressError::Unknown)
    );
    drop(l1);
    let again = f.reserve_port(ia, 7174).unwrap();
    assert_eq!(again.port(), 7174);

    // Port 0 picks free ephemeral ports, each once.
    let e1 = f.reserve_port(ia, 0).unwrap();
    let e2 = f.reserve_port(ia, 0).unwrap();
    assert!(e1.port() >= EPHEMERAL_FIRST && e2.port() >= EPHEMERAL_FIRST);
    assert_ne!(e1.port(), e2.port());
    let taken = f.reserve_port(ia, e1.port());
    assert_eq!(taken.err(), Some(AddressError::InUse));
    drop((l2, w, again, e1, e2));
    settle(&p);
}

/// The path record's selector-and-value bytes (IBA 15.2.5.16 PathRecord: the top two bits
/// select, 2 meaning "exactly"; the low six are the value).
fn exactly(field: u8) -> Option<u8> {
    (field >> 6 == 2).then_some(field & 0x3F)
}

#[test]
fn a_resolved_path_is_one_reversible_path_within_the_subnet() {
    let (p, f, _a, _b, ia, ib) = addressed_pair();
    let path = f.resolve_path(ia, ib).unwrap();
    // HopLimit (the low byte) 1: a packet of the path never leaves the subnet; no flow label
    // and not raw.
    assert_eq!(u32::from_be(path.hop_flow_raw), 1);
    // Reversible (bit 7), as the CM needs a REQ's path to be, and NumbPath 1.
    assert_eq!(path.num_path, 0x81);
    // MTU, rate and packet lifetime are each given "exactly".
    assert_eq!(exactly(path.mtu), Some(5), "4096, the ports' MTU");
    let rate = exactly(path.rate).expect("a rate selected exactly");
    assert!(
        rate >= 2,
        "rate {rate} is no IBA rate (2 is 2.5 Gb/s, the lowest)"
    );
    assert_eq!(
        exactly(path.pkt_life),
        Some(wv_softhca::address::PATH_PACKET_LIFE)
    );
    settle(&p);
}

#[test]
fn ephemeral_ports_go_round_the_whole_dynamic_range() {
    let (p, f, a, _b) = deterministic_pair();
    let ia = v4(10, 0, 0, 1);
    f.assign_address(&a.hca, 1, ia).unwrap();
    // Each port 0 takes the next port of IANA's dynamic range (49152–65535), the first one
    // first, so a port given back is not handed out again before all the others were; after
    // the last one the search wraps to the first.
    let span = usize::from(u16::MAX - EPHEMERAL_FIRST) + 1;
    let picked: Vec<u16> = (0..=span)
        .map(|_| f.reserve_port(ia, 0).unwrap().port())
        .collect();
    let want: Vec<u16> = (EPHEMERAL_FIRST..=u16::MAX)
        .chain([EPHEMERAL_FIRST])
        .collect();
    assert_eq!(picked, want);
    // A taken port is stepped over, forwards.
    let held = f.reserve_port(ia, EPHEMERAL_FIRST + 1).unwrap();
    assert_eq!(f.reserve_port(ia, 0).unwrap().port(), EPHEMERAL_FIRST + 2);
    drop(held);
    settle(&p);
}
