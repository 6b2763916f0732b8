//! What the filter device does with the RDMA controller below it: when it hands the controller
//! to the driver core, when it only passes the controller's I/O through, and when it gives the
//! controller's interfaces back. The WDF glue calls [`Controller`] from the filter device's
//! self-managed I/O callbacks; the decisions are here so that they are tested on the host.
//!
//! * **Start** — `EvtDeviceSelfManagedIoInit` (first start) and `EvtDeviceSelfManagedIoRestart`
//!   (every return to D0 after a suspend): take the controller's verbs interface, then its CM
//!   interface, and hand both to the core ([`Controller::start`]).
//! * **Stop** — `EvtDeviceSelfManagedIoSuspend` (before every power-down: sleep, hibernation,
//!   a stop for resource rebalancing, removal, surprise removal), `EvtDeviceSurpriseRemoval`
//!   and `EvtDeviceSelfManagedIoCleanup`: the core removes the device (every parked request on
//!   it ends with `STATUS_DEVICE_REMOVED`, every verbs handle is destroyed) and the interfaces
//!   go back ([`Controller::stop`]; the first of these calls does it, the others find nothing).
//!   Holding the verbs interface across a power-down is not an option: WinOFED's mlx4_bus
//!   counts every reference on its interfaces and its `EvtDeviceD0Exit` waits, without a
//!   timeout, for that count to reach zero on every target state but D3Final, then stops the
//!   card. A filter that kept the interface would hang sleep and hibernation for ever, and the
//!   HCA objects would not survive the card's stop anyway. OFW's WinVerbs gave everything back
//!   in `EvtDeviceD0Exit` and took it again in `EvtDeviceD0Entry`; this is the same, one
//!   callback earlier. The consequence is OFW's too: across a sleep, applications see their
//!   device removed, and a DEVICE_OPEN of the same GUID after the wake opens it again.
//! * **Pass-through** — a start that cannot attach (no verbs interface: a controller without
//!   IB ports; a query that fails; a table the adapter refuses; no pool for the interface's
//!   cell; an arrival the core refuses) leaves a pass-through filter, and the start succeeds
//!   ([`Start::status`]). Failing the start from a filter would fail the controller's whole
//!   device stack — its function driver, ibbus, IPoIB — for want of something only WinVerbs
//!   needs; the reason is logged instead ([`PassThrough`]'s `Display`).

use core::fmt;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use wv_abi::NtStatus;
use wv_hal::{FilterDriver, KArc, Platform, Verbs};

use crate::Driver;

/// How the filter's suspend (`EvtDeviceSelfManagedIoSuspend`) waits for [`Controller::stop`]:
/// in slices of this length, logging when the time waited reaches 1, 2, 4, 8, … slices
/// ([`suspend_wait_logged`]). It never gives up: the interfaces may not go back to the
/// controller's driver while a verbs call still runs on them (a firmware command of a QP
/// modify in flight, a DEVICE_OPEN being made), so a stuck controller shows up in the debugger
/// log as a suspend that keeps waiting, long before the power manager's watchdog bug-checks
/// the machine — not as a silent hang.
pub const SUSPEND_WAIT_SLICE_NS: u64 = 1_000_000_000;

/// Whether the suspend logs after waiting `slices` slices of [`SUSPEND_WAIT_SLICE_NS`]: at
/// 1, 2, 4, 8, … (a few lines however long the wait).
pub fn suspend_wait_logged(slices: u64) -> bool {
    slices.is_power_of_two()
}

/// Why a filter passes its controller's I/O through instead of giving the controller to the
/// core. `E` is the adapter's reason for refusing an interface table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PassThrough<E> {
    /// The controller answered the verbs query with `STATUS_NOT_SUPPORTED`: it has no IB
    /// ports (mlx4_bus only exports the interface when it has some).
    NoVerbs,
    /// The verbs query failed with this status.
    QueryFailed(NtStatus),
    /// The adapter refused the table the controller returned (size, version, a function
    /// WinVerbs calls is missing); the table's reference has gone back.
    Refused(E),
    /// No pool for the cell the interface is shared in; the table's reference has gone back.
    NoMemory,
    /// The core could not take the controller (out of pool); everything has gone back.
    ArrivalFailed(NtStatus),
}

