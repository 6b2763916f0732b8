//! The I/O manager: PnP arrival/removal, files (create, cleanup, close) and METHOD_BUFFERED
//! DeviceIoControl with OVERLAPPED semantics, driving a [`FilterDriver`].

use std::time::Duration;

use wv_abi::NtStatus;
use wv_hal::{FilterDriver, Irql, Verbs};

use crate::irql;
use crate::platform::HostPlatform;
use crate::request::{FileReference, HostRequest, IoStatus, Irp};
use crate::sync::{Arc, Mutex, Ordering, Weak};
use crate::verifier::Counted;

/// The I/O manager and PnP manager of the host model, for one driver.
///
/// Dropping it is driver unload: every lower device still present is removed
/// (`device_removal`), then the platform's teardown check runs ([`HostPlatform::shutdown`]),
/// unless the thread is already panicking.
pub struct IoManager<D: FilterDriver<HostPlatform>> {
    platform: HostPlatform,
    driver: Arc<D>,
    devices: Mutex<Vec<u64>>,
}

impl<D: FilterDriver<HostPlatform>> IoManager<D> {
    /// An I/O manager delivering PnP, file and IOCTL callbacks to `driver`.
    pub fn new(platform: HostPlatform, driver: Arc<D>) -> Self {
        IoManager {
            platform,
            driver,
            devices: Mutex::new(Vec::new()),
        }
    }

    /// The platform the driver runs on.
    pub fn platform(&self) -> &HostPlatform {
        &self.platform
    }

    /// The driver.
    pub fn driver(&self) -> &Arc<D> {
        &self.driver
    }

    /// PnP start of a lower device whose stack has no connection manager: `device_arrival`
    /// at PASSIVE_LEVEL on this thread.
    ///
    /// # Errors
    /// The driver's status (the device then failed to start and is not remembered).
    pub fn arrive(&self, lower: D::Lower) -> Result<(), NtStatus> {
        self.arrive_with_cm(lower, None)
    }

    /// PnP start of a lower device with the connection manager of its stack.
    ///
    /// # Errors
    /// The driver's status (the device then failed to start and is not remembered).
    pub fn arrive_with_cm(
        &self,
        lower: D::Lower,
        cm: Option<<D::Lower as Verbs>::Cm>,
    ) -> Result<(), NtStatus> {
        let guid = lower.guid();
        // What the glue does before it calls the driver (a host has the memory).
        let lower = wv_hal::KArc::new(lower);
        let cm = cm.map(wv_hal::KArc::new);
        let verifier = self.platform.verifier();
        irql::run_callback(verifier, "device_arrival", Irql::Passive, || {
            self.driver.device_arrival(lower, cm)
        })?;
        self.devices.lock().push(guid);
        Ok(())
    }

    /// Removal (orderly or surprise) of the lower device with node GUID `guid`:
    /// `device_removal` at PASSIVE_LEVEL on this thread.
    pub fn remove(&self, guid: u64) {
        self.devices.lock().retain(|g| *g != guid);
        let verifier = self.platform.verifier();
        irql::run_callback(verifier, "device_removal", Irql::Passive, || {
            self.driver.device_removal(guid);
        });
    }

    /// CreateFile on `\\.\WinVerbs`: `file_create` at PASSIVE_LEVEL on this thread.
    ///
    /// # Errors
    /// The driver's status; no cleanup or close follows a failed create.
    pub fn open(&self) -> Result<File<D>, NtStatus> {
        let verifier = self.platform.verifier();
        let file = irql::run_callback(verifier, "file_create", Irql::Passive, || {
            self.driver.file_create()
        })?;
        verifier.created(Counted::File);
        Ok(File {
            core: Arc::new(FileCore {
                id: self.platform.shared.next_id(),
                driver: Arc::clone(&self.driver),
                platform: self.platform.clone(),
                file: Some(file),
                irps: Mutex::new(Vec::new()),
            }),
        })
    }
}

impl<D: FilterDriver<HostPlatform>> Drop for IoManager<D> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            return;
        }
        let devices = std::mem::take(&mut *self.devices.lock());
        for guid in devices {
            self.remove(guid);
        }
        self.platform.shutdown();
    }
}

/// The file object: the driver's per-file state and the references that keep it alive (the
/// handle and every IRP not yet completed). Its last release runs `file_close`.
struct FileCore<D: FilterDriver<HostPlatform>> {
    id: u64,
    driver: Arc<D>,
    platform: HostPlatform,
    file: Option<D::File>,
    /// IRPs issued on the file, for the flush on cleanup.
    irps: Mutex<Vec<Weak<Irp>>>,
}

