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

#[test]
fn an_address_is_a_gid_on_its_port_and_resolves_to_a_path() {
    let (p, f, a, b) = deterministic_pair();
    let (ia, ib) = (v4(10, 0, 0, 1), v4(10, 0, 1, 1));
    let i6 = IpAddr::V6(Ipv6Addr::new(0xfd57, 0x5600, 0, 0, 0, 0, 1, 1));
    f.assign_address(&a.hca, 1, ia).unwrap();
    f.assign_address(&b.hca, 1, ib).unwrap();
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
    let (p, f, a, b) = deterministic_pair();
    let (ia, ib) = (v4(10, 0, 0, 1), v4(10, 0, 1, 1));
    f.assign_address(&a.hca, 1, ia).unwrap();
    f.assign_address(&b.hca, 1, ib).unwrap();
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