impl<E> PassThrough<E> {
    /// The reason for a verbs query (`IRP_MN_QUERY_INTERFACE`) that failed with `status`.
    pub fn query_failed(status: NtStatus) -> Self {
        if status == NtStatus::NOT_SUPPORTED {
            PassThrough::NoVerbs
        } else {
            PassThrough::QueryFailed(status)
        }
    }
}

impl<E: fmt::Display> fmt::Display for PassThrough<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PassThrough::NoVerbs => {
                f.write_str("the controller has no verbs interface (no IB ports)")
            }
            PassThrough::QueryFailed(status) => {
                write!(f, "the verbs interface query failed ({:#010x})", status.0)
            }
            PassThrough::Refused(reason) => write!(f, "unusable verbs interface ({reason})"),
            PassThrough::NoMemory => f.write_str("no pool for the verbs interface"),
            PassThrough::ArrivalFailed(status) => {
                write!(
                    f,
                    "the driver could not take the controller ({:#010x})",
                    status.0
                )
            }
        }
    }
}

/// What [`Controller::start`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use]
pub enum Start<E> {
    /// The core has the controller (now, or from an earlier start).
    Attached,
    /// The filter passes the controller's I/O through, for this reason.
    PassThrough(PassThrough<E>),
}

impl<E> Start<E> {
    /// The status the start callback returns: success in either case, so that WinVerbs never
    /// takes its controller's stack down (see the module documentation).
    pub fn status(&self) -> NtStatus {
        NtStatus::SUCCESS
    }
}

/// One filter device's hold on its controller: whether the core has it, and under which node
/// GUID.
///
/// Its state is one `AtomicU64` and one `AtomicBool`, so all-zero bytes are
/// [`Controller::new`]: the WDF glue keeps it in the filter device's context, which the
/// framework zero-fills and frees without dropping (nothing here needs dropping). The glue
/// asserts its size; a field that is not valid when zero must not be added.
#[derive(Debug, Default)]
pub struct Controller {
    guid: AtomicU64,
    attached: AtomicBool,
}

impl Controller {
    /// Not attached.
    pub const fn new() -> Self {
        Controller {
            guid: AtomicU64::new(0),
            attached: AtomicBool::new(false),
        }
    }

    /// The controller's self-managed I/O starts (PASSIVE_LEVEL): `query` takes its verbs
    /// interface, `cm` its CM interface (none: the verbs work, endpoints cannot connect through
    /// it), and both go to the core. A controller the core already has keeps its attachment
    /// and nothing is queried.
    pub fn start<P: Platform, V: Verbs, E>(
        &self,
        driver: &Driver<P, V>,
        query: impl FnOnce() -> Result<V, PassThrough<E>>,
        cm: impl FnOnce() -> Option<V::Cm>,
    ) -> Start<E> {
        if self.attached.load(Ordering::Acquire) {
            return Start::Attached;
        }
        let lower = match query() {
            Ok(lower) => lower,
            Err(reason) => return Start::PassThrough(reason),
        };
        let guid = lower.guid();
        // A failed allocation drops the value, which gives the interface's reference back.
        let Ok(lower) = KArc::try_new(lower) else {
            return Start::PassThrough(PassThrough::NoMemory);
        };
        // A CM whose cell cannot be allocated goes back the same way: the controller still
        // works without endpoints.
        let cm = cm().and_then(|cm| KArc::try_new(cm).ok());
        if let Err(status) = driver.device_arrival(lower, cm) {
            return Start::PassThrough(PassThrough::ArrivalFailed(status));
        }
        self.guid.store(guid, Ordering::Relaxed);
        self.attached.store(true, Ordering::Release);
        Start::Attached
    }

    /// The controller's self-managed I/O stops (PASSIVE_LEVEL): if the core has it, everything
    /// on it ends and its interfaces go back before this returns. `false`: the core did not
    /// have it (a pass-through filter, or an earlier stop).
    pub fn stop<P: Platform, V: Verbs>(&self, driver: &Driver<P, V>) -> bool {
        if !self.attached.swap(false, Ordering::AcqRel) {
            return false;
        }
        driver.device_removal(self.guid.load(Ordering::Relaxed));
        true
    }

    /// Whether the core has the controller.
    pub fn is_attached(&self) -> bool {
        self.attached.load(Ordering::Acquire)
    }
}
