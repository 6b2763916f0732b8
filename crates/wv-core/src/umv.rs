//! Vendor ("UMV") data: the user-mode provider's private request and reply, which travel in
//! the request's system buffer after the fixed struct and reach the controller in place (OFW
//! `WvInitVerbsData`).

use core::mem::size_of;

use wv_abi::encode::write_verb_info;
use wv_abi::{NtStatus, Vendor, WV_IO_AH_CREATE, WV_IO_ID, WV_IO_QP_CREATE, WV_IO_SRQ_ATTRIBUTES};
use wv_hal::{IoRequest, Platform, Umv, Verbs};

use crate::provider::{Object, Provider};

/// An input struct that vendor data may follow: the data starts right after it in the system
/// buffer, and its `VerbInfo` is the provider's command to the controller.
pub(crate) trait VerbsInput: Sized {
    /// The struct's `VerbInfo`.
    fn verb_info(&self) -> u32;
    /// The object the struct names: the one a verb runs on, or the parent of a create.
    fn id(&self) -> u64;
}

impl VerbsInput for WV_IO_ID {
    fn verb_info(&self) -> u32 {
        self.VerbInfo
    }
    fn id(&self) -> u64 {
        self.Id
    }
}

/// The structs whose `Id` is a [`WV_IO_ID`].
macro_rules! verbs_input_by_id {
    ($($ty:ty),*) => {$(
        impl VerbsInput for $ty {
            fn verb_info(&self) -> u32 {
                self.Id.VerbInfo
            }
            fn id(&self) -> u64 {
                self.Id.Id
            }
        }
    )*};
}

verbs_input_by_id!(WV_IO_AH_CREATE, WV_IO_QP_CREATE, WV_IO_SRQ_ATTRIBUTES);

/// Runs `call` with the request's vendor data (the system buffer after the `input` struct;
/// `vendor` gives its lengths) and returns its result and the controller's vendor status (what
/// goes back in `VerbInfo`).
pub(crate) fn with_umv<R: IoRequest, I: VerbsInput, T>(
    req: &mut R,
    input: &I,
    vendor: Vendor,
    call: impl FnOnce(&mut Umv<'_>) -> T,
) -> (T, u32) {
    let buf = req.buffer_mut();
    let tail = buf.get_mut(size_of::<I>()..).unwrap_or_default();
    let mut umv = Umv::new(input.verb_info(), vendor.input_len, vendor.output_len, tail);
    let result = call(&mut umv);
    (result, umv.status)
}

/// A verb on one live object that takes vendor data after `input` and answers in the echoed
/// input (CQ_RESIZE, SRQ_QUERY, SRQ_MODIFY). `STATUS_NOT_FOUND` when `input` names no object of
/// type `T` or device removal has destroyed its verbs handle; otherwise `verb` runs with the
/// device's verbs, the object's handle and the vendor data, and `answer` writes its result into
/// the output. `Ok(status)` completes with that status, the controller's `VerbInfo` and the
/// whole output, a failed verb included (OFW); `Err(status)` completes with no output.
pub(crate) fn verb_in_place<P: Platform, V: Verbs, T: Object<P, V>, I: VerbsInput, R>(
    prov: &Provider<P, V>,
    mut req: P::Request,
    input: &I,
    vendor: Vendor,
    verb: impl FnOnce(&V, &T::Verb, &mut Umv<'_>) -> R,
    answer: impl FnOnce(&mut [u8], R) -> Result<NtStatus, NtStatus>,
) {
    let Some((_held, lower, handle)) = prov.acquire_live::<T>(input.id()) else {
        return req.complete(NtStatus::NOT_FOUND, 0);
    };
    let (result, verb_info) = with_umv(&mut req, input, vendor, |umv| verb(&lower, &handle, umv));
    let buf = req.buffer_mut();
    let status = match answer(buf, result) {
        Ok(status) => status,
        Err(status) => return req.complete(status, 0),
    };
    write_verb_info(buf, verb_info).ok();
    let len = req.output_len();
    req.complete(status, len);
}
