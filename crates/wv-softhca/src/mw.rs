//! Memory windows: remote access to part of a registered region under a key of its own, bound
//! and invalidated through the send queue.
//!
//! Two kinds, as in rdma-core and rxe:
//! * **type 1**: bound by the bind verb (`UvpQp::bind_mw`, `ibv_bind_mw`), which the user-mode
//!   provider turns into a bind request on the send queue with a key it increments itself;
//!   rebinding replaces the binding, a zero length unbinds; any QP of the window's PD may use
//!   it; it cannot be invalidated (o10-37.2.26);
//! * **type 2**: bound by a posted `BIND_MW` request (`WrOpcode::BindMw`) with the new key
//!   chosen by the caller, only when free (o10-37.2.30), by a QP of its PD (C10-72), never
//!   with a zero length (o10-37.2.40); it is then reachable only through that QP, and freed
//!   by `LOCAL_INV` or `SEND_WITH_INV` of its key.
//!
//! Window keys have bit 31 set (`MW_KEY_BIT`), region keys never do, so one look at a key
//! says which table it names. The low 8 bits are the key byte a bind changes.

use core::sync::atomic::Ordering;

use crate::lock::Mutex;
use wv_abi::consts::{WV_ACCESS_LOCAL_WRITE, WV_ACCESS_REMOTE_ATOMIC, WV_ACCESS_REMOTE_READ};
use wv_hal::{KArc, KWeak};

use crate::mr::{ACCESS_REMOTE_WRITE_BIT, Mr, Want};
use crate::qp::Qp;
use crate::wr::MwBind;

/// Bit 31 of every window key.
pub(crate) const MW_KEY_BIT: u32 = 0x8000_0000;

/// Rights a window can grant.
const MW_ACCESS: u32 = WV_ACCESS_REMOTE_READ | ACCESS_REMOTE_WRITE_BIT | WV_ACCESS_REMOTE_ATOMIC;

/// Whether `key` names a window.
pub(crate) fn is_mw_key(key: u32) -> bool {
    key & MW_KEY_BIT != 0
}

/// The window handle a key names.
pub(crate) fn mw_handle(key: u32) -> u32 {
    (key & !MW_KEY_BIT) >> 8
}

/// The kind of a memory window (`ibv_mw_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum MwType {
    /// `IBV_MW_TYPE_1`: bound by the bind verb.
    Type1 = 1,
    /// `IBV_MW_TYPE_2`: bound by a `BIND_MW` work request, tied to the binding QP.
    Type2 = 2,
}

impl MwType {
    /// The type a vendor command names (1 or 2).
    pub fn from_u32(v: u32) -> Option<Self> {
        match v {
            1 => Some(MwType::Type1),
            2 => Some(MwType::Type2),
            _ => None,
        }
    }
}

/// What a bound window opens onto.
#[derive(Debug)]
struct Binding {
    mr: KArc<Mr>,
    addr: u64,
    len: u64,
    access: u32,
    /// Type 2: the QP it was bound by (and is reachable through).
    qp: Option<KWeak<Qp>>,
}

#[derive(Debug)]
struct MwState {
    rkey: u32,
    bound: Option<Binding>,
}

/// Why a bind was refused (the request completes with `MW_BIND_ERR`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BindError;

/// A memory window.
#[derive(Debug)]
pub(crate) struct Mw {
    pub handle: u32,
    pub pd: u32,
    pub kind: MwType,
    st: Mutex<MwState>,
}

impl Mw {
    pub(crate) fn new(handle: u32, pd: u32, kind: MwType) -> Self {
        Mw {
            handle,
            pd,
            kind,
            st: Mutex::new(MwState {
                rkey: MW_KEY_BIT | (handle << 8),
                bound: None,
            }),
        }
    }

    /// The current rkey.
    pub(crate) fn rkey(&self) -> u32 {
        self.st.lock().rkey
    }

