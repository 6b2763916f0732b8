//! [`Machine`]: one emulated Windows machine with KMDF 1.31, one per process at a time.
//!
//! A driver built against the WDF bindings has statics (its globals, its control device), and
//! the symbols it links against (`WdfFunctions_01031`, `WdfDriverGlobals`, the kernel
//! routines) are process-wide; so the machine is too. [`Machine::boot`] waits until no other
//! machine exists in the process (tests serialise on it), and the entry points find the
//! running machine through [`current`]. Unloading a driver must bring every count back to zero
//! ([`Machine::unload`] checks it), so that the next machine loads the driver fresh.

use std::cell::UnsafeCell;
use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::{Condvar, Mutex, MutexGuard, RwLock};
use wdk_sys::{DRIVER_OBJECT, NTSTATUS, PCUNICODE_STRING, PDRIVER_OBJECT, UNICODE_STRING};
use wv_ci::Convention;
use wv_hal::Irql;
use wv_host::HostPlatform;

use crate::faults::Faults;
use crate::objects::Fx;
use crate::pnp::Controllers;
use crate::verifier::{self, Report};
use crate::wdm::{Pool, WorkItems};

/// How a machine runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MachineConfig {
    /// PASSIVE_LEVEL worker threads (system work items, deferred dispatch, deferred disposal),
    /// or `None` for one deterministic thread: deferred work then runs only when someone waits
    /// (an I/O wait, a PnP transition, [`Machine::run_until_idle`]).
    pub workers: Option<usize>,
    /// How long an I/O or PnP wait may take before the machine reports a hang.
    pub hang_timeout: Duration,
}

impl Default for MachineConfig {
    fn default() -> Self {
        MachineConfig {
            workers: Some(2),
            hang_timeout: Duration::from_secs(20),
        }
    }
}

impl MachineConfig {
    /// One thread, deterministic.
    pub fn deterministic() -> Self {
        MachineConfig {
            workers: None,
            ..MachineConfig::default()
        }
    }
}

/// The driver's entry point as the machine calls it: `DriverEntry(DriverObject, RegistryPath)`
/// at PASSIVE_LEVEL, with the calling convention of the driver. A host build of the driver
/// exports it as `DriverEntry` with the C convention ([`DriverEntry::host`]); a loader that
/// maps a linked image supplies a closure that calls the image's entry point, with
/// [`Convention::Win64`] ([`DriverEntry::new`]). The convention is the driver's: every callback
/// of the driver is called with it, and the controllers below hand it their tables in it.
pub struct DriverEntry {
    convention: Convention,
    call: Box<dyn Fn(PDRIVER_OBJECT, PCUNICODE_STRING) -> NTSTATUS + Send + Sync>,
    after_unload: Option<Box<dyn Fn() -> Vec<String> + Send + Sync>>,
}

impl DriverEntry {
    /// A driver whose code follows `convention`; `call` runs its entry point.
    pub fn new(
        convention: Convention,
        call: impl Fn(PDRIVER_OBJECT, PCUNICODE_STRING) -> NTSTATUS + Send + Sync + 'static,
    ) -> Self {
        DriverEntry {
            convention,
            call: Box::new(call),
            after_unload: None,
        }
    }

    /// Adds the driver's loader's own checks after an unload (a linked image: bound to the
    /// framework and unbound again, once each): what `check` returns joins the unload's
    /// [`Report`].
    #[must_use]
    pub fn with_unload_check(
        mut self,
        check: impl Fn() -> Vec<String> + Send + Sync + 'static,
    ) -> Self {
        self.after_unload = Some(Box::new(check));
        self
    }

    /// A driver compiled for the host (the host's C convention, `extern "system"` on Linux).
    pub fn host(
        call: impl Fn(PDRIVER_OBJECT, PCUNICODE_STRING) -> NTSTATUS + Send + Sync + 'static,
    ) -> Self {
        Self::new(Convention::System, call)
    }

    /// The driver's calling convention.
    pub fn convention(&self) -> Convention {
        self.convention
    }
}

impl std::fmt::Debug for DriverEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DriverEntry")
            .field("convention", &self.convention)
            .finish_non_exhaustive()
    }
}

