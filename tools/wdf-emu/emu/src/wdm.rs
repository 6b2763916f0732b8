//! The kernel routines a KMDF driver imports, with the checks Driver Verifier makes on them:
//!
//! * pool: `ExAllocatePool2` / `ExFreePoolWithTag`, tracked by allocation and tag (freeing with
//!   another tag, twice, or something that is no allocation is a bug check; what is left at
//!   unload is a leak);
//! * system work items: `IoAllocateWorkItem` (a live device object), `IoQueueWorkItem` (not
//!   while queued; the device object stays referenced until the routine returns),
//!   `IoFreeWorkItem` (not while queued);
//! * spin locks: `KeAcquireSpinLockRaiseToDpc` / `KeReleaseSpinLock` on the driver's
//!   `KSPIN_LOCK` word, raising and restoring the thread's IRQL (shared with the soft HCA's
//!   DPCs through `wv-host`);
//! * events: `KeInitializeEvent`, `KeSetEvent`, `KeReadStateEvent`, `KeWaitForSingleObject`
//!   (a wait above APC_LEVEL is a bug; in the deterministic machine a wait that nothing queued
//!   can end is reported instead of hanging);
//! * `KeEnterCriticalRegion` / `KeLeaveCriticalRegion` (balanced within a callback),
//!   `KeGetCurrentIrql`, `KeQueryInterruptTimePrecise`, `DbgPrint`.

use std::alloc::Layout;
use std::cell::Cell;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use wdk_sys::{
    BOOLEAN, EVENT_TYPE, KIRQL, KPRIORITY, KPROCESSOR_MODE, KWAIT_REASON, LONG, NTSTATUS, PCSTR,
    PDEVICE_OBJECT, PIO_WORKITEM, PIO_WORKITEM_ROUTINE, PKSPIN_LOCK, PLARGE_INTEGER, POOL_FLAGS,
    PRKEVENT, PULONG64, PVOID, SIZE_T, ULONG, ULONG64, WORK_QUEUE_TYPE,
};
use wv_hal::{Irql, Platform};
use wv_host::kernel;

use crate::machine::Inner;
use crate::verifier::{
    BAD_POOL_CALLER, DRIVER_VERIFIER_DETECTED_VIOLATION, IRQL_NOT_LESS_OR_EQUAL, WORKER_INVALID,
};

crate::kernel_routines! {
    ExAllocatePool2 [Dispatch, fail = std::ptr::null_mut()]
        (flags: POOL_FLAGS, bytes: SIZE_T, tag: ULONG) -> PVOID => allocate_pool;
    ExFreePoolWithTag [Dispatch, fail = ()] (pointer: PVOID, tag: ULONG) => free_pool;
    ExFreePool [Dispatch, fail = ()] (pointer: PVOID) => free_pool_any_tag;
    IoAllocateWorkItem [Dispatch, fail = std::ptr::null_mut()]
        (device: PDEVICE_OBJECT) -> PIO_WORKITEM => allocate_work_item;
    IoQueueWorkItem [Dispatch, fail = ()]
        (item: PIO_WORKITEM, routine: PIO_WORKITEM_ROUTINE, queue_type: WORK_QUEUE_TYPE,
         context: PVOID) => queue_work_item;
    IoFreeWorkItem [Dispatch, fail = ()] (item: PIO_WORKITEM) => free_work_item;
    KeAcquireSpinLockRaiseToDpc [Dispatch, fail = 2] (lock: PKSPIN_LOCK) -> KIRQL
        => acquire_spin_lock;
    KeReleaseSpinLock [Dispatch, fail = ()] (lock: PKSPIN_LOCK, new_irql: KIRQL)
        => release_spin_lock;
    KeInitializeEvent [Dispatch, fail = ()] (event: PRKEVENT, kind: EVENT_TYPE, state: BOOLEAN)
        => initialize_event;
    KeSetEvent [Dispatch, fail = 0] (event: PRKEVENT, increment: KPRIORITY, wait: BOOLEAN)
        -> LONG => set_event;
    KeReadStateEvent [Dispatch, fail = 0] (event: PRKEVENT) -> LONG => read_state_event;
    KeWaitForSingleObject [Dispatch, fail = wdk_sys::STATUS_TIMEOUT]
        (object: PVOID, reason: KWAIT_REASON, mode: KPROCESSOR_MODE, alertable: BOOLEAN,
         timeout: PLARGE_INTEGER) -> NTSTATUS => wait_for_single_object;
    KeEnterCriticalRegion [Apc, fail = ()] () => enter_critical_region;
    KeLeaveCriticalRegion [Apc, fail = ()] () => leave_critical_region;
    KeGetCurrentIrql [Device, fail = 0] () -> KIRQL => get_current_irql;
    KeQueryInterruptTimePrecise [Device, fail = 0] (qpc: PULONG64) -> ULONG64
        => query_interrupt_time_precise;
    DbgPrint [Device, fail = 0] (format: PCSTR, text: PCSTR) -> ULONG => dbg_print;
}

