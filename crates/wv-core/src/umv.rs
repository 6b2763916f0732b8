//! Vendor ("UMV") data: the user-mode provider's private request and reply, which travel in
//! the request's system buffer after the fixed struct and reach the controller in place (OFW
//! `WvInitVerbsData`).

use core::mem::size_of;

use wv_abi::{Vendor, WV_IO_AH_CREATE, WV_IO_ID, WV_IO_QP_CREATE, WV_IO_SRQ_ATTRIBUTES};
use wv_hal::{IoRequest, Umv};

/// An input struct that vendor data may follow: the data starts right after it in the system
/// buffer, and its `VerbInfo` is the provider's command to the controller.
pub(crate) trait VerbsInput: Sized {
    /// The struct's `VerbInfo`.
    fn verb_info(&self) -> u32;
}

impl VerbsInput for WV_IO_ID {
    fn verb_info(&self) -> u32 {
        self.VerbInfo
    }
}

/// The structs whose `Id` is a [`WV_IO_ID`].
macro_rules! verbs_input_by_id {
    ($($ty:ty),*) => {$(
        impl VerbsInput for $ty {
            fn verb_info(&self) -> u32 {
                self.Id.VerbInfo
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
