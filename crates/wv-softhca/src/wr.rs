//! The typed work requests and completions of the data path, with ibverbs numeric values, and
//! their encodings as ring entries (WQEs and CQEs of 64-bit words).

use crate::ring::Word;

#[cfg(not(loom))]
use core::sync::atomic::Ordering;
#[cfg(loom)]
use loom::sync::atomic::Ordering;

use wv_hal::Gid;

/// `ibv_wr_opcode` values of the operations the soft HCA executes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum WrOpcode {
    /// `IBV_WR_RDMA_WRITE`.
    RdmaWrite = 0,
    /// `IBV_WR_RDMA_WRITE_WITH_IMM`.
    RdmaWriteWithImm = 1,
    /// `IBV_WR_SEND`.
    Send = 2,
    /// `IBV_WR_SEND_WITH_IMM`.
    SendWithImm = 3,
    /// `IBV_WR_RDMA_READ`.
    RdmaRead = 4,
    /// `IBV_WR_ATOMIC_CMP_AND_SWP`: 8 bytes at `remote_addr` become `swap` if they equal
    /// `compare_add`; the original value lands in the 8-byte local buffer.
    AtomicCmpAndSwp = 5,
    /// `IBV_WR_ATOMIC_FETCH_AND_ADD`: `compare_add` is added to the 8 bytes at `remote_addr`;
    /// the original value lands in the 8-byte local buffer.
    AtomicFetchAndAdd = 6,
    /// `IBV_WR_LOCAL_INV`.
    LocalInv = 7,
    /// `IBV_WR_BIND_MW`: binds a type 2 memory window (see [`MwBind`]).
    BindMw = 8,
    /// `IBV_WR_SEND_WITH_INV`.
    SendWithInv = 9,
    /// Fast-register MR (the kernel's `IB_WR_REG_MR`; numbered after `IBV_WR_DRIVER1`).
    RegMr = 12,
}

impl WrOpcode {
    pub(crate) fn from_u8(v: u8) -> Option<Self> {
        Some(match v {
            0 => Self::RdmaWrite,
            1 => Self::RdmaWriteWithImm,
            2 => Self::Send,
            3 => Self::SendWithImm,
            4 => Self::RdmaRead,
            5 => Self::AtomicCmpAndSwp,
            6 => Self::AtomicFetchAndAdd,
            7 => Self::LocalInv,
            8 => Self::BindMw,
            9 => Self::SendWithInv,
            12 => Self::RegMr,
            _ => return None,
        })
    }

    /// A remote atomic.
    pub(crate) fn is_atomic(self) -> bool {
        matches!(self, Self::AtomicCmpAndSwp | Self::AtomicFetchAndAdd)
    }

    /// An RDMA read or atomic: a request that needs a response and a responder resource.
    pub(crate) fn is_read_or_atomic(self) -> bool {
        self == Self::RdmaRead || self.is_atomic()
    }

    /// Consumes a receive WQE at the responder (a send, or a write with immediate data).
    pub(crate) fn takes_receive(self) -> bool {
        matches!(
            self,
            Self::Send | Self::SendWithImm | Self::SendWithInv | Self::RdmaWriteWithImm
        )
    }

    /// Executed by the local device without a packet.
    pub(crate) fn is_local(self) -> bool {
        matches!(self, Self::LocalInv | Self::RegMr | Self::BindMw)
    }
}

/// `ibv_send_flags`.
pub mod send_flags {
    /// `IBV_SEND_FENCE`.
    pub const FENCE: u32 = 1;
    /// `IBV_SEND_SIGNALED`.
    pub const SIGNALED: u32 = 2;
    /// `IBV_SEND_SOLICITED`.
    pub const SOLICITED: u32 = 4;
    /// `IBV_SEND_INLINE`.
    pub const INLINE: u32 = 8;
}

