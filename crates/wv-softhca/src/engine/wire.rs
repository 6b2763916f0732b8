//! What travels between a requester and a responder: the message with its headers, the
//! link's fate for its packets, and the answer to a burst of them.

use alloc::sync::Arc;

use wv_hal::{Gid, QpType};

use super::segments::{SegList, Src};
use crate::device::Device;
use crate::fabric::Fate;
use crate::wr::{AtomicArgs, WcStatus, WrOpcode};

/// A global route header, as the receiver of a UD message sees it.
#[derive(Clone, Copy, Debug)]
pub(super) struct Grh {
    pub(super) sgid: Gid,
    pub(super) dgid: Gid,
    pub(super) hop_limit: u8,
    pub(super) traffic_class: u8,
    pub(super) flow_label: u32,
}

/// One message on the wire: the request's headers and where its payload comes from. It
/// travels as `npkts` packets of `mtu` bytes (the last one shorter), PSNs from `first_psn`.
pub(super) struct Msg<'a> {
    pub(super) qp_type: QpType,
    pub(super) op: WrOpcode,
    pub(super) src_qpn: u32,
    pub(super) first_psn: u32,
    /// Request packets (1 for a read or an atomic).
    pub(super) npkts: u32,
    /// PSNs the request takes (a read: as many as its response has packets).
    pub(super) psns: u32,
    pub(super) mtu: u64,
    pub(super) len: u64,
    pub(super) src: Src<'a>,
    pub(super) remote_addr: u64,
    pub(super) rkey: u32,
    pub(super) imm_or_inv: u32,
    pub(super) solicited: bool,
    pub(super) atomic: AtomicArgs,
    pub(super) qkey: u32,
    pub(super) grh: Option<Grh>,
    pub(super) slid: u16,
    /// Where a read's response data goes (the requester's buffers).
    pub(super) read_dst: Option<&'a SegList<'a>>,
}

impl Msg<'_> {
    /// The payload bytes of packets `[first, first + count)`: their offset in the message and
    /// length.
    pub(super) fn payload(&self, first: u32, count: u32) -> (u64, u64) {
        let from = u64::from(first) * self.mtu;
        let to = (u64::from(first + count) * self.mtu).min(self.len);
        (from, to.saturating_sub(from))
    }
}

/// The answer to the last packet of a burst.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Reply {
    /// Every PSN up to this one arrived.
    Ack(u32),
    /// The read whose last response PSN this is was answered (its data is in place).
    ReadResp(u32),
    /// The atomic of this PSN was answered with the original value.
    AtomicResp(u32, u64),
    /// Receiver not ready for this PSN; retry after the delay.
    Rnr(u32, u64),
    /// Out of sequence: the responder expects this PSN.
    NakSeq(u32),
    /// A fatal NAK for this PSN (invalid request, remote access or operational error).
    Nak(u32, WcStatus),
    /// Nothing came back.
    Lost,
}

/// The fates of `n` packets from `from` to port `to_port` of `to`: how many in a row arrive,
/// and what happens to the next one (a port that is down loses all). A loopback packet (`from`
/// is `to`) goes through the same transport as any other, so the fabric's fault injection
/// decides it too; a device on no fabric loops back losslessly. `delivered` is the sender's
/// count of packets delivered on a lossless link.
// Always inline: a call costs the one-packet send a third of what the check inside does.
#[inline(always)]
pub(super) fn fates(
    from: &Arc<Device>,
    to: &Arc<Device>,
    to_port: u8,
    n: u32,
    delivered: &mut u64,
) -> (u32, Option<Fate>) {
    if !to.port_up(to_port) || to.is_removed() {
        return (0, Some(Fate::Drop));
    }
    match from.fabric() {
        Some(fabric) => fabric.fates_from(delivered, n),
        None if Arc::ptr_eq(from, to) => (n, None),
        None => (0, Some(Fate::Drop)),
    }
}
