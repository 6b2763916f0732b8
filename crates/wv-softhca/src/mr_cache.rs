//! Epoch-checked references to a device's memory regions, kept by each queue side.
//!
//! Resolving a scatter/gather entry through the device's region table costs a read lock on the
//! table and a clone of the region's `KArc`, both writes to cache lines that the other end of a
//! connection writes too (it resolves the same regions as the target of its messages). A side
//! instead keeps strong references to the few regions it uses, and drops them all when the
//! device's region epoch moved (a deregistration bumps it after the table no longer names the
//! region). The key, rights and bounds are still checked on every access against the region's
//! lock-free state, so invalidation and fast registration need no epoch.
//!
//! A side validates its cache once per message with `&mut` ([`MrCache::validate`]); lookups
//! then take `&self` and hand out references that live as long as that borrow, so a message's
//! segment list refers to its regions without touching their reference counts.

use core::cell::OnceCell;

use wv_hal::KArc;

use crate::device::Device;
use crate::mr::Mr;
use crate::mw::is_mw_key;

/// Regions a side keeps (a perftest side uses one; beyond this, lookups go to the table).
const SLOTS: usize = 4;

/// A region as a segment refers to it: borrowed from a side's cache, or owned (a cache miss
/// beyond its slots, or a segment kept beyond the message).
#[derive(Debug)]
pub(crate) enum MrRef<'a> {
    Cached(&'a KArc<Mr>),
    Owned(KArc<Mr>),
}

impl MrRef<'_> {
    /// The same region, owned (for a segment list kept across packets).
    pub(crate) fn into_owned(self) -> MrRef<'static> {
        match self {
            MrRef::Cached(mr) => MrRef::Owned(KArc::clone(mr)),
            MrRef::Owned(mr) => MrRef::Owned(mr),
        }
    }
}

impl core::ops::Deref for MrRef<'_> {
    type Target = Mr;
    fn deref(&self) -> &Mr {
        match self {
            MrRef::Cached(mr) => mr,
            MrRef::Owned(mr) => mr,
        }
    }
}

/// The regions one queue side uses, valid while the device's region epoch stays what it was.
#[derive(Debug, Default)]
pub(crate) struct MrCache {
    epoch: u32,
    slots: [OnceCell<KArc<Mr>>; SLOTS],
}

impl MrCache {
    /// Forgets every region if a deregistration happened since they were looked up. Before
    /// the lookups of a message.
    pub(crate) fn validate(&mut self, dev: &Device) {
        let epoch = dev.mr_epoch();
        if epoch != self.epoch {
            self.clear();
            self.epoch = epoch;
        }
    }

    /// Forgets every region (the side is reset or destroyed).
    pub(crate) fn clear(&mut self) {
        for slot in &mut self.slots {
            slot.take();
        }
    }

    /// The region `key` names on `dev` (a region key, not a window's), from the cache or the
    /// table. `dev` is the device whose epoch [`MrCache::validate`] checked.
    // The hit inline and the table lookup out of line: with both in one body every message's
    // two lookups paid the miss path's register saves.
    #[inline]
    pub(crate) fn get<'a>(&'a self, dev: &Device, key: u32) -> Option<MrRef<'a>> {
        if is_mw_key(key) {
            return None;
        }
        let handle = key >> 8;
        for slot in &self.slots {
            match slot.get() {
                Some(mr) if mr.handle == handle => return Some(MrRef::Cached(mr)),
                Some(_) => {}
                None => break,
            }
        }
        self.miss(dev, key)
    }

    /// Looks `key` up in the device's table and keeps it in the first free slot (slots fill in
    /// order, so every slot before it holds another region); with none free it is not kept.
    #[cold]
    #[inline(never)]
    fn miss<'a>(&'a self, dev: &Device, key: u32) -> Option<MrRef<'a>> {
        let mr = dev.mr_by_key(key)?;
        Some(match self.slots.iter().find(|slot| slot.get().is_none()) {
            Some(slot) => MrRef::Cached(slot.get_or_init(|| mr)),
            None => MrRef::Owned(mr),
        })
    }
}
