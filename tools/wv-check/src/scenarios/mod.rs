//! The scenarios, one module per area, and what they share: raw-IOCTL helpers (`raw`) and the
//! verbs-level set-up of the traffic scenarios (`fixture`).
//!
//! Every scenario is a plain function over an [`Env`]: it opens handles, drives the driver
//! through IOCTL bytes or the verbs API, and compares what came back with what the spec and
//! rdma-core's conformance cases require, returning the PASS detail or a [`Problem`].
//!
//! [`Problem`]: crate::Problem

mod abi;
mod atomics;
mod badflow;
mod client_modify;
mod endpoint;
mod fixture;
mod lifetime;
mod memory_windows;
mod notify;
mod ports;
mod protection;
mod qp_modify;
pub(crate) mod raw;
mod resize;
mod teardown;
mod traffic;

use crate::env::Env;
use crate::runner::Scenario;

/// Every scenario, in the order they run.
pub fn scenarios<E: Env>() -> Vec<Scenario<E>> {
    let mut all = Vec::new();
    all.extend(abi::scenarios());
    all.extend(lifetime::scenarios());
    all.extend(notify::scenarios());
    all.extend(ports::scenarios());
    all.extend(qp_modify::scenarios());
    all.extend(client_modify::scenarios());
    all.extend(teardown::scenarios());
    all.extend(badflow::scenarios());
    all.extend(traffic::scenarios());
    all.extend(atomics::scenarios());
    all.extend(memory_windows::scenarios());
    all.extend(protection::scenarios());
    all.extend(resize::scenarios());
    all.extend(endpoint::scenarios());
    all
}