/// `ibv_wc_status`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
#[allow(missing_docs)]
pub enum WcStatus {
    Success = 0,
    LocLenErr = 1,
    LocQpOpErr = 2,
    LocEecOpErr = 3,
    LocProtErr = 4,
    WrFlushErr = 5,
    MwBindErr = 6,
    BadRespErr = 7,
    LocAccessErr = 8,
    RemInvReqErr = 9,
    RemAccessErr = 10,
    RemOpErr = 11,
    RetryExcErr = 12,
    RnrRetryExcErr = 13,
    LocRddViolErr = 14,
    RemInvRdReqErr = 15,
    RemAbortErr = 16,
    InvEecnErr = 17,
    InvEecStateErr = 18,
    FatalErr = 19,
    RespTimeoutErr = 20,
    GeneralErr = 21,
}

impl WcStatus {
    fn from_u8(v: u8) -> Self {
        use WcStatus::*;
        const ALL: [WcStatus; 22] = [
            Success,
            LocLenErr,
            LocQpOpErr,
            LocEecOpErr,
            LocProtErr,
            WrFlushErr,
            MwBindErr,
            BadRespErr,
            LocAccessErr,
            RemInvReqErr,
            RemAccessErr,
            RemOpErr,
            RetryExcErr,
            RnrRetryExcErr,
            LocRddViolErr,
            RemInvRdReqErr,
            RemAbortErr,
            InvEecnErr,
            InvEecStateErr,
            FatalErr,
            RespTimeoutErr,
            GeneralErr,
        ];
        ALL.get(v as usize).copied().unwrap_or(GeneralErr)
    }
}

/// `ibv_wc_opcode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum WcOpcode {
    /// `IBV_WC_SEND`.
    Send = 0,
    /// `IBV_WC_RDMA_WRITE`.
    RdmaWrite = 1,
    /// `IBV_WC_RDMA_READ`.
    RdmaRead = 2,
    /// `IBV_WC_COMP_SWAP`.
    CompSwap = 3,
    /// `IBV_WC_FETCH_ADD`.
    FetchAdd = 4,
    /// `IBV_WC_BIND_MW`.
    BindMw = 5,
    /// `IBV_WC_LOCAL_INV`.
    LocalInv = 6,
    /// Fast registration done (`IB_WC_REG_MR`).
    RegMr = 10,
    /// `IBV_WC_RECV`.
    Recv = 128,
    /// `IBV_WC_RECV_RDMA_WITH_IMM`.
    RecvRdmaWithImm = 129,
}

impl WcOpcode {
    fn from_u8(v: u8) -> Self {
        match v {
            0 => Self::Send,
            1 => Self::RdmaWrite,
            2 => Self::RdmaRead,
            3 => Self::CompSwap,
            4 => Self::FetchAdd,
            5 => Self::BindMw,
            6 => Self::LocalInv,
            10 => Self::RegMr,
            129 => Self::RecvRdmaWithImm,
            _ => Self::Recv,
        }
    }
}

/// `ibv_wc_flags`.
pub mod wc_flags {
    /// `IBV_WC_GRH`: the first 40 bytes of a UD receive buffer hold a GRH.
    pub const GRH: u32 = 1;
    /// `IBV_WC_WITH_IMM`.
    pub const WITH_IMM: u32 = 2;
    /// `IBV_WC_WITH_INV`.
    pub const WITH_INV: u32 = 4;
}

/// A scatter/gather element: `length` bytes at `addr` of the region `lkey` names.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sge {
    /// Client virtual address.
    pub addr: u64,
    /// Bytes.
    pub length: u32,
    /// Local key of the region.
    pub lkey: u32,
}

/// Where a UD send goes (the address vector embedded in the WQE, as pvrdma does).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UdAddress {
    /// Destination GID (used when `grh`).
    pub dgid: Gid,
    /// Destination LID (used without `grh`).
    pub dlid: u16,
    /// Route by GID, with a global route header: the receiver gets a GRH (`IBV_WC_GRH`) made
    /// of the fields below. Without it the receiver's first 40 bytes are left alone.
    pub grh: bool,
    /// Index of the source GID in the sending port's GID table (the GRH's SGID).
    pub sgid_index: u8,
    /// GRH hop limit.
    pub hop_limit: u8,
    /// GRH traffic class.
    pub traffic_class: u8,
    /// GRH flow label (20 bits).
    pub flow_label: u32,
    /// Destination QP number.
    pub remote_qpn: u32,
    /// Q_Key; the high bit set means "use the QP's own Q_Key".
    pub remote_qkey: u32,
}