/// The state of the running machine, reached by every entry point through [`current`].
pub struct Inner {
    pub(crate) config: MachineConfig,
    pub(crate) platform: HostPlatform,
    /// The framework: objects, devices, queues, requests.
    pub(crate) fx: Mutex<Fx>,
    /// Nonpaged pool, by allocation.
    pub(crate) pool: Mutex<Pool>,
    /// `IoAllocateWorkItem` items.
    pub(crate) work_items: Mutex<WorkItems>,
    /// Every KEVENT wait parks here; every KEVENT change notifies it.
    pub(crate) events: (Mutex<()>, Condvar),
    /// The PnP manager's devices.
    pub(crate) controllers: Mutex<Controllers>,
    /// Set by the first bug check: the machine is dead (it keeps running so that the test can
    /// tear it down, but the run has failed).
    pub(crate) dead: AtomicBool,
    /// What the driver printed (`DbgPrint`), in order.
    pub(crate) log: Mutex<Vec<String>>,
    pub(crate) faults: Faults,
    /// The driver object and registry path handed to `DriverEntry` (stable addresses). The
    /// driver and the framework write the driver object (its `DriverUnload`), as on Windows.
    pub(crate) driver_object: Box<UnsafeCell<DRIVER_OBJECT>>,
    registry_path: Box<(UNICODE_STRING, Vec<u16>)>,
    /// The loaded driver's calling convention (whether it is [`Convention::Win64`]; set by
    /// [`Machine::load`]).
    win64: AtomicBool,
    /// Whether a driver is loaded (DriverEntry succeeded and unload has not run).
    pub(crate) loaded: AtomicBool,
    /// Counters of things the verifier reports on, by name.
    pub(crate) stats: Stats,
    /// How long the system worker threads take to reach an `IoQueueWorkItem` item.
    pub(crate) work_item_delay: Mutex<Duration>,
}

// SAFETY: the raw pointers inside (the driver object's fields, the registry path's buffer)
// point into memory this value owns and never changes after construction; everything mutable
// is behind a lock or an atomic.
unsafe impl Send for Inner {}
// SAFETY: as above.
unsafe impl Sync for Inner {}

static CURRENT: RwLock<Option<Arc<Inner>>> = RwLock::new(None);
static SESSION: Mutex<()> = Mutex::new(());

/// The running machine, if any.
pub fn current() -> Option<Arc<Inner>> {
    CURRENT.read().clone()
}

/// One emulated machine. Dropping it without [`Machine::unload`] tears down what it can and
/// releases the process for the next machine.
pub struct Machine {
    inner: Arc<Inner>,
    entry: Mutex<Option<DriverEntry>>,
    _session: MutexGuard<'static, ()>,
}

impl std::fmt::Debug for Machine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Machine")
            .field("config", &self.inner.config)
            .field("dead", &self.inner.is_dead())
            .finish_non_exhaustive()
    }
}

impl Machine {
    /// Boots a machine: waits until no other machine exists in this process, then makes this
    /// one current.
    pub fn boot(config: MachineConfig) -> Machine {
        Self::start(config, SESSION.lock())
    }

    /// [`Machine::boot`], waiting at most `wait` for the machine before it (whose test may have
    /// been abandoned hung, holding it): `None` when it is still there.
    pub fn try_boot(config: MachineConfig, wait: Duration) -> Option<Machine> {
        SESSION
            .try_lock_for(wait)
            .map(|session| Self::start(config, session))
    }

    fn start(config: MachineConfig, session: MutexGuard<'static, ()>) -> Machine {
        let platform = match config.workers {
            Some(workers) => HostPlatform::threaded(workers.max(1)),
            None => HostPlatform::deterministic(),
        };
        let path: Vec<u16> = r"\Registry\Machine\System\CurrentControlSet\Services\WinVerbs"
            .encode_utf16()
            .collect();
        let mut registry_path = Box::new((
            UNICODE_STRING {
                Length: 0,
                MaximumLength: 0,
                Buffer: std::ptr::null_mut(),
            },
            path,
        ));
        let bytes = u16::try_from(registry_path.1.len() * 2).expect("short path");
        registry_path.0 = UNICODE_STRING {
            Length: bytes,
            MaximumLength: bytes,
            Buffer: registry_path.1.as_mut_ptr(),
        };
        // SAFETY: DRIVER_OBJECT is plain data (integers, pointers, optional function pointers)
        // for which all-zero bytes are a valid value; the I/O manager zeroes it too.
        let mut driver_object: DRIVER_OBJECT = unsafe { std::mem::zeroed() };
        driver_object.Type = 4; // IO_TYPE_DRIVER
        driver_object.Size = u16::try_from(size_of::<DRIVER_OBJECT>()).unwrap_or(u16::MAX) as i16;
        let driver_object = Box::new(UnsafeCell::new(driver_object));
        let inner = Arc::new(Inner {
            config,
            platform,
            fx: Mutex::new(Fx::default()),
            pool: Mutex::new(Pool::default()),
            work_items: Mutex::new(WorkItems::default()),
            events: (Mutex::new(()), Condvar::new()),
            controllers: Mutex::new(Controllers::default()),
            dead: AtomicBool::new(false),
            log: Mutex::new(Vec::new()),
            faults: Faults::default(),
            driver_object,
            registry_path,
            win64: AtomicBool::new(false),
            loaded: AtomicBool::new(false),
            stats: Stats::default(),
            work_item_delay: Mutex::new(Duration::ZERO),
        });
        crate::table::reset_globals();
        *CURRENT.write() = Some(Arc::clone(&inner));
        Machine {
            inner,
            entry: Mutex::new(None),
            _session: session,
        }
    }

