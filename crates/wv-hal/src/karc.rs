//! [`KArc`] and [`KWeak`]: atomically reference-counted pointers whose allocation can fail.
//!
//! `alloc::sync::Arc::new` calls the allocation-error handler when the heap is exhausted; in a
//! Windows driver that is a bug check (wdk-alloc returns null, `handle_alloc_error` panics,
//! wdk-panic stops the machine). Stable Rust has no fallible `Arc` constructor and no sound way
//! to build an `Arc` from memory allocated elsewhere, so the driver core shares its objects
//! through this type instead, the way Rust-for-Linux's `kernel::sync::Arc::new(value, flags)`
//! returns a `Result`.
//!
//! * [`KArc::try_new`] and [`KArc::try_reserve`] report exhaustion as [`AllocError`]; a
//!   reserved [`KArcSlot`] is written later without allocating, so a caller can allocate
//!   everything before it calls the lower device and cannot fail after it.
//! * Clones, drops, [`KWeak`] and [`KArc::try_unwrap`] behave like `Arc`'s, with the same
//!   memory orderings (Release on decrement, an Acquire fence before the last owner touches
//!   the value).
//! * A `KArc<T>` becomes a `KArc<dyn Trait>` through `From` for the traits the driver passes
//!   across its contracts (the event sinks, [`WorkItem`] and [`Dpc`]); stable Rust cannot
//!   express the general coercion for a user-defined pointer.
//!
//! This is the only module of `wv-hal` with `unsafe` code. Its invariants:
//!
//! # Invariants
//! * `ptr` of every `KArc`, `KWeak` and `KArcSlot` points to a live allocation of
//!   `Inner<T>` made by [`alloc::alloc::alloc`] with the layout stored in its header.
//! * `strong` counts the `KArc`s; while it is non-zero `value` is initialised and valid.
//! * `weak` counts the `KWeak`s plus one for all strong references together (or for the
//!   unwritten slot); the allocation is freed exactly when it drops to zero.
//! * `value` is dropped exactly once, by whoever takes `strong` from 1 to 0 (or moved out by
//!   `try_unwrap`, which does the same).
#![allow(unsafe_code)]

use alloc::alloc::{Layout, alloc, dealloc};
use core::fmt;
use core::marker::PhantomData;
use core::mem::ManuallyDrop;
use core::ops::Deref;
use core::ptr::{self, NonNull};

#[cfg(loom)]
use loom::sync::atomic::{AtomicUsize, Ordering, fence};

#[cfg(not(loom))]
use core::sync::atomic::{AtomicUsize, Ordering, fence};

use crate::cm::CmEventSink;
use crate::device_model::Dpc;
use crate::platform::WorkItem;
use crate::verbs::{CaEventSink, CqEventSink, QpEventSink, SrqEventSink};
use wv_abi::NtStatus;

/// The heap had no room for the allocation. Drivers answer it with OFW's `STATUS_NO_MEMORY`
/// (the `From` conversion) unless the request's own status says otherwise.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AllocError;

impl From<AllocError> for NtStatus {
    fn from(_: AllocError) -> NtStatus {
        NtStatus::NO_MEMORY
    }
}

impl From<alloc::collections::TryReserveError> for AllocError {
    fn from(_: alloc::collections::TryReserveError) -> AllocError {
        AllocError
    }
}

impl fmt::Display for AllocError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("out of memory")
    }
}

/// The counts, at offset 0 of every block.
#[repr(C)]
struct Header {
    strong: AtomicUsize,
    weak: AtomicUsize,
    /// The layout this block was allocated with (kept so that the last weak reference can
    /// free it without looking at a value that was already dropped).
    layout: Layout,
}

/// The allocation behind every pointer of this module.
#[repr(C)]
struct Inner<T: ?Sized> {
    header: Header,
    value: T,
}

/// The header of a block. `ptr` must satisfy the type invariant (a live block).
fn header<'a, T: ?Sized>(ptr: NonNull<Inner<T>>) -> &'a Header {
    // SAFETY: By the invariant the block is live and its header initialised; `Inner` is
    // `repr(C)` with the header first, so the block's address is the header's. Only the
    // header is referenced, never the value (which may be uninitialised or dropped).
    unsafe { ptr.cast::<Header>().as_ref() }
}

