//! Compile-fail cases of the kmdf-check harness. Each feature plants one mistake that the
//! type-check must reject; adding the `fixed` feature compiles the corrected twin of the same
//! code, which must pass. `tools/kmdf-check/check` builds every case both ways and checks that
//! the failure is the expected one.

#![no_std]

/// The planted mistake selected by the enabled feature.
#[cfg(feature = "swapped-handles")]
#[path = "swapped_handles.rs"]
pub mod case;

/// The planted mistake selected by the enabled feature.
#[cfg(feature = "missing-argument")]
#[path = "missing_argument.rs"]
pub mod case;

/// The planted mistake selected by the enabled feature.
#[cfg(feature = "misspelled-ddi")]
#[path = "misspelled_ddi.rs"]
pub mod case;

/// The planted mistake selected by the enabled feature.
#[cfg(feature = "ignored-status")]
#[path = "ignored_status.rs"]
pub mod case;

/// The fixed twin of the two cases that break `WdfRequestCompleteWithInformation`.
#[cfg(all(
    feature = "fixed",
    any(feature = "missing-argument", feature = "misspelled-ddi")
))]
#[path = "complete_with_information.rs"]
mod complete_with_information;
