//! A bounded stress run on the threaded host model: worker threads, each with its own seeded
//! random stream, open files, build objects, issue requests of every kind, cancel random ones
//! (CancelIoEx), close their files with requests outstanding and open new ones, and announce
//! peers' connection requests to listening endpoints, while a PnP thread removes the lower
//! device and brings it back with its CM. The accounting: every request issued
//! is seen completed exactly once (the I/O manager's record holds one status; a second
//! completion is a verifier violation), none is still pending at the end, and the verifier's
//! teardown check finds no request, queue, file or lower-device object alive.
//!
//! Bounded in operations (not time): `WV_STRESS_OPS` per thread (default 400).
#![allow(clippy::disallowed_methods)] // tests may allocate infallibly; the core may not (clippy.toml)

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use common::*;
use wv_abi::NtStatus;
use wv_abi::ioctl::*;
use wv_host::Io;

/// xorshift64: a small deterministic stream per thread.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

const THREADS: u64 = 4;

#[test]
fn threads_files_cancels_closes_removals_and_rearrivals() {
    let ops_per_thread: u64 = std::env::var("WV_STRESS_OPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(400);
    let fx = Arc::new(Fx::threaded());
    let guid = fx.guid();
    let issued = Arc::new(AtomicU64::new(0));
    let cancels = Arc::new(AtomicU64::new(0));
    let closes = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = (0..THREADS)
        .map(|t| {
            let (fx, issued, cancels, closes) = (
                Arc::clone(&fx),
                Arc::clone(&issued),
                Arc::clone(&cancels),
                Arc::clone(&closes),
            );
            std::thread::spawn(move || {
                let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ (t + 1));
                let mut all: Vec<Io> = Vec::new();
                let mut file = fx.open();
                let mut ids: Vec<u64> = Vec::new();
                for _ in 0..ops_per_thread {
                    match rng.below(20) {
                        // Close the last handle with whatever is outstanding; open a new one.
                        0 => {
                            drop(std::mem::replace(&mut file, fx.open()));
                            ids.clear();
                            closes.fetch_add(1, Ordering::Relaxed);
                        }
                        // CancelIoEx of a random earlier request.
                        1..=3 if !all.is_empty() => {
                            let i = rng.below(all.len());
                            file.cancel_io_ex(&all[i]);
                            cancels.fetch_add(1, Ordering::Relaxed);
                        }
                        // Objects to work on (the ids of this file, when they exist).
                        4..=6 => {
                            issue_on(
                                &file,
                                &mut all,
                                &issued,
                                WV_IOCTL_DEVICE_OPEN,
                                &id(guid, 0, 0),
                                16,
                            );
                            for code in [WV_IOCTL_PD_ALLOCATE, WV_IOCTL_CQ_CREATE] {
                                issue_on(&file, &mut all, &issued, code, &id(1, 0, 8), 16);
                            }
                            issue_on(
                                &file,
                                &mut all,
                                &issued,
                                WV_IOCTL_QP_CREATE,
                                &bytes(&qp_create_in(1, 1, 1, 0)),
                                72,
                            );
                            for _ in 0..2 {
                                let connect = u64_in(wv_abi::consts::WV_IO_EP_TYPE_CONNECT);
                                issue_on(&file, &mut all, &issued, WV_IOCTL_EP_CREATE, &connect, 8);
                            }
                            ids.push(1);
                        }
                        // A peer's connection request for a listener, when one listens.
                        7 => {
                            if let Some(&(listen, _)) = fx.cm.listeners().first() {
                                fx.cm.incoming_request(listen, incoming(b"stress"));
                            }
                        }
                        // Any of the 53 codes on a small id, with a valid shape.
                        _ => {
                            let code = Ioctl::ALL[rng.below(Ioctl::ALL.len())];
                            let (mut input, out_len) = valid_request(code, &small_ids());
                            if input.len() >= 8
                                && code != Ioctl::DeviceOpen
                                && code != Ioctl::LibraryQuery
                            {
                                let small = 1 + rng.below(3) as u64;
                                input[..8].copy_from_slice(&small.to_ne_bytes());
                            }
                            if code == Ioctl::DeviceOpen || code == Ioctl::LibraryQuery {
                                input[..8].copy_from_slice(&guid.to_ne_bytes());
                            }
                            issue_on(&file, &mut all, &issued, code.code(), &input, out_len);
                        }
                    }
                }
                drop(file);
                all
            })
        })
        .collect();
    let pnp = {
        let (fx, stop) = (Arc::clone(&fx), Arc::clone(&stop));
        std::thread::spawn(move || {
            let mut cycles = 0u64;
            while !stop.load(Ordering::SeqCst) {
                std::thread::sleep(std::time::Duration::from_millis(3));
                fx.io.remove(guid);
                std::thread::sleep(std::time::Duration::from_millis(1));
                // With its CM, so the endpoints have one after the first removal too.
                fx.io
                    .arrive_with_cm(Arc::clone(&fx.hca), Some(Arc::clone(&fx.cm)))
                    .expect("re-arrival");
                cycles += 1;
            }
            cycles
        })
    };
    let mut ios = Vec::new();
    for w in workers {
        ios.extend(w.join().unwrap());
    }
    stop.store(true, Ordering::SeqCst);
    let removals = pnp.join().unwrap();
    // Every request issued completed exactly once: each has one final status (a second
    // completion fails the verifier, checked at teardown below), none is pending.
    let mut by_status = std::collections::BTreeMap::new();
    for io in &ios {
        let st = done(io);
        assert_ne!(status(&st), NtStatus::PENDING);
        *by_status.entry(st.status).or_insert(0u64) += 1;
    }
    assert_eq!(ios.len() as u64, issued.load(Ordering::SeqCst));
    let completed: u64 = by_status.values().sum();
    assert_eq!(completed, issued.load(Ordering::SeqCst));
    fx.run();
    assert!(removals > 0, "the PnP thread never removed the device");
    let fx = Arc::try_unwrap(fx).ok().expect("fixture still shared");
    drop(fx); // unload: the verifier's teardown check
    // Operations: every request, cancel, close, removal and re-arrival.
    let ops =
        completed + cancels.load(Ordering::SeqCst) + closes.load(Ordering::SeqCst) + removals * 2;
    eprintln!(
        "stress: {} requests from {THREADS} threads, {} cancels, {} closes, {removals} \
         removals and re-arrivals; every request completed exactly once",
        completed,
        cancels.load(Ordering::SeqCst),
        closes.load(Ordering::SeqCst)
    );
    figures(
        "stress",
        &[
            ("operations", ops),
            ("requests", completed),
            ("cancels", cancels.load(Ordering::SeqCst)),
            ("closes", closes.load(Ordering::SeqCst)),
            ("removals", removals),
        ],
    );
}

/// Ids of the first objects of each type, for `valid_request` shapes.
fn small_ids() -> Full {
    Full {
        guid: 0,
        dev: 1,
        pd: 1,
        cq: 1,
        srq: 1,
        qp: 1,
        ud_qp: 2,
        lkey: 1,
        spare_dev: 2,
        spare_pd: 2,
        spare_cq: 2,
        spare_srq: 2,
        spare_qp: 2,
        spare_mw: 1,
        spare_ah: 1,
        spare_lkey: 2,
        ep: 1,
        spare_ep: 2,
    }
}

fn issue_on(
    file: &WvFile,
    all: &mut Vec<Io>,
    issued: &AtomicU64,
    code: u32,
    input: &[u8],
    out_len: usize,
) {
    let io = file.device_io_control(code, input, out_len);
    issued.fetch_add(1, Ordering::SeqCst);
    all.push(io);
}
