//! Endpoint steps on the host model's fixture (the input bytes are in `input.rs`).

use wv_abi::consts::WV_IO_EP_TYPE_CONNECT;
use wv_abi::ioctl::*;
use wv_abi::{NtStatus, WV_IO_SOCKADDR_DATA};

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
