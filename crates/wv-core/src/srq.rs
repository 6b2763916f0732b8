//! Shared receive queues and their event notification.

use core::mem::offset_of;

use wv_abi::encode::write_at;
use wv_abi::{NtStatus, Vendor, WV_IO_SRQ_ATTRIBUTES};
use wv_hal::{
    IoRequest, KArc, Platform, RequestQueue, SpinLock, SrqAttributes, SrqEvent, SrqEventSink,
    SrqModifyMask, Umv, Verbs, VerbsError,
};

use crate::create::{Create, Prepared};
use crate::device::DeviceObj;
use crate::fallible::Slots;
use crate::notify::{complete_all, park_unless_error};
use crate::pd::PdObj;
use crate::provider::{Provider, Teardown};
use crate::shared::Shared;
use crate::status::verbs_status;
use crate::sync::{Handle, RefCount};
use crate::umv::verb_in_place;

/// The parked SRQ_NOTIFYs of one SRQ; also its event sink.
pub(crate) struct SrqNotify<P: Platform> {
    queue: P::Queue,
    /// Sticky error (fix of spec §7.1-d, as for CQs): after an SRQ error event, SRQ_NOTIFY
    /// fails at once with `STATUS_UNEXPECTED_IO_ERROR`.
    error: P::SpinLock<bool>,
}

impl<P: Platform> SrqEventSink for SrqNotify<P> {
    /// DISPATCH_LEVEL, from the controller's DPC; completes the waiters directly.
    fn on_event(&self, event: SrqEvent) {
        let status = match event {
            SrqEvent::LimitReached => NtStatus::ALERTED,
            SrqEvent::LastWqeReached => NtStatus::NOTIFY_CLEANUP,
            SrqEvent::Error => {
                *self.error.lock() = true;
                NtStatus::UNEXPECTED_IO_ERROR
            }
        };
        complete_all::<P>(&self.queue, status);
    }
}

/// A shared receive queue (OFW `WV_SHARED_RECEIVE_QUEUE`).
pub(crate) struct SrqObj<P: Platform, V: Verbs> {
    pub pd: KArc<PdObj<P, V>>,
    pub dev: KArc<DeviceObj<P, V>>,
    pub srq: Handle<P, V::Srq>,
    /// QPs and IOCTLs in flight.
    pub refs: RefCount,
    notify: KArc<SrqNotify<P>>,
}

impl<P: Platform, V: Verbs> SrqObj<P, V> {
    pub fn destroy_handles(&self, lower: &V) {
        if let Some(srq) = self.srq.take() {
            lower.destroy_srq(srq);
        }
    }

    /// Ends every parked notify with `status` (device removal).
    pub fn fail_parked(&self, status: NtStatus) {
        complete_all::<P>(&self.notify.queue, status);
    }
}

impl<P: Platform, V: Verbs> Teardown<P, V> for SrqObj<P, V> {
    fn teardown(this: KArc<Self>, _shared: &Shared<P, V>) {
        if let Some(lower) = this.dev.lower() {
            this.destroy_handles(&lower);
        }
        this.notify.queue.purge();
        this.pd.refs.put();
    }
}

fn srq_attributes(attr: &WV_IO_SRQ_ATTRIBUTES) -> SrqAttributes {
    SrqAttributes {
        max_wr: attr.MaxWr,
        max_sge: attr.MaxSge,
        srq_limit: attr.SrqLimit,
    }
}

/// SRQ_CREATE `{Id.Id = pd, limits}` → `Id.Id = srq`.
impl<P: Platform, V: Verbs> Create<P, V> for SrqObj<P, V> {
    type Input = WV_IO_SRQ_ATTRIBUTES;
    type Made = V::Srq;
    type Kept = KArc<SrqNotify<P>>;
    type Extra = ();
    type Parent = PdObj<P, V>;
    const NO_PARENT: NtStatus = NtStatus::NOT_FOUND;

    fn prepare(prov: &Provider<P, V>) -> Result<Prepared<P, V, Self>, NtStatus> {
        let platform = prov.platform();
        // OFW `WvSrqAlloc`: the SRQ's allocation fails with STATUS_NO_MEMORY; its queue, like
        // the verb, with STATUS_UNSUCCESSFUL (not the framework's status, unlike CQ_CREATE).
        let (notify_slot, obj_slot, srq_slot) = Slots::reserve().ok_or(NtStatus::NO_MEMORY)?;
        let queue = platform
            .create_queue()
            .map_err(|_| NtStatus::UNSUCCESSFUL)?;
        let notify = notify_slot.write(SrqNotify {
            queue,
            error: platform.spin_lock(false),
        });
        Ok((notify, obj_slot, srq_slot))
    }