/// `POOL_FLAG_UNINITIALIZED`, `POOL_FLAG_NON_PAGED`, `POOL_FLAG_PAGED`,
/// `POOL_FLAG_NON_PAGED_EXECUTE` (the POOL_FLAGS page of the DDI reference).
const POOL_FLAG_UNINITIALIZED: u64 = 0x2;
const POOL_FLAG_NON_PAGED: u64 = 0x40;
const POOL_FLAG_NON_PAGED_EXECUTE: u64 = 0x80;
const POOL_FLAG_PAGED: u64 = 0x100;

/// The KIRQL value of each level (DIRQL shown as 5).
fn kirql(irql: Irql) -> KIRQL {
    match irql {
        Irql::Passive => 0,
        Irql::Apc => 1,
        Irql::Dispatch => 2,
        Irql::Device => 5,
    }
}

fn from_kirql(value: KIRQL) -> Irql {
    match value {
        0 => Irql::Passive,
        1 => Irql::Apc,
        2 => Irql::Dispatch,
        _ => Irql::Device,
    }
}

// ---------------------------------------------------------------------------------------------
// Pool

struct Block {
    layout: Layout,
    tag: u32,
}

/// Nonpaged pool: every live allocation.
#[derive(Default)]
pub(crate) struct Pool {
    blocks: HashMap<usize, Block>,
}

impl Pool {
    /// Live allocations as (tag, count, bytes), by tag.
    pub(crate) fn by_tag(&self) -> Vec<(u32, usize, usize)> {
        let mut tags: HashMap<u32, (usize, usize)> = HashMap::new();
        for block in self.blocks.values() {
            let entry = tags.entry(block.tag).or_default();
            entry.0 += 1;
            entry.1 += block.layout.size();
        }
        let mut all: Vec<_> = tags.into_iter().map(|(t, (n, b))| (t, n, b)).collect();
        all.sort_unstable();
        all
    }

    /// Frees everything left (after the leak report).
    pub(crate) fn reclaim(&mut self) {
        for (address, block) in self.blocks.drain() {
            // SAFETY: a block this pool allocated with this layout and nobody freed.
            unsafe { std::alloc::dealloc(address as *mut u8, block.layout) };
        }
    }
}

/// A pool tag as its four characters.
pub fn tag_text(tag: u32) -> String {
    tag.to_le_bytes()
        .iter()
        .map(|b| {
            if b.is_ascii_graphic() {
                *b as char
            } else {
                '.'
            }
        })
        .collect()
}

