//! The verbs objects below a device: PD, MR, MW, AH, CQ, SRQ, QP.
//!
//! Each holds `Arc`s to its parents (winverbs.dll's references), so the driver never sees a
//! destroy of a parent while a child lives, and each sends its DESTROY IOCTL on drop.

use core::fmt;
use core::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use wv_softhca::{AtomicArgs, MwBind, MwBindInfo, MwType, Sge, WrOpcode, inc_rkey};

use wv_abi::consts::{WV_CQ_ERROR, WV_CQ_NEXT_COMPLETION, WV_CQ_SOLICITED, WV_IO_QP_SIGNAL_SENDS};
use wv_abi::ioctl::*;
use wv_abi::{
    NtStatus, WV_IO_AH_CREATE, WV_IO_AV, WV_IO_ID, WV_IO_MEMORY_KEYS, WV_IO_MEMORY_REGISTER,
    WV_IO_QP_ATTRIBUTES, WV_IO_QP_CREATE, WV_IO_QP_MULTICAST, WV_IO_SRQ_ATTRIBUTES,
};
use wv_softhca::abi::{
    self as uabi, AhResp, CqResp, MwCmd, MwResp, PdResp, QpCmd, QpResp, QpStateOut, SrqResp,
};
use wv_softhca::{
    PostError, RecvWr, RingResize, RingResp, SendWr, UvpCq, UvpQp, UvpSrq, WorkCompletion,
};
use zerocopy::{FromBytes, IntoBytes};

use crate::raw::RawFile;
use crate::verbs::pending::{self, Pending};
use crate::verbs::qp_attr::{QpAttr, av_to_abi};
use crate::verbs::{
    AddressVector, Buffer, Device, Handle, Kind, QpState, QpType, Result, UdAddress, VerbsError,
    id_bytes, parse,
};

/// The vendor output of a creation call (after the fixed struct), or an error naming `op`.
fn vendor_out<T: FromBytes + Copy>(op: &'static str, out: &[u8], fixed: usize) -> Result<T> {
    out.get(fixed..)
        .and_then(uabi::parse::<T>)
        .ok_or(VerbsError::new(op, NtStatus::BUFFER_TOO_SMALL))
}

/// The UVP refused to map an object the driver created (its rings are not where the vendor
/// output says): the object is destroyed again and this is the error.
fn uvp_refused(op: &'static str) -> VerbsError {
    VerbsError::new(op, NtStatus::UNSUCCESSFUL)
}

impl<F: RawFile, K: Kind> Handle<F, K> {
    /// An IOCTL whose output is the fixed struct `T`, then the UVP's vendor output `R` (a
    /// create, a resize): the fixed part, and the vendor part or the error naming `op`.
    fn vendor_call<T: FromBytes, R: FromBytes + Copy>(
        &self,
        op: &'static str,
        code: u32,
        input: &[u8],
    ) -> Result<(T, Result<R>)> {
        let fixed = size_of::<T>();
        let st = self.call(op, code, input, fixed + size_of::<R>())?;
        let out = parse::<T>(op, &st.output)?;
        Ok((out, vendor_out(op, &st.output, fixed)))
    }

    /// A command that gives a queue a new ring (CQ_RESIZE, SRQ_MODIFY), sent while `resize`
    /// holds the queue: its fixed output, once the UVP has mapped the ring the vendor output
    /// names.
    fn resize_ring<T: FromBytes, R: RingResp + FromBytes + Copy>(
        &self,
        resize: RingResize<'_, R>,
        op: &'static str,
        code: u32,
        input: &[u8],
    ) -> Result<T> {
        let (out, resp) = self.vendor_call::<T, R>(op, code, input)?;
        resize.finish(&resp?).map_err(|_| uvp_refused(op))?;
        Ok(out)
    }
}

/// The row of the type table of `$parts`: its name in `Debug` output, the IOCTL its last
/// release sends and, after `|parts|`, the fields `Debug` shows beyond the id.
macro_rules! kind {
    (
        $parts:ident, $name:literal, $destroy:ident
        $(, |$p:ident| $($field:literal: $value:expr),+)?
    ) => {
        impl<F: RawFile> Kind for $parts<F> {
            const NAME: &'static str = $name;
            const DESTROY: u32 = $destroy;
            $(fn debug_fields(&self, out: &mut fmt::DebugStruct<'_, '_>) {
                let $p = self;
                $(out.field($field, &$value);)+
            })?
        }
    };
}

// ------------------------------------------------------------------------------------------
// PD

/// A protection domain (`IWVProtectionDomain`). Cloning shares it.
pub type Pd<F> = Handle<F, PdParts<F>>;

/// What the library keeps with a PD: its device.
pub struct PdParts<F: RawFile> {
    dev: Device<F>,
}

kind!(PdParts, "Pd", WV_IOCTL_PD_DEALLOCATE);

/// Deregistration of a region, without the transport type (an [`Mr`] is not generic).
trait MrOwner: Send + Sync {
    fn deregister(&self, lkey: u32) -> Result<()>;
}

impl<F: RawFile + Send + Sync + 'static> MrOwner for Pd<F> {
    fn deregister(&self, lkey: u32) -> Result<()> {
        let input = id_bytes(self.id(), 0, lkey);
        self.call("MEMORY_DEREGISTER", WV_IOCTL_MEMORY_DEREGISTER, &input, 0)
            .map(|_| ())
    }
}

