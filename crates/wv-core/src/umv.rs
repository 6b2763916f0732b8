//! Vendor ("UMV") data: the user-mode provider's private request and reply, which travel in
//! the request's system buffer after the fixed struct and reach the controller in place (OFW
//! `WvInitVerbsData`).

use wv_abi::Vendor;
use wv_hal::{IoRequest, Umv};

/// Runs `call` with the request's vendor data (the system buffer after the `fixed`-byte
/// struct; `vendor` gives its lengths) and returns its result and the controller's vendor
/// status (what goes back in `VerbInfo`).
pub(crate) fn with_umv<R: IoRequest, T>(
    req: &mut R,
    fixed: usize,
    command: u32,
    vendor: Vendor,
    call: impl FnOnce(&mut Umv<'_>) -> T,
) -> (T, u32) {
    let buf = req.buffer_mut();
    let tail = buf.get_mut(fixed..).unwrap_or_default();
    let mut umv = Umv::new(command, vendor.input_len, vendor.output_len, tail);
    let result = call(&mut umv);
    (result, umv.status)
}
