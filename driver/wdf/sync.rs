//! The kernel's spin lock and notification event as `wv_hal::SpinLock` and `wv_hal::Event`.

use core::cell::UnsafeCell;
use core::marker::PhantomData;
use core::mem::MaybeUninit;
use core::ops::{Deref, DerefMut};
use core::ptr::null_mut;

use wdk_sys::ntddk::{
    KeAcquireSpinLockRaiseToDpc, KeEnterCriticalRegion, KeInitializeEvent, KeLeaveCriticalRegion,
    KeReadStateEvent, KeReleaseSpinLock, KeSetEvent, KeWaitForSingleObject,
};
use wdk_sys::{_EVENT_TYPE, _KWAIT_REASON, _MODE, KEVENT, KIRQL, KSPIN_LOCK};
use wv_abi::NtStatus;

use super::pool::PoolBox;

/// A `KSPIN_LOCK` beside the value it guards. A zero `KSPIN_LOCK` is a free, initialised lock
/// on x64 (`KeInitializeSpinLock` is a header inline that stores 0), and an unheld lock may
/// move with its owner.
pub struct KSpinLock<T> {
    lock: UnsafeCell<KSPIN_LOCK>,
    value: UnsafeCell<T>,
}

// SAFETY: the value is only reached through the guard, which holds the lock.
unsafe impl<T: Send> Send for KSpinLock<T> {}
// SAFETY: as above: the lock serialises every access to the value.
unsafe impl<T: Send> Sync for KSpinLock<T> {}

impl<T> KSpinLock<T> {
    /// A free lock around `value`.
    pub const fn new(value: T) -> Self {
        KSpinLock {
            lock: UnsafeCell::new(0),
            value: UnsafeCell::new(value),
        }
    }
}

/// The held lock; releasing it restores the IRQL it was taken at.
pub struct KSpinLockGuard<'a, T> {
    owner: &'a KSpinLock<T>,
    old_irql: KIRQL,
}

impl<T> Deref for KSpinLockGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard holds the lock, so no other reference to the value exists.
        unsafe { &*self.owner.value.get() }
    }
}

impl<T> DerefMut for KSpinLockGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as above, and `&mut self` makes this the only reference.
        unsafe { &mut *self.owner.value.get() }
    }
}

impl<T> Drop for KSpinLockGuard<'_, T> {
    fn drop(&mut self) {
        // SAFETY: the lock this guard acquired, released once with the IRQL it returned.
        unsafe { KeReleaseSpinLock(self.owner.lock.get(), self.old_irql) };
    }
}

impl<T: Send> wv_hal::SpinLock<T> for KSpinLock<T> {
    type Guard<'a>
        = KSpinLockGuard<'a, T>
    where
        Self: 'a,
        T: 'a;

    fn lock(&self) -> KSpinLockGuard<'_, T> {
        // SAFETY: an initialised lock, taken at IRQL <= DISPATCH_LEVEL (the contract of
        // `SpinLock::lock`); it raises to DISPATCH_LEVEL until the guard drops.
        let old_irql = unsafe { KeAcquireSpinLockRaiseToDpc(self.lock.get()) };
        KSpinLockGuard {
            owner: self,
            old_irql,
        }
    }
}

/// A notification `KEVENT` in nonpaged pool: an initialised `KEVENT` heads its own wait list
/// and must never move, while this value may.
pub struct KEvent {
    event: PoolBox<UnsafeCell<KEVENT>>,
}

// SAFETY: KeSetEvent/KeReadStateEvent/KeWaitForSingleObject may be called from any thread at
// their IRQLs; the event never moves.
unsafe impl Send for KEvent {}
// SAFETY: as above; the kernel synchronises the event itself.
unsafe impl Sync for KEvent {}

impl KEvent {
    /// A new notification event, not set. IRQL <= DISPATCH_LEVEL.
    ///
    /// # Errors
    /// `STATUS_INSUFFICIENT_RESOURCES` when pool is exhausted.
    pub fn new() -> Result<KEvent, NtStatus> {
        // SAFETY: all-zero bytes are a valid (uninitialised-state) KEVENT value; it is
        // initialised by KeInitializeEvent below before any use.
        let zeroed = unsafe { MaybeUninit::<KEVENT>::zeroed().assume_init() };
        let event = PoolBox::try_new(UnsafeCell::new(zeroed))
            .map_err(|_| NtStatus::INSUFFICIENT_RESOURCES)?;
        // SAFETY: the event's final, nonpaged address; nobody waits on it yet.
        unsafe { KeInitializeEvent(event.get(), _EVENT_TYPE::NotificationEvent, 0) };
        Ok(KEvent { event })
    }
}