/// The value's address in a block (a projection; nothing is read).
fn value_ptr<T: ?Sized>(ptr: NonNull<Inner<T>>) -> *mut T {
    // SAFETY: The block is live (type invariant), so projecting to its field stays in bounds.
    unsafe { &raw mut (*ptr.as_ptr()).value }
}

/// Above this many references the count is treated as corrupt (as `Arc` does).
const MAX_REFCOUNT: usize = isize::MAX as usize;

/// A shared, reference-counted pointer whose construction can fail. See the module docs.
pub struct KArc<T: ?Sized> {
    ptr: NonNull<Inner<T>>,
    _owns: PhantomData<Inner<T>>,
}

/// A non-owning reference to a [`KArc`]'s value: [`KWeak::upgrade`] gives a `KArc` while one
/// exists.
pub struct KWeak<T: ?Sized> {
    ptr: NonNull<Inner<T>>,
}

/// Memory for one `KArc<T>`, allocated and not yet written. Writing cannot fail.
pub struct KArcSlot<T> {
    ptr: NonNull<Inner<T>>,
}

// SAFETY: A `KArc<T>` gives shared access to `T` from any thread that holds a clone and drops
// `T` on whichever thread drops the last clone, exactly like `Arc<T>`: so it is `Send` and
// `Sync` when `T` is both. The counts are atomics.
unsafe impl<T: ?Sized + Send + Sync> Send for KArc<T> {}
// SAFETY: See the `Send` impl above.
unsafe impl<T: ?Sized + Send + Sync> Sync for KArc<T> {}
// SAFETY: A `KWeak<T>` can be upgraded to a `KArc<T>` on any thread; same bounds as `KArc`.
unsafe impl<T: ?Sized + Send + Sync> Send for KWeak<T> {}
// SAFETY: See the `Send` impl above.
unsafe impl<T: ?Sized + Send + Sync> Sync for KWeak<T> {}
// SAFETY: An unwritten slot holds no `T`; writing it moves a `T` in on the writer's thread, so
// sending the slot is sending a `T`.
unsafe impl<T: Send> Send for KArcSlot<T> {}

impl<T: ?Sized> KArc<T> {
    fn inner(&self) -> &Header {
        header(self.ptr)
    }

    fn value(&self) -> &T {
        // SAFETY: While this strong reference exists the value is initialised and only shared
        // references to it are ever handed out.
        unsafe { &*value_ptr(self.ptr) }
    }

    /// Whether both point to the same allocation.
    pub fn ptr_eq(this: &Self, other: &Self) -> bool {
        ptr::addr_eq(this.ptr.as_ptr(), other.ptr.as_ptr())
    }

    /// The address of the value (for identity comparisons, like `Arc::as_ptr`).
    pub fn as_ptr(this: &Self) -> *const T {
        value_ptr(this.ptr)
    }

    /// A weak reference to the same value.
    pub fn downgrade(this: &Self) -> KWeak<T> {
        let old = this.inner().weak.fetch_add(1, Ordering::Relaxed);
        assert!(old <= MAX_REFCOUNT, "KArc weak count overflow");
        KWeak { ptr: this.ptr }
    }

    /// How many `KArc`s point to the value now (racy by nature).
    pub fn strong_count(this: &Self) -> usize {
        this.inner().strong.load(Ordering::Acquire)
    }
}

impl<T> KArc<T> {
    /// Allocates a `KArc` holding `value`.
    ///
    /// # Errors
    /// [`AllocError`] when the heap is exhausted; `value` is dropped.
    pub fn try_new(value: T) -> Result<Self, AllocError> {
        Ok(Self::try_reserve()?.write(value))
    }

    /// [`KArc::try_new`] for code where running out of memory is not a case to handle: tests,
    /// host tools, the user-mode half of a device model. Never on a driver's request path
    /// (`clippy.toml` of `wv-core` forbids it there).
    ///
    /// # Panics
    /// When the heap is exhausted.
    pub fn new(value: T) -> Self {
        Self::try_new(value).expect("KArc allocation")
    }

