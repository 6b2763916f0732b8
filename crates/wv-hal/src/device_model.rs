//! What a device model needs beyond [`Platform`]: raising its interrupt and queueing its DPC.
//!
//! The driver core never uses this. On Windows a real controller driver owns its
//! `WDFINTERRUPT` (the framework calls its `EvtInterruptIsr` at DIRQL) and its `KDPC`; the
//! filter above it only sees the callbacks that DPC makes. The soft HCA and the host model's
//! scriptable lower device are device models: they raise interrupts through
//! [`DeviceModelPlatform`], which the host model implements. A future root-enumerated Windows
//! soft-HCA driver would implement it with a `KDPC` and a direct call of its ISR.

use alloc::sync::Arc;

use crate::Platform;

/// Work run at DISPATCH_LEVEL soon after an interrupt.
pub trait Dpc: Send + Sync {
    /// Runs the deferred procedure. Called at DISPATCH_LEVEL.
    fn run(&self);
}

/// An interrupt service routine of a (soft) device.
pub trait InterruptService: Send + Sync {
    /// Services the interrupt at device IRQL; returns whether the device had raised it.
    /// It may only read and acknowledge device state and queue a DPC.
    fn service(&self) -> bool;
}

/// The interrupt plumbing of a device model: an interrupt line and DPCs.
pub trait DeviceModelPlatform: Platform {
    /// Queues `dpc` to run at DISPATCH_LEVEL. Returns `false` if that DPC object was already
    /// queued and has not started yet (it then runs once for both requests). Any IRQL, DIRQL
    /// included. Windows counterpart: `KeInsertQueueDpc` (or `WdfDpcEnqueue`) of the device
    /// driver's own DPC object.
    fn queue_dpc(&self, dpc: &Arc<dyn Dpc>) -> bool;

    /// Delivers an interrupt: runs `isr` at device IRQL on the current processor, as the
    /// interrupt controller would when the device raises its line. Windows counterpart: none
    /// in software — the hardware does this and the framework calls `EvtInterruptIsr`.
    fn interrupt(&self, isr: &dyn InterruptService) -> bool;
}
