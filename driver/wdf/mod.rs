//! Small safe wrappers over the WDF and WDM calls the glue makes. The callback files
//! (`entry.rs`, `filter.rs`, `control.rs`) make no framework call of their own, and each call
//! is written once, here, with its `// SAFETY:` argument:
//!
//! * [`driver`]: the framework driver object (`WdfDriverCreate`);
//! * [`device_init`]: the filter device's and the control device's init structures up to
//!   `WdfDeviceCreate`; [`device`]: the calls on a created device (interface queries,
//!   symbolic link, enqueueing a request, deletion);
//! * [`request`]: requests the driver owns, completed once (and completed on drop);
//!   [`queue`]: the default and manual queues; [`object`]: deletion and tagged references;
//! * [`sync`], [`work`], [`pool`]: spin locks and events, system work items, fallible nonpaged
//!   allocations — with `request` and `queue`, the `wv_hal::Platform` parts;
//! * [`wdf_init`]: `const` equivalents of the `WDF_*_INIT` helpers (the bindings have none,
//!   and a zero-filled configuration is wrong for several of them); [`context`]:
//!   `WDF_DECLARE_CONTEXT_TYPE` for Rust types; [`string`]: static `UNICODE_STRING`s.

pub mod context;
pub mod device;
pub mod device_init;
pub mod driver;
pub mod object;
pub mod pool;
pub mod queue;
pub mod request;
pub mod string;
pub mod sync;
pub mod wdf_init;
pub mod work;
