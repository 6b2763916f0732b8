//! What a device model needs beyond [`Platform`]: raising its interrupt, queueing its DPC, and
//! timers that queue a DPC when the platform's clock reaches a due time.
//!
//! The driver core never uses this. On Windows a real controller driver owns its
//! `WDFINTERRUPT` (the framework calls its `EvtInterruptIsr` at DIRQL) and its `KDPC`; the
//! filter above it only sees the callbacks that DPC makes. The soft HCA and the host model's
//! scriptable lower device are device models: they raise interrupts through
//! [`DeviceModelPlatform`], which the host model implements. A future root-enumerated Windows
//! soft-HCA driver would implement it with a `KDPC` and a direct call of its ISR.
//!
//! DPC objects cross this contract as [`KArc`]s: a device model makes some of them on a
//! request path (the soft HCA's per-QP transport timer, created with the QP), where an
//! allocation must be able to fail, as the `KTIMER` and `KDPC` embedded in a driver's
//! nonpaged QP object come with that object's one fallible allocation.

use crate::KArc;

#[cfg(loom)]
use loom::sync::atomic::{AtomicBool, Ordering};

#[cfg(not(loom))]
use core::sync::atomic::{AtomicBool, Ordering};

use crate::Platform;

/// A DPC object's "inserted" state (`KDPC.Inserted`): set by the platform when it queues the
/// DPC, cleared when the DPC starts, so "already queued?" is one atomic operation on the object
/// instead of a lookup in a table the platform shares between processors.
///
/// Both operations are swaps with acquire and release: a caller that finds the DPC already
/// queued ([`DpcInserted::insert`] returns `false`) relies on the pending run to see what it
/// wrote before (the event it wants the DPC to handle). That run starts with
/// [`DpcInserted::started`], whose swap reads the caller's value, so the caller's writes happen
/// before the run. `wv-host`'s `tests/loom.rs` checks this with loom (`--cfg loom`, under which
/// the flag is loom's), and shows it failing with either swap relaxed.
#[derive(Debug, Default)]
pub struct DpcInserted(AtomicBool);

impl DpcInserted {
    /// Not queued.
    pub fn new() -> Self {
        DpcInserted(AtomicBool::new(false))
    }

    /// `KeInsertQueueDpc`'s test-and-set: returns `true` when this call queued the DPC, `false`
    /// when it was queued already and has not started (that run then serves this call too).
    pub fn insert(&self) -> bool {
        !self.0.swap(true, Ordering::AcqRel)
    }

    /// The DPC starts running: from here on it may be queued again. Call before running it.
    pub fn started(&self) {
        self.0.swap(false, Ordering::AcqRel);
    }
}

/// Work run at DISPATCH_LEVEL soon after an interrupt.
pub trait Dpc: Send + Sync {
    /// Runs the deferred procedure. Called at DISPATCH_LEVEL.
    fn run(&self);

    /// The DPC object's own "inserted" flag, if it carries one, as a `KDPC` does (see
    /// [`DpcInserted`]). `None` (the default) leaves that bookkeeping to the platform. Only the
    /// platform touches it.
    fn inserted_flag(&self) -> Option<&DpcInserted> {
        None
    }
}

/// An interrupt service routine of a (soft) device.
pub trait InterruptService: Send + Sync {
    /// Services the interrupt at device IRQL; returns whether the device had raised it.
    /// It may only read and acknowledge device state and queue a DPC.
    fn service(&self) -> bool;
}

/// The interrupt plumbing of a device model: an interrupt line, DPCs and timers.
pub trait DeviceModelPlatform: Platform {
    /// Queues `dpc` to run at DISPATCH_LEVEL. Returns `false` if that DPC object was already
    /// queued and has not started yet (it then runs once for both requests). Any IRQL, DIRQL
    /// included. Windows counterpart: `KeInsertQueueDpc` (or `WdfDpcEnqueue`) of the device
    /// driver's own DPC object.
    fn queue_dpc(&self, dpc: &KArc<dyn Dpc>) -> bool;

    /// Delivers an interrupt: runs `isr` at device IRQL on the current processor, as the
    /// interrupt controller would when the device raises its line. Windows counterpart: none
    /// in software — the hardware does this and the framework calls `EvtInterruptIsr`.
    fn interrupt(&self, isr: &dyn InterruptService) -> bool;

    /// Sets a one-shot timer: once [`Platform::now_ns`] reaches `due_ns`, `timer` is queued as
    /// a DPC (as by [`DeviceModelPlatform::queue_dpc`], so it runs at DISPATCH_LEVEL). The DPC
    /// object names the timer: setting it again while it is pending replaces the due time (only
    /// the last one counts); a due time already passed queues the DPC at once. IRQL <=
    /// DISPATCH_LEVEL.
    ///
    /// A timer never fires early, but may fire late (the DPC queue, a busy processor). In the
    /// host model's deterministic mode the clock is injected, so a timer fires exactly when a
    /// test moves the clock past its due time.
    ///
    /// Windows counterpart: a `KTIMER` and a `KDPC` the device driver keeps beside each timer
    /// object (`KeInitializeTimerEx(SynchronizationTimer)`, `KeInitializeDpc`), set with
    /// `KeSetTimer(&timer, due, &dpc)`, where `due` is the relative interval
    /// `-((due_ns - now_ns).div_ceil(100))` in 100 ns units (negative means relative, and
    /// rounding up keeps it from firing early); `KeSetTimer` on a set timer cancels it first,
    /// as here.
    fn set_timer(&self, timer: &KArc<dyn Dpc>, due_ns: u64);

    /// Cancels a pending timer; returns whether it was set. A DPC the timer already queued is
    /// not removed (it runs; the device model decides, by its own clock reading, that there is
    /// nothing to do). IRQL <= DISPATCH_LEVEL.
    ///
    /// Windows counterpart: `KeCancelTimer(&timer)` (and, for the queued DPC,
    /// `KeRemoveQueueDpc`, which the device model does not need).
    fn cancel_timer(&self, timer: &KArc<dyn Dpc>) -> bool;

    /// Blocks the calling thread for `ns` nanoseconds of the platform's clock: how a device
    /// model makes its caller wait for a device that takes time to answer (a firmware command
    /// round trip). Other threads run meanwhile, so the waits of several callers overlap as
    /// commands in flight on a real controller do.
    ///
    /// Windows counterpart: `KeDelayExecutionThread` at PASSIVE_LEVEL (a real driver sleeps on
    /// its command-completion event), `KeStallExecutionProcessor` at DISPATCH_LEVEL.
    fn delay(&self, ns: u64);
}
