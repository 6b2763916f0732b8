//! The vendor ("UMV") bytes between the soft HCA's kernel half and its user-mode provider.
//!
//! Like rxe, the kernel half allocates every ring itself and tells user mode where it is (the
//! address and size in the response, the moral equivalent of an mmap offset); user mode maps it
//! through the registry of [`crate::uvp`], which checks the address against the allocation the
//! device made, or, as a device service's client, through the memory the service shares with
//! it (the address is then the ring's offset there), from the response alone: a QP's response
//! carries everything its posts are checked against. Commands carry the requested geometry
//! where the verbs call does not.
//!
//! Every struct is `#[repr(C)]`, little-endian, with explicit padding, and starts with
//! [`SOFTHCA_ABI_MAGIC`] where user mode sends it, so that stray bytes are refused.

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use wv_hal::{Umv, VerbsError};

/// First word of every vendor command: "SHCA" and the ABI version 1.
pub const SOFTHCA_ABI_MAGIC: u32 = 0x5348_4101;

/// DEVICE_OPEN response: how user mode finds the device's data path.
#[repr(C)]
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct OpenCaResp {
    /// [`SOFTHCA_ABI_MAGIC`].
    pub magic: u32,
    /// Reserved.
    pub reserved: u32,
    /// Node GUID (as `Verbs::guid`).
    pub node_guid: u64,
    /// The context handle to present to [`crate::uvp::UvpContext::open`].
    pub context: u64,
}

/// PD allocation response.
#[repr(C)]
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct PdResp {
    /// PD handle.
    pub pd_handle: u32,
    /// Reserved.
    pub reserved: u32,
}

/// CQ creation response.
#[repr(C)]
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct CqResp {
    /// CQ handle (the doorbell's handle).
    pub cq_handle: u32,
    /// CQEs in the ring.
    pub entries: u32,
    /// Address of the CQE ring.
    pub ring_addr: u64,
    /// Bytes of the CQE ring.
    pub ring_bytes: u64,
}

/// QP creation command (optional: without it the verbs call's sizes are used).
#[repr(C)]
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct QpCmd {
    /// [`SOFTHCA_ABI_MAGIC`].
    pub magic: u32,
    /// Reserved, zero.
    pub flags: u32,
}

/// QP creation response.
#[repr(C)]
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct QpResp {
    /// QP handle (the doorbell's handle).
    pub qp_handle: u32,
    /// QP number.
    pub qpn: u32,
    /// Send WQEs.
    pub sq_entries: u32,
    /// Words per send WQE.
    pub sq_stride: u32,
    /// Receive WQEs (0 with an SRQ).
    pub rq_entries: u32,
    /// Words per receive WQE.
    pub rq_stride: u32,
    /// Address of the send ring.
    pub sq_addr: u64,
    /// Address of the receive ring.
    pub rq_addr: u64,
    /// The transport type (`WV_IO_QP_CREATE.QpType`'s value).
    pub qp_type: u32,
    /// SGEs per send request.
    pub sq_max_sge: u32,
    /// SGEs per receive request (0 with an SRQ).
    pub rq_max_sge: u32,
    /// Largest inline payload.
    pub max_inline: u32,
    /// [`QP_RESP_SRQ`] when the QP receives from an SRQ.
    pub flags: u32,
    /// Reserved.
    pub reserved: u32,
}

/// [`QpResp::flags`]: the QP receives from an SRQ (its receive ring is a one-slot
/// placeholder).
pub const QP_RESP_SRQ: u32 = 1;

/// SRQ creation response.
#[repr(C)]
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct SrqResp {
    /// SRQ handle.
    pub srq_handle: u32,
    /// WQEs.
    pub entries: u32,
    /// Words per WQE.
    pub stride: u32,
    /// Reserved.
    pub reserved: u32,
    /// Address of the ring.
    pub ring_addr: u64,
}

/// AH creation response.
#[repr(C)]
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct AhResp {
    /// AH handle.
    pub ah_handle: u32,
    /// Index of the address vector's source GID in its port's GID table (0 for a zero
    /// SGID): what the user-mode provider puts in the UD work requests it sends with it.
    pub sgid_index: u32,
}

