//! Feeds sequences of raw IOCTLs, lower-device events, cancels and a final close to the driver
//! core on the deterministic host model. Whatever the bytes, nothing may panic, every request
//! must end exactly once, and nothing may leak: the host verifier checks all of it when the
//! I/O manager is dropped (driver unload), and a violation panics, which libFuzzer reports.
#![no_main]

use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use wv_abi::ioctl::{
    WV_IOCTL_CQ_CREATE, WV_IOCTL_DEVICE_OPEN, WV_IOCTL_MIN, WV_IOCTL_PD_ALLOCATE,
    WV_IOCTL_QP_CREATE, wv_ioctl,
};
use wv_abi::{WV_IO_ID, WV_IO_QP_CREATE};
use wv_core::{Driver, DriverConfig};
use wv_hal::CaEventKind;
use wv_host::fake_verbs::FakeVerbs;
use wv_host::{HostPlatform, IoManager};
use zerocopy::IntoBytes;

fn id(id: u64, data: u32) -> WV_IO_ID {
    WV_IO_ID {
        Id: id,
        VerbInfo: 0,
        Data: data,
    }
}

/// Reads the fuzzer's bytes as a little program.
struct Script<'a>(&'a [u8]);

impl<'a> Script<'a> {
    fn byte(&mut self) -> Option<u8> {
        let (&b, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(b)
    }
    fn bytes(&mut self, n: usize) -> &'a [u8] {
        let (taken, rest) = self.0.split_at(n.min(self.0.len()));
        self.0 = rest;
        taken
    }
}

fuzz_target!(|data: &[u8]| {
    let platform = HostPlatform::deterministic();
    let hca = FakeVerbs::with_defaults(&platform);
    let driver = Arc::new(Driver::new(platform.clone(), DriverConfig::default()));
    let io = IoManager::new(platform.clone(), driver);
    io.arrive(Arc::clone(&hca)).expect("arrival");
    let file = io.open().expect("CreateFile");
    // One of each object (id 1), so the script's small ids find something to work on.
    let guid = wv_hal::Verbs::guid(&*hca);
    for (code, input, out_len) in [
        (WV_IOCTL_DEVICE_OPEN, id(guid, 0).as_bytes().to_vec(), 16),
        (WV_IOCTL_PD_ALLOCATE, id(1, 0).as_bytes().to_vec(), 16),
        (WV_IOCTL_CQ_CREATE, id(1, 16).as_bytes().to_vec(), 16),
        (
            WV_IOCTL_QP_CREATE,
            WV_IO_QP_CREATE {
                Id: id(1, 0),
                SendCqId: 1,
                ReceiveCqId: 1,
                SendDepth: 8,
                SendSge: 1,
                ReceiveDepth: 8,
                ReceiveSge: 1,
                ..Default::default()
            }
            .as_bytes()
            .to_vec(),
            72,
        ),
    ] {
        let status = file.device_io_control(code, &input, out_len).wait().status;
        assert_eq!(status, 0, "setup IOCTL {code:#x}");
    }
    let mut script = Script(data);
    let mut parked = Vec::new();
    while let Some(op) = script.byte() {
        match op % 8 {
            // An IOCTL: a code around the WinVerbs range, an input whose leading id is small
            // (so lookups hit objects the sequence created), an output length.
            0..=4 => {
                let index = u32::from(script.byte().unwrap_or(0) % 58);
                let out_len = usize::from(script.byte().unwrap_or(0));
                let in_len = usize::from(script.byte().unwrap_or(0));
                let mut input = script.bytes(in_len).to_vec();
                if input.len() >= 8 {
                    let id = u64::from(input[0] % 4);
                    input[..8].copy_from_slice(&id.to_ne_bytes());
                }
                let request =
                    file.device_io_control(wv_ioctl(WV_IOCTL_MIN + index), &input, out_len);
                if request.pending() {
                    parked.push(request);
                }
            }
            // Events from the lower device, through its interrupt and DPC.
            5 => {
                let object = u64::from(script.byte().unwrap_or(0) % 8);
                match script.byte().unwrap_or(0) % 3 {
                    0 => {
                        hca.cq_completion(object);
                    }
                    1 => {
                        hca.cq_error(object);
                    }
                    _ => {
                        hca.port_event(1, CaEventKind::PortDown);
                    }
                }
            }
            // CancelIoEx of a parked request.
            6 => {
                if !parked.is_empty() {
                    let i = usize::from(script.byte().unwrap_or(0)) % parked.len();
                    file.cancel_io_ex(&parked[i]);
                }
            }
            // Let work items and DPCs run.
            _ => platform.run_until_idle(),
        }
    }
    platform.run_until_idle();
    // CloseHandle: every request still parked must end.
    drop(file);
    platform.run_until_idle();
    for request in &parked {
        assert!(
            request.is_complete(),
            "a request outlived its file's cleanup"
        );
    }
    // Driver unload: the verifier's teardown check (leaks, requests, queues) runs here.
    drop(io);
});
