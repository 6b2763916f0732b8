//! The WDM (`wdm.h`, `ntdef.h`) and complib (`complib/cl_types.h`, the kernel
//! `cl_types_osd.h`) types WinOFED's headers build on, and `ET_POST_EVENT` of
//! `inc/kernel/event_trace.h`.

use core::ffi::c_void;

use crate::macros::ZeroValid;

/// NT status code (`LONG`).
pub type NTSTATUS = i32;
/// Processor mode of a caller (`CCHAR`): [`KernelMode`] or [`UserMode`].
pub type KPROCESSOR_MODE = i8;
/// complib boolean: `int` in kernel and user builds (4 bytes, unlike the 1-byte `BOOLEAN`).
pub type boolean_t = i32;
/// complib 16-bit value in network order (as stored).
pub type net16_t = u16;
/// complib 32-bit value in network order (as stored).
pub type net32_t = u32;
/// complib 64-bit value in network order (as stored).
pub type net64_t = u64;

ci_struct! {
    /// Windows GUID (`struct _GUID`).
    #[repr(C)]
    pub struct GUID [size 16, align 4] {
        /// First 8 hex digits (`unsigned long`).
        [0] pub Data1: u32,
        /// Next 4 hex digits.
        [4] pub Data2: u16,
        /// Next 4 hex digits.
        [6] pub Data3: u16,
        /// Last 16 hex digits as bytes.
        [8] pub Data4: [u8; 8],
    }
}

ci_struct! {
    /// Doubly linked list link (`struct _LIST_ENTRY`).
    #[repr(C)]
    pub struct LIST_ENTRY [size 16, align 8] {
        /// Next entry.
        [0] pub Flink: *mut LIST_ENTRY,
        /// Previous entry.
        [8] pub Blink: *mut LIST_ENTRY,
    }
}

/// `InterfaceReference` of an [`INTERFACE`]: takes a reference on the interface (`NTAPI`).
pub type PINTERFACE_REFERENCE = Option<unsafe extern "system" fn(Context: *mut c_void)>;
/// `InterfaceDereference` of an [`INTERFACE`]: drops a reference on the interface (`NTAPI`).
pub type PINTERFACE_DEREFERENCE = Option<unsafe extern "system" fn(Context: *mut c_void)>;

ci_struct! {
    /// WDM header of every interface returned by IRP_MN_QUERY_INTERFACE (`struct _INTERFACE`).
    #[repr(C)]
    pub struct INTERFACE [size 32, align 8] {
        /// Size of the whole interface structure in bytes.
        [0] pub Size: u16,
        /// Interface version.
        [2] pub Version: u16,
        /// Context passed to the reference/dereference routines.
        [8] pub Context: *mut c_void,
        /// Adds a reference.
        [16] pub InterfaceReference: PINTERFACE_REFERENCE,
        /// Drops a reference.
        [24] pub InterfaceDereference: PINTERFACE_DEREFERENCE,
    }
}

impl INTERFACE {
    /// Releases the one reference a query took on the interface (`InterfaceDereference`).
    ///
    /// # Safety
    /// Called once for that reference, at an IRQL the interface's dereference routine allows.
    pub(crate) unsafe fn release(&self) {
        if let Some(deref) = self.InterfaceDereference {
            // SAFETY: the interface's own routine on its own context; once, by the caller's
            // promise.
            unsafe { deref(self.Context) };
        }
    }
}

ci_opaque! {
    /// Memory descriptor list; only passed by pointer here.
    MDL;
}

/// Trace hook of `RDMA_INTERFACE_VERBS` (`ET_POST_EVENT`): `(Caller, Format, ...)`. It is
/// variadic, and C variadic functions always use the C convention, hence `extern "C"`.
pub type ET_POST_EVENT = Option<unsafe extern "C" fn(Caller: *const i8, Format: *const i8, ...)>;

impl ZeroValid for ET_POST_EVENT {}

ci_consts! {
    /// The constants of this module, in declaration order.
    pub(crate) const BASE_CONSTANTS;

    /// `MODE` value, passed as a [`KPROCESSOR_MODE`].
    group {
        /// The caller runs in kernel mode.
        KernelMode: KPROCESSOR_MODE = 0;
        /// The caller is a user-mode process.
        UserMode: KPROCESSOR_MODE = 1;
    }
}
