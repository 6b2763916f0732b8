//! Small safe wrappers over the WDF and WDM calls the glue makes, so that the callback files
//! hold no raw framework call they could get wrong in more than one place:
//!
//! * [`wdf_init`]: `const` equivalents of the `WDF_*_INIT` helpers (the bindings have none,
//!   and a zero-filled configuration is wrong for several of them);
//! * [`context`]: `WDF_DECLARE_CONTEXT_TYPE` for Rust types;
//! * [`request`], [`queue`], [`sync`], [`work`]: the `wv_hal::Platform` parts — requests,
//!   manual queues, spin locks and events, work items;
//! * [`pool`]: fallible nonpaged allocations; [`string`]: static `UNICODE_STRING`s.

pub mod context;
pub mod pool;
pub mod queue;
pub mod request;
pub mod string;
pub mod sync;
pub mod wdf_init;
pub mod work;
