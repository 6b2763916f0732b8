//! [`WdfPlatform`]: `wv_hal::Platform` with KMDF and WDM, exactly as each method's contract in
//! `wv-hal` describes: manual queues of the control device, `KSPIN_LOCK`s, nonpaged `KEVENT`s,
//! `IoAllocateWorkItem` work items, `KeGetCurrentIrql`, `KeQueryInterruptTimePrecise`.

use wdk_sys::ntddk::{KeGetCurrentIrql, KeQueryInterruptTimePrecise};
use wv_abi::NtStatus;
use wv_hal::{Irql, KArc, Platform, WorkItem};

use crate::control;
use crate::wdf::queue::ManualQueue;
use crate::wdf::request::Request;
use crate::wdf::sync::{KEvent, KSpinLock};
use crate::wdf::work;

/// The operating-system services of the driver core, on Windows. Stateless: the control device
/// it parents queues and work items to is the driver's one control device.
#[derive(Clone, Copy, Debug, Default)]
pub struct WdfPlatform;

impl Platform for WdfPlatform {
    type Request = Request;
    type Queue = ManualQueue;
    type SpinLock<T: Send> = KSpinLock<T>;
    type Event = KEvent;

    fn create_queue(&self) -> Result<ManualQueue, NtStatus> {
        let device = control::device().ok_or(NtStatus::INSUFFICIENT_RESOURCES)?;
        ManualQueue::new(device)
    }

    fn spin_lock<T: Send>(&self, value: T) -> KSpinLock<T> {
        KSpinLock::new(value)
    }

    fn event(&self) -> Result<KEvent, NtStatus> {
        KEvent::new()
    }

    fn queue_work(&self, work: KArc<dyn WorkItem>) -> Result<(), NtStatus> {
        // SAFETY: the control device's WDM device object (or null when it does not exist),
        // which lives while any handle is open, and work is only queued for open handles.
        unsafe { work::queue_work(control::wdm_device(), work) }
    }

    fn irql(&self) -> Irql {
        // SAFETY: reading the IRQL has no preconditions.
        match unsafe { KeGetCurrentIrql() } {
            0 => Irql::Passive,
            1 => Irql::Apc,
            2 => Irql::Dispatch,
            _ => Irql::Device,
        }
    }

    fn paged_code(&self) {
        debug_assert!(
            self.irql() <= Irql::Apc,
            "pageable code at {}",
            self.irql().name()
        );
    }

    fn now_ns(&self) -> u64 {
        let mut qpc = 0u64;
        // SAFETY: the out-pointer is a local; callable at any IRQL.
        let interrupt_time = unsafe { KeQueryInterruptTimePrecise(&mut qpc) };
        interrupt_time.saturating_mul(100)
    }
}
