//! The input bytes of the IOCTLs the tests send, and the connection request a peer sends.
//! Nothing here needs a platform, so the loom models (`tests/loom.rs`, which cannot build the
//! host model's fixture) include this file too and send the same bytes.

use wv_abi::consts::WV_IO_EP_OPTION_ROUTE;
use wv_abi::{
    IB_PATH_REC, WV_IO_CONNECT_PARAM, WV_IO_DEVICE_ADDRESS, WV_IO_EP_ACCEPT, WV_IO_EP_BIND,
    WV_IO_EP_CONNECT, WV_IO_EP_DISCONNECT, WV_IO_EP_GET_REQUEST, WV_IO_EP_LISTEN, WV_IO_ID,
    WV_IO_QP_CREATE, WV_IO_SOCKADDR_DATA,
};
use wv_host::fake_cm::{peer_path, peer_req};
use zerocopy::{Immutable, IntoBytes};

pub fn bytes<T: IntoBytes + Immutable>(value: &T) -> Vec<u8> {
    value.as_bytes().to_vec()
}

pub fn id(id: u64, verb_info: u32, data: u32) -> Vec<u8> {
    bytes(&WV_IO_ID {
        Id: id,
        VerbInfo: verb_info,
        Data: data,
    })
}

pub fn qp_create_in(pd: u64, scq: u64, rcq: u64, srq: u64) -> WV_IO_QP_CREATE {
    WV_IO_QP_CREATE {
        Id: WV_IO_ID::new(pd, 0),
        SendCqId: scq,
        ReceiveCqId: rcq,
        SrqId: srq,
        SendDepth: 16,
        SendSge: 1,
        ReceiveDepth: 16,
        ReceiveSge: 1,
        MaxInlineSend: 0,
        InitiatorDepth: 1,
        ResponderResources: 1,
        QpType: 0,
        QpFlags: 1,
        Reserved: 0,
    }
}

pub fn u64_in(value: u64) -> Vec<u8> {
    value.to_ne_bytes().to_vec()
}

/// This side's address and the peer's.
pub const LOCAL: [u8; 4] = [10, 0, 0, 1];
pub const PEER: [u8; 4] = [10, 0, 0, 2];

pub fn ipv4(addr: [u8; 4], port: u16) -> WV_IO_SOCKADDR_DATA {
    let mut a = WV_IO_SOCKADDR_DATA::default();
    let mut sin = a.sin();
    sin.SinFamily = 2;
    sin.SinPort = port.to_be();
    sin.SinAddr = u32::from_ne_bytes(addr);
    a.set_sin(&sin);
    a
}

pub fn bind_in(ep: u64, addr: WV_IO_SOCKADDR_DATA, guid: u64) -> Vec<u8> {
    bytes(&WV_IO_EP_BIND {
        Id: ep,
        Address: addr,
        Device: WV_IO_DEVICE_ADDRESS {
            DeviceGuid: guid,
            Pkey: 0xFFFF,
            PortNumber: 1,
            Reserved: [0; 5],
        },
    })
}

pub fn path() -> IB_PATH_REC {
    IB_PATH_REC {
        dgid: [0xD; 16],
        sgid: [0x5; 16],
        ..peer_path()
    }
}

pub fn route_in(ep: u64) -> Vec<u8> {
    let mut input = id(ep, 0, WV_IO_EP_OPTION_ROUTE);
    input.extend_from_slice(&bytes(&path()));
    input
}

pub fn param(pdata: &[u8]) -> WV_IO_CONNECT_PARAM {
    let mut p = WV_IO_CONNECT_PARAM {
        ResponderResources: 3,
        InitiatorDepth: 2,
        RetryCount: 6,
        RnrRetryCount: 5,
        DataLength: pdata.len() as u8,
        ..WV_IO_CONNECT_PARAM::default()
    };
    p.Data[..pdata.len()].copy_from_slice(pdata);
    p
}

pub fn connect_in(ep: u64, qp: u64, pdata: &[u8]) -> Vec<u8> {
    bytes(&WV_IO_EP_CONNECT {
        Id: ep,
        QpId: qp,
        PeerAddress: ipv4(PEER, 5000),
        Param: param(pdata),
    })
}

pub fn accept_in(ep: u64, qp: u64, pdata: &[u8]) -> Vec<u8> {
    bytes(&WV_IO_EP_ACCEPT {
        Id: ep,
        QpId: qp,
        Param: param(pdata),
    })
}

pub fn disconnect_in(ep: u64, qp: u64) -> Vec<u8> {
    bytes(&WV_IO_EP_DISCONNECT { Id: ep, QpId: qp })
}

pub fn listen_in(ep: u64, backlog: u64) -> Vec<u8> {
    bytes(&WV_IO_EP_LISTEN {
        Id: ep,
        Backlog: backlog,
    })
}

pub fn get_request_in(listener: u64, ep: u64) -> Vec<u8> {
    bytes(&WV_IO_EP_GET_REQUEST {
        Id: listener,
        EpId: ep,
    })
}

/// The REQ a peer at PEER:6000 sends to LOCAL:7001 with `user` private data.
pub fn incoming(user: &[u8]) -> wv_hal::CmReqEvent {
    let mut pdata = vec![0x00, 0x40, 0x17, 0x70];
    pdata.extend_from_slice(&[0; 12]);
    pdata.extend_from_slice(&PEER);
    pdata.extend_from_slice(&[0; 12]);
    pdata.extend_from_slice(&LOCAL);
    pdata.extend_from_slice(user);
    peer_req(0x0106_1B59, &pdata)
}
