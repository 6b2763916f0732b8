//! The emulation's verifier: what KMDF Verifier and Driver Verifier check, on every run.
//!
//! During the run each entry point checks its own rules (its IRQL, its NULL arguments, its
//! handles and their types, request ownership, pool tags, work-item states) and each callback
//! frame checks how the driver returned (IRQL, spin locks, critical regions). A broken rule is
//! recorded in `wv-host`'s verifier, shared with the soft HCAs' models; one the kernel or the
//! framework answers with a bug check also marks the machine dead.
//!
//! At unload ([`unload_checks`]) nothing may be left: framework objects (with the tagged
//! references that keep them), device-init structures, pool by tag, work items, device
//! objects, interface references on the controllers below, requests.
//!
//! Counters ([`crate::Machine::stat`]): `ddi calls`, `irps`, `requests presented`,
//! `requests completed by the driver`, `requests cancelled in a queue`, `queue purges`,
//! `pool allocations`, `work items allocated`, `deferred presentations`, `deferred disposals`,
//! `interface queries`, `files opened`, `files closed`, `irql violations`,
//! `filter AddDevice failures turned into success`,
//! `control device deletions deferred to the last close`, `file lookups by search`.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use wdk_sys::WDFDRIVER;
use wv_hal::Irql;

use crate::machine::Inner;
use crate::objects::{self, Kind, Object};

/// `IRQL_NOT_LESS_OR_EQUAL`.
pub const IRQL_NOT_LESS_OR_EQUAL: u32 = 0x0A;
/// `BAD_POOL_CALLER`.
pub const BAD_POOL_CALLER: u32 = 0xC2;
/// `DRIVER_VERIFIER_DETECTED_VIOLATION`.
pub const DRIVER_VERIFIER_DETECTED_VIOLATION: u32 = 0xC4;
/// `WORKER_INVALID`.
pub const WORKER_INVALID: u32 = 0xE4;
/// `WDF_VIOLATION` (KMDF's own bug check, e.g. `FxPointerNotNull`).
pub const WDF_VIOLATION: u32 = 0x10D;

/// The name of a bug check code.
pub fn bug_check_name(code: u32) -> &'static str {
    match code {
        IRQL_NOT_LESS_OR_EQUAL => "IRQL_NOT_LESS_OR_EQUAL",
        BAD_POOL_CALLER => "BAD_POOL_CALLER",
        DRIVER_VERIFIER_DETECTED_VIOLATION => "DRIVER_VERIFIER_DETECTED_VIOLATION",
        WORKER_INVALID => "WORKER_INVALID",
        WDF_VIOLATION => "WDF_VIOLATION",
        _ => "unknown",
    }
}

/// KMDF's own statuses (`wdfstatus.h` values).
pub mod status {
    use wdk_sys::NTSTATUS;

    /// `STATUS_WDF_PAUSED`.
    pub const WDF_PAUSED: NTSTATUS = 0xC020_0203_u32 as NTSTATUS;
    /// `STATUS_WDF_BUSY`.
    pub const WDF_BUSY: NTSTATUS = 0xC020_0204_u32 as NTSTATUS;
    /// `STATUS_WDF_OBJECT_ATTRIBUTES_INVALID`.
    pub const WDF_OBJECT_ATTRIBUTES_INVALID: NTSTATUS = 0xC020_0209_u32 as NTSTATUS;
    /// `STATUS_WDF_NO_CALLBACK`.
    pub const WDF_NO_CALLBACK: NTSTATUS = 0xC020_020B_u32 as NTSTATUS;
    /// `STATUS_WDF_PARENT_ASSIGNMENT_NOT_ALLOWED`.
    pub const WDF_PARENT_ASSIGNMENT_NOT_ALLOWED: NTSTATUS = 0xC020_020F_u32 as NTSTATUS;
}

/// A fresh id for an IRP (never 0), shown in messages.
pub(crate) fn next_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// Everything the verifier found in a run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// Every violation and leak, oldest first.
    pub violations: Vec<String>,
}

impl Report {
    /// Whether nothing was found.
    pub fn is_clean(&self) -> bool {
        self.violations.is_empty()
    }

    /// Panics with every finding when the run was not clean.
    #[track_caller]
    pub fn assert_clean(&self) {
        assert!(self.is_clean(), "{self}");
    }

