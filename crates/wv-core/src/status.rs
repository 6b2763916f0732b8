//! How verbs failures become NTSTATUS values.

use wv_abi::NtStatus;
use wv_hal::VerbsError;

/// The status an IOCTL completes with when a verb fails.
///
/// OFW answers every `ib_api_status_t` failure with `STATUS_UNSUCCESSFUL` (spec §2.6), and user
/// libraries compare against it, so every [`VerbsError`] maps there; the distinction stays
/// available to tracing through the `VerbsError` itself.
pub(crate) fn verbs_status(_error: VerbsError) -> NtStatus {
    NtStatus::UNSUCCESSFUL
}

/// The status of requests that were parked on a lower device when it went away (fix of spec
/// §7.1-e: OFW left them parked until cancel or close). `STATUS_DEVICE_REMOVED` tells user mode
/// the object is dead, which neither `STATUS_CANCELLED` (a user's own cancel) nor
/// `STATUS_UNEXPECTED_IO_ERROR` (a CQ/SRQ error) says.
pub(crate) const REMOVED: NtStatus = NtStatus::DEVICE_REMOVED;