impl wv_hal::Event for KEvent {
    fn set(&self) {
        // SAFETY: an initialised event; no wait follows (Wait = FALSE). IRQL <= DISPATCH_LEVEL.
        unsafe { KeSetEvent(self.event.get(), 0, 0) };
    }

    fn is_set(&self) -> bool {
        // SAFETY: an initialised event; KeReadStateEvent is callable at IRQL <= DISPATCH_LEVEL,
        // the level every caller of `Event::is_set` runs at.
        unsafe { KeReadStateEvent(self.event.get()) != 0 }
    }

    fn wait(&self) {
        // SAFETY: an initialised event that outlives the wait; a kernel-mode, non-alertable
        // wait with no timeout at PASSIVE_LEVEL (the contract of `Event::wait`).
        let _status = unsafe {
            KeWaitForSingleObject(
                self.event.get().cast(),
                _KWAIT_REASON::Executive,
                _MODE::KernelMode as i8,
                0,
                null_mut(),
            )
        };
    }
}

/// A lock held only at PASSIVE_LEVEL, across calls that may wait (creating and deleting the
/// control device): a synchronization `KEVENT`, signalled while free, in nonpaged pool. Held
/// inside a critical region, as a guarded or fast mutex would be: some of its holders run in
/// an application's thread (the last close of a handle), which must not be suspended while it
/// holds the lock.
pub struct PassiveLock {
    event: PoolBox<UnsafeCell<KEVENT>>,
}

// SAFETY: the kernel synchronises the event; it never moves.
unsafe impl Send for PassiveLock {}
// SAFETY: as above.
unsafe impl Sync for PassiveLock {}

/// A held [`PassiveLock`], released on drop.
pub struct PassiveLockGuard<'a> {
    owner: &'a PassiveLock,
    /// Not `Send`: the critical region is the thread's, left where it was entered.
    _thread: PhantomData<*const ()>,
}

impl PassiveLock {
    /// A free lock. IRQL <= DISPATCH_LEVEL.
    ///
    /// # Errors
    /// `STATUS_INSUFFICIENT_RESOURCES` when pool is exhausted.
    pub fn new() -> Result<PassiveLock, NtStatus> {
        // SAFETY: all-zero bytes are a valid KEVENT value before KeInitializeEvent.
        let zeroed = unsafe { MaybeUninit::<KEVENT>::zeroed().assume_init() };
        let event = PoolBox::try_new(UnsafeCell::new(zeroed))
            .map_err(|_| NtStatus::INSUFFICIENT_RESOURCES)?;
        // SAFETY: the event's final address; signalled = free.
        unsafe { KeInitializeEvent(event.get(), _EVENT_TYPE::SynchronizationEvent, 1) };
        Ok(PassiveLock { event })
    }

    /// Takes the lock, waiting for it. PASSIVE_LEVEL.
    pub fn lock(&self) -> PassiveLockGuard<'_> {
        // SAFETY: no arguments; PASSIVE_LEVEL. The guard leaves the region.
        unsafe { KeEnterCriticalRegion() };
        // SAFETY: an initialised synchronization event: the wait takes it (auto-reset);
        // kernel-mode, non-alertable, no timeout, at PASSIVE_LEVEL.
        let _status = unsafe {
            KeWaitForSingleObject(
                self.event.get().cast(),
                _KWAIT_REASON::Executive,
                _MODE::KernelMode as i8,
                0,
                null_mut(),
            )
        };
        PassiveLockGuard {
            owner: self,
            _thread: PhantomData,
        }
    }
}

impl Drop for PassiveLockGuard<'_> {
    fn drop(&mut self) {
        // SAFETY: the event this guard took; setting it lets one waiter in.
        unsafe { KeSetEvent(self.owner.event.get(), 0, 0) };
        // SAFETY: the region `lock` entered, left once, in the same thread.
        unsafe { KeLeaveCriticalRegion() };
    }
}