    /// Allocates the memory of a future `KArc<T>`, to be written later without failing.
    ///
    /// # Errors
    /// [`AllocError`] when the heap is exhausted.
    pub fn try_reserve() -> Result<KArcSlot<T>, AllocError> {
        let layout = Layout::new::<Inner<T>>();
        // SAFETY: `Inner<T>` holds a header of two `usize`s and a layout, so the layout is
        // never zero-sized.
        let raw = unsafe { alloc(layout) }.cast::<Inner<T>>();
        let ptr = NonNull::new(raw).ok_or(AllocError)?;
        let fresh = Header {
            strong: AtomicUsize::new(0),
            weak: AtomicUsize::new(1),
            layout,
        };
        // SAFETY: `ptr` is a fresh allocation for an `Inner<T>`, whose header is at offset 0;
        // the header is written in place (the value stays uninitialised until `write`).
        unsafe { ptr.cast::<Header>().write(fresh) };
        // INVARIANT: a live allocation with strong = 0 (no value yet) and weak = 1 (the slot).
        Ok(KArcSlot { ptr })
    }

    /// Gives up the reference as the value's address, for a C caller to hold (an
    /// `INTERFACE`'s `Context`); [`KArc::from_raw`] takes it back.
    pub fn into_raw(this: Self) -> *const T {
        let this = ManuallyDrop::new(this);
        value_ptr(this.ptr)
    }

    /// The reference [`KArc::into_raw`] gave up.
    ///
    /// # Safety
    /// `value` was returned by `KArc::<T>::into_raw` and the reference it stands for has not
    /// been taken back since (each `into_raw` is matched by exactly one `from_raw`).
    pub unsafe fn from_raw(value: *const T) -> Self {
        let offset = core::mem::offset_of!(Inner<T>, value);
        // SAFETY: `value` points `offset` bytes into a live block (the caller's promise and
        // `into_raw`'s projection), so stepping back stays inside it and keeps its provenance.
        let inner = unsafe { value.byte_sub(offset) }
            .cast::<Inner<T>>()
            .cast_mut();
        // SAFETY: derived from a non-null block address.
        let ptr = unsafe { NonNull::new_unchecked(inner) };
        // INVARIANT: the strong reference `into_raw` kept alive is this one again.
        KArc {
            ptr,
            _owns: PhantomData,
        }
    }

    /// The value, if this is the only strong reference; otherwise the `KArc` back. Weak
    /// references can no longer upgrade afterwards.
    ///
    /// # Errors
    /// `this` itself when other strong references exist.
    pub fn try_unwrap(this: Self) -> Result<T, Self> {
        if this
            .inner()
            .strong
            .compare_exchange(1, 0, Ordering::Relaxed, Ordering::Relaxed)
            .is_err()
        {
            return Err(this);
        }
        fence(Ordering::Acquire);
        let this = ManuallyDrop::new(this);
        // SAFETY: We took `strong` from 1 to 0, so we are the one owner of the initialised
        // value and nobody else will drop it; it is moved out exactly once.
        let value = unsafe { ptr::read(value_ptr(this.ptr)) };
        // The strong references' shared weak reference goes with the last strong one.
        drop(KWeak { ptr: this.ptr });
        Ok(value)
    }
}

impl<T: ?Sized> Clone for KArc<T> {
    fn clone(&self) -> Self {
        let old = self.inner().strong.fetch_add(1, Ordering::Relaxed);
        assert!(old <= MAX_REFCOUNT, "KArc strong count overflow");
        KArc {
            ptr: self.ptr,
            _owns: PhantomData,
        }
    }
}

impl<T: ?Sized> Deref for KArc<T> {
    type Target = T;
    fn deref(&self) -> &T {
        self.value()
    }
}

