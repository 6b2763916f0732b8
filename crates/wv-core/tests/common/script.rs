//! Byte strings read as IOCTL sequences for the driver core: shared by the cargo-fuzz target
//! (`fuzz/fuzz_targets/ioctl_sequence.rs` includes this file) and its proptest twin
//! (`tests/fuzz.rs`), which also replays the seed corpus in `fuzz/corpus/ioctl_sequence/`.
//!
//! A script runs on the deterministic host model above a fake lower device: raw IOCTLs (codes
//! around the WinVerbs range, inputs whose leading id is small so lookups hit), lower-device
//! events and the CM's (peers' connection requests and messages) through interrupt and DPC,
//! CancelIoEx, the last handle's close and a new open (`MAX_REOPENS` times at most), device
//! removal and re-arrival (with the CM, so endpoints have one throughout), and deferred work.
//! Whatever the bytes, nothing may panic, every request must end exactly once, and nothing may
//! leak: the host verifier checks the last two when the I/O manager is dropped (driver unload).
#![allow(dead_code)]

use std::sync::Arc;

use wv_abi::consts::{WV_IO_EP_TYPE_CONNECT, WV_IO_EP_TYPE_DATAGRAM};
use wv_abi::ioctl::{
    WV_IOCTL_CQ_CREATE, WV_IOCTL_DEVICE_OPEN, WV_IOCTL_EP_CREATE, WV_IOCTL_MIN,
    WV_IOCTL_PD_ALLOCATE, WV_IOCTL_QP_CREATE, wv_ioctl,
};
use wv_abi::{WV_IO_ID, WV_IO_QP_CREATE};
use wv_core::{Driver, DriverConfig};
use wv_hal::CaEventKind;
use wv_host::fake_cm::{FakeCm, FakeCmEvent, peer_rep, peer_req};
use wv_host::fake_verbs::FakeVerbs;
use wv_host::{File, HostPlatform, Io, IoManager};
use zerocopy::IntoBytes;

type Drv = Driver<HostPlatform, Arc<FakeVerbs>>;

/// What one script did, for the figures.
#[derive(Clone, Copy, Debug, Default)]
pub struct Ran {
    pub requests: u64,
    pub cancels: u64,
    pub closes: u64,
    pub removals: u64,
}

fn id(id: u64, data: u32) -> WV_IO_ID {
    WV_IO_ID::new(id, data)
}

/// Reads the bytes as a little program.
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

/// Opens a file and creates one device, PD, CQ and QP on it (ids 1), as far as the device is
/// present, so that the script's small ids find something.
fn open_with_objects(io: &IoManager<Drv>, guid: u64) -> File<Drv> {
    let file = io.open().expect("CreateFile");
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
        let _ = file.device_io_control(code, &input, out_len).wait();
    }
    file
}

/// How many closes and reopens one script does; further close operations do nothing.
///
/// Each reopen runs the same fixture (a file and the four objects of `open_with_objects`) and
/// each close tears the file down, so a long run of them reaches no driver code the first few
/// did: it only lifts the hit counts of that fixture code into libFuzzer's higher buckets,
/// which the fuzzer rewards as new features. Uncapped, it bred inputs with up to 187 reopens
/// that spent most of the fuzzing time there. Every state a later close would tear down is
/// reachable before the cap, since each reopen starts from an empty file.
pub const MAX_REOPENS: u64 = 8;

/// A peer's message, by kind.
fn peer_event(kind: u8) -> FakeCmEvent {
    match kind % 10 {
        0 => FakeCmEvent::ReqError,
        1 => FakeCmEvent::Rep(peer_rep(b"fuzz")),
        2 => FakeCmEvent::RepError,
        3 => FakeCmEvent::Rtu(Vec::new()),
        4 => FakeCmEvent::Dreq(Vec::new()),
        5 => FakeCmEvent::DreqError,
        6 => FakeCmEvent::Drep(Vec::new()),
        7 => FakeCmEvent::Rej {
            reason: 28,
            private_data: b"fuzz".to_vec(),
        },
        8 => FakeCmEvent::Mra(20),
        _ => FakeCmEvent::Other(u32::from(kind)),
    }
}

