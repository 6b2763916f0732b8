//! Memory regions: keys, access rights and bounds, checked on every access the device makes.

use core::sync::atomic::{AtomicU32, Ordering};

use spin::RwLock;
use wv_abi::consts::{
    WV_ACCESS_LOCAL_WRITE, WV_ACCESS_MW_BIND, WV_ACCESS_REMOTE_ATOMIC, WV_ACCESS_REMOTE_READ,
};
use wv_hal::VerbsError;

use crate::dma::DmaRange;

/// The remote-write bit alone (`WV_ACCESS_REMOTE_WRITE` is 0xA: it includes local write).
pub(crate) const ACCESS_REMOTE_WRITE_BIT: u32 = 0x2;
/// Every access bit the device knows.
pub(crate) const ACCESS_ALL: u32 = WV_ACCESS_REMOTE_READ
    | ACCESS_REMOTE_WRITE_BIT
    | WV_ACCESS_REMOTE_ATOMIC
    | WV_ACCESS_LOCAL_WRITE
    | WV_ACCESS_MW_BIND;

/// Checks an access combination the way `ib_check_mr_access` does: unknown bits are invalid,
/// and remote write or atomic access requires local write.
pub(crate) fn check_access(access: u32) -> Result<(), VerbsError> {
    if access & !ACCESS_ALL != 0 {
        return Err(VerbsError::InvalidParameter);
    }
    if access & (ACCESS_REMOTE_WRITE_BIT | WV_ACCESS_REMOTE_ATOMIC) != 0
        && access & WV_ACCESS_LOCAL_WRITE == 0
    {
        return Err(VerbsError::InvalidPermission);
    }
    Ok(())
}

/// What a remote access wants.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Want {
    LocalRead,
    LocalWrite,
    RemoteRead,
    RemoteWrite,
    RemoteAtomic,
}

impl Want {
    /// The access bit a remote access needs (of a region, a window or the QP); 0 for local.
    pub(crate) fn remote_bit(self) -> u32 {
        match self {
            Want::RemoteRead => WV_ACCESS_REMOTE_READ,
            Want::RemoteWrite => ACCESS_REMOTE_WRITE_BIT,
            Want::RemoteAtomic => WV_ACCESS_REMOTE_ATOMIC,
            Want::LocalRead | Want::LocalWrite => 0,
        }
    }
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct MrState {
    /// The full key (index << 8 | key byte).
    pub key: u32,
    /// Invalidated regions refuse every access until fast-registered again.
    pub valid: bool,
    pub access: u32,
    /// First accessible client address.
    pub iova: u64,
    pub length: u64,
}

/// A registered memory region.
#[derive(Debug)]
pub(crate) struct Mr {
    pub handle: u32,
    pub pd: u32,
    /// The pinned pages of the registration (fast registration re-maps within them).
    pub range: DmaRange,
    pub st: RwLock<MrState>,
    /// Memory windows bound to the region: while any is, it can be neither invalidated nor
    /// deregistered (a window keeps the region it opens onto, as in rxe).
    pub windows: AtomicU32,
}

impl Mr {
    pub(crate) fn new(handle: u32, pd: u32, range: DmaRange, access: u32) -> Self {
        let st = MrState {
            key: handle << 8,
            valid: true,
            access,
            iova: range.base(),
            length: range.len(),
        };
        Mr {
            handle,
            pd,
            range,
            st: RwLock::new(st),
            windows: AtomicU32::new(0),
        }
    }

    /// Checks `key` and an access of `len` bytes at `addr` for `want` by a QP of protection
    /// domain `pd`; returns the offset into [`Mr::range`].
    pub(crate) fn check(
        &self,
        key: u32,
        pd: u32,
        addr: u64,
        len: u64,
        want: Want,
    ) -> Result<u64, ()> {
        let st = *self.st.read();
        if !st.valid || st.key != key || pd != self.pd {
            return Err(());
        }
        let ok = match want {
            Want::LocalRead => true,
            Want::LocalWrite => st.access & WV_ACCESS_LOCAL_WRITE != 0,
            w => st.access & w.remote_bit() != 0,
        };
        if !ok {
            return Err(());
        }
        let end = addr.checked_add(len).ok_or(())?;
        if addr < st.iova || end > st.iova + st.length {
            return Err(());
        }
        Ok(addr - self.range.base())
    }

    /// The region as a window's binding target: a valid region of `pd` named by `lkey`, with
    /// bind rights, covering `[addr, addr + len)`, that allows `access` (remote write or
    /// atomic rights need local write). Returns whether it qualifies (C10-73, C10-74, C10-75).
    pub(crate) fn bindable(&self, lkey: u32, pd: u32, addr: u64, len: u64, access: u32) -> bool {
        let st = *self.st.read();
        let Some(end) = addr.checked_add(len) else {
            return false;
        };
        st.valid
            && st.key == lkey
            && self.pd == pd
            && st.access & WV_ACCESS_MW_BIND != 0
            && (access & (ACCESS_REMOTE_WRITE_BIT | WV_ACCESS_REMOTE_ATOMIC) == 0
                || st.access & WV_ACCESS_LOCAL_WRITE != 0)
            && addr >= st.iova
            && end <= st.iova + st.length
    }

    /// Local invalidation (`LOCAL_INV`, `SEND_WITH_INV`): the key must match, and no window
    /// may be bound to the region.
    pub(crate) fn invalidate(&self, key: u32) -> Result<(), ()> {
        let mut st = self.st.write();
        if st.key != key || !st.valid || self.windows.load(Ordering::Acquire) != 0 {
            return Err(());
        }
        st.valid = false;
        Ok(())
    }

    /// Fast registration: re-key an invalidated region over part of its pinned pages.
    pub(crate) fn fast_register(
        &self,
        key: u32,
        new_byte: u8,
        access: u32,
        iova: u64,
        length: u64,
    ) -> Result<u32, ()> {
        check_access(access).map_err(|_| ())?;
        let mut st = self.st.write();
        if st.key != key || st.valid {
            return Err(());
        }
        let base = self.range.base();
        let end = iova.checked_add(length).ok_or(())?;
        if iova < base || end > base + self.range.len() {
            return Err(());
        }
        st.key = (self.handle << 8) | u32::from(new_byte);
        st.access = access;
        st.iova = iova;
        st.length = length;
        st.valid = true;
        Ok(st.key)
    }
}