/// Fast-registration parameters of a [`WrOpcode::RegMr`] request: re-key an invalidated region
/// and make `[iova, iova + length)` of its pinned pages accessible with `access`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FastReg {
    /// The region's current key (index and old key byte).
    pub mr_key: u32,
    /// The new key byte (low 8 bits of the new lkey/rkey).
    pub new_key_byte: u8,
    /// `WV_ACCESS_*` flags.
    pub access: u32,
    /// First address made accessible.
    pub iova: u64,
    /// Length made accessible.
    pub length: u64,
}

/// The operands of an atomic request (`wr.atomic` of `ibv_send_wr`), host order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AtomicArgs {
    /// The value to compare with (compare-and-swap) or to add (fetch-and-add).
    pub compare_add: u64,
    /// The value to store when the comparison holds (compare-and-swap only).
    pub swap: u64,
}

/// Memory-window binding parameters (`bind_mw` of `ibv_send_wr`, `ibv_mw_bind_info`): make
/// `[addr, addr + length)` of the region `mr_lkey` names reachable through the window, with
/// `access`, under the key `new_rkey`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MwBind {
    /// The window's current rkey (which window).
    pub mw_rkey: u32,
    /// The rkey after the bind: the window's index with a new key byte (its low 8 bits), as
    /// `ibv_inc_rkey` makes it.
    pub new_rkey: u32,
    /// Local key of the region the window opens onto (ignored when `length` is 0).
    pub mr_lkey: u32,
    /// First address.
    pub addr: u64,
    /// Length; 0 unbinds a type 1 window.
    pub length: u64,
    /// Remote rights: `WV_ACCESS_REMOTE_READ | WV_ACCESS_REMOTE_WRITE |
    /// WV_ACCESS_REMOTE_ATOMIC`.
    pub access: u32,
}

/// What the type 1 bind verb (`ibv_bind_mw`'s `ibv_mw_bind_info`) binds a window to: `length`
/// bytes at `addr` of the region `mr_lkey` names, with remote rights `access`. A zero length
/// unbinds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MwBindInfo {
    /// Local key of the region.
    pub mr_lkey: u32,
    /// First address.
    pub addr: u64,
    /// Length (0: unbind).
    pub length: u64,
    /// Remote rights (`WV_ACCESS_REMOTE_READ | WV_ACCESS_REMOTE_WRITE |
    /// WV_ACCESS_REMOTE_ATOMIC`).
    pub access: u32,
}

/// `ibv_inc_rkey`: the same key with the next key byte (the low 8 bits), as a window's new
/// rkey after a bind.
pub fn inc_rkey(rkey: u32) -> u32 {
    (rkey & !0xFF) | (rkey.wrapping_add(1) & 0xFF)
}

/// A send-queue work request (`ibv_send_wr`).
#[derive(Clone, Copy, Debug)]
pub struct SendWr<'a> {
    /// Caller's id, returned in the completion.
    pub wr_id: u64,
    /// Operation.
    pub opcode: WrOpcode,
    /// [`send_flags`].
    pub send_flags: u32,
    /// Gather list (ignored when `inline_data` is given).
    pub sg_list: &'a [Sge],
    /// Inline payload copied into the WQE at post time (implies `INLINE`).
    pub inline_data: Option<&'a [u8]>,
    /// Immediate data (`*_WITH_IMM`, network order as on the wire) or the rkey to invalidate
    /// (`SEND_WITH_INV`, `LOCAL_INV`).
    pub imm_or_inv: u32,
    /// RDMA remote address.
    pub remote_addr: u64,
    /// RDMA remote key.
    pub rkey: u32,
    /// UD destination.
    pub ud: Option<UdAddress>,
    /// Fast-registration parameters.
    pub reg: Option<FastReg>,
    /// Atomic operands.
    pub atomic: Option<AtomicArgs>,
    /// Memory-window binding (`BindMw`).
    pub bind: Option<MwBind>,
}

