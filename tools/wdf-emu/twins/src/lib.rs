//! A small KMDF driver for the verifier's planted-mistake twins: `DriverEntry` creates the
//! framework driver and a control device `\Device\WdfEmuTwin` (symbolic link, a parallel
//! default queue with `EvtIoDeviceControl`), which completes every IOCTL with its input length as
//! the information; `EvtDriverUnload` deletes the device. [`plant`] chooses one mistake for the
//! next load; [`Mistake::None`] is the fixed twin.
#![no_std]

use core::ptr::null_mut;
use core::sync::atomic::{AtomicPtr, AtomicU8, Ordering};

use wdk_sys::ntddk::{ExAllocatePool2, KeAcquireSpinLockRaiseToDpc, KeReleaseSpinLock};
use wdk_sys::{
    _WDF_EXECUTION_LEVEL, _WDF_IO_QUEUE_DISPATCH_TYPE, _WDF_SYNCHRONIZATION_SCOPE, _WDF_TRI_STATE,
    DRIVER_OBJECT, KSPIN_LOCK, NTSTATUS, PCUNICODE_STRING, POOL_FLAG_NON_PAGED, PVOID,
    STATUS_SUCCESS, UNICODE_STRING, WDF_DRIVER_CONFIG, WDF_IO_QUEUE_CONFIG,
    WDF_NO_OBJECT_ATTRIBUTES, WDF_OBJECT_ATTRIBUTES, WDFDEVICE, WDFDEVICE__, WDFDRIVER, WDFQUEUE,
    WDFREQUEST, call_unsafe_wdf_function_binding,
};

/// The mistake planted in the next load.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Mistake {
    /// The fixed twin.
    None = 0,
    /// `EvtIoDeviceControl` completes the request twice.
    DoubleCompletion = 1,
    /// `EvtIoDeviceControl` returns without completing or handing on the request.
    MissingCompletion = 2,
    /// `EvtIoDeviceControl` calls a PASSIVE_LEVEL DDI while holding a spin lock.
    DdiAtWrongIrql = 3,
    /// The queue is referenced and never dereferenced: it outlives the driver.
    LeakedObject = 4,
    /// A pool allocation is never freed.
    LeakedPool = 5,
}

static MISTAKE: AtomicU8 = AtomicU8::new(0);
static DEVICE: AtomicPtr<WDFDEVICE__> = AtomicPtr::new(null_mut());

/// Chooses the mistake of the next load.
pub fn plant(mistake: Mistake) {
    MISTAKE.store(mistake as u8, Ordering::SeqCst);
}

fn planted(mistake: Mistake) -> bool {
    MISTAKE.load(Ordering::SeqCst) == mistake as u8
}

const fn utf16<const N: usize>(text: &str) -> [u16; N] {
    let bytes = text.as_bytes();
    assert!(bytes.len() == N);
    let mut out = [0; N];
    let mut i = 0;
    while i < N {
        out[i] = bytes[i] as u16;
        i += 1;
    }
    out
}

static NAME: [u16; 18] = utf16(r"\Device\WdfEmuTwin");
static LINK: [u16; 22] = utf16(r"\DosDevices\WdfEmuTwin");
static SDDL: [u16; 27] = utf16("D:P(A;;GA;;;SY)(A;;GA;;;BA)");

fn unicode(text: &'static [u16]) -> UNICODE_STRING {
    UNICODE_STRING {
        Length: (text.len() * 2) as u16,
        MaximumLength: (text.len() * 2) as u16,
        Buffer: text.as_ptr().cast_mut(),
    }
}

fn attributes() -> WDF_OBJECT_ATTRIBUTES {
    // SAFETY: plain data; zero, then what WDF_OBJECT_ATTRIBUTES_INIT sets.
    let mut a: WDF_OBJECT_ATTRIBUTES = unsafe { core::mem::zeroed() };
    a.Size = size_of::<WDF_OBJECT_ATTRIBUTES>() as u32;
    a.ExecutionLevel = _WDF_EXECUTION_LEVEL::WdfExecutionLevelInheritFromParent;
    a.SynchronizationScope = _WDF_SYNCHRONIZATION_SCOPE::WdfSynchronizationScopeInheritFromParent;
    a
}

/// The twin's `DriverEntry`.
///
/// # Safety
/// Called once per load with the system's driver object and registry path.
pub unsafe extern "C" fn driver_entry(
    driver: *mut DRIVER_OBJECT,
    path: PCUNICODE_STRING,
) -> NTSTATUS {
    // SAFETY: plain data; zero, then what WDF_DRIVER_CONFIG_INIT sets.
    let mut config: WDF_DRIVER_CONFIG = unsafe { core::mem::zeroed() };
    config.Size = size_of::<WDF_DRIVER_CONFIG>() as u32;
    config.EvtDriverUnload = Some(evt_driver_unload);
    let mut wdf_driver: WDFDRIVER = null_mut();
    // SAFETY: the driver object and path DriverEntry received; a local configuration.
    let status = unsafe {
        call_unsafe_wdf_function_binding!(
            WdfDriverCreate,
            driver,
            path,
            WDF_NO_OBJECT_ATTRIBUTES,
            &mut config,
            &mut wdf_driver,
        )
    };
    if !wdk::nt_success(status) {
        return status;
    }
    create_control_device(wdf_driver)
}

