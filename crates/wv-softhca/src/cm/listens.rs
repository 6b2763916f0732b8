//! The listens of a host: which service ids (and IP-CM addresses) take connection requests,
//! and the requests each one holds until its consumer takes them.
//!
//! AL's CM is one per host, so a listen catches a REQ arriving at any port of any of the
//! host's devices. Here the host is the fabric (every device of an in-process machine joins
//! its one fabric); a device on no fabric keeps its own registry. The requests themselves are
//! CEPs of the device they arrived at; the registry only remembers where they are.

use alloc::collections::VecDeque;
use alloc::sync::Weak;
use alloc::vec::Vec;

use crate::lock::Mutex;
use wv_abi::NtStatus;
use wv_hal::cm::REQ_PRIVATE_DATA;
use wv_hal::{CmEventSink, KArc};

use crate::device::{Device, Rundown};

/// The IP-CM header a listen may compare (`ib_cm_rdma_req_t` up to its private data).
pub(crate) const HEADER: usize = 36;
/// `IB_REQ_CM_RDMA_CMP_SRC_PORT`, `..._SRC_IP`, `..._DST_IP`: the header fields a listen's
/// mask selects (AL's `__cm_rdma_req_cmp`; version and IP version always count).
const CMP_SRC_PORT: u8 = 1;
const CMP_SRC_IP: u8 = 2;
const CMP_DST_IP: u8 = 4;

/// One listen.
pub(crate) struct Listen {
    /// The listening CEP: its device and communication id.
    pub owner: Weak<Device>,
    pub id: u32,
    pub service_id: u64,
    /// The header to compare and the fields to compare; `None` takes every request for the
    /// service id.
    pub compare: Option<([u8; HEADER], u8)>,
    pub sink: KArc<dyn CmEventSink>,
    pub rundown: KArc<Rundown>,
    /// Requests not taken yet, oldest first: their device and communication id.
    pub queue: VecDeque<(Weak<Device>, u32)>,
}

impl Listen {
    fn is(&self, owner: &Device, id: u32) -> bool {
        self.id == id && core::ptr::eq(self.owner.as_ptr(), owner)
    }

    /// Whether a REQ's private data passes the compare (AL's `__cm_rdma_req_cmp`).
    fn accepts(&self, pdata: &[u8; REQ_PRIVATE_DATA]) -> bool {
        let Some((c, mask)) = &self.compare else {
            return true;
        };
        let same = |r: core::ops::Range<usize>| c[r.clone()] == pdata[r];
        same(0..2)
            && (mask & CMP_SRC_PORT == 0 || same(2..4))
            && (mask & CMP_SRC_IP == 0 || same(4..20))
            && (mask & CMP_DST_IP == 0 || same(20..36))
    }
}

/// The listens of one host.
#[derive(Default)]
pub(crate) struct Listens {
    list: Vec<Listen>,
}

impl Listens {
    pub(crate) const fn new() -> Listens {
        Listens { list: Vec::new() }
    }

    /// The list, for making room before an add.
    pub(crate) fn room(&mut self) -> Option<&mut Vec<Listen>> {
        Some(&mut self.list)
    }

    /// Adds a listen, in room the caller made ([`Listens::room`]). Another listen with the
    /// same service id and the same compare is AL's `IB_INVALID_SETTING`. Allocates nothing.
    pub(crate) fn add(&mut self, listen: Listen) -> Result<(), NtStatus> {
        if self
            .list
            .iter()
            .any(|l| l.service_id == listen.service_id && l.compare == listen.compare)
        {
            return Err(NtStatus::INVALID_PARAMETER);
        }
        if self.list.len() == self.list.capacity() {
            return Err(NtStatus::INSUFFICIENT_RESOURCES);
        }
        self.list.push(listen);
        Ok(())
    }

    /// Removes the listen of CEP `id` of `owner`.
    pub(crate) fn remove(&mut self, owner: &Device, id: u32) -> Option<Listen> {
        let at = self.list.iter().position(|l| l.is(owner, id))?;
        Some(self.list.swap_remove(at))
    }

    /// The listen of CEP `id` of `owner`.
    pub(crate) fn get_mut(&mut self, owner: &Device, id: u32) -> Option<&mut Listen> {
        self.list.iter_mut().find(|l| l.is(owner, id))
    }

    /// The listen a REQ for `service_id` with `pdata` goes to: one whose compare matches
    /// before one that takes everything.
    pub(crate) fn find(
        &mut self,
        service_id: u64,
        pdata: &[u8; REQ_PRIVATE_DATA],
    ) -> Option<&mut Listen> {
        let at = self
            .list
            .iter()
            .enumerate()
            .filter(|(_, l)| l.service_id == service_id && l.accepts(pdata))
            .min_by_key(|(_, l)| l.compare.is_none())
            .map(|(i, _)| i)?;
        self.list.get_mut(at)
    }
}

/// The registry `dev`'s listens and requests go to.
pub(crate) fn of(dev: &Device) -> &Mutex<Listens> {
    match dev.fabric() {
        Some(fabric) => &fabric.cm_listens,
        None => &dev.cm.own_listens,
    }
}

/// A compare header from `listen`'s arguments: `None` for an empty compare.
pub(crate) fn compare_of(compare: &[u8], mask: u8) -> Result<Option<([u8; HEADER], u8)>, NtStatus> {
    if compare.is_empty() {
        return Ok(None);
    }
    if compare.len() > REQ_PRIVATE_DATA {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    Ok(Some((super::mad::full(compare), mask)))
}