impl<'a> SendWr<'a> {
    /// A request with the given id and opcode and nothing else.
    pub fn new(wr_id: u64, opcode: WrOpcode) -> Self {
        SendWr {
            wr_id,
            opcode,
            send_flags: 0,
            sg_list: &[],
            inline_data: None,
            imm_or_inv: 0,
            remote_addr: 0,
            rkey: 0,
            ud: None,
            reg: None,
            atomic: None,
            bind: None,
        }
    }
}

/// A receive work request (`ibv_recv_wr`).
#[derive(Clone, Copy, Debug)]
pub struct RecvWr<'a> {
    /// Caller's id.
    pub wr_id: u64,
    /// Scatter list.
    pub sg_list: &'a [Sge],
}

/// A work completion (`ibv_wc`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WorkCompletion {
    /// The request's id.
    pub wr_id: u64,
    /// Status.
    pub status: WcStatus,
    /// Operation (valid only on success).
    pub opcode: WcOpcode,
    /// Vendor error.
    pub vendor_err: u32,
    /// Bytes transferred (receives, reads).
    pub byte_len: u32,
    /// Immediate data (network order) or the invalidated rkey.
    pub imm_data: u32,
    /// Local QP number.
    pub qp_num: u32,
    /// Source QP (UD receives).
    pub src_qp: u32,
    /// [`wc_flags`].
    pub wc_flags: u32,
    /// P_Key index.
    pub pkey_index: u16,
    /// Source LID.
    pub slid: u16,
    /// Service level.
    pub sl: u8,
    /// Destination LID path bits.
    pub dlid_path_bits: u8,
}

impl Default for WorkCompletion {
    fn default() -> Self {
        WorkCompletion {
            wr_id: 0,
            status: WcStatus::Success,
            opcode: WcOpcode::Send,
            vendor_err: 0,
            byte_len: 0,
            imm_data: 0,
            qp_num: 0,
            src_qp: 0,
            wc_flags: 0,
            pkey_index: 0,
            slid: 0,
            sl: 0,
            dlid_path_bits: 0,
        }
    }
}

/// Words of a CQE (64 bytes, as pvrdma's).
pub(crate) const CQE_WORDS: usize = 8;
/// Header words of a send WQE.
pub(crate) const SQ_HDR_WORDS: usize = 8;
/// Header words of a receive WQE.
pub(crate) const RQ_HDR_WORDS: usize = 2;

/// Stores words with relaxed ordering: the ring index publishes them with release.
fn st(slot: &[Word], i: usize, v: u64) {
    slot[i].store(v, Ordering::Relaxed);
}
fn ld(slot: &[Word], i: usize) -> u64 {
    slot[i].load(Ordering::Relaxed)
}

/// Words of a CQE that hold its fields (the rest of its 64 bytes are reserved).
const WC_FIELD_WORDS: usize = 6;
/// Word 5 of a CQE: 1 when the completion is of a receive the device took from its QP's own
/// receive queue (and released before it wrote the CQE), 0 for every other. The user-mode
/// provider counts them to learn which receive slots are free (as mlx5's provider advances its
/// receive queue at each receive CQE it polls).
const CQE_TOOK_RQ_SLOT: u64 = 1;

/// The first `N` words of `slot`, its length checked once for all of them: the fields are then
/// stored and loaded without a check each.
#[inline]
fn head<const N: usize>(slot: &[Word]) -> &[Word; N] {
    match slot.first_chunk() {
        Some(words) => words,
        None => panic!("a slot of {} words has no {N}-word header", slot.len()),
    }
}

