//! The I/O manager's side of a device: opening it by its symbolic link (`CreateFile`), sending
//! IOCTLs (`DeviceIoControl` with an OVERLAPPED, from user mode; `IoBuildDeviceIoControlRequest`
//! and `IoCallDriver` from a kernel-mode component, with or without a file object), cancelling
//! one (`CancelIoEx`), and closing the handle (`IRP_MJ_CLEANUP` in the closing thread, then
//! `IRP_MJ_CLOSE` once the last request of the file has completed).
//!
//! On the framework's side, as KMDF does it (`fxpkggeneral.cpp`): a create makes a
//! `WDFFILEOBJECT` with the device's file-object context and calls `EvtDeviceFileCreate`; a
//! failed create deletes it without cleanup or close; cleanup calls `EvtFileCleanup` and then
//! cancels every request of the file still waiting in one of the device's queues; close calls
//! `EvtFileClose` and deletes the file object. Every request reaches `EvtIoInCallerContext`
//! first, in the sender's thread at the sender's IRQL, when the device has one.
//!
//! [`EmuFile`] and [`EmuIo`] are `wv_client::raw::RawFile` and `RawIo`: the conformance suite
//! and the verbs library run over them unchanged.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use wdk_sys::{NTSTATUS, WDFDEVICE, WDFFILEOBJECT, WDFREQUEST};
use wv_client::raw::{IoStatus, RawFile, RawIo};
use wv_hal::Irql;
use wv_host::kernel;

use crate::devices::{self, device_mut};
use crate::machine::{Inner, Machine};
use crate::objects::{self, Handle, Kind};
use crate::requests::{self, Irp, Major, Owner};

/// The I/O manager's file object: the references that keep it (the handle, and each IRP in
/// flight) and the framework file object it carries.
pub struct FileCore {
    /// The `WDFFILEOBJECT`.
    pub(crate) handle: Handle,
    pub(crate) device: Handle,
    refs: AtomicUsize,
    machine: Weak<Inner>,
}

impl FileCore {
    pub(crate) fn add_ref(&self) {
        self.refs.fetch_add(1, Ordering::SeqCst);
    }

    /// Drops one reference; the last one sends `IRP_MJ_CLOSE`, at PASSIVE_LEVEL on a worker
    /// (the object manager's deferred delete: the last reference may go in a DPC).
    pub(crate) fn release(&self) {
        if self.refs.fetch_sub(1, Ordering::SeqCst) != 1 {
            return;
        }
        let Some(m) = self.machine.upgrade() else {
            return;
        };
        let (file, device) = (self.handle, self.device);
        let machine = Arc::clone(&m);
        crate::callbacks::queue_system_work(&m, "IRP_MJ_CLOSE", move || {
            close(&machine, file, device)
        });
    }
}

/// `IRP_MJ_CLOSE`: `EvtFileClose`, then the file object goes, and the device counts one handle
/// fewer.
fn close(m: &Arc<Inner>, file: Handle, device: Handle) {
    let callback = device_mut(&mut m.fx.lock(), device)
        .and_then(|d| d.file_config.map(|(config, _)| config.EvtFileClose))
        .flatten();
    if let Some(callback) = callback {
        crate::callbacks::frame(m, "EvtFileClose", Irql::Passive, || {
            // SAFETY: the driver's close callback with its file object, once.
            unsafe { crate::callbacks::file_event(m.convention(), callback, file as WDFFILEOBJECT) }
        });
    }
    m.count("files closed");
    objects::delete(m, file);
    devices::handle_closed(m, device);
}

/// How a kernel-mode component sends an IOCTL.
#[derive(Clone, Copy, Debug)]
pub enum KernelSender<'a> {
    /// `IoBuildDeviceIoControlRequest` to the device object named (e.g. `\Device\WinVerbs`):
    /// no file object.
    Device(&'a str),
    /// On a handle the component opened (`ZwCreateFile`): the file object, kernel mode.
    File(&'a EmuFile),
}

/// An open handle (one file object).
pub struct EmuFile {
    core: Arc<FileCore>,
    machine: Arc<Inner>,
}

impl std::fmt::Debug for EmuFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmuFile")
            .field("file", &format_args!("{:#x}", self.core.handle))
            .finish()
    }
}

