//! Completion queues: create/destroy/resize and the notification queues completed from the
//! controller's DPC.

use wv_abi::consts::WV_CQ_ERROR;
use wv_abi::encode::write_data;
use wv_abi::{NtStatus, Vendor, WV_IO_ID};
#[cfg(feature = "fault-injection")]
use wv_hal::Event;
use wv_hal::{
    CqEventSink, IoRequest, KArc, Platform, RequestQueue, SpinLock, Umv, Verbs, VerbsError,
};

use crate::create::{Create, Prepared};
use crate::device::DeviceObj;
use crate::fallible::Slots;
use crate::notify::{complete_all, park_unless_error};
use crate::provider::{Provider, Teardown};
use crate::shared::Shared;
use crate::status::verbs_status;
use crate::sync::{Handle, RefCount};
use crate::umv::verb_in_place;

/// The parked CQ_NOTIFYs of one CQ; also the CQ's event sink.
pub(crate) struct CqNotify<P: Platform> {
    /// NEXT_COMPLETION / SOLICITED (and 8-byte BatchNotify) waiters.
    queue: P::Queue,
    /// WV_CQ_ERROR waiters.
    error_queue: P::Queue,
    /// Sticky error (fix of spec §7.1-d): once the CQ has had an async error, every later
    /// CQ_NOTIFY fails at once instead of waiting for an event that already happened. The lock
    /// makes "check, then park" atomic against "set, then flush".
    error: P::SpinLock<bool>,
    /// Fault-injection builds: an event to wait on inside the DPC callback.
    #[cfg(feature = "fault-injection")]
    block: Option<P::Event>,
}

impl<P: Platform> CqNotify<P> {
    fn complete_all(&self, status: NtStatus) {
        complete_all::<P>(&self.queue, status);
        complete_all::<P>(&self.error_queue, status);
    }
}

impl<P: Platform> CqEventSink for CqNotify<P> {
    /// DISPATCH_LEVEL, from the controller's DPC: every parked completion waiter ends here,
    /// with no thread hop. The CQ is not re-armed: user mode arms it after queueing a notify.
    fn on_completion(&self) {
        #[cfg(feature = "fault-injection")]
        if let Some(block) = &self.block {
            block.wait();
        }
        complete_all::<P>(&self.queue, NtStatus::SUCCESS);
    }

    fn on_error(&self) {
        *self.error.lock() = true;
        self.complete_all(NtStatus::UNEXPECTED_IO_ERROR);
    }
}

/// A completion queue (OFW `WV_COMPLETION_QUEUE`).
pub(crate) struct CqObj<P: Platform, V: Verbs> {
    pub dev: KArc<DeviceObj<P, V>>,
    pub cq: Handle<P, V::Cq>,
    /// QPs and IOCTLs in flight.
    pub refs: RefCount,
    notify: KArc<CqNotify<P>>,
}

impl<P: Platform, V: Verbs> CqObj<P, V> {
    pub fn destroy_handles(&self, lower: &V, shared: &Shared<P, V>) {
        if let Some(cq) = self.cq.take() {
            #[cfg(feature = "fault-injection")]
            if shared.faults().leak_cq_on_destroy {
                core::mem::forget(cq);
                return;
            }
            let _ = shared;
            lower.destroy_cq(cq);
        }
    }

    /// Ends every parked notify with `status` (device removal).
    pub fn fail_parked(&self, status: NtStatus) {
        self.notify.complete_all(status);
    }
}

impl<P: Platform, V: Verbs> Teardown<P, V> for CqObj<P, V> {
    fn teardown(this: KArc<Self>, shared: &Shared<P, V>) {
        if let Some(lower) = this.dev.lower() {
            this.destroy_handles(&lower, shared);
        }
        // No callback runs after destroy_cq: purging now ends every waiter for good.
        this.notify.queue.purge();
        this.notify.error_queue.purge();
        this.dev.refs.put();
    }
}

/// CQ_CREATE `{Id = device, Data = entries}` → `{Id = cq, Data = actual size}`. Runs in the
/// caller's context (spec §7.1-l). A bad device id is `STATUS_NO_SUCH_DEVICE`.
impl<P: Platform, V: Verbs> Create<P, V> for CqObj<P, V> {
    type Input = WV_IO_ID;
    type Made = V::Cq;
    type Kept = KArc<CqNotify<P>>;
    /// The CQ's actual size.
    type Extra = u32;
    type Parent = DeviceObj<P, V>;
    const NO_PARENT: NtStatus = NtStatus::NO_SUCH_DEVICE;