impl WorkCompletion {
    #[inline]
    pub(crate) fn encode(&self, slot: &[Word]) {
        self.encode_recv(slot, false);
    }
    /// Encodes a receive's CQE, saying whether the receive was taken from the QP's own receive
    /// queue (`took_rq_slot`, its slot already released).
    #[inline]
    pub(crate) fn encode_recv(&self, slot: &[Word], took_rq_slot: bool) {
        let slot = head::<WC_FIELD_WORDS>(slot);
        st(slot, 0, self.wr_id);
        st(
            slot,
            1,
            u64::from(self.qp_num) | (u64::from(self.src_qp) << 32),
        );
        st(
            slot,
            2,
            u64::from(self.opcode as u8)
                | (u64::from(self.status as u8) << 8)
                | (u64::from(self.wc_flags as u16) << 16)
                | (u64::from(self.byte_len) << 32),
        );
        st(
            slot,
            3,
            u64::from(self.imm_data)
                | (u64::from(self.pkey_index) << 32)
                | (u64::from(self.slid) << 48),
        );
        st(
            slot,
            4,
            u64::from(self.sl)
                | (u64::from(self.dlid_path_bits) << 8)
                | (u64::from(self.vendor_err) << 32),
        );
        st(slot, 5, if took_rq_slot { CQE_TOOK_RQ_SLOT } else { 0 });
    }
    pub(crate) fn decode(slot: &[Word]) -> Self {
        let slot = head::<WC_FIELD_WORDS>(slot);
        let w1 = ld(slot, 1);
        let w2 = ld(slot, 2);
        let w3 = ld(slot, 3);
        let w4 = ld(slot, 4);
        WorkCompletion {
            wr_id: ld(slot, 0),
            qp_num: w1 as u32,
            src_qp: (w1 >> 32) as u32,
            opcode: WcOpcode::from_u8(w2 as u8),
            status: WcStatus::from_u8((w2 >> 8) as u8),
            wc_flags: u32::from((w2 >> 16) as u16),
            byte_len: (w2 >> 32) as u32,
            imm_data: w3 as u32,
            pkey_index: (w3 >> 32) as u16,
            slid: (w3 >> 48) as u16,
            sl: w4 as u8,
            dlid_path_bits: (w4 >> 8) as u8,
            vendor_err: (w4 >> 32) as u32,
        }
    }
}

/// Whether the CQE in `slot` is of a receive taken from its QP's own receive queue
/// ([`WorkCompletion::encode_recv`]).
#[inline]
pub(crate) fn cqe_took_rq_slot(slot: &[Word]) -> bool {
    ld(head::<WC_FIELD_WORDS>(slot), 5) == CQE_TOOK_RQ_SLOT
}

/// A send WQE as the device reads it from the ring: the first four words, which every request
/// uses. The words after them (a UD address, atomic operands, a registration or a binding) are
/// read in place, like the SGEs and inline bytes, by the few requests that have them.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SendWqe {
    pub wr_id: u64,
    pub opcode: u8,
    pub flags: u32,
    pub num_sge: usize,
    pub inline_len: usize,
    pub imm_or_inv: u32,
    pub rkey: u32,
    pub remote_addr: u64,
}

/// Words 4 to 7 of the send WQE in `slot`.
fn ext_words(slot: &[Word]) -> [u64; 4] {
    let slot = head::<SQ_HDR_WORDS>(slot);
    [ld(slot, 4), ld(slot, 5), ld(slot, 6), ld(slot, 7)]
}

