//! The creates of an object on a parent (PD_ALLOCATE, CQ_CREATE, SRQ_CREATE, MW_ALLOCATE,
//! AH_CREATE): one handler, [`create`], and a [`Create`] impl per kind for what differs. QP_CREATE,
//! with its several parents, is its own.

use wv_abi::{NtStatus, Vendor};
use wv_hal::{IoRequest, KArc, KArcSlot, Platform, Umv, Verbs, VerbsError};

use crate::fallible::Slots;
use crate::provider::{Object, Provider};
use crate::status::verbs_status;
use crate::sync::Handle;
use crate::umv::{VerbsInput, with_umv};

/// What a create allocates before its verb, so that nothing can fail once the lower object
/// exists: what the object keeps besides its verbs handle (its notify queues), the object's
/// slot and its verbs handle's slot.
pub(crate) type Prepared<P, V, T> = (
    <T as Create<P, V>>::Kept,
    KArcSlot<T>,
    KArcSlot<<T as Create<P, V>>::Made>,
);

/// What tells the creates on a parent apart.
pub(crate) trait Create<P: Platform, V: Verbs>: Object<P, V> {
    /// The creating IOCTL's input; its id names the parent.
    type Input: VerbsInput;
    /// The verbs handle the verb makes.
    type Made: Send + Sync;
    /// What the object keeps of what [`Create::prepare`] made, besides its slots.
    type Kept;
    /// What the output reports besides the new id and `VerbInfo`.
    type Extra;
    /// The object the new one is made on and holds a reference on.
    type Parent: Object<P, V>;
    /// What the create answers when the parent is unknown or its verbs handle is gone.
    const NO_PARENT: NtStatus;
    /// Allocates what the create needs; the status it fails with otherwise.
    fn prepare(prov: &Provider<P, V>) -> Result<Prepared<P, V, Self>, NtStatus>;
    /// The verb, on the parent's verbs handle.
    fn create(
        lower: &V,
        parent: &<Self::Parent as Object<P, V>>::Verb,
        input: &Self::Input,
        kept: &Self::Kept,
        umv: &mut Umv<'_>,
    ) -> Result<(Self::Made, Self::Extra), VerbsError>;
    /// Lets go of what the object would have kept, after the verb failed.
    fn abandon(_kept: Self::Kept) {}
    /// The new object (its reference on `parent` is already taken).
    fn new(
        parent: &KArc<Self::Parent>,
        verb: Handle<P, Self::Made>,
        kept: Self::Kept,
        platform: &P,
    ) -> Self;
    /// Writes `extra` into the output.
    fn report(_buf: &mut [u8], _extra: Self::Extra) {}
}

/// [`Create::prepare`] of the kinds that keep nothing but their verbs handle: their two slots
/// (`STATUS_NO_MEMORY`, OFW's answer to the object's allocation).
pub(crate) fn slots_only<P: Platform, V: Verbs, T: Create<P, V, Kept = ()>>()
-> Result<Prepared<P, V, T>, NtStatus> {
    let (obj_slot, verb_slot) = Slots::reserve().ok_or(NtStatus::NO_MEMORY)?;
    Ok(((), obj_slot, verb_slot))
}

/// A create on a parent ([`Create`] says which): the parent its input names, everything the
/// object needs allocated before the verb, the verb with the caller's vendor data, then the
/// object published with its id, `VerbInfo` and what the kind reports. A failed verb is
/// `STATUS_UNSUCCESSFUL` (OFW) and leaves nothing behind.
pub(crate) fn create<P: Platform, V: Verbs, T: Create<P, V>>(
    prov: &Provider<P, V>,
    mut req: P::Request,
    input: T::Input,
    vendor: Vendor,
) {
    let Some((parent, lower, handle)) = prov.acquire_live::<T::Parent>(input.id()) else {
        return req.complete(T::NO_PARENT, 0);
    };
    let (kept, obj_slot, verb_slot) = match T::prepare(prov) {
        Ok(prepared) => prepared,
        Err(status) => return req.complete(status, 0),
    };
    let (created, verb_info) = with_umv(&mut req, &input, vendor, |umv| {
        T::create(&lower, &handle, &input, &kept, umv)
    });
    let (made, extra) = match created {
        Ok(created) => created,
        Err(e) => {
            T::abandon(kept);
            return req.complete(verbs_status(e), 0);
        }
    };
    parent.refs().get();
    let platform = prov.platform();
    let verb = Handle::new(platform, verb_slot.write(made));
    let obj = obj_slot.write(T::new(parent.arc(), verb, kept, platform));
    prov.publish(req, obj, verb_info, |buf| T::report(buf, extra));
}
