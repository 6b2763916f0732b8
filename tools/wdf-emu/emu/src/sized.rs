//! The framework's structures that carry their own `Size` (set by their `WDF_…_INIT`), and
//! the checks KMDF makes before it reads one a driver hands it.

use wdk_sys::{
    NTSTATUS, WDF_DRIVER_CONFIG, WDF_FILEOBJECT_CONFIG, WDF_IO_QUEUE_CONFIG, WDF_OBJECT_ATTRIBUTES,
    WDF_PNPPOWER_EVENT_CALLBACKS,
};

use crate::machine::Inner;

/// A structure whose `Size` member the driver sets to the structure's size.
pub(crate) trait SizedStruct: Copy {
    /// Its name in the headers, for messages.
    const NAME: &'static str;
    /// Its `Size` member.
    fn size(&self) -> u32;
}

macro_rules! sized_structs {
    ($($t:ident),* $(,)?) => {$(
        impl SizedStruct for $t {
            const NAME: &'static str = stringify!($t);
            fn size(&self) -> u32 {
                self.Size
            }
        }
    )*};
}

sized_structs!(
    WDF_DRIVER_CONFIG,
    WDF_FILEOBJECT_CONFIG,
    WDF_IO_QUEUE_CONFIG,
    WDF_OBJECT_ATTRIBUTES,
    WDF_PNPPOWER_EVENT_CALLBACKS,
);

impl Inner {
    /// Whether the driver's structure `s` has a `Size` other than its type's: the framework
    /// refuses it (the driver did not fill it in with its `…_INIT`), and the verifier records
    /// it. `hint` ends the message (empty, or a space and a remark).
    pub(crate) fn wrong_size<T: SizedStruct>(&self, ddi: &str, s: &T, hint: &str) -> bool {
        let expected = size_of::<T>();
        if s.size() as usize == expected {
            return false;
        }
        self.violation(format!(
            "verifier: {ddi}: {}.Size is {}, expected {expected}{hint}",
            T::NAME,
            s.size()
        ));
        true
    }

    /// Copies the driver's structure from `ptr` (the parameter `param` of `ddi`) after the
    /// checks KMDF makes: not NULL (else a bug check, and `STATUS_INVALID_PARAMETER` for the
    /// teardown), and its own size (else `STATUS_INFO_LENGTH_MISMATCH`).
    ///
    /// # Safety
    /// `ptr` is NULL or points to a readable `T`.
    pub(crate) unsafe fn read_sized<T: SizedStruct>(
        &self,
        ddi: &str,
        param: &str,
        ptr: *const T,
    ) -> Result<T, NTSTATUS> {
        // SAFETY: the caller's promise.
        let Some(s) = (unsafe { ptr.as_ref() }).copied() else {
            self.null_parameter(ddi, param);
            return Err(wdk_sys::STATUS_INVALID_PARAMETER);
        };
        if self.wrong_size(ddi, &s, "") {
            return Err(wdk_sys::STATUS_INFO_LENGTH_MISMATCH);
        }
        Ok(s)
    }
}