impl<T: ?Sized> Drop for KArc<T> {
    fn drop(&mut self) {
        if self.inner().strong.fetch_sub(1, Ordering::Release) != 1 {
            return;
        }
        // Every other owner's uses of the value happen before its destruction.
        fence(Ordering::Acquire);
        // SAFETY: `strong` went from 1 to 0 here, so this was the last strong reference: the
        // value is initialised and nobody else can reach it (upgrades fail from 0).
        unsafe { ptr::drop_in_place(value_ptr(self.ptr)) };
        drop(KWeak { ptr: self.ptr });
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for KArc<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

impl<T: ?Sized> KWeak<T> {
    fn weak(&self) -> &AtomicUsize {
        &header(self.ptr).weak
    }

    fn strong(&self) -> &AtomicUsize {
        &header(self.ptr).strong
    }

    /// A strong reference, if the value is still alive.
    pub fn upgrade(&self) -> Option<KArc<T>> {
        let strong = self.strong();
        let mut n = strong.load(Ordering::Relaxed);
        loop {
            if n == 0 {
                return None;
            }
            assert!(n <= MAX_REFCOUNT, "KArc strong count overflow");
            match strong.compare_exchange_weak(n, n + 1, Ordering::Acquire, Ordering::Relaxed) {
                Ok(_) => {
                    return Some(KArc {
                        ptr: self.ptr,
                        _owns: PhantomData,
                    });
                }
                Err(now) => n = now,
            }
        }
    }

    /// How many `KArc`s point to the value now; 0 once it is gone.
    pub fn strong_count(&self) -> usize {
        self.strong().load(Ordering::Acquire)
    }

    /// The address the value has (or had), for identity comparisons.
    pub fn as_ptr(&self) -> *const T {
        value_ptr(self.ptr)
    }
}

impl<T: ?Sized> Clone for KWeak<T> {
    fn clone(&self) -> Self {
        let old = self.weak().fetch_add(1, Ordering::Relaxed);
        assert!(old <= MAX_REFCOUNT, "KArc weak count overflow");
        KWeak { ptr: self.ptr }
    }
}

impl<T: ?Sized> Drop for KWeak<T> {
    fn drop(&mut self) {
        if self.weak().fetch_sub(1, Ordering::Release) != 1 {
            return;
        }
        fence(Ordering::Acquire);
        let block = self.ptr.cast::<Header>();
        // SAFETY: The last reference of any kind is gone: the value was dropped or moved out
        // (or never written) and nobody can reach the block any more. The header is still
        // initialised; it is moved out (dropping its atomics, a no-op for core's and needed
        // by loom's) before the block is freed.
        let header = unsafe { block.read() };
        // SAFETY: The block was allocated by `alloc` with exactly this layout and is freed
        // once, here.
        unsafe { dealloc(block.as_ptr().cast::<u8>(), header.layout) };
    }
}

impl<T: ?Sized> fmt::Debug for KWeak<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("(KWeak)")
    }
}

impl<T> KArcSlot<T> {
    /// Moves `value` in and returns the first strong reference.
    pub fn write(self, value: T) -> KArc<T> {
        self.write_cyclic(|_| value)
    }

    /// Builds the value with a weak reference to itself (which cannot be upgraded before this
    /// returns), moves it in and returns the first strong reference.
    pub fn write_cyclic(self, build: impl FnOnce(&KWeak<T>) -> T) -> KArc<T> {
        let slot = ManuallyDrop::new(self);
        let ptr = slot.ptr;
        // The slot's weak reference becomes the strong references' shared one; `me` is an
        // extra one for the builder, dropped below.
        header(ptr).weak.fetch_add(1, Ordering::Relaxed);
        let me = KWeak { ptr };
        let value = build(&me);
        // SAFETY: The value field is uninitialised (strong = 0) and ours alone to write.
        unsafe { value_ptr(ptr).write(value) };
        // Release: an upgrade that sees 1 also sees the value.
        header(ptr).strong.store(1, Ordering::Release);
        drop(me);
        KArc {
            ptr,
            _owns: PhantomData,
        }
    }
}

impl<T> Drop for KArcSlot<T> {
    fn drop(&mut self) {
        // Never written: only the slot's weak reference is dropped, which frees the block.
        drop(KWeak { ptr: self.ptr });
    }
}

impl<T> fmt::Debug for KArcSlot<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("KArcSlot")
    }
}

/// `KArc<T>` → `KArc<dyn Trait>` for the traits the driver's contracts pass as objects.
macro_rules! unsize_into {
    ($($tr:ident),* $(,)?) => {$(
        impl<T: $tr + 'static> From<KArc<T>> for KArc<dyn $tr> {
            fn from(this: KArc<T>) -> Self {
                let this = ManuallyDrop::new(this);
                // The pointer coerces to the unsized one; the reference moves over as is.
                let ptr: NonNull<Inner<dyn $tr>> = this.ptr;
                KArc { ptr, _owns: PhantomData }
            }
        }
    )*};
}