/// Memory-window allocation command (optional: without it the window is type 1, the only
/// kind the OFW verbs knew).
#[repr(C)]
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct MwCmd {
    /// [`SOFTHCA_ABI_MAGIC`].
    pub magic: u32,
    /// `IBV_MW_TYPE_1` (1) or `IBV_MW_TYPE_2` (2).
    pub mw_type: u32,
}

/// Memory-window allocation response (the rkey travels in `WV_IO_ID.Data`).
#[repr(C)]
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct MwResp {
    /// MW handle.
    pub mw_handle: u32,
    /// The window's type.
    pub mw_type: u32,
}

/// The QP-state bytes `modify_qp` writes for the user-mode provider.
#[repr(C)]
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct QpStateOut {
    /// The new `WV_IO_QP_STATE_*`.
    pub state: u32,
    /// Reserved.
    pub reserved: u32,
}

/// Checks a command, if the caller sent one: absent is fine (a kernel consumer), present must
/// be whole and carry the magic.
pub(crate) fn read_cmd<T: FromBytes + Copy>(
    umv: &Umv<'_>,
    magic_of: impl Fn(&T) -> u32,
) -> Result<Option<T>, VerbsError> {
    if umv.input_len == 0 {
        return Ok(None);
    }
    let input = umv
        .buf
        .get(..umv.input_len)
        .ok_or(VerbsError::InvalidParameter)?;
    let (cmd, _) = T::read_from_prefix(input).map_err(|_| VerbsError::InvalidParameter)?;
    if magic_of(&cmd) != SOFTHCA_ABI_MAGIC {
        return Err(VerbsError::InvalidParameter);
    }
    Ok(Some(cmd))
}

/// Writes a response if the caller has room for one: no output buffer is fine (a kernel
/// consumer); a buffer too small for the response is an error.
pub(crate) fn write_resp<T: IntoBytes + Immutable>(
    umv: &mut Umv<'_>,
    resp: &T,
) -> Result<(), VerbsError> {
    if umv.output_len == 0 {
        return Ok(());
    }
    let bytes = resp.as_bytes();
    let out = umv
        .buf
        .get_mut(..umv.output_len)
        .ok_or(VerbsError::InvalidParameter)?;
    if out.len() < bytes.len() {
        return Err(VerbsError::InvalidParameter);
    }
    out[..bytes.len()].copy_from_slice(bytes);
    Ok(())
}

/// Reads a response a verbs call wrote into vendor output bytes (for the user-mode side).
pub fn parse<T: FromBytes + Copy>(bytes: &[u8]) -> Option<T> {
    T::read_from_prefix(bytes).ok().map(|(t, _)| t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts() {
        assert_eq!(core::mem::size_of::<OpenCaResp>(), 24);
        assert_eq!(core::mem::size_of::<CqResp>(), 24);
        assert_eq!(core::mem::size_of::<QpResp>(), 64);
        assert_eq!(core::mem::size_of::<SrqResp>(), 24);
        assert_eq!(core::mem::size_of::<QpStateOut>(), 8);
        assert_eq!(core::mem::size_of::<MwCmd>(), 8);
        assert_eq!(core::mem::size_of::<MwResp>(), 8);
        assert_eq!(core::mem::size_of::<AhResp>(), 8);
    }

    #[test]
    fn bad_vendor_bytes_are_refused() {
        let mut buf = [0u8; 8];
        let umv = Umv::new(0, 8, 0, &mut buf);
        assert_eq!(
            read_cmd::<QpCmd>(&umv, |c| c.magic),
            Err(VerbsError::InvalidParameter)
        );
        let mut short = [0u8; 3];
        let umv = Umv::new(0, 3, 0, &mut short);
        assert_eq!(
            read_cmd::<QpCmd>(&umv, |c| c.magic),
            Err(VerbsError::InvalidParameter)
        );
        let mut small = [0u8; 4];
        let mut umv = Umv::new(0, 0, 4, &mut small);
        assert_eq!(
            write_resp(&mut umv, &CqResp::default()),
            Err(VerbsError::InvalidParameter)
        );
        let mut umv = Umv::none();
        assert_eq!(write_resp(&mut umv, &CqResp::default()), Ok(()));
    }
}