    /// The machine's state (for the other modules' public functions).
    pub fn inner(&self) -> &Arc<Inner> {
        &self.inner
    }

    /// The host platform the soft HCAs below the driver run on (their ISRs and DPCs share the
    /// driver's per-thread IRQL).
    pub fn platform(&self) -> &HostPlatform {
        &self.inner.platform
    }

    /// The fault injector (failing WDF calls and pool allocations in turn).
    pub fn faults(&self) -> &Faults {
        &self.inner.faults
    }

    /// Loads the driver: `DriverEntry` at PASSIVE_LEVEL on this thread, with the driver's
    /// calling convention from then on. On failure the framework deletes what the driver
    /// created and the driver is not loaded.
    pub fn load(&self, entry: DriverEntry) -> NTSTATUS {
        let inner = &self.inner;
        inner
            .win64
            .store(entry.convention == Convention::Win64, Ordering::SeqCst);
        let driver_object = inner.driver_object();
        let path = &raw const inner.registry_path.0;
        let (status, _) = crate::callbacks::frame(inner, "DriverEntry", Irql::Passive, || {
            (entry.call)(driver_object, path)
        });
        if wdk_sys::NT_SUCCESS(status) {
            inner.loaded.store(true, Ordering::SeqCst);
            *self.entry.lock() = Some(entry);
        } else {
            // The framework's side of a failed DriverEntry: the driver object goes, with every
            // object the driver parented to it; EvtDriverUnload is not called.
            crate::objects::delete_driver_object(inner);
            crate::table::reset_globals();
        }
        status
    }

    /// The registry path `DriverEntry` received (the service key).
    pub fn registry_path(&self) -> String {
        String::from_utf16_lossy(&self.inner.registry_path.1)
    }

    /// The driver object `DriverEntry` received.
    pub fn driver_object(&self) -> PDRIVER_OBJECT {
        self.inner.driver_object()
    }

    /// Whether a driver is loaded.
    pub fn is_loaded(&self) -> bool {
        self.inner.loaded.load(Ordering::SeqCst)
    }

    /// Runs deferred work until none is left (deterministic), or waits until the workers are
    /// idle (threaded).
    pub fn run_until_idle(&self) {
        self.inner.run_until_idle();
    }

    /// Every violation recorded so far (rules broken, bug checks), oldest first.
    pub fn violations(&self) -> Vec<String> {
        self.inner.platform.verifier().violations()
    }

    /// Removes and returns the recorded violations (for tests that provoke one on purpose).
    pub fn take_violations(&self) -> Vec<String> {
        self.inner.platform.verifier().take_violations()
    }

    /// Whether a bug check happened.
    pub fn is_dead(&self) -> bool {
        self.inner.is_dead()
    }

    /// What the driver printed with `DbgPrint`.
    pub fn debug_log(&self) -> Vec<String> {
        self.inner.log.lock().clone()
    }

    /// Busy system worker threads (threaded machines): every `IoQueueWorkItem` routine starts
    /// `delay` late, until set back to zero.
    pub fn delay_work_items(&self, delay: Duration) {
        *self.inner.work_item_delay.lock() = delay;
    }

    /// Every device the driver has now (a control device, filter devices), as the framework
    /// holds them.
    pub fn devices(&self) -> Vec<crate::devices::DeviceInfo> {
        crate::devices::devices(&self.inner)
    }

    /// A counter the emulation keeps (see [`crate::verifier`] for the names).
    pub fn stat(&self, name: &str) -> u64 {
        self.inner.stats.get(name)
    }

