//! The soft HCA's tests, one module per area, linked into one test binary: each of them builds
//! against the crate as a client would (its verbs and C faces, the host platform), and one
//! binary instead of one per area is what keeps a rebuild of the crate, and so each mutant of
//! a mutation run, quick. (The allocation-failure walk stays a binary of its own: it installs
//! its own global allocator.)
#![allow(clippy::disallowed_methods)] // tests may allocate infallibly (clippy.toml)

#[macro_use]
mod common;

mod address;
mod argument_limits;
mod atomics;
mod attributes;
mod client_memory;
mod cm;
mod commands;
mod concurrency;
mod cross_pd;
mod data_path;
mod device_model;
mod direct;
mod e2e_core;
mod errors;
mod events;
mod fabric;
mod link_layer;
mod memory_regions;
mod provider_checks;
mod qp_attributes;
mod qp_state_table;
mod rc_requester;
mod receive_slots;
mod resize;
mod responder;
mod service_path;
mod state_machine;
mod teardown;
mod timers;
mod unreliable;
mod windows;
