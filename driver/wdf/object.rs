//! What every framework object shares: deletion, and a tagged reference that keeps an object's
//! memory (and so its handle) valid after the framework has disposed of it.

use wdk_sys::{PVOID, WDFOBJECT, call_unsafe_wdf_function_binding};

/// The file name the framework records with a tagged reference.
const FILE: &[u8] = b"driver/wdf/object.rs\0";

/// `WdfObjectDelete`. IRQL: the object's (PASSIVE_LEVEL for a device, <= DISPATCH_LEVEL for a
/// queue with the dispatch execution level).
///
/// # Safety
/// `object` is a handle of this driver's that is still valid (live, or kept in memory by a
/// reference), deleted by this driver at most once; a deletion the framework makes anyway when
/// the parent goes is the race it allows.
pub unsafe fn delete(object: WDFOBJECT) {
    // SAFETY: the caller's promise.
    unsafe { call_unsafe_wdf_function_binding!(WdfObjectDelete, object) };
}

/// A reference on a framework object, tagged `tag` for the framework's verifier
/// (`!wdfkd.wdftagtracker`); released on drop. IRQL <= DISPATCH_LEVEL.
pub struct TaggedReference {
    object: WDFOBJECT,
    tag: PVOID,
}

// SAFETY: taking and releasing a reference is allowed from any thread at IRQL <= DISPATCH_LEVEL.
unsafe impl Send for TaggedReference {}
// SAFETY: as above; the value hands out nothing but the handle.
unsafe impl Sync for TaggedReference {}

impl TaggedReference {
    /// Takes a reference on `object`.
    ///
    /// # Safety
    /// `object` is a live framework object (not yet disposed of).
    pub unsafe fn new(object: WDFOBJECT, tag: &'static [u8; 4]) -> TaggedReference {
        let tag: PVOID = tag.as_ptr().cast_mut().cast();
        // SAFETY: the caller's promise; the tag and file name are static.
        unsafe {
            call_unsafe_wdf_function_binding!(
                WdfObjectReferenceActual,
                object,
                tag,
                line!() as i32,
                FILE.as_ptr().cast(),
            )
        };
        TaggedReference { object, tag }
    }

    /// The object, valid (at least in memory) while this reference lives.
    pub fn object(&self) -> WDFOBJECT {
        self.object
    }
}

impl Drop for TaggedReference {
    fn drop(&mut self) {
        // SAFETY: the reference `new` took, released once, with the same tag.
        unsafe {
            call_unsafe_wdf_function_binding!(
                WdfObjectDereferenceActual,
                self.object,
                self.tag,
                line!() as i32,
                FILE.as_ptr().cast(),
            )
        };
    }
}