impl SendWqe {
    #[inline]
    pub(crate) fn decode(slot: &[Word]) -> Self {
        let slot = head::<SQ_HDR_WORDS>(slot);
        let w1 = ld(slot, 1);
        let w2 = ld(slot, 2);
        SendWqe {
            wr_id: ld(slot, 0),
            opcode: w1 as u8,
            flags: u32::from((w1 >> 8) as u8),
            num_sge: usize::from((w1 >> 16) as u16),
            inline_len: (w1 >> 32) as usize,
            imm_or_inv: w2 as u32,
            rkey: (w2 >> 32) as u32,
            remote_addr: ld(slot, 3),
        }
    }
    /// The UD address of this WQE, which is in `slot`.
    pub(crate) fn ud(&self, slot: &[Word]) -> UdAddress {
        let [w4, w5, w6, w7] = ext_words(slot);
        let mut dgid = [0u8; 16];
        dgid[..8].copy_from_slice(&w5.to_be_bytes());
        dgid[8..].copy_from_slice(&w6.to_be_bytes());
        UdAddress {
            dgid,
            dlid: w7 as u16,
            grh: (w7 >> 24) & 1 != 0,
            sgid_index: (w7 >> 16) as u8,
            hop_limit: (self.remote_addr >> 32) as u8,
            traffic_class: (self.remote_addr >> 24) as u8,
            flow_label: (self.remote_addr as u32) & 0xF_FFFF,
            remote_qpn: w4 as u32,
            remote_qkey: (w4 >> 32) as u32,
        }
    }
    /// The atomic operands of this WQE, which is in `slot`.
    pub(crate) fn atomic(&self, slot: &[Word]) -> AtomicArgs {
        let [w4, w5, ..] = ext_words(slot);
        AtomicArgs {
            compare_add: w4,
            swap: w5,
        }
    }
    /// The bind parameters of this WQE (in `slot`) and whether the bind came from the type 1
    /// verb (`ibv_bind_mw`) rather than a posted `BIND_MW` request.
    pub(crate) fn bind(&self, slot: &[Word]) -> (MwBind, bool) {
        let [w4, w5, w6, _] = ext_words(slot);
        (
            MwBind {
                mw_rkey: self.rkey,
                new_rkey: w6 as u32,
                mr_lkey: w5 as u32,
                addr: self.remote_addr,
                length: w4,
                access: (w5 >> 32) as u32,
            },
            (w6 >> 32) & 1 != 0,
        )
    }
    /// The fast registration of this WQE, which is in `slot`.
    pub(crate) fn reg(&self, slot: &[Word]) -> FastReg {
        let [w4, w5, w6, _] = ext_words(slot);
        FastReg {
            mr_key: self.rkey,
            new_key_byte: (w6 >> 32) as u8,
            access: w6 as u32,
            iova: w4,
            length: w5,
        }
    }
}

/// Encodes a send request into a WQE slot. `inline` is the payload to embed, if any; the
/// caller checked that it and the SGEs fit the stride. `type1_bind` marks a bind made by the
/// type 1 verb.
pub(crate) fn encode_send(slot: &[Word], wr: &SendWr<'_>, inline: Option<&[u8]>, type1_bind: bool) {
    let (num_sge, inline_len) = match inline {
        Some(d) => (0usize, d.len()),
        None => (wr.sg_list.len(), 0),
    };
    let flags = wr.send_flags
        | if inline.is_some() {
            send_flags::INLINE
        } else {
            0
        };
    let hdr = head::<SQ_HDR_WORDS>(slot);
    st(hdr, 0, wr.wr_id);
    st(
        hdr,
        1,
        u64::from(wr.opcode as u8)
            | (u64::from(flags as u8) << 8)
            | ((num_sge as u64) << 16)
            | ((inline_len as u64) << 32),
    );
    // Words 2 to 7 of a send or write are its key and remote address and zeros; the rest is
    // out of line, so that the common request does not carry it.
    let [w2, w3, w4, w5, w6, w7] =
        if wr.ud.is_none() && wr.reg.is_none() && wr.atomic.is_none() && wr.bind.is_none() {
            [
                u64::from(wr.imm_or_inv) | (u64::from(wr.rkey) << 32),
                wr.remote_addr,
                0,
                0,
                0,
                0,
            ]
        } else {
            ext_send_words(wr, type1_bind)
        };
    st(hdr, 2, w2);
    st(hdr, 3, w3);
    st(hdr, 4, w4);
    st(hdr, 5, w5);
    st(hdr, 6, w6);
    st(hdr, 7, w7);
    match inline {
        Some(d) => {
            let words = &slot[SQ_HDR_WORDS..SQ_HDR_WORDS + d.len().div_ceil(8)];
            let chunks = d.chunks_exact(8);
            let rest = chunks.remainder();
            for (word, chunk) in words.iter().zip(chunks) {
                let mut w = [0u8; 8];
                w.copy_from_slice(chunk);
                word.store(u64::from_le_bytes(w), Ordering::Relaxed);
            }
            if !rest.is_empty() {
                let mut w = [0u8; 8];
                w[..rest.len()].copy_from_slice(rest);
                st(words, words.len() - 1, u64::from_le_bytes(w));
            }
        }
        None => encode_sges(slot, SQ_HDR_WORDS, wr.sg_list),
    }
}