impl<F: RawFile + Send + Sync + 'static> Pd<F> {
    pub(crate) fn allocate(dev: &Device<F>) -> Result<Self> {
        let input = id_bytes(dev.id(), 0, 0);
        let (out, _) =
            dev.vendor_call::<WV_IO_ID, PdResp>("PD_ALLOCATE", WV_IOCTL_PD_ALLOCATE, &input)?;
        let parts = PdParts { dev: dev.clone() };
        Ok(Handle::new(Arc::clone(dev.file()), out.Id, parts))
    }

    /// The device it belongs to.
    pub fn device(&self) -> &Device<F> {
        &self.parts().dev
    }

    /// MEMORY_REGISTER of the whole buffer with `access` (`WV_ACCESS_*`).
    ///
    /// # Errors
    /// The status of MEMORY_REGISTER (e.g. `STATUS_UNSUCCESSFUL` for bad access flags).
    pub fn reg_mr(&self, buf: &Buffer, access: u32) -> Result<Mr> {
        self.reg_mr_range(buf, 0, buf.len(), access)
    }

    /// MEMORY_REGISTER of `len` bytes at `offset` of `buf`.
    ///
    /// # Errors
    /// `STATUS_INVALID_PARAMETER` for a range outside the buffer (nothing is sent), or the
    /// status of MEMORY_REGISTER.
    pub fn reg_mr_range(&self, buf: &Buffer, offset: usize, len: usize, access: u32) -> Result<Mr> {
        if offset.checked_add(len).is_none_or(|end| end > buf.len()) {
            return Err(VerbsError::new(
                "MEMORY_REGISTER",
                NtStatus::INVALID_PARAMETER,
            ));
        }
        self.register(buf.addr() + offset as u64, len, access, Some(buf.clone()))
    }

    /// MEMORY_REGISTER of `len` bytes of this process's memory at `addr` (`ibv_reg_mr` of any
    /// application memory). The device validates the range as the kernel's probe does; it
    /// accepts it only when its client memory is the process's
    /// (`wv_inproc::MemoryMode::Process`), a pool device refuses anything but its buffers.
    ///
    /// # Errors
    /// The status of MEMORY_REGISTER (`STATUS_UNSUCCESSFUL` for memory the device refuses).
    pub fn reg_mr_addr(&self, addr: u64, len: usize, access: u32) -> Result<Mr> {
        self.register(addr, len, access, None)
    }

    /// MEMORY_REGISTER; the region keeps `buf` (when it is one of ours) until it goes.
    fn register(&self, addr: u64, len: usize, access: u32, buf: Option<Buffer>) -> Result<Mr> {
        const OP: &str = "MEMORY_REGISTER";
        let reg = WV_IO_MEMORY_REGISTER {
            Id: self.id(),
            Address: addr,
            BufferLength: len as u64,
            AccessFlags: access,
            Reserved: 0,
        };
        let keys: WV_IO_MEMORY_KEYS = self.call_as(OP, WV_IOCTL_MEMORY_REGISTER, reg.as_bytes())?;
        Ok(Mr {
            owner: Box::new(self.clone()),
            lkey: keys.Lkey,
            rkey: u32::from_be(keys.Rkey),
            addr,
            len,
            _buf: buf,
            registered: true,
        })
    }

    /// QP_CREATE.
    ///
    /// # Errors
    /// `STATUS_INVALID_HANDLE` for a CQ or SRQ opened through another handle (nothing is
    /// sent); the status of QP_CREATE otherwise (`STATUS_INVALID_PARAMETER` for a CQ of another
    /// device, ...).
    pub fn create_qp(&self, init: &QpInit<'_, F>) -> Result<Qp<F>> {
        Qp::create(self, init)
    }

    /// SRQ_CREATE with `max_wr` requests of `max_sge` SGEs, and the limit event armed at
    /// `limit` (0: off).
    ///
    /// # Errors
    /// The status of SRQ_CREATE.
    pub fn create_srq(&self, max_wr: u32, max_sge: u32, limit: u32) -> Result<Srq<F>> {
        Srq::create(self, max_wr, max_sge, limit)
    }

    /// AH_CREATE: an address handle for UD sends.
    ///
    /// # Errors
    /// The status of AH_CREATE (the soft HCA needs a GRH with a unicast GID).
    pub fn create_ah(&self, av: &AddressVector) -> Result<Ah<F>> {
        const OP: &str = "AH_CREATE";
        let mut wire = WV_IO_AV::default();
        av_to_abi(&mut wire, av);
        let create = WV_IO_AH_CREATE {
            Id: WV_IO_ID::new(self.id(), 0),
            AddressVector: wire,
        };
        let (out, resp) =
            self.vendor_call::<WV_IO_AH_CREATE, AhResp>(OP, WV_IOCTL_AH_CREATE, create.as_bytes())?;
        // The device says which entry of the port's GID table the source GID is: UD sends
        // through this handle carry it.
        let sgid_index = resp.map_or(0, |r| r.sgid_index as u8);
        Ok(Handle::new(
            Arc::clone(self.file()),
            out.Id.Id,
            AhParts {
                _pd: self.clone(),
                av: *av,
                sgid_index,
            },
        ))
    }

    /// MW_ALLOCATE of a type 1 window (`ibv_alloc_mw(pd, IBV_MW_TYPE_1)`, the only kind OFW's
    /// verbs knew): bound with [`Qp::bind_mw`].
    ///
    /// # Errors
    /// The status of MW_ALLOCATE.
    pub fn alloc_mw(&self) -> Result<Mw<F>> {
        self.alloc_mw_type(MwType::Type1)
    }

    /// MW_ALLOCATE of a window of `kind` (the soft UVP's vendor command carries the type):
    /// type 1 windows are bound with [`Qp::bind_mw`], type 2 with [`Qp::post_bind_mw`].
    ///
    /// # Errors
    /// The status of MW_ALLOCATE.
    pub fn alloc_mw_type(&self, kind: MwType) -> Result<Mw<F>> {
        let cmd = MwCmd {
            magic: uabi::SOFTHCA_ABI_MAGIC,
            mw_type: kind as u32,
        };
        let mut input = id_bytes(self.id(), 0, 0);
        input.extend_from_slice(cmd.as_bytes());
        let (out, resp) =
            self.vendor_call::<WV_IO_ID, MwResp>("MW_ALLOCATE", WV_IOCTL_MW_ALLOCATE, &input)?;
        let kind = resp
            .ok()
            .and_then(|r| MwType::from_u32(r.mw_type))
            .unwrap_or(kind);
        Ok(Handle::new(
            Arc::clone(self.file()),
            out.Id,
            MwParts {
                pd: self.clone(),
                rkey: AtomicU32::new(u32::from_be(out.Data)),
                kind,
            },
        ))
    }
}