unsize_into!(
    CaEventSink,
    CqEventSink,
    SrqEventSink,
    QpEventSink,
    CmEventSink,
    WorkItem,
    Dpc
);

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use core::sync::atomic::AtomicUsize as Counter;

    struct Noisy<'a>(&'a Counter);
    impl Drop for Noisy<'_> {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn clone_and_drop_drop_the_value_once() {
        let drops = Counter::new(0);
        let a = KArc::try_new(Noisy(&drops)).unwrap();
        let b = a.clone();
        assert!(KArc::ptr_eq(&a, &b));
        assert_eq!(KArc::strong_count(&a), 2);
        drop(a);
        assert_eq!(drops.load(Ordering::SeqCst), 0);
        drop(b);
        assert_eq!(drops.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn into_raw_and_back_keeps_the_reference() {
        let drops = Counter::new(0);
        let a = KArc::try_new(Noisy(&drops)).unwrap();
        let raw = KArc::into_raw(a.clone());
        assert_eq!(raw, KArc::as_ptr(&a));
        assert_eq!(KArc::strong_count(&a), 2);
        drop(a);
        assert_eq!(drops.load(Ordering::SeqCst), 0);
        // SAFETY: `raw` came from `into_raw` and is taken back once.
        drop(unsafe { KArc::from_raw(raw) });
        assert_eq!(drops.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn weak_upgrades_only_while_alive() {
        let a = KArc::try_new(7u32).unwrap();
        let w = KArc::downgrade(&a);
        let w2 = w.clone();
        assert_eq!(*w.upgrade().unwrap(), 7);
        assert_eq!(w.as_ptr(), KArc::as_ptr(&a));
        drop(a);
        assert!(w.upgrade().is_none());
        assert_eq!(w2.strong_count(), 0);
    }

    #[test]
    fn try_unwrap_only_when_unique() {
        let a = KArc::try_new(alloc::vec![1u8, 2, 3]).unwrap();
        let b = a.clone();
        let a = KArc::try_unwrap(a).unwrap_err();
        drop(b);
        let w = KArc::downgrade(&a);
        assert_eq!(KArc::try_unwrap(a).unwrap(), [1, 2, 3]);
        assert!(w.upgrade().is_none());
    }

    #[test]
    fn unwritten_slots_and_cycles() {
        let slot = KArc::<alloc::string::String>::try_reserve().unwrap();
        drop(slot);
        struct Node {
            me: KWeak<Node>,
        }
        let node = KArc::try_reserve().unwrap().write_cyclic(|me| {
            assert!(me.upgrade().is_none(), "not alive while being built");
            Node { me: me.clone() }
        });
        assert!(KArc::ptr_eq(&node.me.upgrade().unwrap(), &node));
    }

    #[test]
    fn dyn_sinks_drop_the_concrete_value() {
        struct Sink<'a> {
            _drops: Noisy<'a>,
        }
        impl CqEventSink for Sink<'_> {
            fn on_completion(&self) {}
            fn on_error(&self) {}
        }
        // 'static needed for the coercion: leak-free through a static counter.
        static DROPS: Counter = Counter::new(0);
        let sink: KArc<dyn CqEventSink> = KArc::try_new(Sink {
            _drops: Noisy(&DROPS),
        })
        .unwrap()
        .into();
        let again = sink.clone();
        sink.on_completion();
        drop(sink);
        drop(again);
        assert_eq!(DROPS.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn shared_between_threads() {
        extern crate std;
        let a = KArc::try_new(Counter::new(0)).unwrap();
        let threads: alloc::vec::Vec<_> = (0..4)
            .map(|_| {
                let a = a.clone();
                let w = KArc::downgrade(&a);
                std::thread::spawn(move || {
                    a.fetch_add(1, Ordering::SeqCst);
                    drop(a);
                    drop(w.upgrade());
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(a.load(Ordering::SeqCst), 4);
        assert_eq!(KArc::strong_count(&a), 1);
    }
}