/// Words 2 to 7 of a send WQE that has a UD address, a registration, atomic operands or a
/// binding.
#[inline(never)]
fn ext_send_words(wr: &SendWr<'_>, type1_bind: bool) -> [u64; 6] {
    let (mut w4, mut w5, mut w6, mut w7) = (0u64, 0u64, 0u64, 0u64);
    let mut rkey = wr.rkey;
    let mut w3 = wr.remote_addr;
    if let Some(ud) = wr.ud {
        w3 = u64::from(ud.flow_label & 0xF_FFFF)
            | (u64::from(ud.traffic_class) << 24)
            | (u64::from(ud.hop_limit) << 32);
        w4 = u64::from(ud.remote_qpn) | (u64::from(ud.remote_qkey) << 32);
        let mut hi = [0u8; 8];
        let mut lo = [0u8; 8];
        hi.copy_from_slice(&ud.dgid[..8]);
        lo.copy_from_slice(&ud.dgid[8..]);
        w5 = u64::from_be_bytes(hi);
        w6 = u64::from_be_bytes(lo);
        w7 = u64::from(ud.dlid) | (u64::from(ud.sgid_index) << 16) | (u64::from(ud.grh) << 24);
    }
    if let Some(r) = wr.reg {
        rkey = r.mr_key;
        w4 = r.iova;
        w5 = r.length;
        w6 = u64::from(r.access) | (u64::from(r.new_key_byte) << 32);
    }
    if let Some(a) = wr.atomic {
        w4 = a.compare_add;
        w5 = a.swap;
    }
    if let Some(b) = wr.bind {
        rkey = b.mw_rkey;
        w3 = b.addr;
        w4 = b.length;
        w5 = u64::from(b.mr_lkey) | (u64::from(b.access) << 32);
        w6 = u64::from(b.new_rkey) | (u64::from(type1_bind) << 32);
    }
    [
        u64::from(wr.imm_or_inv) | (u64::from(rkey) << 32),
        w3,
        w4,
        w5,
        w6,
        w7,
    ]
}

#[inline]
fn encode_sges(slot: &[Word], first: usize, sges: &[Sge]) {
    // One bounds check for the whole list rather than one per word.
    let words = &slot[first..first + 2 * sges.len()];
    for (pair, s) in words.chunks_exact(2).zip(sges) {
        st(pair, 0, s.addr);
        st(pair, 1, u64::from(s.length) | (u64::from(s.lkey) << 32));
    }
}

/// The `i`th SGE of a WQE whose SGEs start at word `first`.
pub(crate) fn sge_at(slot: &[Word], first: usize, i: usize) -> Sge {
    let w = ld(slot, first + 2 * i + 1);
    Sge {
        addr: ld(slot, first + 2 * i),
        length: w as u32,
        lkey: (w >> 32) as u32,
    }
}

/// How many inline bytes a send WQE really carries: what it claims, never past its slot.
pub(crate) fn inline_len(slot: &[Word], claimed: usize) -> usize {
    claimed.min(slot.len().saturating_sub(SQ_HDR_WORDS) * 8)
}

/// Copies the first `n` inline bytes of a send WQE into `buf` and returns them; the caller keeps
/// `n` within [`inline_len`] and `buf`. Whole words, the last one too (its bytes past `n` are
/// the WQE's, copied and not returned): a byte-exact tail cost a `memcpy` call per payload.
#[inline]
pub(crate) fn inline_prefix<'b, const N: usize>(
    slot: &[Word],
    n: usize,
    buf: &'b mut [u8; N],
) -> &'b [u8] {
    let words = &slot[SQ_HDR_WORDS..SQ_HDR_WORDS + n.div_ceil(8)];
    for (out, w) in buf.chunks_exact_mut(8).zip(words) {
        out.copy_from_slice(&w.load(Ordering::Relaxed).to_le_bytes());
    }
    &buf[..n]
}

/// Encodes a receive request.
pub(crate) fn encode_recv(slot: &[Word], wr: &RecvWr<'_>) {
    let hdr = head::<RQ_HDR_WORDS>(slot);
    st(hdr, 0, wr.wr_id);
    st(hdr, 1, wr.sg_list.len() as u64);
    encode_sges(slot, RQ_HDR_WORDS, wr.sg_list);
}