/// One request in flight (its OVERLAPPED).
pub struct EmuIo {
    irp: Arc<Irp>,
    /// The dispatch returned `STATUS_PENDING` (the IRP was marked pending).
    pending: bool,
    /// The request had completed when the dispatch returned.
    completed_at_return: bool,
    machine: Arc<Inner>,
}

impl std::fmt::Debug for EmuIo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmuIo")
            .field("irp", &format_args!("{:#x}", self.irp.id))
            .field("pending", &self.pending)
            .field("result", &self.irp.result())
            .finish()
    }
}

impl EmuIo {
    /// Sends `irp` down the stack at `irql` from this thread; the request as the dispatch
    /// left it.
    fn send(m: &Arc<Inner>, irp: Arc<Irp>, irql: Irql) -> EmuIo {
        let old = kernel::raise_irql(irql);
        send(m, &irp);
        kernel::lower_irql(old);
        EmuIo {
            pending: irp.marked_pending.load(Ordering::SeqCst) || irp.result().is_none(),
            completed_at_return: irp.completed_in_dispatch.load(Ordering::SeqCst),
            irp,
            machine: Arc::clone(m),
        }
    }
}

/// `STATUS_IO_TIMEOUT`, what a hung request reports after the verifier records the hang.
const STATUS_IO_TIMEOUT: u32 = 0xC000_00B5;

impl Machine {
    /// `CreateFile(path)` from user mode (`\\.\WinVerbs`).
    ///
    /// # Errors
    /// The status the open failed with: no such name, a device being deleted, the driver's
    /// refusal.
    pub fn open(&self, path: &str) -> Result<EmuFile, NTSTATUS> {
        open(self.inner(), path, || {})
    }

    /// [`Machine::open`] with `between` run after the I/O manager found the device (and the
    /// framework counted the open) and before `EvtDeviceFileCreate`: an interleaving a real
    /// system only produces by chance, such as the device's deletion racing the create.
    ///
    /// # Errors
    /// As [`Machine::open`].
    pub fn open_racing(&self, path: &str, between: impl FnOnce()) -> Result<EmuFile, NTSTATUS> {
        open(self.inner(), path, between)
    }

    /// A kernel-mode component's IOCTL at `irql` (PASSIVE_LEVEL to DISPATCH_LEVEL), from this
    /// thread.
    pub fn kernel_ioctl(
        &self,
        sender: KernelSender<'_>,
        irql: Irql,
        code: u32,
        input: &[u8],
        output_len: usize,
    ) -> EmuIo {
        let m = self.inner();
        let (device, file) = match sender {
            KernelSender::Device(name) => (lookup_device_name(m, name), None),
            KernelSender::File(file) => (Some(file.core.device), Some(Arc::clone(&file.core))),
        };
        let Some(device) = device else {
            let irp = Irp::new(
                m,
                Major::DeviceControl,
                0,
                code,
                input,
                output_len,
                true,
                None,
            );
            irp.complete(wdk_sys::STATUS_OBJECT_NAME_NOT_FOUND, 0);
            return EmuIo {
                irp,
                pending: false,
                completed_at_return: true,
                machine: Arc::clone(m),
            };
        };
        let irp = Irp::new(
            m,
            Major::DeviceControl,
            device,
            code,
            input,
            output_len,
            true,
            file,
        );
        EmuIo::send(m, irp, irql)
    }
}

