//! The Rust side of `WDF_DECLARE_CONTEXT_TYPE`: a static type descriptor per context type and a
//! typed accessor over `WdfObjectGetTypedContextWorker`.
//!
//! Rules a context type must follow, because WDF allocates and frees the memory itself:
//! - WDF zero-fills it, so every field must be valid when all bytes are zero (raw pointers,
//!   atomics, `UnsafeCell` of plain kernel structures; no references, `NonNull` or `Box`);
//! - WDF frees it without running `Drop`, so teardown belongs in `EvtCleanupCallback`;
//! - callbacks reach it concurrently through a shared reference, so every mutable field is an
//!   atomic or sits in an `UnsafeCell` guarded by a lock the code names.

use core::{ffi::CStr, marker::PhantomData, mem::size_of};

use wdk_sys::{
    PCWDF_OBJECT_CONTEXT_TYPE_INFO, WDF_OBJECT_CONTEXT_TYPE_INFO, WDFOBJECT,
    call_unsafe_wdf_function_binding,
};

use super::wdf_init::wdf_structure_size;

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

    /// The context of type `T` of `object`: `WdfObjectGetTypedContext(object, T)`.
    ///
    /// # Safety
    ///
    /// `object` must be a live WDF object created with this context type (in its attributes or
    /// by `WdfObjectAllocateContext`), and the caller picks a lifetime `'object` that ends before
    /// the object is deleted.
    #[must_use]
    pub unsafe fn get<'object>(&'static self, object: WDFOBJECT) -> &'object T {
        // SAFETY: the caller guarantees `object` is live and has this context type; the
        // framework then returns the non-null, aligned, zero-initialised context memory.
        let context = unsafe {
            call_unsafe_wdf_function_binding!(WdfObjectGetTypedContextWorker, object, self.info())
        };
        // SAFETY: see above; `T` is valid when zero-filled (module rules) and only shared
        // references are handed out, so the memory is never aliased mutably.
        unsafe { &*context.cast::<T>() }
    }
}