/// `(wr_id, num_sge)` of a receive WQE.
pub(crate) fn recv_header(slot: &[Word]) -> (u64, usize) {
    let hdr = head::<RQ_HDR_WORDS>(slot);
    (ld(hdr, 0), ld(hdr, 1) as u16 as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot(words: usize) -> alloc::vec::Vec<Word> {
        (0..words).map(|_| Word::new(0)).collect()
    }

    #[test]
    fn cqe_round_trip() {
        let s = slot(CQE_WORDS);
        let wc = WorkCompletion {
            wr_id: u64::MAX - 1,
            status: WcStatus::RemAccessErr,
            opcode: WcOpcode::RecvRdmaWithImm,
            vendor_err: 0x1234,
            byte_len: 0x8000_0001,
            imm_data: 0xdead_beef,
            qp_num: 0xFF_FFFF,
            src_qp: 77,
            wc_flags: wc_flags::WITH_IMM | wc_flags::GRH,
            pkey_index: 3,
            slid: 0xABCD,
            sl: 5,
            dlid_path_bits: 1,
        };
        wc.encode(&s);
        assert_eq!(WorkCompletion::decode(&s), wc);
    }

    #[test]
    fn send_wqe_round_trip_and_a_lying_inline_length_stays_in_the_slot() {
        let s = slot(SQ_HDR_WORDS + 2);
        let mut wr = SendWr::new(9, WrOpcode::SendWithImm);
        wr.send_flags = send_flags::SOLICITED;
        wr.imm_or_inv = 0x0102_0304;
        wr.ud = Some(UdAddress {
            dgid: [7; 16],
            dlid: 3,
            grh: true,
            sgid_index: 2,
            hop_limit: 64,
            traffic_class: 0xA5,
            flow_label: 0xF_1234,
            remote_qpn: 44,
            remote_qkey: 0x8000_0000,
        });
        encode_send(&s, &wr, Some(b"0123456789abcdef"), false);
        let w = SendWqe::decode(&s);
        assert_eq!(
            (w.wr_id, w.opcode, w.inline_len),
            (9, WrOpcode::SendWithImm as u8, 16)
        );
        assert_eq!(w.flags, send_flags::SOLICITED | send_flags::INLINE);
        assert_eq!(w.ud(&s), wr.ud.unwrap());
        assert_eq!(inline_len(&s, 16), 16);
        assert_eq!(inline_prefix(&s, 16, &mut [0u8; 16]), b"0123456789abcdef");
        // A WQE that claims more inline bytes than its slot holds.
        assert_eq!(inline_len(&s, 1 << 20), 16);
        // A prefix that ends inside a word: the word's later bytes are not part of it.
        let mut buf = [0xEEu8; 24];
        assert_eq!(inline_prefix(&s, 11, &mut buf), b"0123456789a");
        assert_eq!(buf[16..], [0xEE; 8]);
    }

    #[test]
    fn atomic_and_bind_wqes_round_trip() {
        let s = slot(SQ_HDR_WORDS + 2);
        let mut wr = SendWr::new(3, WrOpcode::AtomicCmpAndSwp);
        wr.remote_addr = 0x1000;
        wr.rkey = 0x4200;
        wr.atomic = Some(AtomicArgs {
            compare_add: u64::MAX,
            swap: 0x0123_4567_89AB_CDEF,
        });
        encode_send(&s, &wr, None, false);
        let w = SendWqe::decode(&s);
        assert_eq!((w.remote_addr, w.rkey), (0x1000, 0x4200));
        assert_eq!(w.atomic(&s), wr.atomic.unwrap());
        let mut wr = SendWr::new(4, WrOpcode::BindMw);
        let b = MwBind {
            mw_rkey: 0x8000_0100,
            new_rkey: 0x8000_0101,
            mr_lkey: 0x300,
            addr: 0xDEAD_0000,
            length: 1 << 33,
            access: 0x7,
        };
        wr.bind = Some(b);
        encode_send(&s, &wr, None, true);
        assert_eq!(SendWqe::decode(&s).bind(&s), (b, true));
        encode_send(&s, &wr, None, false);
        assert_eq!(SendWqe::decode(&s).bind(&s), (b, false));
    }
}
