//! Calls into the driver: one caller per callback type, for either calling convention, and
//! the frame every callback runs in.
//!
//! The frame is what the framework and Driver Verifier check around a callback: it runs at the
//! documented IRQL with no spin lock held and in the driver's allocation scope (so the
//! low-resources simulation may refuse its allocations), and it must return at that IRQL, with
//! no spin lock held and outside any critical region it entered.

use std::sync::Arc;

use parking_lot::Mutex;
use wdk_sys::{
    NTSTATUS, PDEVICE_OBJECT, PDRIVER_OBJECT, PVOID, PWDFDEVICE_INIT, ULONG,
    WDF_POWER_DEVICE_STATE, WDFCONTEXT, WDFDEVICE, WDFDRIVER, WDFFILEOBJECT, WDFOBJECT, WDFQUEUE,
    WDFREQUEST,
};
use wv_hal::{Irql, KArc, Platform, WorkItem};
use wv_host::kernel;

use crate::machine::Inner;

/// Runs driver code `name` at `at` in a callback frame and checks how it returned. Returns the
/// result and the violation found, if any (already recorded).
pub(crate) fn frame<R>(
    inner: &Inner,
    name: &str,
    at: Irql,
    f: impl FnOnce() -> R,
) -> (R, Option<String>) {
    let regions = crate::wdm::critical_regions();
    let (result, problem) = kernel::run_callback(inner.platform.verifier(), name, at, f);
    let after = crate::wdm::critical_regions();
    if after != regions {
        crate::wdm::set_critical_regions(regions);
        let message = format!(
            "verifier: {name} returned with {} critical region(s) entered and not left \
             (KeEnterCriticalRegion without KeLeaveCriticalRegion)",
            after - regions
        );
        inner.violation(message.clone());
        return (result, problem.or(Some(message)));
    }
    (result, problem)
}

// One caller per callback type, taking the driver's convention: the bindings declare every
// callback type `extern "C"`, while an image loaded for Windows implements them with the
// Windows x64 convention.
wv_ci::callbacks! {
    extern "C";
    /// `DriverObject->DriverUnload` (`DRIVER_UNLOAD`).
    driver_object_unload(driver: PDRIVER_OBJECT);
    /// `EvtDriverDeviceAdd`.
    driver_device_add(driver: WDFDRIVER, init: PWDFDEVICE_INIT) -> NTSTATUS;
    /// `EvtDriverUnload`.
    driver_unload(driver: WDFDRIVER);
    /// `EvtCleanupCallback` and `EvtDestroyCallback`.
    object_callback(object: WDFOBJECT);
    /// `EvtDeviceSelfManagedIoInit`, `…Restart`, `…Suspend`.
    device_status(device: WDFDEVICE) -> NTSTATUS;
    /// `EvtDeviceSurpriseRemoval`, `EvtDeviceSelfManagedIoFlush`, `…Cleanup`.
    device_void(device: WDFDEVICE);
    /// `EvtDeviceD0Entry`, `EvtDeviceD0Exit`.
    device_power(device: WDFDEVICE, state: WDF_POWER_DEVICE_STATE) -> NTSTATUS;
    /// `EvtIoInCallerContext`.
    io_in_caller_context(device: WDFDEVICE, request: WDFREQUEST);
    /// `EvtIoDeviceControl`.
    io_device_control(
        queue: WDFQUEUE,
        request: WDFREQUEST,
        output_length: usize,
        input_length: usize,
        code: ULONG
    );
    /// `EvtDeviceFileCreate`.
    file_create(device: WDFDEVICE, request: WDFREQUEST, file: WDFFILEOBJECT);
    /// `EvtFileCleanup`, `EvtFileClose`.
    file_event(file: WDFFILEOBJECT);
    /// `EvtIoQueueState` (a purge's completion).
    queue_state(queue: WDFQUEUE, context: WDFCONTEXT);
    /// An `IO_WORKITEM_ROUTINE`.
    io_workitem(device: PDEVICE_OBJECT, context: PVOID);
}

/// A closure run once on a system worker thread.
struct SystemWork {
    name: &'static str,
    run: Mutex<Option<Box<dyn FnOnce() + Send>>>,
    inner: std::sync::Weak<Inner>,
}

impl WorkItem for SystemWork {
    fn run(&self) {
        let _host = kernel::host_scope();
        let Some(run) = self.run.lock().take() else {
            return;
        };
        if self.inner.upgrade().is_none() {
            return;
        }
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(run));
        if let Err(payload) = outcome
            && let Some(inner) = self.inner.upgrade()
        {
            inner.violation(format!(
                "wdf-emu: {} panicked on a worker thread: {}",
                self.name,
                crate::abi::panic_text(&*payload)
            ));
        }
    }
}

/// Queues `f` to run once at PASSIVE_LEVEL on one of the platform's workers (deterministic:
/// in the FIFO).
pub(crate) fn queue_system_work(
    inner: &Arc<Inner>,
    name: &'static str,
    f: impl FnOnce() + Send + 'static,
) {
    let work = SystemWork {
        name,
        run: Mutex::new(Some(Box::new(f))),
        inner: Arc::downgrade(inner),
    };
    let work: KArc<dyn WorkItem> = KArc::new(work).into();
    if let Err(status) = inner.platform.queue_work(work) {
        inner.violation(format!(
            "wdf-emu: could not queue {name} on a worker ({:#x})",
            status.0
        ));
    }
}
