//! Memory regions: keys, access rights and bounds, checked on every access the device makes.
//!
//! The data path reads a region's state for every scatter/gather entry, from the threads of
//! both ends of a connection, so the read takes no lock: the state is a sequence lock over
//! atomics ([`StateCell`]). A reader never writes the region's cache lines; the rare writers
//! (invalidation, fast registration) serialise on a lock of their own.

use core::sync::atomic::{AtomicU32, AtomicU64, Ordering, fence};

use crate::lock::Mutex;
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

/// A region's [`MrState`], readable without a lock: a sequence lock over atomics. A writer
/// makes the sequence odd, stores the fields, and makes it even again; a reader reads the
/// sequence, the fields, and the sequence again, and retries if it changed or was odd. All
/// fields are atomics, so a torn read is only ever retried, never undefined.
#[derive(Debug)]
pub(crate) struct StateCell {
    seq: AtomicU32,
    /// `key << 32 | access << 1 | valid`.
    word: AtomicU64,
    iova: AtomicU64,
    length: AtomicU64,
    /// Serialises the writers.
    writer: Mutex<()>,
}

impl StateCell {
    fn new(st: MrState) -> Self {
        let (word, iova, length) = Self::pack(&st);
        StateCell {
            seq: AtomicU32::new(0),
            word: AtomicU64::new(word),
            iova: AtomicU64::new(iova),
            length: AtomicU64::new(length),
            writer: Mutex::new(()),
        }
    }

    fn pack(st: &MrState) -> (u64, u64, u64) {
        let word = (u64::from(st.key) << 32) | (u64::from(st.access) << 1) | u64::from(st.valid);
        (word, st.iova, st.length)
    }

    fn unpack(word: u64, iova: u64, length: u64) -> MrState {
        MrState {
            key: (word >> 32) as u32,
            valid: word & 1 != 0,
            access: (word as u32) >> 1,
            iova,
            length,
        }
    }

    /// A consistent snapshot of the state.
    pub(crate) fn read(&self) -> MrState {
        loop {
            let s1 = self.seq.load(Ordering::Acquire);
            if s1 & 1 == 0 {
                let word = self.word.load(Ordering::Relaxed);
                let iova = self.iova.load(Ordering::Relaxed);
                let length = self.length.load(Ordering::Relaxed);
                // The field loads before the second look at the sequence.
                fence(Ordering::Acquire);
                if self.seq.load(Ordering::Relaxed) == s1 {
                    return Self::unpack(word, iova, length);
                }
            }
            crate::lock::relax();
        }
    }

    /// Changes the state: `f` sees the current state and returns `Err` to leave it as it
    /// was (nothing is written then).
    fn update<R>(&self, f: impl FnOnce(&mut MrState) -> Result<R, ()>) -> Result<R, ()> {
        let _writer = self.writer.lock();
        let mut st = self.read();
        let r = f(&mut st)?;
        let (word, iova, length) = Self::pack(&st);
        let s = self.seq.load(Ordering::Relaxed);
        self.seq.store(s.wrapping_add(1), Ordering::Relaxed);
        // The odd sequence before the field stores.
        fence(Ordering::Release);
        self.word.store(word, Ordering::Relaxed);
        self.iova.store(iova, Ordering::Relaxed);
        self.length.store(length, Ordering::Relaxed);
        self.seq.store(s.wrapping_add(2), Ordering::Release);
        Ok(r)
    }
}

/// A registered memory region.
#[derive(Debug)]
pub(crate) struct Mr {
    pub handle: u32,
    pub pd: u32,
    /// The pinned pages of the registration (fast registration re-maps within them).
    pub range: DmaRange,
    pub st: StateCell,
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
            st: StateCell::new(st),
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
        let st = self.st.read();
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
        let st = self.st.read();
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
        self.st.update(|st| {
            if st.key != key || !st.valid || self.windows.load(Ordering::Acquire) != 0 {
                return Err(());
            }
            st.valid = false;
            Ok(())
        })
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
        self.st.update(|st| {
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
        })
    }
}