// ------------------------------------------------------------------------------------------
// MR

/// A registered memory region. MEMORY_DEREGISTER runs on drop; the region keeps its buffer
/// (and its PD) alive until then.
pub struct Mr {
    owner: Box<dyn MrOwner>,
    lkey: u32,
    rkey: u32,
    addr: u64,
    len: usize,
    _buf: Option<Buffer>,
    /// Cleared by a successful [`Mr::deregister`], so the drop sends nothing more.
    registered: bool,
}

impl fmt::Debug for Mr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Mr")
            .field("lkey", &format_args!("{:#x}", self.lkey))
            .field("rkey", &format_args!("{:#x}", self.rkey))
            .field("addr", &format_args!("{:#x}", self.addr))
            .field("len", &self.len)
            .finish()
    }
}

impl Mr {
    /// Local key (host order), for SGEs.
    pub fn lkey(&self) -> u32 {
        self.lkey
    }
    /// Remote key (host order), for a peer's RDMA requests.
    pub fn rkey(&self) -> u32 {
        self.rkey
    }
    /// First registered address.
    pub fn addr(&self) -> u64 {
        self.addr
    }
    /// Registered length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }
    /// Whether the region is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// An SGE over `len` bytes at `offset` of the region.
    pub fn sge(&self, offset: usize, len: u32) -> wv_softhca::Sge {
        wv_softhca::Sge {
            addr: self.addr.wrapping_add(offset as u64),
            length: len,
            lkey: self.lkey,
        }
    }

    /// What a window bound to `len` bytes at `offset` of the region with the remote rights
    /// `access` covers.
    fn window(&self, offset: usize, len: u64, access: u32) -> MwBindInfo {
        MwBindInfo {
            mr_lkey: self.lkey,
            addr: self.addr.wrapping_add(offset as u64),
            length: len,
            access,
        }
    }
}

impl Mr {
    /// MEMORY_DEREGISTER now, reporting its failure (`ibv_dereg_mr`): the region is given back
    /// when the driver refuses (e.g. a memory window is bound to it).
    ///
    /// # Errors
    /// The region and the status of MEMORY_DEREGISTER.
    pub fn deregister(mut self) -> core::result::Result<(), (Mr, VerbsError)> {
        match self.owner.deregister(self.lkey) {
            Ok(()) => {
                self.registered = false;
                Ok(())
            }
            Err(e) => Err((self, e)),
        }
    }
}

impl Drop for Mr {
    fn drop(&mut self) {
        if self.registered {
            let _ = self.owner.deregister(self.lkey);
        }
    }
}

// ------------------------------------------------------------------------------------------
// MW, AH

/// A memory window (`IWVMemoryWindow`, `ibv_mw`): created unbound; bound to part of a
/// region through a QP's send queue ([`Qp::bind_mw`] for type 1, [`Qp::post_bind_mw`] for
/// type 2), then reachable by a peer's RDMA and atomics under [`Mw::rkey`] within its bounds
/// and rights. Cloning shares it.
pub type Mw<F> = Handle<F, MwParts<F>>;

/// What the library keeps with a memory window: its PD, its type and its current key.
pub struct MwParts<F: RawFile> {
    pd: Pd<F>,
    /// The current rkey (a bind posted through this library moves it to the next key).
    rkey: AtomicU32,
    kind: MwType,
}

kind!(MwParts, "Mw", WV_IOCTL_MW_DEALLOCATE, |mw|
    "kind": mw.kind,
    "rkey": format_args!("{:#x}", mw.rkey.load(Ordering::Acquire)));

impl<F: RawFile> Mw<F> {
    /// The window's current rkey (host order): after a bind posted through this library, the
    /// key that bind gives it (as `ibv_mw.rkey`).
    pub fn rkey(&self) -> u32 {
        self.parts().rkey.load(Ordering::Acquire)
    }
    /// Type 1 or type 2.
    pub fn kind(&self) -> MwType {
        self.parts().kind
    }
    /// The PD it belongs to.
    pub fn pd(&self) -> &Pd<F> {
        &self.parts().pd
    }
}

/// An address handle (`IWVAddressHandle`). Cloning shares it.
pub type Ah<F> = Handle<F, AhParts<F>>;

/// What the library keeps with an address handle: its PD, its address vector and the index of
/// its source GID.
pub struct AhParts<F: RawFile> {
    _pd: Pd<F>,
    av: AddressVector,
    sgid_index: u8,
}

kind!(AhParts, "Ah", WV_IOCTL_AH_DESTROY);

