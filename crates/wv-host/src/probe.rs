//! Time stamps along the event path (interrupt → ISR → DPC → driver → completion → wake), for
//! the benchmark that breaks an event's latency down. Off unless a benchmark turns it on; then
//! each hook costs a clock read.
//!
//! The first three stamps are taken on the thread that raises the interrupt (the ISR and, in
//! threaded mode, the DPC run there); the request completion copies them into the IRP it
//! completes, and the thread woken by that completion adds its own stamp and records the whole
//! trace. Completions outside a DPC (inline, cancel) are not traced.

use std::cell::Cell;
use std::sync::OnceLock;
use std::time::Instant;

use crate::sync::{AtomicBool, AtomicU64, Mutex, Ordering};

static ENABLED: AtomicBool = AtomicBool::new(false);
static TRACES: Mutex<Vec<NotifyTrace>> = Mutex::new(Vec::new());

thread_local! {
    /// Interrupt, DPC queued, DPC started: the chain running on this thread (0 = none).
    static CHAIN: Cell<[u64; 3]> = const { Cell::new([0; 3]) };
}

/// One event from the interrupt to the woken waiter, in nanoseconds on one clock.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NotifyTrace {
    /// The device raised the interrupt (the ISR is about to run).
    pub interrupt: u64,
    /// The ISR queued its DPC.
    pub dpc_queued: u64,
    /// The DPC started (DISPATCH_LEVEL).
    pub dpc_started: u64,
    /// The driver completed the parked request (`IoCompleteRequest` entered).
    pub completed: u64,
    /// The completion had set the status and woken the waiter.
    pub wake_issued: u64,
    /// The waiting thread ran again.
    pub woken: u64,
}

/// Turns tracing on or off and forgets the traces recorded so far.
pub fn enable(on: bool) {
    TRACES.lock().clear();
    ENABLED.store(on, Ordering::Release);
}

/// The traces recorded since [`enable`].
pub fn take() -> Vec<NotifyTrace> {
    std::mem::take(&mut *TRACES.lock())
}

pub(crate) fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// Nanoseconds on the probe's clock (never 0).
pub(crate) fn now() -> u64 {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    ORIGIN.get_or_init(Instant::now).elapsed().as_nanos() as u64 + 1
}

/// Stamps stage `i` (0 interrupt, 1 DPC queued, 2 DPC started) of this thread's chain; the
/// interrupt starts a new chain.
pub(crate) fn stamp(i: usize) {
    if !enabled() {
        return;
    }
    let t = now();
    CHAIN.with(|c| {
        let mut v = if i == 0 { [0; 3] } else { c.get() };
        v[i] = t;
        c.set(v);
    });
}

/// The DPC that ran on this thread is over.
pub(crate) fn end_chain() {
    if enabled() {
        CHAIN.with(|c| c.set([0; 3]));
    }
}

/// The completing thread's chain, if it is a whole one (a completion from a DPC).
pub(crate) fn chain() -> Option<[u64; 3]> {
    let v = CHAIN.with(Cell::get);
    (v[0] != 0 && v[1] != 0 && v[2] != 0).then_some(v)
}

/// An IRP's copy of the chain that completed it.
#[derive(Default)]
pub(crate) struct IrpTrace([AtomicU64; 5]);

impl IrpTrace {
    /// At completion: the chain and the completion's own stamp.
    pub(crate) fn completing(&self) {
        if !enabled() {
            return;
        }
        if let Some(c) = chain() {
            for (slot, v) in self.0.iter().zip(c) {
                slot.store(v, Ordering::Relaxed);
            }
            self.0[3].store(now(), Ordering::Relaxed);
        }
    }

    /// After the waiter was woken.
    pub(crate) fn wake_issued(&self) {
        if enabled() && self.0[3].load(Ordering::Relaxed) != 0 {
            self.0[4].store(now(), Ordering::Relaxed);
        }
    }

    /// In the woken thread: records the trace if it is whole.
    pub(crate) fn woken(&self) {
        if !enabled() {
            return;
        }
        let woken = now();
        let v: Vec<u64> = self.0.iter().map(|a| a.load(Ordering::Relaxed)).collect();
        if v.iter().all(|&t| t != 0) {
            TRACES.lock().push(NotifyTrace {
                interrupt: v[0],
                dpc_queued: v[1],
                dpc_started: v[2],
                completed: v[3],
                wake_issued: v[4],
                woken,
            });
        }
    }
}
