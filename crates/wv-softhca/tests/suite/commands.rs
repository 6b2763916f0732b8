//! The command channel on the threaded host model: a command's latency elapses before its
//! caller sees the response, and one slot serialises the callers. Elapsed times are only
//! bounded below (a loaded machine makes sleeps longer, never shorter); that several slots
//! overlap their latencies is shown without a clock in `device_model.rs`.

use std::sync::Barrier;
use std::time::{Duration, Instant};

use crate::common::*;
use wv_hal::*;
use wv_host::HostPlatform;
use wv_softhca::*;

const LATENCY: Duration = Duration::from_millis(50);

/// When the first caller began and the last was answered.
fn span(calls: &[(Instant, Instant)]) -> (Instant, Instant) {
    let first = calls.iter().map(|c| c.0).min().unwrap();
    let last = calls.iter().map(|c| c.1).max().unwrap();
    (first, last)
}

/// `callers` threads each allocate a PD at the same moment on a device with `slots` command
/// slots; returns when each call began and ended.
fn concurrent_commands(slots: u32, callers: usize) -> Vec<(Instant, Instant)> {
    let p = HostPlatform::threaded(2);
    let node = Node::configured(&p, "slots", |c| {
        c.command_latency_ns = LATENCY.as_nanos() as u64;
        c.command_slots = slots;
    });
    let start = Barrier::new(callers);
    std::thread::scope(|s| {
        let calls: Vec<_> = (0..callers)
            .map(|_| {
                s.spawn(|| {
                    start.wait();
                    let t0 = Instant::now();
                    let pd = node.hca.allocate_pd(&node.ca, &mut Umv::none()).unwrap();
                    let t1 = Instant::now();
                    drop(pd);
                    (t0, t1)
                })
            })
            .collect();
        calls.into_iter().map(|c| c.join().unwrap()).collect()
    })
}

#[test]
fn a_command_answers_only_after_its_latency() {
    for (t0, t1) in concurrent_commands(DEFAULT_COMMAND_SLOTS, 1) {
        assert!(t1 - t0 >= LATENCY, "answered after {:?}", t1 - t0);
    }
}

#[test]
fn one_slot_serialises_the_callers() {
    // pvrdma's single request slot: three callers take three latencies one after the other.
    let calls = concurrent_commands(1, 3);
    let (first, last) = span(&calls);
    assert!(
        last - first >= 3 * LATENCY,
        "three commands in {:?}",
        last - first
    );
}

#[test]
fn the_default_slots_keep_eight_commands_in_flight() {
    assert_eq!(
        DeviceConfig::new("d", mac()).command_slots,
        DEFAULT_COMMAND_SLOTS
    );
    // The benchmark keeps 8 modifies in flight.
    const { assert!(DEFAULT_COMMAND_SLOTS >= 8) };
}
