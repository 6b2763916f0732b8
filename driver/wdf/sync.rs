//! The kernel's spin lock and notification event as `wv_hal::SpinLock` and `wv_hal::Event`,
//! and the framework's wait lock for the driver's PASSIVE_LEVEL lock.

use core::cell::UnsafeCell;
use core::marker::PhantomData;
use core::mem::MaybeUninit;
use core::ops::{Deref, DerefMut};
use core::ptr::null_mut;

use wdk::nt_success;
use wdk_sys::ntddk::{
    KeAcquireSpinLockRaiseToDpc, KeInitializeEvent, KeReadStateEvent, KeReleaseSpinLock,
    KeSetEvent, KeWaitForSingleObject,
};
use wdk_sys::{
    _EVENT_TYPE, _KWAIT_REASON, _MODE, KEVENT, KIRQL, KSPIN_LOCK, LARGE_INTEGER, NTSTATUS,
    STATUS_SUCCESS, WDF_NO_OBJECT_ATTRIBUTES, WDFWAITLOCK, call_unsafe_wdf_function_binding,
};
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

impl KEvent {
    /// Waits until the event is set or `timeout_ns` have passed; whether it is set.
    /// PASSIVE_LEVEL.
    pub fn wait_for(&self, timeout_ns: u64) -> bool {
        // A relative timeout: negative, in 100 ns units.
        let mut timeout = LARGE_INTEGER {
            QuadPart: -i64::try_from(timeout_ns / 100).unwrap_or(i64::MAX),
        };
        // SAFETY: an initialised event that outlives the wait; a kernel-mode, non-alertable
        // wait with a relative timeout at PASSIVE_LEVEL.
        let status = unsafe {
            KeWaitForSingleObject(
                self.event.get().cast(),
                _KWAIT_REASON::Executive,
                _MODE::KernelMode as i8,
                0,
                &mut timeout,
            )
        };
        status == STATUS_SUCCESS
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
/// control device): a `WDFWAITLOCK`, which KMDF Verifier tracks (lock order, a lock held
/// across a return to the framework) and which the framework acquires inside a critical
/// region, because some of its holders run in an application's thread (the last close of a
/// handle), which must not be suspended while it holds the lock. Its parent is the framework
/// driver object, which deletes it.
pub struct WaitLock {
    handle: WDFWAITLOCK,
}

// SAFETY: a wait lock may be acquired and released from any thread at PASSIVE_LEVEL.
unsafe impl Send for WaitLock {}
// SAFETY: as above; the framework synchronises it.
unsafe impl Sync for WaitLock {}

/// A held [`WaitLock`], released on drop.
pub struct WaitLockGuard<'a> {
    owner: &'a WaitLock,
    /// Not `Send`: a wait lock is released by the thread that acquired it.
    _thread: PhantomData<*const ()>,
}

impl WaitLock {
    /// `WdfWaitLockCreate`, parented to the framework driver object (which must exist: call it
    /// after `WdfDriverCreate`). IRQL <= DISPATCH_LEVEL.
    ///
    /// # Errors
    /// The framework's status (`STATUS_INSUFFICIENT_RESOURCES` when out of pool).
    pub fn new() -> Result<WaitLock, NTSTATUS> {
        let mut handle: WDFWAITLOCK = null_mut();
        // SAFETY: no attributes (the driver object is the parent); `handle` receives the lock.
        let status = unsafe {
            call_unsafe_wdf_function_binding!(
                WdfWaitLockCreate,
                WDF_NO_OBJECT_ATTRIBUTES,
                &mut handle
            )
        };
        if nt_success(status) {
            Ok(WaitLock { handle })
        } else {
            Err(status)
        }
    }

    /// `WdfWaitLockAcquire` with no timeout: takes the lock, waiting for it. PASSIVE_LEVEL.
    pub fn lock(&self) -> WaitLockGuard<'_> {
        // SAFETY: a live lock (its parent, the driver object, outlives every caller); no
        // timeout, at PASSIVE_LEVEL. Without a timeout the call always returns STATUS_SUCCESS.
        let _status = unsafe {
            call_unsafe_wdf_function_binding!(WdfWaitLockAcquire, self.handle, null_mut())
        };
        WaitLockGuard {
            owner: self,
            _thread: PhantomData,
        }
    }
}

impl Drop for WaitLockGuard<'_> {
    fn drop(&mut self) {
        // SAFETY: the lock this guard acquired, released once, in the same thread.
        unsafe { call_unsafe_wdf_function_binding!(WdfWaitLockRelease, self.owner.handle) };
    }
}