    fn create(
        lower: &V,
        pd: &V::Pd,
        attr: &WV_IO_SRQ_ATTRIBUTES,
        notify: &Self::Kept,
        umv: &mut Umv<'_>,
    ) -> Result<(V::Srq, ()), VerbsError> {
        let sink: KArc<dyn SrqEventSink> = KArc::clone(notify).into();
        Ok((lower.create_srq(pd, &srq_attributes(attr), sink, umv)?, ()))
    }

    fn abandon(notify: Self::Kept) {
        notify.queue.purge();
    }

    fn new(pd: &KArc<PdObj<P, V>>, srq: Handle<P, V::Srq>, notify: Self::Kept, _: &P) -> Self {
        SrqObj {
            notify,
            pd: KArc::clone(pd),
            dev: KArc::clone(&pd.dev),
            srq,
            refs: RefCount::default(),
        }
    }
}

/// SRQ_QUERY: writes `VerbInfo`, `MaxWr`, `MaxSge`, `SrqLimit` over the echoed input. OFW
/// ignored the verb's failure and returned garbage limits with SUCCESS; a failure is now
/// `STATUS_UNSUCCESSFUL` (fix of spec §7.1-j).
pub(crate) fn srq_query<P: Platform, V: Verbs>(
    prov: &Provider<P, V>,
    req: P::Request,
    attr: WV_IO_SRQ_ATTRIBUTES,
    vendor: Vendor,
) {
    let query = |lower: &V, srq: &V::Srq, umv: &mut Umv<'_>| lower.query_srq(srq, umv);
    verb_in_place::<P, V, SrqObj<P, V>, _, _>(prov, req, &attr, vendor, query, |buf, queried| {
        let limits = queried.map_err(verbs_status)?;
        let fields = [
            (offset_of!(WV_IO_SRQ_ATTRIBUTES, MaxWr), limits.max_wr),
            (offset_of!(WV_IO_SRQ_ATTRIBUTES, MaxSge), limits.max_sge),
            (offset_of!(WV_IO_SRQ_ATTRIBUTES, SrqLimit), limits.srq_limit),
        ];
        for (offset, value) in fields {
            write_at(buf, offset, &value).ok();
        }
        Ok(NtStatus::SUCCESS)
    });
}

/// SRQ_MODIFY: always `MAX_WR | LIMIT` (OFW; `MaxSge` is ignored). A verbs failure is
/// `STATUS_UNSUCCESSFUL` with `Information = outlen`, as in OFW.
pub(crate) fn srq_modify<P: Platform, V: Verbs>(
    prov: &Provider<P, V>,
    req: P::Request,
    attr: WV_IO_SRQ_ATTRIBUTES,
    vendor: Vendor,
) {
    let verbs_attr = srq_attributes(&attr);
    let mask = SrqModifyMask {
        max_wr: true,
        limit: true,
    };
    let modify =
        |lower: &V, srq: &V::Srq, umv: &mut Umv<'_>| lower.modify_srq(srq, &verbs_attr, mask, umv);
    verb_in_place::<P, V, SrqObj<P, V>, _, _>(prov, req, &attr, vendor, modify, |_, modified| {
        Ok(modified.map_or_else(verbs_status, |()| NtStatus::SUCCESS))
    });
}

/// SRQ_NOTIFY: parks until the next SRQ event (LIMIT → `STATUS_ALERTED`, LAST_WQE →
/// `STATUS_NOTIFY_CLEANUP`, error → `STATUS_UNEXPECTED_IO_ERROR`, sticky).
pub(crate) fn srq_notify<P: Platform, V: Verbs>(prov: &Provider<P, V>, req: P::Request, id: u64) {
    let Some(srq) = prov.acquire::<SrqObj<P, V>>(id) else {
        return req.complete(NtStatus::NOT_FOUND, 0);
    };
    park_unless_error::<P, _>(srq, req, |srq| (&srq.notify.error, &srq.notify.queue));
}

/// SRQ_CANCEL: parked notifies end with `STATUS_CANCELLED`.
pub(crate) fn srq_cancel<P: Platform, V: Verbs>(prov: &Provider<P, V>, req: P::Request, id: u64) {
    let Some(srq) = prov.acquire::<SrqObj<P, V>>(id) else {
        return req.complete(NtStatus::NOT_FOUND, 0);
    };
    complete_all::<P>(&srq.notify.queue, NtStatus::CANCELLED);
    drop(srq);
    req.complete(NtStatus::SUCCESS, 0);
}