    /// Unloads the driver and checks that nothing is left: every controller is removed first
    /// (the PnP manager unloads a driver when its last device goes), then `EvtDriverUnload`
    /// runs, the framework deletes the driver object, and the verifier looks for everything a
    /// driver must have given back ([`crate::verifier::unload_checks`]). Returns every violation
    /// of the run.
    pub fn unload(self) -> Report {
        crate::pnp::remove_all(&self.inner);
        record_coverage(&self.inner);
        self.inner.run_until_idle();
        unload_driver(&self.inner);
        self.inner.run_until_idle();
        let mut report = verifier::unload_checks(&self.inner);
        if let Some(check) = self
            .entry
            .lock()
            .as_ref()
            .and_then(|e| e.after_unload.as_ref())
        {
            report.violations.extend(check());
        }
        self.inner.loaded.store(false, Ordering::SeqCst);
        report
    }
}

/// The I/O manager's unload: `DriverObject->DriverUnload` at PASSIVE_LEVEL — the framework's
/// unload routine ([`crate::objects::framework_unload`]: `EvtDriverUnload`, then the driver
/// object's deletion), or whatever the driver put in front of it (a linked image's
/// `FxDriverEntry` stub displaces it and unbinds from the framework after it). A driver the
/// framework gave no unload routine is unloaded by the framework directly.
fn unload_driver(inner: &Arc<Inner>) {
    let driver_object = inner.driver_object();
    // SAFETY: the machine's driver object; nothing else writes it while the driver unloads.
    let routine = unsafe { (*driver_object).DriverUnload };
    match routine {
        Some(routine) => {
            crate::callbacks::frame(inner, "DriverUnload", Irql::Passive, || {
                // SAFETY: the routine in the driver object, called once with it, as the I/O
                // manager does.
                unsafe {
                    crate::callbacks::driver_object_unload(
                        inner.convention(),
                        routine,
                        driver_object,
                    )
                }
            });
        }
        None => verifier::unload(inner),
    }
}

/// With `WDF_EMU_COVERAGE=<file>`, appends a line to the file: the running test's name and
/// every DDI and kernel routine the driver called on this machine. `tools/wdf-emu/run` checks
/// docs/WINDOWS.md's table against it (each call is executed by the tests the table names).
fn record_coverage(inner: &Inner) {
    use std::io::Write as _;
    let Some(path) = std::env::var_os("WDF_EMU_COVERAGE") else {
        return;
    };
    let mut called: Vec<&str> = inner
        .stats
        .names()
        .into_iter()
        .filter(|k| {
            ["Wdf", "Ke", "Ex", "Io", "DbgPrint"]
                .iter()
                .any(|p| k.starts_with(p))
        })
        .collect();
    called.sort_unstable();
    called.dedup();
    let test = std::thread::current()
        .name()
        .unwrap_or("?")
        .rsplit("::")
        .next()
        .unwrap_or("?")
        .to_owned();
    if let Ok(mut file) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
    {
        let _ = writeln!(file, "{test} {}", called.join(","));
    }
}

impl Drop for Machine {
    fn drop(&mut self) {
        if self.inner.loaded.load(Ordering::SeqCst) {
            // Not unloaded by the test (it failed or returned early): tear down what can be
            // torn down, so that the next machine starts from a clean driver.
            crate::pnp::remove_all(&self.inner);
            self.inner.run_until_idle();
            unload_driver(&self.inner);
            self.inner.run_until_idle();
            self.inner.loaded.store(false, Ordering::SeqCst);
        }
        crate::table::reset_globals();
        *CURRENT.write() = None;
    }
}

impl Inner {
    /// The loaded driver's calling convention.
    pub fn convention(&self) -> Convention {
        if self.win64.load(Ordering::SeqCst) {
            Convention::Win64
        } else {
            Convention::System
        }
    }

    /// The driver object (the address `DriverEntry` received).
    pub fn driver_object(&self) -> PDRIVER_OBJECT {
        self.driver_object.get()
    }

    /// Whether a bug check happened.
    pub fn is_dead(&self) -> bool {
        self.dead.load(Ordering::SeqCst)
    }

    /// Every violation recorded so far, oldest first.
    pub fn violations(&self) -> Vec<String> {
        self.platform.verifier().violations()
    }