fn create_control_device(driver: WDFDRIVER) -> NTSTATUS {
    let sddl = unicode(&SDDL);
    // SAFETY: this driver's framework driver; a string that outlives the call.
    let mut init =
        unsafe { call_unsafe_wdf_function_binding!(WdfControlDeviceInitAllocate, driver, &sddl) };
    if init.is_null() {
        return wdk_sys::STATUS_INSUFFICIENT_RESOURCES;
    }
    let name = unicode(&NAME);
    // SAFETY: the structure just allocated; the name outlives the call.
    let status = unsafe { call_unsafe_wdf_function_binding!(WdfDeviceInitAssignName, init, &name) };
    let mut device: WDFDEVICE = null_mut();
    let status = if wdk::nt_success(status) {
        let mut attributes = attributes();
        attributes.ExecutionLevel = _WDF_EXECUTION_LEVEL::WdfExecutionLevelPassive;
        // SAFETY: the structure, freed below if no device came of it.
        unsafe {
            call_unsafe_wdf_function_binding!(
                WdfDeviceCreate,
                &mut init,
                &mut attributes,
                &mut device
            )
        }
    } else {
        status
    };
    if !wdk::nt_success(status) {
        // SAFETY: a control device's structure that no device was created from.
        unsafe { call_unsafe_wdf_function_binding!(WdfDeviceInitFree, init) };
        return status;
    }
    let link = unicode(&LINK);
    // SAFETY: the new device; the link outlives the call.
    let status =
        unsafe { call_unsafe_wdf_function_binding!(WdfDeviceCreateSymbolicLink, device, &link) };
    if !wdk::nt_success(status) {
        // SAFETY: the device just created, deleted once.
        unsafe { call_unsafe_wdf_function_binding!(WdfObjectDelete, device.cast()) };
        return status;
    }
    // SAFETY: plain data; zero, then what WDF_IO_QUEUE_CONFIG_INIT_DEFAULT_QUEUE sets.
    let mut queue_config: WDF_IO_QUEUE_CONFIG = unsafe { core::mem::zeroed() };
    queue_config.Size = size_of::<WDF_IO_QUEUE_CONFIG>() as u32;
    queue_config.DispatchType = _WDF_IO_QUEUE_DISPATCH_TYPE::WdfIoQueueDispatchParallel;
    queue_config.PowerManaged = _WDF_TRI_STATE::WdfFalse;
    queue_config.DefaultQueue = 1;
    queue_config.Settings.Parallel.NumberOfPresentedRequests = u32::MAX;
    queue_config.EvtIoDeviceControl = Some(evt_io_device_control);
    let mut queue: WDFQUEUE = null_mut();
    // SAFETY: the new device; a local configuration; no attributes.
    let status = unsafe {
        call_unsafe_wdf_function_binding!(
            WdfIoQueueCreate,
            device,
            &mut queue_config,
            WDF_NO_OBJECT_ATTRIBUTES,
            &mut queue
        )
    };
    if !wdk::nt_success(status) {
        // SAFETY: as above.
        unsafe { call_unsafe_wdf_function_binding!(WdfObjectDelete, device.cast()) };
        return status;
    }
    if planted(Mistake::LeakedObject) {
        let tag: PVOID = b"Twin".as_ptr().cast_mut().cast();
        // SAFETY: the live queue; never dereferenced (the planted leak).
        unsafe {
            call_unsafe_wdf_function_binding!(
                WdfObjectReferenceActual,
                queue.cast(),
                tag,
                line!() as i32,
                c"twins/src/lib.rs".as_ptr()
            )
        };
    }
    if planted(Mistake::LeakedPool) {
        // SAFETY: a nonpaged allocation, never freed (the planted leak).
        let _leak =
            unsafe { ExAllocatePool2(POOL_FLAG_NON_PAGED, 64, u32::from_le_bytes(*b"Twin")) };
    }
    DEVICE.store(device, Ordering::Release);
    // SAFETY: the set-up device: opens may reach it from now on.
    unsafe { call_unsafe_wdf_function_binding!(WdfControlFinishInitializing, device) };
    STATUS_SUCCESS
}

extern "C" fn evt_io_device_control(
    _queue: WDFQUEUE,
    request: WDFREQUEST,
    _output: usize,
    input: usize,
    _code: u32,
) {
    if planted(Mistake::MissingCompletion) {
        return;
    }
    if planted(Mistake::DdiAtWrongIrql) {
        let mut lock: KSPIN_LOCK = 0;
        // SAFETY: a free local lock, taken at PASSIVE_LEVEL and released below.
        let old = unsafe { KeAcquireSpinLockRaiseToDpc(&mut lock) };
        let link = unicode(&LINK);
        let device = DEVICE.load(Ordering::Acquire);
        // SAFETY: the live device; PASSIVE_LEVEL only (the planted mistake: at DISPATCH_LEVEL).
        let _ = unsafe {
            call_unsafe_wdf_function_binding!(WdfDeviceCreateSymbolicLink, device, &link)
        };
        // SAFETY: the lock taken above, with its IRQL.
        unsafe { KeReleaseSpinLock(&mut lock, old) };
    }
    // SAFETY: the request the queue presented; completed once.
    unsafe {
        call_unsafe_wdf_function_binding!(
            WdfRequestCompleteWithInformation,
            request,
            STATUS_SUCCESS,
            input as u64
        )
    };
    if planted(Mistake::DoubleCompletion) {
        // SAFETY: not: the request is already completed (the planted mistake).
        unsafe {
            call_unsafe_wdf_function_binding!(
                WdfRequestCompleteWithInformation,
                request,
                STATUS_SUCCESS,
                0
            )
        };
    }
}

extern "C" fn evt_driver_unload(_driver: WDFDRIVER) {
    let device = DEVICE.swap(null_mut(), Ordering::AcqRel);
    if !device.is_null() {
        // SAFETY: the control device this driver created, deleted once.
        unsafe { call_unsafe_wdf_function_binding!(WdfObjectDelete, device.cast()) };
    }
}
