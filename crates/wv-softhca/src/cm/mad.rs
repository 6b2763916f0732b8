//! CM messages (IBA 12.6) as the soft CMs exchange them, and their trip over the fabric.
//!
//! A message goes to the CM agent of the device its address names and waits in that agent's
//! inbox for its DPC, so the receiver reacts in its own context, never inside the sender's
//! call. Between two devices it is one packet of the link: fault injection may lose it (a
//! dropped or corrupted MAD never arrives; a delayed one arrives), and the sender's timeout and
//! retries make up for it as IB CM does. A message to an address nobody owns is lost too.

use alloc::sync::{Arc, Weak};

use wv_hal::cm::{
    DREP_PRIVATE_DATA, DREQ_PRIVATE_DATA, MRA_PRIVATE_DATA, REJ_ARI, REJ_PRIVATE_DATA,
    RTU_PRIVATE_DATA,
};
use wv_hal::{CmRepEvent, CmReqEvent};

use crate::device::Device;
use crate::fabric::Fate;

/// A REJ's content.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Rej {
    /// Reason (host order).
    pub reason: u16,
    /// Additional reject information and how much of it is used.
    pub ari: [u8; REJ_ARI],
    pub ari_len: u8,
    /// Private data.
    pub pdata: [u8; REJ_PRIVATE_DATA],
}

impl Rej {
    /// A REJ with `reason` and nothing else.
    pub(crate) fn bare(reason: u16) -> Rej {
        Rej {
            reason,
            ari: [0; REJ_ARI],
            ari_len: 0,
            pdata: [0; REJ_PRIVATE_DATA],
        }
    }
}

/// The body of a CM message; private data always travels at the field's full size.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Body {
    /// REQ, in the sender's view (its path: `sgid`/`slid` are its own; `remote_ca_guid` is
    /// its node GUID).
    Req(CmReqEvent),
    /// REP (`remote_ca_guid` is the sender's node GUID).
    Rep(CmRepEvent),
    Rtu([u8; RTU_PRIVATE_DATA]),
    Dreq([u8; DREQ_PRIVATE_DATA]),
    Drep([u8; DREP_PRIVATE_DATA]),
    Rej(Rej),
    Mra {
        /// The time the sender asks for (`4.096 µs × 2^n`).
        timeout: u8,
        pdata: [u8; MRA_PRIVATE_DATA],
    },
}

/// One CM MAD on its way.
#[derive(Debug)]
pub(crate) struct Mad {
    /// The sending device (replies go back to it).
    pub from: Weak<Device>,
    /// Its node GUID.
    pub from_guid: u64,
    /// The sender's communication id.
    pub from_comm: u32,
    /// The receiver's communication id (0 in a REQ, and in a REJ of a REQ whose sender never
    /// learnt it).
    pub to_comm: u32,
    pub body: Body,
}

/// Private data at a field's full size, zero beyond what the caller gave.
pub(crate) fn full<const N: usize>(data: &[u8]) -> [u8; N] {
    let mut out = [0u8; N];
    let n = data.len().min(N);
    out[..n].copy_from_slice(&data[..n]);
    out
}

/// Sends `mad` from `from` to `to` (`None`: an address nobody owns, so it is lost).
pub(crate) fn post(from: &Device, to: Option<Arc<Device>>, mad: Mad) {
    let Some(to) = to else { return };
    if from.is_removed() || to.is_removed() {
        return;
    }
    let loopback = core::ptr::eq(from, &*to);
    if !loopback
        && let Some(fabric) = from.fabric()
        && matches!(
            fabric.fate_of_device_packet(from),
            Fate::Drop | Fate::Corrupt
        )
    {
        return;
    }
    to.cm.receive(&to, mad);
}