/// The device a `\Device\…` name or a `\\.\…` / `\DosDevices\…` link leads to, if it exists and
/// takes opens.
fn lookup_device_name(m: &Inner, path: &str) -> Option<Handle> {
    let fx = m.fx.lock();
    if let Some(rest) = path.strip_prefix(r"\\.\") {
        return fx
            .links
            .get(&format!(r"\DosDevices\{rest}").to_ascii_lowercase())
            .copied();
    }
    if path.to_ascii_lowercase().starts_with(r"\dosdevices\") || path.starts_with(r"\??\") {
        let rest = path.rsplit('\\').next().unwrap_or_default();
        return fx
            .links
            .get(&format!(r"\DosDevices\{rest}").to_ascii_lowercase())
            .copied();
    }
    fx.names.get(path).copied()
}

fn open(m: &Arc<Inner>, path: &str, between: impl FnOnce()) -> Result<EmuFile, NTSTATUS> {
    let _host = kernel::host_scope();
    let Some(device) = lookup_device_name(m, path) else {
        return Err(wdk_sys::STATUS_OBJECT_NAME_NOT_FOUND);
    };
    // The I/O manager's checks (IopCheckDeviceAndDriver) and the framework's open count.
    let (file_config, exclusive_refused) = {
        let mut fx = m.fx.lock();
        let wdm_deleted = device_mut(&mut fx, device)
            .map(|d| d.wdm)
            .and_then(|w| fx.wdm_devices.get(&w).map(|w| w.deleted))
            .unwrap_or(true);
        let live = devices::live(&fx, device);
        let Some(d) = device_mut(&mut fx, device) else {
            return Err(wdk_sys::STATUS_NO_SUCH_DEVICE);
        };
        if !live || wdm_deleted || d.delete_pending || d.initializing {
            return Err(wdk_sys::STATUS_NO_SUCH_DEVICE);
        }
        d.open_handles += 1;
        (d.file_config, d.exclusive && d.open_handles > 1)
    };
    if exclusive_refused {
        devices::handle_closed(m, device);
        return Err(wdk_sys::STATUS_ACCESS_DENIED);
    }
    between();
    let attributes = file_config.map(|(_, a)| a).unwrap_or_default();
    let file = {
        let mut fx = m.fx.lock();
        let handle = fx.next_handle();
        let core = Arc::new(FileCore {
            handle,
            device,
            refs: AtomicUsize::new(1),
            machine: Arc::downgrade(m),
        });
        fx.insert_at(handle, Kind::File, &attributes, Some(device));
        core
    };
    let irp = Irp::new(
        m,
        Major::Create,
        device,
        0,
        &[],
        0,
        false,
        Some(Arc::clone(&file)),
    );
    let request = requests::create(m, &irp);
    let create = file_config.and_then(|(config, _)| config.EvtDeviceFileCreate);
    match create {
        Some(callback) => {
            requests::hand_to_driver(m, request, false);
            crate::callbacks::frame(m, "EvtDeviceFileCreate", Irql::Passive, || {
                // SAFETY: the driver's create callback with the device, the create request
                // (the driver's now) and the new file object.
                unsafe {
                    crate::callbacks::file_create(
                        m.convention(),
                        callback,
                        device as WDFDEVICE,
                        request as WDFREQUEST,
                        file.handle as WDFFILEOBJECT,
                    )
                }
            });
        }
        None => requests::complete_by_framework(m, request, wdk_sys::STATUS_SUCCESS),
    }
    let result = irp.wait(m, m.config.hang_timeout);
    let status = match result {
        Some(result) => result.status as NTSTATUS,
        None => {
            m.violation(format!(
                "verifier: the create request {:#x} was not completed within {:?} (hung: \
                 EvtDeviceFileCreate must complete it)",
                irp.id, m.config.hang_timeout
            ));
            wdk_sys::STATUS_UNSUCCESSFUL
        }
    };
    if wdk_sys::NT_SUCCESS(status) {
        m.count("files opened");
        return Ok(EmuFile {
            core: file,
            machine: Arc::clone(m),
        });
    }
    // A failed create: the file object goes without cleanup or close.
    drop(irp);
    objects::delete(m, file.handle);
    devices::handle_closed(m, device);
    Err(status)
}

