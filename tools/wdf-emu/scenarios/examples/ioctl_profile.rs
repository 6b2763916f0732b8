//! A profiling driver for the glue's IOCTL cost (tests/ioctl_cost.rs): the same GUID_QUERY
//! round trips, through the glue on the emulated KMDF and through the host model, each side
//! in its own non-inlined function so that callgrind can collect one side at a time
//! (`--toggle-collect='*glue_calls*'` or `'*model_calls*'`) and divide by the call count.
//!
//! Usage: ioctl_profile [CALLS]   (default 2000; both sides are warmed up first)

use wdf_emu::{EmuStack, EmuStackConfig};
use wdf_emu_scenarios::winverbs_entry;
use wv_client::raw::{RawFile, RawIo};

fn call<F: RawFile>(file: &F) {
    let status = file
        .device_io_control(wv_abi::ioctl::WV_IOCTL_GUID_QUERY, &[], 64)
        .wait();
    assert_eq!(status.status, 0, "GUID_QUERY failed");
}

#[inline(never)]
fn glue_calls<F: RawFile>(file: &F, n: usize) {
    for _ in 0..n {
        call(file);
    }
}

#[inline(never)]
fn model_calls<F: RawFile>(file: &F, n: usize) {
    for _ in 0..n {
        call(file);
    }
}

fn main() {
    let calls: usize = std::env::args()
        .nth(1)
        .map(|a| a.parse().expect("CALLS: a number"))
        .unwrap_or(2000);
    let emu = EmuStack::new(EmuStackConfig::default(), winverbs_entry()).expect("emulated stack");
    let glue = emu.open().expect("open through the glue");
    let host = wv_inproc::Stack::new(wv_inproc::StackConfig::default());
    let model = host.open().expect("open through the host model");
    // Warm-up outside the collected functions: lazily created state, the allocator's caches.
    for _ in 0..100 {
        call(&glue);
        call(&model);
    }
    glue_calls(&glue, calls);
    model_calls(&model, calls);
    println!("{calls} GUID_QUERY calls through the glue and through the host model");
    drop(glue);
    drop(model);
    emu.unload().assert_clean();
}
