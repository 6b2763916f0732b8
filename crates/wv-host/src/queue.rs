//! [`HostQueue`]: a WDF manual queue for parking requests.

use std::collections::VecDeque;

use wv_abi::NtStatus;
use wv_hal::{Irql, RequestQueue};

use crate::irql;
use crate::low_resources;
use crate::platform::Shared;
use crate::request::HostRequest;
use crate::sync::{Arc, Mutex, Ordering};
use crate::verifier::Counted;

/// A `WdfIoQueueDispatchManual` queue with no `EvtIoCanceledOnQueue`.
///
/// The queue lock is the one place that decides who owns a parked request: `retrieve_next`,
/// `purge` and the I/O manager's cancel each take the request out under it, so exactly one of
/// them gets it and a cancel/complete race cannot be expressed.
///
/// * `park` after `purge` fails and hands the request back with STATUS_CANCELLED (what
///   `WdfRequestForwardToIoQueue` into a purged queue amounts to: the caller completes it).
/// * `park` of a request whose IRP was already cancelled (CancelIoEx between dispatch and
///   park) completes it at once with STATUS_CANCELLED and returns `Ok`, as the cancel routine
///   would run as soon as the IRP became cancellable.
/// * A parked request cancelled by the I/O manager is completed with STATUS_CANCELLED by the
///   platform, once, and never returned by `retrieve_next`.
///
/// Verifier: dropping the queue with requests still parked ("verifier: queue dropped with N
/// requests parked"; they are completed with STATUS_CANCELLED first), queue calls above
/// DISPATCH_LEVEL, and parking a request in the queue `retrieve_next` took it from (KMDF's
/// verifier fails that forward with STATUS_INVALID_DEVICE_REQUEST; `WdfRequestRequeue` is the
/// call for it, which the platform does not offer).
pub struct HostQueue {
    inner: Arc<QueueInner>,
}

pub(crate) struct QueueInner {
    shared: Arc<Shared>,
    state: Mutex<QueueState>,
}

#[derive(Default)]
struct QueueState {
    parked: VecDeque<HostRequest>,
    purged: bool,
}

impl QueueInner {
    /// Takes the parked request of IRP `id` out of the queue (for cancellation).
    pub(crate) fn take(&self, id: u64) -> Option<HostRequest> {
        let mut state = self.state.lock();
        let at = state.parked.iter().position(|r| r.irp.id == id)?;
        let request = state.parked.remove(at)?;
        request.irp.cancel.lock().parked_in = None;
        Some(request)
    }
}

impl HostQueue {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        shared.verifier.created(Counted::Queue);
        HostQueue {
            inner: Arc::new(QueueInner {
                shared,
                state: Mutex::new(QueueState::default()),
            }),
        }
    }

    fn check_irql(&self, what: &str) {
        let level = irql::current();
        if level > Irql::Dispatch {
            self.inner
                .shared
                .verifier
                .fail(format!("verifier: {what} at {}", level.name()));
        }
    }
}

impl RequestQueue<HostRequest> for HostQueue {
    fn park(&self, request: HostRequest) -> Result<(), (HostRequest, NtStatus)> {
        let _host = low_resources::host_scope();
        self.check_irql("park");
        let mut state = self.inner.state.lock();
        if state.purged {
            return Err((request, NtStatus::CANCELLED));
        }
        let already_cancelled = {
            let mut cancel = request.irp.cancel.lock();
            let from_here = cancel
                .delivered_by
                .as_ref()
                .is_some_and(|q| std::ptr::eq(q.as_ptr(), Arc::as_ptr(&self.inner)));
            if from_here {
                // Recorded, not raised: the locks of the request are held here.
                self.inner.shared.verifier.report(
                    "verifier: a request forwarded to the queue that delivered it \
                     (WdfRequestForwardToIoQueue refuses it under KMDF's verifier)",
                );
            }
            if !cancel.cancelled {
                cancel.parked_in = Some(Arc::downgrade(&self.inner));
            }
            cancel.cancelled
        };
        request.irp.ever_parked.store(true, Ordering::SeqCst);
        if already_cancelled {
            drop(state);
            request.complete_by_platform(NtStatus::CANCELLED);
        } else {
            state.parked.push_back(request);
        }
        Ok(())
    }

    fn retrieve_next(&self) -> Option<HostRequest> {
        let _host = low_resources::host_scope();
        self.check_irql("retrieve_next");
        let request = self.inner.state.lock().parked.pop_front()?;
        {
            let mut cancel = request.irp.cancel.lock();
            cancel.parked_in = None;
            cancel.delivered_by = Some(Arc::downgrade(&self.inner));
        }
        Some(request)
    }

    fn purge(&self) {
        let _host = low_resources::host_scope();
        self.check_irql("purge");
        let drained: Vec<HostRequest> = {
            let mut state = self.inner.state.lock();
            state.purged = true;
            state.parked.drain(..).collect()
        };
        for request in drained {
            request.irp.cancel.lock().parked_in = None;
            request.complete_by_platform(NtStatus::CANCELLED);
        }
    }

    fn parked(&self) -> usize {
        let _host = low_resources::host_scope();
        self.inner.state.lock().parked.len()
    }
}

impl Drop for HostQueue {
    fn drop(&mut self) {
        let _host = low_resources::host_scope();
        let left: Vec<HostRequest> = self.inner.state.lock().parked.drain(..).collect();
        let verifier = self.inner.shared.verifier.clone();
        verifier.destroyed(Counted::Queue);
        if left.is_empty() {
            return;
        }
        let n = left.len();
        for request in left {
            request.irp.cancel.lock().parked_in = None;
            request.complete_by_platform(NtStatus::CANCELLED);
        }
        verifier.fail_unless_panicking(format!("verifier: queue dropped with {n} requests parked"));
    }
}

impl std::fmt::Debug for HostQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostQueue")
            .field("parked", &self.parked())
            .finish()
    }
}