    /// Records a violation of a rule (the machine goes on).
    pub fn violation(&self, message: impl Into<String>) {
        let message = message.into();
        if std::env::var_os("WDF_EMU_TRACE").is_some() {
            eprintln!("wdf-emu: {message}");
        }
        self.platform.verifier().report(message);
    }

    /// Records a bug check: the machine is dead from here on (what follows is for teardown
    /// only). `code` is the bug check code, `what` names the routine and the rule.
    pub fn bug_check(&self, code: u32, what: impl AsRef<str>) {
        self.dead.store(true, Ordering::SeqCst);
        self.violation(format!(
            "bug check {code:#x} ({}): {}",
            verifier::bug_check_name(code),
            what.as_ref()
        ));
    }

    /// A DDI `ddi` was given NULL for a pointer parameter the framework checks
    /// (`FxPointerNotNull`); `names` names the parameter (or the ones of which one was NULL).
    /// Bug-checks with `WDF_VIOLATION`, as KMDF does.
    pub(crate) fn null_parameter(&self, ddi: &str, names: &str) {
        self.bug_check(
            verifier::WDF_VIOLATION,
            format!("{ddi}: {names} is NULL (FxPointerNotNull)"),
        );
    }

    /// A DDI `ddi` was given `handle`, which is not a live object of the `expected` kind:
    /// releases the framework lock `fx` and bug-checks with `WDF_VIOLATION`, saying what the
    /// handle is instead.
    pub(crate) fn invalid_handle(
        &self,
        fx: MutexGuard<'_, Fx>,
        ddi: &str,
        handle: crate::objects::Handle,
        expected: &str,
    ) {
        let message = fx.invalid(handle, expected);
        drop(fx);
        self.bug_check(verifier::WDF_VIOLATION, format!("{ddi}: {message}"));
    }

    /// Counts one event of `name` (see [`Machine::stat`]).
    pub(crate) fn count(&self, name: &'static str) {
        self.stats.add(name);
    }

    /// Deterministic: runs deferred work until none is left. Threaded: waits for the workers.
    pub(crate) fn run_until_idle(&self) {
        self.platform.run_until_idle();
    }

    /// Whether this is the one-thread machine.
    pub(crate) fn is_deterministic(&self) -> bool {
        self.config.workers.is_none()
    }
}

/// The emulation's counters. Every entry point counts itself, so counting is on the path of
/// every DDI and must cost little: a counter is found by the address of its name (every name
/// is a `&'static str`), in an open-addressed table that never moves, and incremented without a
/// lock. The same text at two addresses (a literal the compiler did not merge) gets two slots;
/// reading sums them, so a name's count is what one map keyed by its text would hold.
pub(crate) struct Stats {
    slots: Box<[Slot]>,
}

#[derive(Default)]
struct Slot {
    name: OnceLock<&'static str>,
    count: AtomicU64,
}

/// Slots in the table: several times the distinct names the emulation counts (its DDIs, kernel
/// routines and events, about two hundred), so that probes stay short.
const STAT_SLOTS: usize = 1024;

impl Default for Stats {
    fn default() -> Self {
        Stats {
            slots: (0..STAT_SLOTS).map(|_| Slot::default()).collect(),
        }
    }
}

impl Stats {
    /// Counts one event of `name`.
    pub(crate) fn add(&self, name: &'static str) {
        let same = |key: &&'static str| key.as_ptr() == name.as_ptr() && key.len() == name.len();
        // Fibonacci hashing of the address: names are byte strings anywhere in the image.
        let start = (name.as_ptr() as usize as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 54;
        for probe in 0..STAT_SLOTS {
            let slot = &self.slots[(start as usize + probe) % STAT_SLOTS];
            let key = match slot.name.get() {
                Some(key) => key,
                None => slot.name.get_or_init(|| name),
            };
            if same(key) {
                slot.count.fetch_add(1, Ordering::Relaxed);
                return;
            }
        }
        panic!("wdf-emu: more than {STAT_SLOTS} counter names");
    }

    /// The count of `name`, whatever its address.
    pub(crate) fn get(&self, name: &str) -> u64 {
        self.slots
            .iter()
            .filter(|slot| slot.name.get().is_some_and(|key| *key == name))
            .map(|slot| slot.count.load(Ordering::Relaxed))
            .sum()
    }

    /// Every name counted at least once (a name at two addresses appears twice).
    pub(crate) fn names(&self) -> Vec<&'static str> {
        self.slots
            .iter()
            .filter_map(|slot| slot.name.get().copied())
            .collect()
    }
}