/// The framework's dispatch of a new IRP: `EvtIoInCallerContext` in the sender's thread when
/// the device has one, else the device's queue.
fn send(m: &Arc<Inner>, irp: &Arc<Irp>) {
    let _host = kernel::host_scope();
    irp.dispatching.store(true, Ordering::SeqCst);
    dispatch_irp(m, irp);
    irp.dispatching.store(false, Ordering::SeqCst);
}

fn dispatch_irp(m: &Arc<Inner>, irp: &Arc<Irp>) {
    let device = irp.device;
    let (in_caller, search) = device_mut(&mut m.fx.lock(), device).map_or((None, false), |d| {
        let class = d.file_config.map(|(c, _)| c.FileObjectClass);
        (
            d.in_caller,
            class == Some(wdk_sys::_WDF_FILEOBJECT_CLASS::WdfFileObjectWdfCannotUseFsContexts),
        )
    });
    if search && irp.file_handle().is_some() {
        // FxFileObject::_GetFileObjectFromWdm for this class: a walk of the device's open file
        // objects under its lock, for every request.
        let fx = m.fx.lock();
        let open = fx
            .objects
            .values()
            .filter(|o| matches!(o.kind, Kind::File))
            .count();
        drop(fx);
        m.count("file lookups by search");
        for _ in 0..open {
            m.count("file objects searched");
        }
    }
    let request = requests::create(m, irp);
    m.count("ioctls sent");
    match in_caller {
        Some(callback) => {
            // FxPkgIo::DispatchToInCallerContextCallback marks the IRP pending and returns
            // STATUS_PENDING whether or not the driver completes the request in the callback.
            irp.marked_pending.store(true, Ordering::SeqCst);
            requests::hand_to_driver(m, request, true);
            let at = kernel::irql();
            crate::callbacks::frame(m, "EvtIoInCallerContext", at, || {
                // SAFETY: the driver's callback with its device and a request it now owns.
                unsafe {
                    crate::callbacks::io_in_caller_context(
                        m.convention(),
                        callback,
                        device as WDFDEVICE,
                        request as WDFREQUEST,
                    )
                }
            });
            // The callback must complete the request or hand it on; keeping it is a hang.
            if requests::owner_of(m, request) == Some(Owner::Driver)
                && let Some(req) = requests::request_mut(&mut m.fx.lock(), request)
                && req.in_caller_context
            {
                m.count("requests kept by EvtIoInCallerContext");
            }
        }
        None => crate::io::deliver_to_default_queue(m, device, request),
    }
}

impl EmuFile {
    /// The framework file object of this handle.
    pub fn wdf_file_object(&self) -> WDFFILEOBJECT {
        self.core.handle as WDFFILEOBJECT
    }

    /// `DeviceIoControl` with an OVERLAPPED from user mode (PASSIVE_LEVEL, this thread).
    pub fn device_io_control(&self, code: u32, input: &[u8], output_len: usize) -> EmuIo {
        let m = &self.machine;
        let irp = Irp::new(
            m,
            Major::DeviceControl,
            self.core.device,
            code,
            input,
            output_len,
            false,
            Some(Arc::clone(&self.core)),
        );
        EmuIo::send(m, irp, Irql::Passive)
    }

    /// `CancelIoEx(handle, overlapped of io)`: whether a cancellable request was found.
    pub fn cancel_io_ex(&self, io: &EmuIo) -> bool {
        if io.irp.file_handle() != Some(self.core.handle) || io.irp.result().is_some() {
            return false;
        }
        crate::io::cancel_irp(&self.machine, &io.irp)
    }
}