unsafe fn allocate_pool(m: &Arc<Inner>, flags: POOL_FLAGS, bytes: SIZE_T, tag: ULONG) -> PVOID {
    const NAME: &str = "ExAllocatePool2";
    let kinds = flags & (POOL_FLAG_NON_PAGED | POOL_FLAG_NON_PAGED_EXECUTE | POOL_FLAG_PAGED);
    if kinds.count_ones() != 1 {
        m.bug_check(
            BAD_POOL_CALLER,
            format!("{NAME}: flags {flags:#x} name no single pool type"),
        );
        return std::ptr::null_mut();
    }
    if kinds == POOL_FLAG_PAGED && kernel::irql() > Irql::Apc {
        m.bug_check(
            IRQL_NOT_LESS_OR_EQUAL,
            format!("{NAME}: paged pool at {}", kernel::irql().name()),
        );
        return std::ptr::null_mut();
    }
    if tag == 0 {
        m.bug_check(BAD_POOL_CALLER, format!("{NAME}: a zero pool tag"));
        return std::ptr::null_mut();
    }
    if m.faults.fail(NAME) {
        return std::ptr::null_mut();
    }
    let Ok(layout) = Layout::from_size_align(bytes.max(1) as usize, 16) else {
        return std::ptr::null_mut();
    };
    // SAFETY: a non-zero size.
    let block = unsafe { std::alloc::alloc_zeroed(layout) };
    if block.is_null() {
        return std::ptr::null_mut();
    }
    if flags & POOL_FLAG_UNINITIALIZED != 0 {
        // SAFETY: the whole new block.
        unsafe { std::ptr::write_bytes(block, 0xC5, layout.size()) };
    }
    m.pool
        .lock()
        .blocks
        .insert(block as usize, Block { layout, tag });
    m.count("pool allocations");
    block.cast()
}

unsafe fn free_pool(m: &Arc<Inner>, pointer: PVOID, tag: ULONG) {
    // SAFETY: the caller's promise.
    unsafe { free(m, "ExFreePoolWithTag", pointer, Some(tag)) }
}

/// `ExFreePool`: what wdk-alloc's allocator frees the driver's Rust heap with (a linked
/// image's; a host build of the driver has the host's allocator).
unsafe fn free_pool_any_tag(m: &Arc<Inner>, pointer: PVOID) {
    // SAFETY: the caller's promise.
    unsafe { free(m, "ExFreePool", pointer, None) }
}

/// Frees a pool block, checking its tag when the caller names one.
///
/// # Safety
/// `pointer` is what the driver passed to the routine `name`.
unsafe fn free(m: &Arc<Inner>, name: &str, pointer: PVOID, tag: Option<ULONG>) {
    let mut pool = m.pool.lock();
    let Some(block) = pool.blocks.get(&(pointer as usize)) else {
        drop(pool);
        m.bug_check(
            BAD_POOL_CALLER,
            format!(
                "{name}: {pointer:p} is not a pool allocation (freed twice, or never allocated)"
            ),
        );
        return;
    };
    if let Some(tag) = tag
        && block.tag != tag
    {
        let owner = block.tag;
        drop(pool);
        m.bug_check(
            BAD_POOL_CALLER,
            format!(
                "{name}: {pointer:p} was allocated with tag '{}' and freed with tag '{}'",
                tag_text(owner),
                tag_text(tag)
            ),
        );
        return;
    }
    let block = pool
        .blocks
        .remove(&(pointer as usize))
        .expect("found above");
    drop(pool);
    // Events living in the block go with it.
    forget_events(pointer as usize, block.layout.size());
    // SAFETY: allocated by `allocate_pool` with this layout, freed once (removed above).
    unsafe { std::alloc::dealloc(pointer.cast(), block.layout) };
}

// ---------------------------------------------------------------------------------------------
// Work items

struct Item {
    device: usize,
    queued: bool,
    _memory: Box<[u64; 8]>,
}

/// `IO_WORKITEM`s allocated and not freed.
#[derive(Default)]
pub(crate) struct WorkItems {
    items: HashMap<usize, Item>,
}

impl WorkItems {
    /// Items allocated and not freed, and of those, queued.
    pub(crate) fn counts(&self) -> (usize, usize) {
        (
            self.items.len(),
            self.items.values().filter(|i| i.queued).count(),
        )
    }
}