    /// Whether a finding contains `text`.
    pub fn contains(&self, text: &str) -> bool {
        self.violations.iter().any(|v| v.contains(text))
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "verifier: {} finding(s)", self.violations.len())?;
        for v in &self.violations {
            write!(f, "\n  {v}")?;
        }
        Ok(())
    }
}

/// The driver's unload: the PnP manager unloads a driver once it has no device objects left;
/// `EvtDriverUnload` runs, then the framework deletes the driver object (and whatever is still
/// parented to it).
pub(crate) fn unload(m: &Arc<Inner>) {
    let (driver, unload) = {
        let fx = m.fx.lock();
        let Some(driver) = fx.driver else {
            return;
        };
        let unload = match fx.get(driver) {
            Some(Object {
                kind: Kind::Driver(d),
                ..
            }) => d.unload,
            _ => None,
        };
        (driver, unload)
    };
    if let Some(unload) = unload {
        crate::callbacks::frame(m, "EvtDriverUnload", Irql::Passive, || {
            // SAFETY: the driver's unload callback with its driver object, once.
            unsafe { crate::callbacks::driver_unload(m.convention(), unload, driver as WDFDRIVER) }
        });
    }
    m.run_until_idle();
    let devices: Vec<String> =
        m.fx.lock()
            .objects
            .iter()
            .filter_map(|(h, o)| match &o.kind {
                Kind::Device(d) if o.life == objects::Life::Live => Some(format!(
                    "{} {h:#x}{}",
                    if d.control {
                        "control device"
                    } else {
                        "filter device"
                    },
                    d.name
                        .as_deref()
                        .map(|n| format!(" ({n})"))
                        .unwrap_or_default()
                )),
                _ => None,
            })
            .collect();
    if !devices.is_empty() {
        m.violation(format!(
            "verifier: unload with device objects the driver did not delete ({}): the system \
             would never unload this driver",
            devices.join(", ")
        ));
    }
    objects::delete_driver_object(m);
}

/// The checks at unload: everything the driver or the framework still holds for it.
pub(crate) fn unload_checks(m: &Arc<Inner>) -> Report {
    let mut leaks = Vec::new();
    {
        let mut fx = m.fx.lock();
        for (handle, kind, life, refs) in fx.census() {
            let tags: Vec<String> = fx
                .get(handle)
                .map(|o| {
                    o.tags
                        .iter()
                        .map(|t| format!("tag {:#x} at {}:{}", t.tag, t.file, t.line))
                        .collect()
                })
                .unwrap_or_default();
            leaks.push(format!(
                "leak: {kind} {handle:#x} still exists at unload ({life:?}, {refs} reference(s){})",
                if tags.is_empty() {
                    String::new()
                } else {
                    format!("; held by {}", tags.join(", "))
                }
            ));
        }
        let inits = fx.inits.len();
        if inits > 0 {
            leaks.push(format!(
                "leak: {inits} WDFDEVICE_INIT structure(s) allocated and never freed \
                 (WdfDeviceInitFree after a failed WdfDeviceCreate)"
            ));
        }
        for w in fx.wdm_devices.values() {
            leaks.push(format!(
                "leak: device object {:#x} ({}) still exists at unload ({} reference(s) from \
                 work items)",
                w.address(),
                if w.name.is_empty() {
                    "unnamed"
                } else {
                    &w.name
                },
                w.refs
            ));
        }
        fx.objects.clear();
        fx.inits.clear();
        fx.wdm_devices.clear();
        fx.names.clear();
        fx.links.clear();
        fx.driver = None;
    }
    let mut pool = m.pool.lock();
    for (tag, count, bytes) in pool.by_tag() {
        leaks.push(format!(
            "leak: {count} pool allocation(s) of {bytes} bytes with tag '{}' not freed at unload",
            crate::wdm::tag_text(tag)
        ));
    }
    pool.reclaim();
    drop(pool);
    let (items, queued) = m.work_items.lock().counts();
    if items > 0 {
        leaks.push(format!(
            "leak: {items} IO_WORKITEM(s) allocated and never freed at unload ({queued} still \
             queued)"
        ));
    }
    for (name, references) in crate::pnp::references(m) {
        if references > 0 {
            leaks.push(format!(
                "leak: {references} interface reference(s) on {name} still held at unload"
            ));
        }
    }
    for leak in &leaks {
        m.violation(leak.clone());
    }
    Report {
        violations: m.platform.verifier().take_violations(),
    }
}