impl EmuFile {
    /// `CloseHandle` of this (last) handle racing a `DeviceIoControl` that the I/O manager has
    /// already referenced the file object for: the cleanup runs first, then the IOCTL reaches
    /// the driver for the cleaned-up file (which must fail it, not touch freed state).
    pub fn close_racing_ioctl(self, code: u32, input: &[u8], output_len: usize) -> EmuIo {
        let core = Arc::clone(&self.core);
        let machine = Arc::clone(&self.machine);
        // The reference the in-flight DeviceIoControl holds on the file object.
        core.add_ref();
        drop(self);
        let irp = Irp::new(
            &machine,
            Major::DeviceControl,
            core.device,
            code,
            input,
            output_len,
            false,
            Some(Arc::clone(&core)),
        );
        core.release();
        let old = kernel::raise_irql(Irql::Passive);
        send(&machine, &irp);
        kernel::lower_irql(old);
        EmuIo {
            pending: irp.marked_pending.load(Ordering::SeqCst) || irp.result().is_none(),
            completed_at_return: irp.completed_in_dispatch.load(Ordering::SeqCst),
            irp,
            machine,
        }
    }
}

impl Drop for EmuFile {
    /// `CloseHandle` of the last handle: `IRP_MJ_CLEANUP` in this thread.
    fn drop(&mut self) {
        let m = &self.machine;
        let _host = kernel::host_scope();
        let device = self.core.device;
        let callback = device_mut(&mut m.fx.lock(), device)
            .and_then(|d| d.file_config.map(|(config, _)| config.EvtFileCleanup))
            .flatten();
        if let Some(callback) = callback {
            crate::callbacks::frame(m, "EvtFileCleanup", Irql::Passive, || {
                // SAFETY: the driver's cleanup callback with its file object, once.
                unsafe {
                    crate::callbacks::file_event(
                        m.convention(),
                        callback,
                        self.core.handle as WDFFILEOBJECT,
                    )
                }
            });
        }
        crate::io::flush_by_file(m, device, self.core.handle);
        self.core.release();
    }
}

impl EmuIo {
    /// Whether the sender saw `STATUS_PENDING`: KMDF marks every IRP it dispatches pending —
    /// to `EvtIoInCallerContext` or into a queue (`FxPkgIo::DispatchToInCallerContextCallback`,
    /// `FxIoQueue::QueueRequest`) — and returns `STATUS_PENDING` even when the driver completed
    /// it before returning; only a request the framework fails before dispatching it is not.
    pub fn pending(&self) -> bool {
        self.pending
    }

    /// Whether the driver completed the request inside its dispatch — in the sender's thread,
    /// before the dispatch returned, without the request ever waiting in a manual queue or for
    /// a worker — whatever status the dispatch returned.
    pub fn completed_at_return(&self) -> bool {
        self.completed_at_return
    }

    /// The final status, if the request completed.
    pub fn try_result(&self) -> Option<IoStatus> {
        self.irp.result()
    }

    /// Waits for the request: a request that does not complete within the machine's hang
    /// timeout (or, deterministically, once nothing is left to run) is a violation, reported
    /// as `STATUS_IO_TIMEOUT`.
    pub fn wait(self) -> IoStatus {
        let m = &self.machine;
        match self.irp.wait(m, m.config.hang_timeout) {
            Some(result) => result,
            None => {
                m.violation(format!(
                    "verifier: request {:#x} (IOCTL {:#x}) never completed (hung: still pending \
                     after {:?})",
                    self.irp.id, self.irp.code, m.config.hang_timeout
                ));
                IoStatus {
                    status: STATUS_IO_TIMEOUT,
                    information: 0,
                    output: Vec::new(),
                }
            }
        }
    }
}

impl RawFile for EmuFile {
    type Io = EmuIo;

    fn device_io_control(&self, code: u32, input: &[u8], output_len: usize) -> EmuIo {
        EmuFile::device_io_control(self, code, input, output_len)
    }

    fn cancel_io_ex(&self, io: &EmuIo) -> bool {
        EmuFile::cancel_io_ex(self, io)
    }
}

impl RawIo for EmuIo {
    fn pending(&self) -> bool {
        self.pending
    }

    fn wait(self) -> IoStatus {
        EmuIo::wait(self)
    }

    fn wait_timeout(&self, timeout: Duration) -> Option<IoStatus> {
        self.irp.wait(&self.machine, timeout)
    }

    fn is_complete(&self) -> bool {
        self.irp.result().is_some()
    }
}
