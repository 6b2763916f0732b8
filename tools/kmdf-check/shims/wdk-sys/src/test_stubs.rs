//! Symbols a test build of a driver needs to link without the WDK libraries (same as the real
//! crate's `test-stubs` feature). Calling a WDF function through them dereferences null.

#[cfg(any(driver_model__driver_type = "KMDF", driver_model__driver_type = "UMDF"))]
pub use wdf::*;

for_every_driver_model! {
    use crate::{NTSTATUS, PCUNICODE_STRING, PDRIVER_OBJECT};

    /// Stubbed version of `DriverEntry` Symbol so that test targets will compile
    ///
    /// # Safety
    ///
    /// This function should never be called, so its safety is irrelevant
    // SAFETY: "DriverEntry" is the symbol name WDF's entry stub calls; no other function of
    // this crate exports it.
    #[unsafe(export_name = "DriverEntry")]
    pub const unsafe extern "system" fn driver_entry_stub(
        _driver: PDRIVER_OBJECT,
        _registry_path: PCUNICODE_STRING,
    ) -> NTSTATUS {
        0
    }
}

#[cfg(any(driver_model__driver_type = "KMDF", driver_model__driver_type = "UMDF"))]
mod wdf {
    use crate::{PWDF_DRIVER_GLOBALS, ULONG};

    /// Stubbed version of `WdfFunctionCount` Symbol so that test targets will
    /// compile
    // SAFETY: WdfFunctionCount is a required WDF symbol for test compilation; no other symbol
    // of this crate has the name.
    #[unsafe(no_mangle)]
    pub static mut WdfFunctionCount: ULONG = 0;

    /// Stubbed version of `WdfDriverGlobals` Symbol so that test targets will
    /// link.
    // SAFETY: WdfDriverGlobals is a required WDF symbol for test compilation; no other symbol
    // of this crate has the name.
    #[unsafe(no_mangle)]
    pub static mut WdfDriverGlobals: PWDF_DRIVER_GLOBALS = core::ptr::null_mut();

    include!(concat!(env!("OUT_DIR"), "/test_stubs.rs"));
}