/// Runs one script; panics (a verifier violation, or a request left incomplete) on a bug.
pub fn run(data: &[u8]) -> Ran {
    let mut ran = Ran::default();
    let platform = HostPlatform::deterministic();
    let hca = FakeVerbs::with_defaults(&platform);
    let cm = FakeCm::new(&platform);
    let guid = wv_hal::Verbs::guid(&*hca);
    let driver = Arc::new(Driver::new(platform.clone(), DriverConfig::default()));
    let io = IoManager::new(platform.clone(), driver);
    let arrive = || {
        io.arrive_with_cm(Arc::clone(&hca), Some(Arc::clone(&cm)))
            .expect("arrival")
    };
    arrive();
    let mut present = true;
    let mut file = open_with_objects(&io, guid);
    let mut issued: Vec<Io> = Vec::new();
    let mut script = Script(data);
    while let Some(op) = script.byte() {
        match op % 11 {
            // An IOCTL: a code around the WinVerbs range, an input whose leading id is small
            // (so lookups hit objects the sequence created), an output length.
            0..=4 => {
                let index = u32::from(script.byte().unwrap_or(0) % 58);
                let out_len = usize::from(script.byte().unwrap_or(0));
                let in_len = usize::from(script.byte().unwrap_or(0));
                let mut input = script.bytes(in_len).to_vec();
                let code = wv_ioctl(WV_IOCTL_MIN + index);
                if input.len() >= 8 {
                    // EP_CREATE's leading word is a type, not an id: mostly the two valid ones.
                    let lead = if code == WV_IOCTL_EP_CREATE {
                        [WV_IO_EP_TYPE_CONNECT, WV_IO_EP_TYPE_DATAGRAM, 0x0107]
                            [input[0] as usize % 3]
                    } else {
                        u64::from(input[0] % 4)
                    };
                    input[..8].copy_from_slice(&lead.to_ne_bytes());
                }
                issued.push(file.device_io_control(code, &input, out_len));
                ran.requests += 1;
            }
            // Events from the lower device and its CM, through interrupt and DPC: a peer's
            // connection request for a listening id, or a peer's message on any live id.
            5 => {
                let object = u64::from(script.byte().unwrap_or(0) % 8);
                match script.byte().unwrap_or(0) % 5 {
                    0 => {
                        hca.cq_completion(object);
                    }
                    1 => {
                        hca.cq_error(object);
                    }
                    2 => {
                        hca.port_event(1, CaEventKind::PortDown);
                    }
                    3 => {
                        let listening = cm.listeners();
                        if let Some(&(listen, service_id)) =
                            listening.get(object as usize % listening.len().max(1))
                        {
                            cm.incoming_request(listen, peer_req(service_id, &[]));
                        }
                    }
                    _ => {
                        let live = cm.live_ids();
                        if let Some(&id) = live.get(object as usize % live.len().max(1)) {
                            cm.event(id, peer_event(script.byte().unwrap_or(0)));
                        }
                    }
                }
            }
            // CancelIoEx of an earlier request (a no-op once it has ended).
            6 => {
                if !issued.is_empty() {
                    let i = usize::from(script.byte().unwrap_or(0)) % issued.len();
                    file.cancel_io_ex(&issued[i]);
                    ran.cancels += 1;
                }
            }
            // CloseHandle with requests outstanding, and a new file (up to `MAX_REOPENS` times;
            // later ones are no-ops, see there).
            7 => {
                if ran.closes < MAX_REOPENS {
                    drop(file);
                    file = open_with_objects(&io, guid);
                    ran.closes += 1;
                }
            }
            // Removal of the lower device, or its re-arrival.
            8 => {
                if present {
                    io.remove(guid);
                    ran.removals += 1;
                } else {
                    // With its CM: endpoints have one after a removal too.
                    arrive();
                }
                present = !present;
            }
            // Let work items and DPCs run.
            _ => platform.run_until_idle(),
        }
    }
    platform.run_until_idle();
    // CloseHandle: every request still parked must end.
    drop(file);
    platform.run_until_idle();
    for request in &issued {
        assert!(
            request.is_complete(),
            "a request outlived its file's cleanup"
        );
    }
    // Driver unload: the verifier's teardown check (leaks, requests, queues) runs here.
    drop(io);
    ran
}