    /// Executes a bind request of `qp` (protection domain `pd`). `mr` is the region `b.mr_lkey`
    /// names, if any; `by_verb` says whether the request came from the type 1 bind verb.
    pub(crate) fn bind(
        &self,
        qp: &KArc<Qp>,
        pd: u32,
        mr: Option<KArc<Mr>>,
        b: &MwBind,
        by_verb: bool,
    ) -> Result<(), BindError> {
        let mut st = self.st.lock();
        if st.rkey != b.mw_rkey || self.pd != pd || mw_handle(b.new_rkey) != self.handle {
            return Err(BindError);
        }
        // WinVerbs' WV_ACCESS_REMOTE_WRITE (0xA) carries the local-write bit, which means
        // nothing for a window: accepted and ignored; any other unknown bit is refused.
        if b.access & !(MW_ACCESS | WV_ACCESS_LOCAL_WRITE) != 0 {
            return Err(BindError);
        }
        match self.kind {
            MwType::Type1 => {
                if !by_verb {
                    return Err(BindError);
                }
            }
            MwType::Type2 => {
                if by_verb || st.bound.is_some() || b.length == 0 {
                    return Err(BindError);
                }
            }
        }
        let binding = if b.length == 0 {
            None
        } else {
            let mr = mr.ok_or(BindError)?;
            if !mr.bindable(b.mr_lkey, self.pd, b.addr, b.length, b.access) {
                return Err(BindError);
            }
            mr.windows.fetch_add(1, Ordering::AcqRel);
            Some(Binding {
                mr,
                addr: b.addr,
                len: b.length,
                access: b.access & MW_ACCESS,
                qp: (self.kind == MwType::Type2).then(|| KArc::downgrade(qp)),
            })
        };
        if let Some(old) = st.bound.take() {
            old.mr.windows.fetch_sub(1, Ordering::AcqRel);
        }
        st.bound = binding;
        st.rkey = (st.rkey & !0xFF) | (b.new_rkey & 0xFF);
        Ok(())
    }

    /// Invalidation (`LOCAL_INV`, `SEND_WITH_INV`) of `key` by a QP of `pd`: only a bound
    /// type 2 window, named by its current key.
    pub(crate) fn invalidate(&self, key: u32, pd: u32) -> Result<(), ()> {
        let mut st = self.st.lock();
        if st.rkey != key || self.pd != pd || self.kind != MwType::Type2 {
            return Err(());
        }
        let old = st.bound.take().ok_or(())?;
        old.mr.windows.fetch_sub(1, Ordering::AcqRel);
        Ok(())
    }

    /// Drops the binding (the window is destroyed).
    pub(crate) fn unbind(&self) {
        if let Some(old) = self.st.lock().bound.take() {
            old.mr.windows.fetch_sub(1, Ordering::AcqRel);
        }
    }

    /// A remote access through the window by QP `qp` (of protection domain `pd`): `len` bytes
    /// at `addr` for `want`. Returns the region and the offset into its pinned range.
    pub(crate) fn check(
        &self,
        key: u32,
        qp: &Qp,
        pd: u32,
        addr: u64,
        len: u64,
        want: Want,
    ) -> Result<(KArc<Mr>, u64), ()> {
        let st = self.st.lock();
        let b = st.bound.as_ref().ok_or(())?;
        if st.rkey != key || self.pd != pd || b.access & want.remote_bit() == 0 {
            return Err(());
        }
        if let Some(owner) = &b.qp
            && !core::ptr::eq(owner.as_ptr(), qp)
        {
            return Err(());
        }
        let end = addr.checked_add(len).ok_or(())?;
        if addr < b.addr || end > b.addr + b.len {
            return Err(());
        }
        // The region cannot be invalidated or deregistered while the window is bound, so its
        // pinned range still covers the binding.
        let off = addr.checked_sub(b.mr.range.base()).ok_or(())?;
        Ok((KArc::clone(&b.mr), off))
    }
}