unsafe fn allocate_work_item(m: &Arc<Inner>, device: PDEVICE_OBJECT) -> PIO_WORKITEM {
    const NAME: &str = "IoAllocateWorkItem";
    {
        let mut fx = m.fx.lock();
        match fx.wdm_devices.get_mut(&(device as usize)) {
            Some(w) if !w.deleted => {}
            Some(_) => {
                drop(fx);
                m.bug_check(
                    DRIVER_VERIFIER_DETECTED_VIOLATION,
                    format!("{NAME}: device object {device:p} was deleted"),
                );
                return std::ptr::null_mut();
            }
            None => {
                drop(fx);
                m.bug_check(
                    DRIVER_VERIFIER_DETECTED_VIOLATION,
                    format!("{NAME}: {device:p} is not a device object of this driver"),
                );
                return std::ptr::null_mut();
            }
        }
    }
    if m.faults.fail(NAME) {
        return std::ptr::null_mut();
    }
    let memory = Box::new([0u64; 8]);
    let address = std::ptr::from_ref(&*memory) as usize;
    m.work_items.lock().items.insert(
        address,
        Item {
            device: device as usize,
            queued: false,
            _memory: memory,
        },
    );
    m.count("work items allocated");
    address as PIO_WORKITEM
}

unsafe fn queue_work_item(
    m: &Arc<Inner>,
    item: PIO_WORKITEM,
    routine: PIO_WORKITEM_ROUTINE,
    _queue_type: WORK_QUEUE_TYPE,
    context: PVOID,
) {
    const NAME: &str = "IoQueueWorkItem";
    let Some(routine) = routine else {
        m.bug_check(WORKER_INVALID, format!("{NAME}: WorkerRoutine is NULL"));
        return;
    };
    let device = {
        let mut items = m.work_items.lock();
        match items.items.get_mut(&(item as usize)) {
            None => {
                drop(items);
                m.bug_check(
                    WORKER_INVALID,
                    format!("{NAME}: {item:p} is not an allocated work item"),
                );
                return;
            }
            Some(i) if i.queued => {
                drop(items);
                m.bug_check(
                    WORKER_INVALID,
                    format!("{NAME}: work item {item:p} queued again while it is still queued"),
                );
                return;
            }
            Some(i) => {
                i.queued = true;
                i.device
            }
        }
    };
    // The queued item references its device object until the routine returns.
    if let Some(w) = m.fx.lock().wdm_devices.get_mut(&device) {
        w.refs += 1;
    }
    let machine = Arc::clone(m);
    let (item, context) = (item as usize, context as usize);
    crate::callbacks::queue_system_work(m, "IO_WORKITEM_ROUTINE", move || {
        let delay = *machine.work_item_delay.lock();
        if !delay.is_zero() && !machine.is_deterministic() {
            std::thread::sleep(delay);
        }
        if let Some(i) = machine.work_items.lock().items.get_mut(&item) {
            i.queued = false;
        }
        crate::callbacks::frame(&machine, "IO_WORKITEM_ROUTINE", Irql::Passive, || {
            // SAFETY: the routine and context the driver queued, with the item's device
            // object, which the queued item kept alive.
            unsafe {
                crate::callbacks::io_workitem(
                    machine.convention(),
                    routine,
                    device as PDEVICE_OBJECT,
                    context as PVOID,
                )
            }
        });
        let mut fx = machine.fx.lock();
        if let Some(w) = fx.wdm_devices.get_mut(&device) {
            w.refs = w.refs.saturating_sub(1);
            if w.deleted && w.refs == 0 {
                fx.wdm_devices.remove(&device);
            }
        }
    });
}

