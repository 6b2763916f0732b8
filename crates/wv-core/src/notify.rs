//! Helpers for parked requests (OFW's `WvFlushQueue` / `WvCompleteRequests`).
//!
//! Requests are taken out of a platform queue one at a time and completed at once: a request
//! is never driver-owned and cancellable at the same time (spec §3.7), and the queue's own
//! cancellation completes anything still parked. These run at IRQL <= DISPATCH_LEVEL, straight
//! from the lower device's DPC callbacks: no work item, no thread hop.

use wv_abi::NtStatus;
use wv_hal::{IoRequest, Platform, RequestQueue, SpinLock};

/// Completes every request parked in `queue` with `status` and `Information = 0` (broadcast).
pub(crate) fn complete_all<P: Platform>(queue: &P::Queue, status: NtStatus) {
    while let Some(request) = queue.retrieve_next() {
        request.complete(status, 0);
    }
}

/// Parks `req` unless the sticky error is set (CQ and SRQ notifies): `pick` names the error
/// flag and the queue in `held`, the caller's reference on the object they belong to.
/// Checking and parking under the error's lock makes them atomic against "set, then flush". A
/// request that was not parked is completed with its status after `held` is dropped.
pub(crate) fn park_unless_error<P: Platform, H>(
    held: H,
    req: P::Request,
    pick: impl for<'a> FnOnce(&'a H) -> (&'a P::SpinLock<bool>, &'a P::Queue),
) {
    let refused = {
        let (error, queue) = pick(&held);
        let error = error.lock();
        if *error {
            Some((req, NtStatus::UNEXPECTED_IO_ERROR))
        } else {
            queue.park(req).err()
        }
    };
    drop(held);
    if let Some((req, status)) = refused {
        req.complete(status, 0);
    }
}
