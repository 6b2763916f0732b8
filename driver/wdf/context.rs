//! The Rust side of `WDF_DECLARE_CONTEXT_TYPE`: a static type descriptor per context type and a
//! typed accessor over `WdfObjectGetTypedContextWorker`.
//!
//! Rules a context type must follow, because WDF allocates and frees the memory itself:
//! - WDF aligns it to `MEMORY_ALLOCATION_ALIGNMENT` (16 bytes on x64): a type that needs more
//!   does not compile ([`ContextType::new`] checks it);
//! - WDF zero-fills it, so every field must be valid when all bytes are zero (raw pointers,
//!   atomics, `UnsafeCell` of plain kernel structures; no references, `NonNull` or `Box`);
//! - WDF frees it without running `Drop`, so teardown belongs in `EvtCleanupCallback`;
//! - callbacks reach it concurrently through a shared reference, so every mutable field is an
//!   atomic or sits in an `UnsafeCell` guarded by a lock the code names.

use core::{
    ffi::CStr,
    marker::PhantomData,
    mem::{align_of, size_of},
};

use wdk_sys::{
    PCWDF_OBJECT_CONTEXT_TYPE_INFO, WDF_OBJECT_CONTEXT_TYPE_INFO, WDFOBJECT,
    call_unsafe_wdf_function_binding,
};

use super::wdf_init::wdf_structure_size;

/// The alignment of the memory WDF gives a context (`MEMORY_ALLOCATION_ALIGNMENT` on x64).
const CONTEXT_ALIGNMENT: usize = 16;

/// `WDF_OBJECT_CONTEXT_TYPE_INFO` for the context type `T`. Declare one `static` per type;
/// `UniqueType` points at that static, which is what makes the type unique to WDF.
#[repr(transparent)]
pub struct ContextType<T> {
    info: WDF_OBJECT_CONTEXT_TYPE_INFO,
    context: PhantomData<fn() -> T>,
}

// SAFETY: the descriptor is immutable after compile-time initialisation; its pointers refer to
// a static string and to the static descriptor itself, both valid for the program's lifetime,
// and WDF only reads through them.
unsafe impl<T> Sync for ContextType<T> {}

impl<T> ContextType<T> {
    /// The descriptor for `T`, named `name` in WDF's debugger extensions. `this` must be the
    /// address of the `static` being initialised:
    /// `static X: ContextType<T> = ContextType::new(c"T", &raw const X);`
    #[must_use]
    pub const fn new(name: &'static CStr, this: *const Self) -> Self {
        assert!(
            align_of::<T>() <= CONTEXT_ALIGNMENT,
            "a context type may not need more alignment than WDF gives its memory"
        );
        Self {
            info: WDF_OBJECT_CONTEXT_TYPE_INFO {
                Size: wdf_structure_size::<WDF_OBJECT_CONTEXT_TYPE_INFO>(),
                ContextName: name.as_ptr(),
                ContextSize: size_of::<T>(),
                UniqueType: this.cast(),
                EvtDriverGetUniqueContextType: None,
            },
            context: PhantomData,
        }
    }

    /// The pointer `WDF_OBJECT_ATTRIBUTES::ContextTypeInfo` takes.
    #[must_use]
    pub const fn info(&'static self) -> PCWDF_OBJECT_CONTEXT_TYPE_INFO {
        &raw const self.info
    }

    /// The context of type `T` of `object`: `WdfObjectGetTypedContext(object, T)`; `None` for
    /// a null handle (the framework would bug-check on it: `FxPointerNotNull`) and for an
    /// object that has no context of this type (the framework answers NULL).
    ///
    /// # Safety
    ///
    /// `object` must be null or a live WDF object of this driver, and the caller picks a
    /// lifetime `'object` that ends before the object is deleted.
    #[must_use]
    pub unsafe fn get<'object>(&'static self, object: WDFOBJECT) -> Option<&'object T> {
        if object.is_null() {
            return None;
        }
        // SAFETY: the caller guarantees `object` is live; the framework returns its context of
        // this type (aligned and zero-initialised, see the checks above) or NULL.
        let context = unsafe {
            call_unsafe_wdf_function_binding!(WdfObjectGetTypedContextWorker, object, self.info())
        };
        // SAFETY: see above; `T` is valid when zero-filled (module rules) and only shared
        // references are handed out, so the memory is never aliased mutably.
        unsafe { context.cast::<T>().as_ref() }
    }
}