impl<F: RawFile> Ah<F> {
    /// The address vector it was created with.
    pub fn av(&self) -> &AddressVector {
        &self.parts().av
    }

    /// The UD destination of a send through this handle (`wr.ud` of `ibv_send_wr`): the soft
    /// HCA embeds the address vector in the WQE, as pvrdma does, with its GRH fields (the
    /// source GID as its index in the port's table). A `remote_qkey` with the high bit set
    /// means "use the QP's own Q_Key".
    pub fn ud(&self, remote_qpn: u32, remote_qkey: u32) -> UdAddress {
        let av = &self.parts().av;
        UdAddress {
            dgid: av.dgid,
            dlid: av.dlid,
            grh: av.grh_valid,
            sgid_index: self.parts().sgid_index,
            hop_limit: av.hop_limit,
            traffic_class: av.traffic_class,
            flow_label: av.flow_label,
            remote_qpn,
            remote_qkey,
        }
    }
}

// ------------------------------------------------------------------------------------------
// CQ

/// A completion queue (`IWVCompletionQueue`). Cloning shares it.
pub type Cq<F> = Handle<F, CqParts<F>>;

/// What the library keeps with a CQ: its device, the UVP's half and its size.
pub struct CqParts<F: RawFile> {
    _dev: Device<F>,
    uvp: UvpCq,
    entries: AtomicU32,
}

kind!(CqParts, "Cq", WV_IOCTL_CQ_DESTROY, |cq| "entries": cq.entries.load(Ordering::Relaxed));

impl<F: RawFile> Cq<F> {
    /// Entries the CQ holds (what the device made of the size asked for).
    pub fn entries(&self) -> u32 {
        self.parts().entries.load(Ordering::Relaxed)
    }

    /// Takes up to `out.len()` completions, oldest first, through the UVP (no IOCTL); returns
    /// how many.
    pub fn poll(&self, out: &mut [WorkCompletion]) -> usize {
        self.parts().uvp.poll(out)
    }

    /// Whether the CQ overran (an overrun is sticky: the CQ takes no more completions and its
    /// error notify completes with `STATUS_UNEXPECTED_IO_ERROR`).
    pub fn overrun(&self) -> bool {
        self.parts().uvp.overrun()
    }
}

impl<F: RawFile + Send + Sync + 'static> Cq<F> {
    pub(crate) fn create(dev: &Device<F>, entries: u32) -> Result<Self> {
        const OP: &str = "CQ_CREATE";
        let input = id_bytes(dev.id(), 0, entries);
        let (out, resp) = dev.vendor_call::<WV_IO_ID, CqResp>(OP, WV_IOCTL_CQ_CREATE, &input)?;
        let parts = resp.and_then(|r| {
            let uvp = dev.parts().uvp.map_cq(&r).map_err(|_| uvp_refused(OP))?;
            Ok(CqParts {
                _dev: dev.clone(),
                uvp,
                entries: AtomicU32::new(out.Data),
            })
        });
        Handle::adopt(dev.file(), out.Id, parts)
    }

    /// Requests one completion event (`ibv_req_notify_cq`): CQ_NOTIFY is queued in the driver
    /// first, then the CQ is armed through the UVP (spec §3.7), so no completion is missed. The
    /// result completes with success at the next completion (the next solicited one with
    /// `solicited_only`), with `STATUS_CANCELLED` on [`Cq::cancel`], destroy or handle close,
    /// `STATUS_UNEXPECTED_IO_ERROR` on a CQ error. Poll the CQ after arming: completions that
    /// were already there raise no event.
    ///
    /// # Errors
    /// An inline failure of CQ_NOTIFY (then the CQ is not armed).
    pub fn notify(&self, solicited_only: bool) -> Result<Pending<()>> {
        let kind = if solicited_only {
            WV_CQ_SOLICITED
        } else {
            WV_CQ_NEXT_COMPLETION
        };
        let pending = self.notify_queue(kind)?;
        self.parts().uvp.arm(solicited_only);
        Ok(pending)
    }

    /// CQ_NOTIFY of `kind` (`WV_CQ_*`): which of the CQ's notify queues it waits in.
    fn notify_queue(&self, kind: u32) -> Result<Pending<()>> {
        let input = id_bytes(self.id(), 0, kind);
        self.issue(
            "CQ_NOTIFY",
            WV_IOCTL_CQ_NOTIFY,
            &input,
            0,
            pending::finish_unit,
        )
    }

    /// CQ_NOTIFY on the error queue: completes with `STATUS_UNEXPECTED_IO_ERROR` when the CQ
    /// goes into error (overrun), `STATUS_CANCELLED` on cancel.
    ///
    /// # Errors
    /// An inline failure of CQ_NOTIFY.
    pub fn error_notify(&self) -> Result<Pending<()>> {
        self.notify_queue(WV_CQ_ERROR)
    }

    /// CQ_CANCEL: completes both notify queues of the CQ with `STATUS_CANCELLED`.
    ///
    /// # Errors
    /// The status of CQ_CANCEL.
    pub fn cancel(&self) -> Result<()> {
        self.command("CQ_CANCEL", WV_IOCTL_CQ_CANCEL)
    }

    /// CQ_RESIZE to at least `entries` (`ibv_resize_cq`), larger or smaller; returns the new
    /// size. Completions not yet polled are kept, in order. Polling and arming wait while the
    /// command runs (the user-mode provider then maps the new ring).
    ///
    /// # Errors
    /// The status of CQ_RESIZE: `STATUS_UNSUCCESSFUL` for a size beyond the device's
    /// `MaxCqEntries` or too small for the completions waiting.
    pub fn resize(&self, entries: u32) -> Result<u32> {
        let input = id_bytes(self.id(), 0, entries);
        let resize = self.parts().uvp.begin_resize();
        let out: WV_IO_ID = self.resize_ring(resize, "CQ_RESIZE", WV_IOCTL_CQ_RESIZE, &input)?;
        self.parts().entries.store(out.Data, Ordering::Relaxed);
        Ok(out.Data)
    }
}

