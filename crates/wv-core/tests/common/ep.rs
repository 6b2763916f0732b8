//! Endpoint steps on the host model's fixture (the input bytes are in `input.rs`).

use wv_abi::consts::WV_IO_EP_TYPE_CONNECT;
use wv_abi::ioctl::*;
use wv_abi::{NtStatus, WV_IO_SOCKADDR_DATA};
use wv_host::fake_cm::FakeCmOp;
use wv_host::{Io, IoStatus};

use super::*;

pub fn ep_create(f: &WvFile) -> u64 {
    let st = ioctl(f, WV_IOCTL_EP_CREATE, &u64_in(WV_IO_EP_TYPE_CONNECT), 8);
    expect(&st, NtStatus::SUCCESS);
    assert_eq!(st.information, 8);
    out::<u64>(&st)
}

pub fn bind(fx: &Fx, f: &WvFile, ep: u64, addr: WV_IO_SOCKADDR_DATA) {
    let st = ioctl(f, WV_IOCTL_EP_BIND, &bind_in(ep, addr, fx.guid()), 56);
    expect(&st, NtStatus::SUCCESS);
    assert_eq!(st.information, 56);
}

/// An endpoint IOCTL as the tests send it: its code, input bytes and output room. Built by
/// the functions below (one per IOCTL, with the room the user library gives it), then sent
/// inline, pending, or either way.
pub struct EpIoctl {
    code: u32,
    input: Vec<u8>,
    out_len: usize,
}

impl EpIoctl {
    /// The same IOCTL with `out_len` bytes of output room.
    pub fn room(self, out_len: usize) -> EpIoctl {
        EpIoctl { out_len, ..self }
    }

    /// Sent; it must complete inline.
    #[track_caller]
    pub fn inline(&self, f: &WvFile) -> IoStatus {
        ioctl(f, self.code, &self.input, self.out_len)
    }

    /// Sent; it must complete inline with `want`.
    #[track_caller]
    pub fn completes(&self, f: &WvFile, want: NtStatus) -> IoStatus {
        expect_ioctl(f, self.code, &self.input, self.out_len, want)
    }

    /// Sent; it must pend.
    #[track_caller]
    pub fn pend(&self, f: &WvFile) -> Io {
        pend(f, self.code, &self.input, self.out_len)
    }

    /// Sent, whether it pends or not.
    pub fn issue(&self, f: &WvFile) -> Io {
        f.device_io_control(self.code, &self.input, self.out_len)
    }
}

fn ep_ioctl(code: u32, input: Vec<u8>, out_len: usize) -> EpIoctl {
    EpIoctl {
        code,
        input,
        out_len,
    }
}

/// EP_CONNECT of `ep` with `qp`.
pub fn ep_connect(ep: u64, qp: u64, pdata: &[u8]) -> EpIoctl {
    ep_ioctl(WV_IOCTL_EP_CONNECT, connect_in(ep, qp, pdata), 0)
}

/// EP_ACCEPT of `ep` with `qp`: room for the QP-state bytes.
pub fn ep_accept(ep: u64, qp: u64, pdata: &[u8]) -> EpIoctl {
    ep_ioctl(WV_IOCTL_EP_ACCEPT, accept_in(ep, qp, pdata), 8)
}

/// EP_DISCONNECT of `ep` (with `qp`, 0 for the endpoint's): room for the QP-state bytes.
pub fn ep_disconnect(ep: u64, qp: u64) -> EpIoctl {
    ep_ioctl(WV_IOCTL_EP_DISCONNECT, disconnect_in(ep, qp), 8)
}

/// EP_DISCONNECT_NOTIFY of `ep`.
pub fn ep_disconnect_notify(ep: u64) -> EpIoctl {
    ep_ioctl(WV_IOCTL_EP_DISCONNECT_NOTIFY, u64_in(ep), 0)
}

/// EP_LISTEN of `ep` with `backlog`.
pub fn ep_listen(ep: u64, backlog: u64) -> EpIoctl {
    ep_ioctl(WV_IOCTL_EP_LISTEN, listen_in(ep, backlog), 16)
}

/// EP_MODIFY of `ep` that sets its route.
pub fn ep_route(ep: u64) -> EpIoctl {
    ep_ioctl(WV_IOCTL_EP_MODIFY, route_in(ep), 0)
}

/// EP_GET_REQUEST of `listener` for `ep`.
pub fn ep_get_request(listener: u64, ep: u64) -> EpIoctl {
    ep_ioctl(WV_IOCTL_EP_GET_REQUEST, get_request_in(listener, ep), 0)
}

/// A new endpoint bound to LOCAL:`port`.
pub fn bound(fx: &Fx, f: &WvFile, port: u16) -> u64 {
    let ep = ep_create(f);
    bind(fx, f, ep, ipv4(LOCAL, port));
    ep
}

/// An endpoint with its route (bound to LOCAL:7000), ready to connect.
pub fn routed(fx: &Fx, f: &WvFile) -> u64 {
    let ep = bound(fx, f, 7000);
    ep_route(ep).completes(f, NtStatus::SUCCESS);
    ep
}

/// A listener bound to LOCAL:`port`, listening with `backlog`: returns it and the listen's CM
/// id.
pub fn listener_on(fx: &Fx, f: &WvFile, port: u16, backlog: u64) -> (u64, u64) {
    let listener = bound(fx, f, port);
    ep_listen(listener, backlog).completes(f, NtStatus::SUCCESS);
    let lid = fx.cm.last_id(FakeCmOp::Listen).expect("a listen");
    (listener, lid)
}