unsafe fn free_work_item(m: &Arc<Inner>, item: PIO_WORKITEM) {
    const NAME: &str = "IoFreeWorkItem";
    let mut items = m.work_items.lock();
    match items.items.get(&(item as usize)) {
        None => {
            drop(items);
            m.bug_check(
                WORKER_INVALID,
                format!("{NAME}: {item:p} is not an allocated work item (freed twice?)"),
            );
        }
        Some(i) if i.queued => {
            drop(items);
            m.bug_check(
                WORKER_INVALID,
                format!("{NAME}: work item {item:p} freed while it is queued"),
            );
        }
        Some(_) => {
            items.items.remove(&(item as usize));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Spin locks

thread_local! {
    static THREAD: u64 = {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        NEXT.fetch_add(1, Ordering::Relaxed)
    };
    static CRITICAL: Cell<i32> = const { Cell::new(0) };
}

fn me() -> u64 {
    THREAD.with(|t| *t)
}

/// A small number naming the current thread (never 0): lock ownership.
pub(crate) fn thread_number() -> u64 {
    me()
}

/// The `KSPIN_LOCK` word: 0 free, else the owner's thread number.
///
/// # Safety
/// `lock` points to the driver's aligned, live `KSPIN_LOCK`.
unsafe fn word<'a>(lock: PKSPIN_LOCK) -> &'a AtomicU64 {
    // SAFETY: the caller's promise; a KSPIN_LOCK is a naturally aligned 64-bit word, only ever
    // accessed through these routines.
    unsafe { AtomicU64::from_ptr(lock.cast()) }
}

unsafe fn acquire_spin_lock(m: &Arc<Inner>, lock: PKSPIN_LOCK) -> KIRQL {
    const NAME: &str = "KeAcquireSpinLockRaiseToDpc";
    if lock.is_null() {
        m.bug_check(
            DRIVER_VERIFIER_DETECTED_VIOLATION,
            format!("{NAME}: SpinLock is NULL"),
        );
        return kirql(kernel::irql());
    }
    // SAFETY: the driver's lock.
    let word = unsafe { word(lock) };
    let me = me();
    if word.load(Ordering::Acquire) == me {
        m.bug_check(
            DRIVER_VERIFIER_DETECTED_VIOLATION,
            format!("{NAME}: spin lock {lock:p} acquired recursively by the thread that holds it (deadlock)"),
        );
        return kirql(kernel::irql());
    }
    // The clock starts at the first failed attempt: an uncontended acquisition (nearly all of
    // them) reads no clock.
    let mut first_failure = None;
    let mut reported = false;
    while word
        .compare_exchange_weak(0, me, Ordering::Acquire, Ordering::Relaxed)
        .is_err()
    {
        let start = *first_failure.get_or_insert_with(Instant::now);
        if !reported && start.elapsed() > m.config.hang_timeout {
            reported = true;
            m.bug_check(
                DRIVER_VERIFIER_DETECTED_VIOLATION,
                format!(
                    "{NAME}: spin lock {lock:p} held by another thread for more than {:?}",
                    m.config.hang_timeout
                ),
            );
        }
        std::thread::yield_now();
    }
    kirql(kernel::spin_lock_acquired())
}

unsafe fn release_spin_lock(m: &Arc<Inner>, lock: PKSPIN_LOCK, new_irql: KIRQL) {
    const NAME: &str = "KeReleaseSpinLock";
    if lock.is_null() {
        m.bug_check(
            DRIVER_VERIFIER_DETECTED_VIOLATION,
            format!("{NAME}: SpinLock is NULL"),
        );
        return;
    }
    // SAFETY: the driver's lock.
    let word = unsafe { word(lock) };
    if word.load(Ordering::Acquire) != me() {
        m.bug_check(
            DRIVER_VERIFIER_DETECTED_VIOLATION,
            format!("{NAME}: spin lock {lock:p} released by a thread that does not hold it"),
        );
        return;
    }
    if kernel::irql() != Irql::Dispatch {
        m.violation(format!(
            "verifier: {NAME} at {}; a held spin lock keeps DISPATCH_LEVEL",
            kernel::irql().name()
        ));
    }
    word.store(0, Ordering::Release);
    kernel::spin_lock_released(from_kirql(new_irql));
}

// ---------------------------------------------------------------------------------------------
// Events: the state lives in the driver's KEVENT, as the dispatcher header (Type at offset 0,
// SignalState at offset 4); every change is made under the machine's event lock and wakes its
// waiters.

/// The `SignalState` of a `KEVENT`.
///
/// # Safety
/// `event` points to the driver's live, aligned `KEVENT`.
unsafe fn signal<'a>(event: PRKEVENT) -> &'a AtomicI32 {
    // SAFETY: the caller's promise; SignalState is the aligned LONG at offset 4 of the
    // dispatcher header.
    unsafe { AtomicI32::from_ptr(event.cast::<u8>().wrapping_add(4).cast()) }
}

/// Whether the event is a synchronization (auto-reset) event.
///
/// # Safety
/// As [`signal`].
unsafe fn is_synchronization(event: PRKEVENT) -> bool {
    // SAFETY: the caller's promise; Type is the first byte of the header.
    unsafe { event.cast::<u8>().read() == wdk_sys::_EVENT_TYPE::SynchronizationEvent as u8 }
}

fn forget_events(_address: usize, _size: usize) {}

unsafe fn initialize_event(m: &Arc<Inner>, event: PRKEVENT, kind: EVENT_TYPE, state: BOOLEAN) {
    if event.is_null() {
        m.bug_check(
            DRIVER_VERIFIER_DETECTED_VIOLATION,
            "KeInitializeEvent: Event is NULL",
        );
        return;
    }
    let _guard = m.events.0.lock();
    // SAFETY: the driver's KEVENT: the whole structure is (re)initialised here.
    unsafe { std::ptr::write_bytes(event.cast::<u8>(), 0, size_of::<wdk_sys::KEVENT>()) };
    // SAFETY: as above.
    unsafe { event.cast::<u8>().write(kind as u8) };
    // SAFETY: as above.
    unsafe { signal(event) }.store(i32::from(state != 0), Ordering::SeqCst);
}

unsafe fn set_event(m: &Arc<Inner>, event: PRKEVENT, _increment: KPRIORITY, wait: BOOLEAN) -> LONG {
    if event.is_null() {
        m.bug_check(
            DRIVER_VERIFIER_DETECTED_VIOLATION,
            "KeSetEvent: Event is NULL",
        );
        return 0;
    }
    if wait != 0 {
        m.violation("verifier: KeSetEvent with Wait = TRUE: the driver must wait right after, which it does not model here");
    }
    let guard = m.events.0.lock();
    // SAFETY: the driver's initialised KEVENT.
    let previous = unsafe { signal(event) }.swap(1, Ordering::SeqCst);
    drop(guard);
    m.events.1.notify_all();
    previous
}

unsafe fn read_state_event(m: &Arc<Inner>, event: PRKEVENT) -> LONG {
    if event.is_null() {
        m.bug_check(
            DRIVER_VERIFIER_DETECTED_VIOLATION,
            "KeReadStateEvent: Event is NULL",
        );
        return 0;
    }
    // SAFETY: the driver's initialised KEVENT.
    unsafe { signal(event) }.load(Ordering::SeqCst)
}

unsafe fn wait_for_single_object(
    m: &Arc<Inner>,
    object: PVOID,
    _reason: KWAIT_REASON,
    _mode: KPROCESSOR_MODE,
    _alertable: BOOLEAN,
    timeout: PLARGE_INTEGER,
) -> NTSTATUS {
    const NAME: &str = "KeWaitForSingleObject";
    let event: PRKEVENT = object.cast();
    if event.is_null() {
        m.bug_check(
            DRIVER_VERIFIER_DETECTED_VIOLATION,
            format!("{NAME}: Object is NULL"),
        );
        return wdk_sys::STATUS_TIMEOUT;
    }
    // SAFETY: the driver's optional timeout (relative, in 100 ns units, when negative).
    let timeout: Option<i64> = unsafe { timeout.as_ref() }.map(|t| {
        // SAFETY: LARGE_INTEGER's QuadPart covers the whole union.
        unsafe { t.QuadPart }
    });
    let irql = kernel::irql();
    if irql > Irql::Apc && timeout != Some(0) {
        m.bug_check(
            IRQL_NOT_LESS_OR_EQUAL,
            format!(
                "{NAME}: a wait at {} (only a zero timeout may be used above APC_LEVEL)",
                irql.name()
            ),
        );
        return wdk_sys::STATUS_TIMEOUT;
    }
    if kernel::spin_locks_held() > 0 && timeout != Some(0) {
        m.bug_check(
            IRQL_NOT_LESS_OR_EQUAL,
            format!("{NAME}: a wait while holding a spin lock"),
        );
        return wdk_sys::STATUS_TIMEOUT;
    }
    // SAFETY: the driver's initialised KEVENT, for the rest of the wait.
    let state = unsafe { signal(event) };
    // SAFETY: as above.
    let synchronization = unsafe { is_synchronization(event) };
    let take = |state: &AtomicI32| -> bool {
        if synchronization {
            state
                .compare_exchange(1, 0, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
        } else {
            state.load(Ordering::SeqCst) != 0
        }
    };
    let limit = match timeout {
        Some(t) if t <= 0 => Some(Duration::from_nanos(t.unsigned_abs().saturating_mul(100))),
        // An absolute time: the emulation treats it as "now".
        Some(_) => Some(Duration::ZERO),
        None => None,
    };
    if m.is_deterministic() {
        loop {
            if take(state) {
                return wdk_sys::STATUS_SUCCESS;
            }
            // The other processors' work runs while this thread waits.
            if m.platform.run_one() {
                continue;
            }
            if limit.is_some() {
                return wdk_sys::STATUS_TIMEOUT;
            }
            m.bug_check(
                DRIVER_VERIFIER_DETECTED_VIOLATION,
                format!("{NAME}: a wait on an event that nothing queued can set (deterministic machine: it would block for ever)"),
            );
            return wdk_sys::STATUS_TIMEOUT;
        }
    }
    let start = Instant::now();
    let mut guard = m.events.0.lock();
    loop {
        if take(state) {
            return wdk_sys::STATUS_SUCCESS;
        }
        let waited = start.elapsed();
        if let Some(limit) = limit
            && waited >= limit
        {
            return wdk_sys::STATUS_TIMEOUT;
        }
        if limit.is_none() && waited > m.config.hang_timeout {
            drop(guard);
            m.bug_check(
                DRIVER_VERIFIER_DETECTED_VIOLATION,
                format!(
                    "{NAME}: an untimed wait still blocked after {:?} (a deadlock)",
                    m.config.hang_timeout
                ),
            );
            return wdk_sys::STATUS_TIMEOUT;
        }
        let slice = Duration::from_millis(50);
        m.events.1.wait_for(&mut guard, slice);
    }
}

// ---------------------------------------------------------------------------------------------
// Critical regions, IRQL, time, debug output

/// Critical regions the current thread has entered.
pub(crate) fn critical_regions() -> i32 {
    CRITICAL.with(Cell::get)
}

/// Restores the current thread's critical-region count (after a callback left it unbalanced).
pub(crate) fn set_critical_regions(n: i32) {
    CRITICAL.with(|c| c.set(n));
}

unsafe fn enter_critical_region(_m: &Arc<Inner>) {
    CRITICAL.with(|c| c.set(c.get() + 1));
}

unsafe fn leave_critical_region(m: &Arc<Inner>) {
    let n = CRITICAL.with(Cell::get);
    if n <= 0 {
        m.bug_check(
            DRIVER_VERIFIER_DETECTED_VIOLATION,
            "KeLeaveCriticalRegion without a matching KeEnterCriticalRegion",
        );
        return;
    }
    CRITICAL.with(|c| c.set(n - 1));
}

unsafe fn get_current_irql(_m: &Arc<Inner>) -> KIRQL {
    kirql(kernel::irql())
}

unsafe fn query_interrupt_time_precise(m: &Arc<Inner>, qpc: PULONG64) -> ULONG64 {
    let now = m.platform.now_ns() / 100;
    if let Some(out) = std::ptr::NonNull::new(qpc) {
        // SAFETY: the driver's out-parameter.
        unsafe { out.as_ptr().write(now) };
    }
    now
}

unsafe fn dbg_print(m: &Arc<Inner>, format: PCSTR, text: PCSTR) -> ULONG {
    if format.is_null() {
        return 0;
    }
    // SAFETY: a NUL-terminated format string.
    let format = unsafe { std::ffi::CStr::from_ptr(format) }.to_string_lossy();
    let line = if format == "%s" && !text.is_null() {
        // SAFETY: wdk's print passes its text as the one argument of "%s".
        unsafe { std::ffi::CStr::from_ptr(text) }
            .to_string_lossy()
            .into_owned()
    } else {
        format.into_owned()
    };
    if std::env::var_os("WDF_EMU_TRACE").is_some() {
        eprint!("DbgPrint: {line}");
    }
    let mut log = m.log.lock();
    match log.last_mut() {
        // wdk's println! sends long lines in pieces; a piece without its newline continues.
        Some(last) if !last.ends_with('\n') => last.push_str(&line),
        _ => log.push(line),
    }
    0
}