impl<D: FilterDriver<HostPlatform>> FileCore<D> {
    fn state(&self) -> &D::File {
        self.file.as_ref().expect("file state present until close")
    }
}

impl<D: FilterDriver<HostPlatform>> Drop for FileCore<D> {
    fn drop(&mut self) {
        if let Some(file) = self.file.take() {
            let verifier = self.platform.verifier();
            irql::run_callback(verifier, "file_close", Irql::Passive, || {
                self.driver.file_close(file);
            });
            verifier.destroyed(Counted::File);
        }
    }
}

/// An open handle to `\\.\WinVerbs` (one file object, one WinVerbs provider).
///
/// Dropping it is CloseHandle of the last handle: the framework first cancels the file's
/// requests parked in queues (KMDF flushes its queues by file object before `EvtFileCleanup`),
/// then `file_cleanup` runs on this thread; `file_close` runs when the last IRP of the file has
/// completed (at once if none is outstanding). An [`Io`] may outlive its `File`.
pub struct File<D: FilterDriver<HostPlatform>> {
    core: Arc<FileCore<D>>,
}

impl<D: FilterDriver<HostPlatform>> File<D> {
    /// DeviceIoControl with an OVERLAPPED: builds the METHOD_BUFFERED IRP (system buffer of
    /// `max(input.len(), output_len)` bytes starting with `input`) and calls the driver's
    /// `device_io_control` on this thread at PASSIVE_LEVEL, as the I/O manager does for a
    /// control device's parallel queue. The returned [`Io`] says whether the driver completed
    /// inline or the caller got STATUS_PENDING.
    pub fn device_io_control(&self, code: u32, input: &[u8], output_len: usize) -> Io {
        dispatch(&self.core, code, input, output_len)
    }

    /// CloseHandle of the last handle racing a DeviceIoControl on another thread that the I/O
    /// manager has already referenced the file object for: cleanup runs first (as [`Drop`]
    /// does), then the IRP reaches the driver's `device_io_control` for the cleaned-up file.
    /// The driver must fail it (WinVerbs answers `STATUS_FILE_CLOSED`), not touch freed state.
    pub fn close_racing_ioctl(self, code: u32, input: &[u8], output_len: usize) -> Io {
        let core = Arc::clone(&self.core);
        drop(self);
        dispatch(&core, code, input, output_len)
    }

    /// The file object as an IOCTL in flight holds it: what the I/O manager references when
    /// DeviceIoControl starts, before the IRP reaches the driver. Requests issued through it
    /// race this handle's CloseHandle for real: the last handle may close (cleanup runs)
    /// while they are on their way in, and they still reach the driver afterwards.
    pub fn reference(&self) -> FileRef<D> {
        FileRef {
            core: Arc::clone(&self.core),
        }
    }

    /// CancelIoEx(handle, overlapped of `io`): cancels the IRP if it is parked in a queue (the
    /// platform completes it with STATUS_CANCELLED). Returns whether a cancellable IRP of this
    /// file was found. A driver-owned IRP is only marked (`Irp->Cancel`), so a later park of
    /// it completes it with STATUS_CANCELLED.
    pub fn cancel_io_ex(&self, io: &Io) -> bool {
        if io.irp.file_id != self.core.id || io.irp.result().is_some() {
            return false;
        }
        io.irp.cancel()
    }
}

/// A reference on a file object that is not a handle (see [`File::reference`]): it keeps the
/// file object alive but does not delay cleanup.
pub struct FileRef<D: FilterDriver<HostPlatform>> {
    core: Arc<FileCore<D>>,
}

impl<D: FilterDriver<HostPlatform>> FileRef<D> {
    /// DeviceIoControl on the referenced file object, as [`File::device_io_control`], also
    /// after its last handle was closed.
    pub fn device_io_control(&self, code: u32, input: &[u8], output_len: usize) -> Io {
        dispatch(&self.core, code, input, output_len)
    }

    /// CancelIoEx of a request issued on this file object.
    pub fn cancel_io_ex(&self, io: &Io) -> bool {
        if io.irp.file_id != self.core.id || io.irp.result().is_some() {
            return false;
        }
        io.irp.cancel()
    }
}