// ------------------------------------------------------------------------------------------
// SRQ

/// A shared receive queue (`IWVSharedReceiveQueue`). Cloning shares it.
pub type Srq<F> = Handle<F, SrqParts<F>>;

/// What the library keeps with an SRQ: its PD and the UVP's half.
pub struct SrqParts<F: RawFile> {
    _pd: Pd<F>,
    uvp: UvpSrq,
}

kind!(SrqParts, "Srq", WV_IOCTL_SRQ_DESTROY);

/// The posts of one kind of work request (`$wr`) of an object whose parts hold the UVP queue:
/// one request (`$one`) and a list (`$list`).
macro_rules! post_methods {
    ($one:ident, $list:ident, $wr:ident, $one_doc:literal, $list_doc:literal) => {
        #[doc = $one_doc]
        ///
        /// # Errors
        /// The UVP's [`PostError`].
        pub fn $one(&self, wr: &$wr<'_>) -> core::result::Result<(), PostError> {
            self.parts().uvp.$one(wr)
        }

        #[doc = $list_doc]
        ///
        /// # Errors
        /// `(index, error)` of the first request that failed; those before it are posted.
        pub fn $list(&self, wrs: &[$wr<'_>]) -> core::result::Result<(), (usize, PostError)> {
            self.parts().uvp.$list(wrs)
        }
    };
}

/// Binds of a window to `len` bytes at `offset` of a region of this library with the remote
/// rights `access`: each public `$name` binds the [`MwBindInfo`] of that range the way windows
/// of type `$how` are bound.
macro_rules! region_binds {
    ($($(#[$doc:meta])* $name:ident => $how:expr;)+) => {$(
        $(#[$doc])*
        #[allow(clippy::too_many_arguments)]
        pub fn $name(
            &self,
            mw: &Mw<F>,
            wr_id: u64,
            send_flags: u32,
            mr: &Mr,
            offset: usize,
            len: u64,
            access: u32,
        ) -> core::result::Result<u32, PostError> {
            let info = mr.window(offset, len, access);
            self.bind($how, mw, wr_id, send_flags, &info)
        }
    )+};
}

/// The receive posts of an SRQ or a QP.
macro_rules! post_recv_methods {
    () => {
        post_methods!(
            post_recv,
            post_recv_list,
            RecvWr,
            "Posts one receive request through the UVP.",
            "Posts receive requests; stops at the first failure and returns its index (`bad_wr`)."
        );
    };
}

impl<F: RawFile> Srq<F> {
    post_recv_methods!();
}

impl<F: RawFile + Send + Sync + 'static> Srq<F> {
    fn create(pd: &Pd<F>, max_wr: u32, max_sge: u32, limit: u32) -> Result<Self> {
        const OP: &str = "SRQ_CREATE";
        let attr = WV_IO_SRQ_ATTRIBUTES {
            Id: WV_IO_ID::new(pd.id(), 0),
            MaxWr: max_wr,
            MaxSge: max_sge,
            SrqLimit: limit,
            Reserved: 0,
        };
        let (out, resp) = pd.vendor_call::<WV_IO_SRQ_ATTRIBUTES, SrqResp>(
            OP,
            WV_IOCTL_SRQ_CREATE,
            attr.as_bytes(),
        )?;
        let parts = resp.and_then(|r| {
            let uvp = pd.device().parts().uvp.map_srq(&r);
            Ok(SrqParts {
                _pd: pd.clone(),
                uvp: uvp.map_err(|_| uvp_refused(OP))?,
            })
        });
        Handle::adopt(pd.file(), out.Id.Id, parts)
    }

    fn attr(&self, max_wr: u32, limit: u32) -> WV_IO_SRQ_ATTRIBUTES {
        WV_IO_SRQ_ATTRIBUTES {
            Id: WV_IO_ID::new(self.id(), 0),
            MaxWr: max_wr,
            MaxSge: 0,
            SrqLimit: limit,
            Reserved: 0,
        }
    }

    /// SRQ_MODIFY: the driver always passes both the size and the limit, as OFW does. A
    /// `max_wr` other than the current size resizes the SRQ (`ibv_modify_srq` with
    /// `IBV_SRQ_MAX_WR`; the device advertises `WV_IO_SRQ_RESIZE`), keeping the receives not
    /// yet used; posting waits while the command runs. Pass [`Srq::query`]'s `MaxWr` to change
    /// only the limit.
    ///
    /// # Errors
    /// The status of SRQ_MODIFY: `STATUS_UNSUCCESSFUL` for a size beyond `MaxSrqWr`, too small
    /// for the receives waiting, or below the limit.
    pub fn modify(&self, max_wr: u32, limit: u32) -> Result<()> {
        let attr = self.attr(max_wr, limit);
        let resize = self.parts().uvp.begin_resize();
        let _: WV_IO_SRQ_ATTRIBUTES =
            self.resize_ring(resize, "SRQ_MODIFY", WV_IOCTL_SRQ_MODIFY, attr.as_bytes())?;
        Ok(())
    }

    /// SRQ_QUERY: `MaxWr`, `MaxSge`, `SrqLimit`.
    ///
    /// # Errors
    /// The status of SRQ_QUERY.
    pub fn query(&self) -> Result<WV_IO_SRQ_ATTRIBUTES> {
        let attr = self.attr(0, 0);
        self.call_as("SRQ_QUERY", WV_IOCTL_SRQ_QUERY, attr.as_bytes())
    }

    /// SRQ_NOTIFY: completes at the next SRQ event with its status — `STATUS_ALERTED` when the
    /// limit is reached, `STATUS_NOTIFY_CLEANUP` for the last WQE of a QP leaving the SRQ —
    /// returned as `Ok(status)`; `STATUS_UNEXPECTED_IO_ERROR` or `STATUS_CANCELLED` as errors.
    ///
    /// # Errors
    /// An inline failure of SRQ_NOTIFY.
    pub fn notify(&self) -> Result<Pending<u32>> {
        let input = self.id().to_ne_bytes();
        self.issue(
            "SRQ_NOTIFY",
            WV_IOCTL_SRQ_NOTIFY,
            &input,
            0,
            pending::finish_status,
        )
    }

    /// SRQ_CANCEL: completes pending notifies with `STATUS_CANCELLED`.
    ///
    /// # Errors
    /// The status of SRQ_CANCEL.
    pub fn cancel(&self) -> Result<()> {
        self.command("SRQ_CANCEL", WV_IOCTL_SRQ_CANCEL)
    }
}

// ------------------------------------------------------------------------------------------
// QP

/// What to create a QP with (`ibv_qp_init_attr`).
pub struct QpInit<'a, F: RawFile> {
    /// RC, UC or UD.
    pub qp_type: QpType,
    /// CQ of the send queue.
    pub send_cq: &'a Cq<F>,
    /// CQ of the receive queue.
    pub recv_cq: &'a Cq<F>,
    /// Receive from this SRQ instead of an own receive queue.
    pub srq: Option<&'a Srq<F>>,
    /// Send queue depth.
    pub max_send_wr: u32,
    /// Receive queue depth (ignored with an SRQ).
    pub max_recv_wr: u32,
    /// SGEs per send request.
    pub max_send_sge: u32,
    /// SGEs per receive request.
    pub max_recv_sge: u32,
    /// Largest inline send.
    pub max_inline: u32,
    /// Every send completes with a CQE (`sq_sig_all`); otherwise only `SIGNALED` ones.
    pub sq_sig_all: bool,
}

impl<'a, F: RawFile> QpInit<'a, F> {
    /// A QP of `qp_type` on the given CQs: 16 requests each way, one SGE, no inline data,
    /// signalled sends only when asked (`sq_sig_all = false`, as libibverbs' zeroed struct).
    pub fn new(qp_type: QpType, send_cq: &'a Cq<F>, recv_cq: &'a Cq<F>) -> Self {
        QpInit {
            qp_type,
            send_cq,
            recv_cq,
            srq: None,
            max_send_wr: 16,
            max_recv_wr: 16,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline: 0,
            sq_sig_all: false,
        }
    }
}

/// A queue pair (`IWVQueuePair`). Cloning shares it.
pub type Qp<F> = Handle<F, QpParts<F>>;

/// What the library keeps with a QP: its PD, CQs and SRQ (so that they outlive it) and the
/// UVP's half.
pub struct QpParts<F: RawFile> {
    _pd: Pd<F>,
    _send_cq: Cq<F>,
    _recv_cq: Cq<F>,
    _srq: Option<Srq<F>>,
    uvp: UvpQp,
}

kind!(QpParts, "Qp", WV_IOCTL_QP_DESTROY, |qp| "qpn": qp.uvp.qpn());

impl<F: RawFile> Qp<F> {
    /// The QP number.
    pub fn qpn(&self) -> u32 {
        self.parts().uvp.qpn()
    }

    /// The transport type.
    pub fn qp_type(&self) -> QpType {
        self.parts().uvp.qp_type()
    }

    /// The state as the UVP sees it (the QP-state bytes shared with the device).
    pub fn state(&self) -> QpState {
        self.parts().uvp.state()
    }

    /// Largest inline send the QP got.
    pub fn max_inline(&self) -> u32 {
        self.parts().uvp.max_inline()
    }

    post_methods!(
        post_send,
        post_send_list,
        SendWr,
        "Posts one send request through the UVP (no IOCTL).",
        "Posts send requests with one doorbell; stops at the first failure (`bad_wr`)."
    );

    post_recv_methods!();

    fn atomic(
        &self,
        wr_id: u64,
        opcode: WrOpcode,
        result: Sge,
        remote: (u64, u32),
        args: AtomicArgs,
        send_flags: u32,
    ) -> core::result::Result<(), PostError> {
        let sg = [result];
        let mut wr = SendWr::new(wr_id, opcode);
        wr.sg_list = &sg;
        wr.send_flags = send_flags;
        wr.remote_addr = remote.0;
        wr.rkey = remote.1;
        wr.atomic = Some(args);
        self.parts().uvp.post_send(&wr)
    }

    /// Posts an atomic compare-and-swap (`IBV_WR_ATOMIC_CMP_AND_SWP`, RC only): if the 8
    /// bytes at `remote_addr` (naturally aligned, under `rkey` with remote atomic access)
    /// equal `compare` they become `swap`; their original value lands in `result` (an 8-byte
    /// SGE of a region with local write access). Completes as `WcOpcode::CompSwap`.
    ///
    /// # Errors
    /// The UVP's [`PostError`] (`BadOpcode` on UC/UD, `AtomicLength` unless `result` is 8
    /// bytes); access, bounds and alignment faults are error completions.
    #[allow(clippy::too_many_arguments)]
    pub fn compare_swap(
        &self,
        wr_id: u64,
        result: Sge,
        remote_addr: u64,
        rkey: u32,
        compare: u64,
        swap: u64,
        send_flags: u32,
    ) -> core::result::Result<(), PostError> {
        self.atomic(
            wr_id,
            WrOpcode::AtomicCmpAndSwp,
            result,
            (remote_addr, rkey),
            AtomicArgs {
                compare_add: compare,
                swap,
            },
            send_flags,
        )
    }

    /// Posts an atomic fetch-and-add (`IBV_WR_ATOMIC_FETCH_AND_ADD`, RC only): `add` is added
    /// (modulo 2^64) to the 8 bytes at `remote_addr`; their original value lands in `result`.
    /// Completes as `WcOpcode::FetchAdd`. See [`Qp::compare_swap`] for the rules.
    ///
    /// # Errors
    /// As [`Qp::compare_swap`].
    pub fn fetch_add(
        &self,
        wr_id: u64,
        result: Sge,
        remote_addr: u64,
        rkey: u32,
        add: u64,
        send_flags: u32,
    ) -> core::result::Result<(), PostError> {
        self.atomic(
            wr_id,
            WrOpcode::AtomicFetchAndAdd,
            result,
            (remote_addr, rkey),
            AtomicArgs {
                compare_add: add,
                swap: 0,
            },
            send_flags,
        )
    }

    region_binds! {
        /// Binds the type 1 window `mw` (`ibv_bind_mw`) to `len` bytes at `offset` of `mr` (a
        /// region registered with `WV_ACCESS_MW_BIND`) with the remote rights `access`; `len` 0
        /// unbinds it. The bind goes through the send queue (completion `WcOpcode::BindMw` with
        /// `wr_id`) and the window's key moves to the next key byte: returned, and what
        /// [`Mw::rkey`] says from now on.
        ///
        /// # Errors
        /// The UVP's [`PostError`]; a bind the device refuses (wrong type, PD, bounds, rights)
        /// completes with `MW_BIND_ERR`.
        bind_mw => MwType::Type1;

        /// Posts a `BIND_MW` request for the type 2 window `mw` (`IBV_WR_BIND_MW`): like
        /// [`Qp::bind_mw`], under the key `inc_rkey(mw.rkey())`, which it returns and
        /// [`Mw::rkey`] reports from now on. The window is then reachable through this QP only,
        /// until a `LOCAL_INV` ([`Qp::invalidate`]) or a peer's `SEND_WITH_INV` of that key
        /// frees it.
        ///
        /// # Errors
        /// As [`Qp::bind_mw`].
        post_bind_mw => MwType::Type2;
    }

    /// [`Qp::bind_mw`] with the bind given as the verb's `ibv_mw_bind_info` (a region's key
    /// and an address rather than an [`Mr`] of this library; a zero length unbinds).
    ///
    /// # Errors
    /// As [`Qp::bind_mw`].
    pub fn bind_mw_info(
        &self,
        mw: &Mw<F>,
        wr_id: u64,
        send_flags: u32,
        info: &MwBindInfo,
    ) -> core::result::Result<u32, PostError> {
        self.bind(MwType::Type1, mw, wr_id, send_flags, info)
    }

    /// A bind of `mw` to `info` the way windows of type `how` are bound: type 1 through the
    /// UVP's bind verb, type 2 as a posted `BIND_MW` under the next key. Either way the window's
    /// key becomes the one the bind gives it, which is returned.
    fn bind(
        &self,
        how: MwType,
        mw: &Mw<F>,
        wr_id: u64,
        send_flags: u32,
        info: &MwBindInfo,
    ) -> core::result::Result<u32, PostError> {
        let uvp = &self.parts().uvp;
        let new = match how {
            MwType::Type1 => uvp.bind_mw(wr_id, send_flags, mw.rkey(), info)?,
            MwType::Type2 => {
                let new = inc_rkey(mw.rkey());
                let mut wr = SendWr::new(wr_id, WrOpcode::BindMw);
                wr.send_flags = send_flags;
                wr.bind = Some(MwBind {
                    mw_rkey: mw.rkey(),
                    new_rkey: new,
                    mr_lkey: info.mr_lkey,
                    addr: info.addr,
                    length: info.length,
                    access: info.access,
                });
                uvp.post_send(&wr)?;
                new
            }
        };
        mw.parts().rkey.store(new, Ordering::Release);
        Ok(new)
    }

    /// Posts a `LOCAL_INV` of `rkey` (a region's key, or a type 2 window's).
    ///
    /// # Errors
    /// The UVP's [`PostError`]; a key the device cannot invalidate completes with
    /// `LOC_QP_OP_ERR`.
    pub fn invalidate(
        &self,
        wr_id: u64,
        rkey: u32,
        send_flags: u32,
    ) -> core::result::Result<(), PostError> {
        let mut wr = SendWr::new(wr_id, WrOpcode::LocalInv);
        wr.imm_or_inv = rkey;
        wr.send_flags = send_flags;
        self.parts().uvp.post_send(&wr)
    }
}

impl<F: RawFile + Send + Sync + 'static> Qp<F> {
    fn create(pd: &Pd<F>, init: &QpInit<'_, F>) -> Result<Self> {
        const OP: &str = "QP_CREATE";
        // Ids are per handle: a CQ or SRQ of another handle would name some other object (or
        // none) in this one, so refuse it here instead of letting the id be reinterpreted.
        let same_file = |other: &Arc<F>| Arc::ptr_eq(other, pd.file());
        if !same_file(init.send_cq.file())
            || !same_file(init.recv_cq.file())
            || init.srq.is_some_and(|s| !same_file(s.file()))
        {
            return Err(VerbsError::new(OP, NtStatus::INVALID_HANDLE));
        }
        let create = WV_IO_QP_CREATE {
            Id: WV_IO_ID::new(pd.id(), 0),
            SendCqId: init.send_cq.id(),
            ReceiveCqId: init.recv_cq.id(),
            SrqId: init.srq.map_or(0, |s| s.id()),
            SendDepth: init.max_send_wr,
            SendSge: init.max_send_sge,
            ReceiveDepth: init.max_recv_wr,
            ReceiveSge: init.max_recv_sge,
            MaxInlineSend: init.max_inline,
            InitiatorDepth: 0,
            ResponderResources: 0,
            QpType: init.qp_type as u8,
            QpFlags: if init.sq_sig_all {
                WV_IO_QP_SIGNAL_SENDS as u8
            } else {
                0
            },
            Reserved: 0,
        };
        // The soft UVP's vendor command: a magic word, so stray bytes are refused.
        let cmd = QpCmd {
            magic: uabi::SOFTHCA_ABI_MAGIC,
            flags: 0,
        };
        let mut input = create.as_bytes().to_vec();
        input.extend_from_slice(cmd.as_bytes());
        let (out, resp) =
            pd.vendor_call::<WV_IO_QP_CREATE, QpResp>(OP, WV_IOCTL_QP_CREATE, &input)?;
        let parts = resp.and_then(|r| {
            // The receive CQ's polls tell the QP's receive post which receives are done.
            let uvp = pd
                .device()
                .parts()
                .uvp
                .map_qp(&r)
                .map(|qp| qp.with_recv_cq(&init.recv_cq.parts().uvp));
            Ok(QpParts {
                _pd: pd.clone(),
                _send_cq: init.send_cq.clone(),
                _recv_cq: init.recv_cq.clone(),
                _srq: init.srq.cloned(),
                uvp: uvp.map_err(|_| uvp_refused(OP))?,
            })
        });
        Handle::adopt(pd.file(), out.Id.Id, parts)
    }

    /// QP_MODIFY, waiting for it: the driver runs modifies asynchronously (a work item, FIFO
    /// per QP), so this is [`Qp::modify_async`] then [`Pending::wait`].
    ///
    /// # Errors
    /// The status of QP_MODIFY (`STATUS_UNSUCCESSFUL` for a transition or attribute set the
    /// state table refuses, `STATUS_CANCELLED` after [`Qp::cancel`]).
    pub fn modify(&self, attr: &QpAttr) -> Result<()> {
        self.modify_async(attr)?.wait()
    }

    /// QP_MODIFY without waiting. The output is the UVP's QP-state buffer (the soft UVP reads
    /// the state the device shares, so it only needs the call to have succeeded). Modifies of
    /// one QP run in the order issued; dropping the [`Pending`] before it completes cancels the
    /// modify if it has not started yet.
    ///
    /// # Errors
    /// An inline failure of QP_MODIFY (e.g. `STATUS_NOT_FOUND`).
    pub fn modify_async(&self, attr: &QpAttr) -> Result<Pending<()>> {
        let mut wire = *attr.as_abi();
        wire.Id.Id = self.id();
        let out_len = size_of::<QpStateOut>();
        self.issue(
            "QP_MODIFY",
            WV_IOCTL_QP_MODIFY,
            wire.as_bytes(),
            out_len,
            pending::finish_unit,
        )
    }

    /// QP_CANCEL: completes this QP's queued (not yet started) modifies with
    /// `STATUS_CANCELLED`.
    ///
    /// # Errors
    /// The status of QP_CANCEL.
    pub fn cancel(&self) -> Result<()> {
        self.command("QP_CANCEL", WV_IOCTL_QP_CANCEL)
    }

    /// QP_QUERY (network-order fields stay as in the ABI struct).
    ///
    /// # Errors
    /// The status of QP_QUERY.
    pub fn query(&self) -> Result<WV_IO_QP_ATTRIBUTES> {
        self.query_as("QP_QUERY", WV_IOCTL_QP_QUERY)
    }

    fn mcast(&self, op: &'static str, code: u32, gid: &[u8; 16], lid: u16) -> Result<()> {
        let mc = WV_IO_QP_MULTICAST {
            Id: WV_IO_ID::new(self.id(), u32::from(lid.to_be())),
            Gid: wv_abi::WV_IO_GID { Raw: *gid },
        };
        self.call(op, code, mc.as_bytes(), 0).map(|_| ())
    }

    /// QP_ATTACH: joins the UD QP to multicast group `gid` (`lid` in host order).
    ///
    /// # Errors
    /// The status of QP_ATTACH.
    pub fn attach_mcast(&self, gid: &[u8; 16], lid: u16) -> Result<()> {
        self.mcast("QP_ATTACH", WV_IOCTL_QP_ATTACH, gid, lid)
    }

    /// QP_DETACH.
    ///
    /// # Errors
    /// `STATUS_NOT_FOUND` when not attached, or the status of QP_DETACH.
    pub fn detach_mcast(&self, gid: &[u8; 16], lid: u16) -> Result<()> {
        self.mcast("QP_DETACH", WV_IOCTL_QP_DETACH, gid, lid)
    }
}
