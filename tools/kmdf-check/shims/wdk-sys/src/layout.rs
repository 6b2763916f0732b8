//! Compile-time checks that the structures the glue passes to the framework have the x64
//! sizes and field offsets of the WDK. bindgen already asserts that the Rust layout matches
//! what clang computed from our headers; these pin that computation to the published numbers,
//! so a wrong member in the WDF subset (or a mingw structure that drifted from the WDK's)
//! fails the build instead of passing the type-check with a layout Windows would reject.
//!
//! Sizes were checked against Microsoft's KMDF 1.31 headers parsed by clang over the same
//! mingw base headers (tools/kmdf-check/README.md, "Where the facts come from").

use core::mem::{offset_of, size_of};

use crate::types::{
    INTERFACE, KDPC, KEVENT, KSPIN_LOCK, UNICODE_STRING, WDF_DPC_CONFIG, WDF_DRIVER_CONFIG,
    WDF_DRIVER_GLOBALS, WDF_FILEOBJECT_CONFIG, WDF_IO_QUEUE_CONFIG, WDF_OBJECT_ATTRIBUTES,
    WDF_OBJECT_CONTEXT_TYPE_INFO, WDF_PNPPOWER_EVENT_CALLBACKS, WDF_REQUEST_PARAMETERS,
    WDF_TIMER_CONFIG, WDF_WORKITEM_CONFIG,
};

const _: () = assert!(size_of::<WDF_OBJECT_ATTRIBUTES>() == 56);
const _: () = assert!(size_of::<WDF_OBJECT_CONTEXT_TYPE_INFO>() == 40);
const _: () = assert!(size_of::<WDF_DRIVER_CONFIG>() == 32);
const _: () = assert!(size_of::<WDF_DRIVER_GLOBALS>() == 56);
const _: () = assert!(size_of::<WDF_PNPPOWER_EVENT_CALLBACKS>() == 144);
const _: () = assert!(size_of::<WDF_FILEOBJECT_CONFIG>() == 40);
const _: () = assert!(size_of::<WDF_IO_QUEUE_CONFIG>() == 96);
const _: () = assert!(offset_of!(WDF_IO_QUEUE_CONFIG, Settings) == 80);
const _: () = assert!(offset_of!(WDF_IO_QUEUE_CONFIG, Driver) == 88);
const _: () = assert!(size_of::<WDF_REQUEST_PARAMETERS>() == 40);
const _: () = assert!(offset_of!(WDF_REQUEST_PARAMETERS, Parameters) == 8);
const _: () = assert!(size_of::<WDF_WORKITEM_CONFIG>() == 24);
const _: () = assert!(size_of::<WDF_DPC_CONFIG>() == 24);
const _: () = assert!(size_of::<WDF_TIMER_CONFIG>() == 40);
const _: () = assert!(offset_of!(WDF_TIMER_CONFIG, UseHighResolutionTimer) == 32);

const _: () = assert!(size_of::<KDPC>() == 64);
const _: () = assert!(size_of::<KEVENT>() == 24);
const _: () = assert!(size_of::<INTERFACE>() == 32);
const _: () = assert!(size_of::<KSPIN_LOCK>() == 8);
const _: () = assert!(size_of::<UNICODE_STRING>() == 16);