impl<D: FilterDriver<HostPlatform>> Clone for FileRef<D> {
    fn clone(&self) -> Self {
        FileRef {
            core: Arc::clone(&self.core),
        }
    }
}

/// Builds the METHOD_BUFFERED IRP for the file and calls the driver's `device_io_control`.
fn dispatch<D: FilterDriver<HostPlatform>>(
    core: &Arc<FileCore<D>>,
    code: u32,
    input: &[u8],
    output_len: usize,
) -> Io {
    let shared = &core.platform.shared;
    let level = irql::current();
    if level != Irql::Passive {
        shared.verifier.fail(format!(
            "verifier: DeviceIoControl issued at {}",
            level.name()
        ));
    }
    let reference: Box<dyn FileReference> = Box::new(Arc::clone(core));
    let irp = Irp::new(Arc::clone(shared), core.id, reference);
    {
        let mut irps = core.irps.lock();
        irps.retain(|w| w.upgrade().is_some_and(|irp| irp.result().is_none()));
        irps.push(Arc::downgrade(&irp));
    }
    let request = HostRequest::new(Arc::clone(&irp), code, input, output_len);
    irql::run_callback(&shared.verifier, "device_io_control", Irql::Passive, || {
        core.driver.device_io_control(core.state(), request);
    });
    irp.dispatching.store(false, Ordering::SeqCst);
    let pending = !irp.completed_inline();
    Io {
        irp,
        pending,
        platform: core.platform.clone(),
    }
}

impl<D: FilterDriver<HostPlatform>> Drop for File<D> {
    fn drop(&mut self) {
        let irps: Vec<Arc<Irp>> = self
            .core
            .irps
            .lock()
            .drain(..)
            .filter_map(|w| w.upgrade())
            .collect();
        for irp in irps {
            if irp.result().is_none() {
                irp.cancel();
            }
        }
        let core = &self.core;
        irql::run_callback(
            core.platform.verifier(),
            "file_cleanup",
            Irql::Passive,
            || {
                core.driver.file_cleanup(core.state());
            },
        );
    }
}

impl<D: FilterDriver<HostPlatform>> std::fmt::Debug for File<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("File").field("id", &self.core.id).finish()
    }
}

/// One overlapped DeviceIoControl in flight (the caller's OVERLAPPED).
pub struct Io {
    irp: Arc<Irp>,
    pending: bool,
    platform: HostPlatform,
}

impl Io {
    /// Whether DeviceIoControl returned STATUS_PENDING (ERROR_IO_PENDING): the driver did not
    /// complete the request inline in its dispatch routine.
    pub fn pending(&self) -> bool {
        self.pending
    }

    /// The IRP id, as the verifier's messages show it.
    pub fn id(&self) -> u64 {
        self.irp.id
    }

    /// Whether the request has completed (`HasOverlappedIoCompleted`).
    pub fn is_complete(&self) -> bool {
        self.irp.result().is_some()
    }

    /// The final status, if completed (`GetOverlappedResult(bWait = FALSE)`).
    pub fn try_result(&self) -> Option<IoStatus> {
        self.irp.result()
    }

    /// Waits for completion (`GetOverlappedResult(bWait = TRUE)`). Threaded mode: parks on
    /// the IRP's wait word, woken directly (and alone) by the completing thread. Deterministic
    /// mode: runs the queued work first.
    ///
    /// # Panics
    /// In deterministic mode, if the request is still pending once nothing is left to run
    /// (the wait would never end).
    pub fn wait(self) -> IoStatus {
        if self.platform.is_deterministic() {
            self.platform.run_until_idle();
            self.irp.result().unwrap_or_else(|| {
                panic!(
                    "Io::wait: request {:#x} is still pending after run_until_idle; \
                     in deterministic mode this wait would block for ever",
                    self.irp.id
                )
            })
        } else {
            self.irp.wait(None).expect("completed")
        }
    }

    /// Waits at most `timeout` (a hang guard for tests); deterministic mode runs the queued
    /// work first and does not wait.
    pub fn wait_timeout(&self, timeout: Duration) -> Option<IoStatus> {
        if self.platform.is_deterministic() {
            self.platform.run_until_idle();
            self.irp.result()
        } else {
            self.irp.wait(Some(timeout))
        }
    }
}

impl std::fmt::Debug for Io {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Io")
            .field("id", &self.irp.id)
            .field("pending", &self.pending)
            .field("result", &self.irp.result())
            .finish()
    }
}