    fn prepare(prov: &Provider<P, V>) -> Result<Prepared<P, V, Self>, NtStatus> {
        let platform = prov.platform();
        // OFW: the CQ's allocation fails with STATUS_NO_MEMORY, its queues with the framework's
        // status, the verb with STATUS_UNSUCCESSFUL. Everything is allocated before the verb.
        let (notify_slot, obj_slot, cq_slot) = Slots::reserve().ok_or(NtStatus::NO_MEMORY)?;
        // Both queues or no CQ (spec §7.1-k).
        let (queue, error_queue) = platform
            .create_queue()
            .and_then(|q| Ok((q, platform.create_queue()?)))?;
        #[cfg(feature = "fault-injection")]
        let block = match prov
            .shared
            .faults()
            .block_in_cq_callback
            .then(|| platform.event())
            .transpose()
        {
            Ok(block) => block,
            Err(status) => {
                queue.purge();
                error_queue.purge();
                return Err(status);
            }
        };
        let notify = notify_slot.write(CqNotify {
            queue,
            error_queue,
            error: platform.spin_lock(false),
            #[cfg(feature = "fault-injection")]
            block,
        });
        Ok((notify, obj_slot, cq_slot))
    }

    fn create(
        lower: &V,
        ca: &V::Ca,
        &WV_IO_ID { Data: entries, .. }: &WV_IO_ID,
        notify: &Self::Kept,
        umv: &mut Umv<'_>,
    ) -> Result<(V::Cq, u32), VerbsError> {
        let sink: KArc<dyn CqEventSink> = KArc::clone(notify).into();
        lower.create_cq(ca, entries, sink, umv)
    }

    fn abandon(notify: Self::Kept) {
        notify.queue.purge();
        notify.error_queue.purge();
    }

    fn new(dev: &KArc<DeviceObj<P, V>>, cq: Handle<P, V::Cq>, notify: Self::Kept, _: &P) -> Self {
        CqObj {
            dev: KArc::clone(dev),
            cq,
            refs: RefCount::default(),
            notify,
        }
    }

    fn report(buf: &mut [u8], entries: u32) {
        write_data(buf, entries).ok();
    }
}

/// CQ_RESIZE `{Id = cq, Data = entries}` → `Data = actual`. A verbs failure is
/// `STATUS_UNSUCCESSFUL` with `Information = outlen` (OFW; nothing reaches user mode).
pub(crate) fn cq_resize<P: Platform, V: Verbs>(
    prov: &Provider<P, V>,
    req: P::Request,
    id: WV_IO_ID,
    vendor: Vendor,
) {
    let resize = |lower: &V, cq: &V::Cq, umv: &mut Umv<'_>| lower.resize_cq(cq, id.Data, umv);
    verb_in_place::<P, V, CqObj<P, V>, _, _>(prov, req, &id, vendor, resize, |buf, resized| {
        let (status, entries) = match resized {
            Ok(entries) => (NtStatus::SUCCESS, entries),
            Err(e) => (verbs_status(e), id.Data),
        };
        write_data(buf, entries).ok();
        Ok(status)
    });
}

/// CQ_NOTIFY `{Id = cq, Data = type}`: parks on the error queue for `WV_CQ_ERROR`, otherwise
/// on the completion queue. The kernel does not arm the CQ: user mode does, after this
/// returns. `batch` is `IWVCompletionQueue::BatchNotify`'s 8-byte form (fix of spec §7.1-a):
/// parked as a next-completion notify, a superset of "wake me when a batch is done" (spurious
/// wake-ups are allowed).
pub(crate) fn cq_notify<P: Platform, V: Verbs>(
    prov: &Provider<P, V>,
    req: P::Request,
    id: u64,
    kind: u32,
) {
    let Some(cq) = prov.acquire::<CqObj<P, V>>(id) else {
        return req.complete(NtStatus::NOT_FOUND, 0);
    };
    park_unless_error::<P, _>(cq, req, |cq| {
        let notify = &cq.notify;
        let queue = if kind == WV_CQ_ERROR {
            &notify.error_queue
        } else {
            &notify.queue
        };
        (&notify.error, queue)
    });
}

/// CQ_CANCEL: every parked notify of both queues ends with `STATUS_CANCELLED`.
pub(crate) fn cq_cancel<P: Platform, V: Verbs>(prov: &Provider<P, V>, req: P::Request, id: u64) {
    let Some(cq) = prov.acquire::<CqObj<P, V>>(id) else {
        return req.complete(NtStatus::NOT_FOUND, 0);
    };
    cq.notify.complete_all(NtStatus::CANCELLED);
    drop(cq);
    #[cfg(feature = "fault-injection")]
    {
        let faults = prov.shared.faults();
        if faults.lose_cq_cancel {
            core::mem::forget(req);
            return;
        }
        let raw = *prov.shared.raw_completer.lock();
        if let Some(raw) = raw.filter(|_| faults.complete_twice) {
            let complete = raw(req);
            complete(NtStatus::SUCCESS, 0);
            complete(NtStatus::SUCCESS, 0);
            return;
        }
    }
    req.complete(NtStatus::SUCCESS, 0);
}
