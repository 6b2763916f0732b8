//! The WinVerbs conformance suite, for any stack that can be driven through `\\.\WinVerbs`'s
//! IOCTLs.
//!
//! Every scenario compares what the driver did against the exact status, `Information` and
//! bytes the spec (`winverbs-spec.md` §2, §3.7, §7.1) and the rdma-core conformance cases
//! (`device-model-and-perftest.md` §6) require, and ends as one [`ScenarioResult`]:
//!
//! ```text
//! PASS  <name>: <what it checked>
//! FAIL  <name>: <what differed>
//! SKIP  <name>: <why it could not run on this stack>
//! ```
//!
//! [`summary_line`] then gives `N passed, M failed` (`, K skipped` when something was skipped).
//!
//! Scenarios are plain functions over an [`Env`], one fresh machine per scenario, each run on
//! its own thread under a time limit ([`SCENARIO_TIME_LIMIT`]): a request that never completes
//! makes that scenario FAIL instead of hanging the suite. When the machines have a verifier,
//! each machine's violations are tagged with its scenario's name and summed up in a last
//! [`VERIFIER_SCENARIO`] result.
//!
//! Stacks that come with the library: [`InprocEnv`] (the driver core on the host model of KMDF
//! above soft HCAs, in this process), on Linux `ServiceEnv` (the same stack hosted by the
//! device service `wvd` in a process of its own, reached through its socket and shared
//! memory) and, in Windows builds, `WindowsEnv` (the installed driver).
//!
//! # Running the suite
//!
//! ```no_run
//! use wv_check::{InprocConfig, InprocEnv, run_suite, summary_line};
//!
//! let config = InprocConfig::default();
//! let results = run_suite::<InprocEnv>(&config, None, &mut |r| println!("{}", r.line()));
//! println!("{}", summary_line(&results));
//! ```
//!
//! [`scenario_names`] lists what a run returns (to size a progress bar), `filter` keeps the
//! scenarios whose name contains it, [`run_one`] runs a single [`Scenario`] with a limit of
//! the caller's choice, and [`to_json`] serialises results.
//!
//! # Plugging in a stack
//!
//! A stack runs every scenario once it implements [`Env`]:
//!
//! * **A fresh machine per scenario.** [`Env::create`] loads the driver anew with its devices
//!   (two, on one fabric, each with two ports: the port-event scenario orders events across
//!   them). It runs on the scenario's own thread, so the machine needs no `Send`; only
//!   [`Env::Config`] crosses threads. Nothing may carry over between machines: object ids, port
//!   states, removed devices, verifier findings.
//! * **Handles.** [`Env::open`] is CreateFile: each call a new file object. The [`Env::File`]
//!   is a [`wv_client::raw::RawFile`] with the I/O manager's semantics: the exact NTSTATUS,
//!   `Information` and output bytes, pending requests that complete later, CancelIoEx, and
//!   CloseHandle on drop (cleanup cancels what is parked, close follows the last request).
//! * **Registrable memory.** MEMORY_REGISTER probes the caller's pages, so
//!   [`Env::buffer`]`(len)` hands out memory every device of the machine accepts, and keeps it
//!   alive as long as the returned owner. The verbs-level scenarios also register buffers from
//!   [`wv_client::verbs::Device::alloc_buffer`], which come from the process-wide
//!   [`wv_client::process_memory`] pool: soft HCAs must be built with that pool as
//!   their client memory (`ClientMemory::pool(process_memory().clone())`), as the in-process
//!   stack's are.
//! * **Teardown and the verifier.** [`Env::finish`] unloads the driver once the scenario has
//!   closed its handles and returns that machine's violations, one line each (it must report,
//!   not panic). [`Env::verifier`] says whether there is a verifier and what it watched, in
//!   words; that text ends the verifier line.
//! * **The admin side** ([`Env::machine`], a [`Machine`]): device GUIDs by index, port up and
//!   down, surprise removal, hot add, the address service the endpoints bind and route
//!   through, the connection manager's id count. Without it, the port-event, removal and
//!   endpoint scenarios SKIP (as on a real system).
//! * **Optional:** [`Env::create_on_injected_clock`] (the machine of a scenario marked
//!   [`Clock::Injected`], whose timers fire on demand through [`Machine::clock`]: the CM's 15
//!   retries are checked in no time; a stack without it SKIPs that scenario) and [`Env::close_racing_ioctl`] (an IOCTL delivered after cleanup; the
//!   scenario SKIPs without it).
//!
//! A skeleton, here over the in-process [`Stack`](wv_inproc::Stack) (which implements
//! [`Machine`]); another stack swaps in its own I/O manager, file and verifier:
//!
//! ```no_run
//! use std::any::Any;
//!
//! use wv_check::{DeviceSpec, Env, Machine, run_suite, summary_line};
//! use wv_inproc::{File, Stack, StackConfig, process_memory};
//!
//! struct MyEnv(Stack);
//!
//! impl Env for MyEnv {
//!     type Config = ();
//!     type File = File;
//!
//!     fn create(_: &()) -> Result<Self, String> {
//!         let config = StackConfig { devices: 2, ports_per_device: 2, ..StackConfig::default() };
//!         Ok(MyEnv(Stack::new(config)))
//!     }
//!     fn verifier(_: &()) -> Option<String> {
//!         Some("my driver → soft HCAs".into())
//!     }
//!     fn open(&self) -> Result<File, String> {
//!         self.0.open().map_err(|s| s.to_string())
//!     }
//!     fn device_spec(&self) -> Option<DeviceSpec> {
//!         None
//!     }
//!     fn machine(&self) -> Option<&dyn Machine> {
//!         Some(&self.0)
//!     }
//!     fn buffer(&self, len: usize) -> (u64, Box<dyn Any>) {
//!         let b = process_memory().alloc(len);
//!         (b.addr(), Box::new(b))
//!     }
//!     fn finish(self) -> Vec<String> {
//!         self.0.unload()
//!     }
//! }
//!
//! let results = run_suite::<MyEnv>(&(), None, &mut |r| println!("{}", r.line()));
//! println!("{}", summary_line(&results));
//! ```

pub mod conn_side;
mod device;
mod env;
mod inproc;
#[cfg(windows)]
mod installed;
mod runner;
mod scenarios;
#[cfg(target_os = "linux")]
mod service;

pub use device::{DeviceSpec, format_guid, other_device, resolve_device};
pub use env::{Env, InjectedClock, Machine};
pub use inproc::{InprocConfig, InprocEnv};
#[cfg(windows)]
pub use installed::{InstalledConfig, WindowsEnv};
pub use runner::{
    Clock, Outcome, Problem, SCENARIO_TIME_LIMIT, Scenario, ScenarioResult, VERIFIER_SCENARIO,
    Verdict, run_one, run_suite, scenario_names, summary_line, tally, to_json,
};
pub use scenarios::raw::port_in;
pub use scenarios::scenarios;
#[cfg(target_os = "linux")]
pub use service::{ServiceConfig, ServiceEnv};
