//! Protection domains and what hangs off them: memory regions (kept in the PD by lkey, as in
//! OFW), memory windows and address handles.

use alloc::vec::Vec;

use wv_abi::encode::{write_data, write_prefix};
use wv_abi::{NtStatus, WV_IO_AH_CREATE, WV_IO_ID, WV_IO_MEMORY_KEYS, WV_IO_MEMORY_REGISTER};
use wv_hal::{IoRequest, KArc, MemoryRegion, Platform, SpinLock, Umv, Verbs, VerbsError};

use crate::convert::av_from_abi;
use crate::create::{Create, Prepared, slots_only};
use crate::device::DeviceObj;
use crate::fallible::grow_locked;
use crate::provider::{Object, Provider, Teardown};
use crate::shared::Shared;
use crate::status::verbs_status;
use crate::sync::{Handle, RefCount};
use crate::umv::VerbsInput;

/// A protection domain (OFW `WV_PROTECTION_DOMAIN`).
pub(crate) struct PdObj<P: Platform, V: Verbs> {
    pub dev: KArc<DeviceObj<P, V>>,
    pub pd: Handle<P, V::Pd>,
    /// SRQs, QPs, MWs, AHs and IOCTLs in flight. MRs hold none: PD_DEALLOCATE deregisters
    /// them (OFW behaviour, kept).
    pub refs: RefCount,
    /// Registered memory, sorted by lkey (OFW's `MrMap`). An entry whose region is being
    /// deregistered is `None` until the controller has answered, so a refused deregistration
    /// puts it back without allocating. Grows outside the lock (`grow_locked`).
    mrs: P::SpinLock<MrTable<V>>,
}

/// Registered regions by lkey; `None` while one is being deregistered.
type MrTable<V> = Vec<(u32, Option<<V as Verbs>::Mr>)>;

impl<P: Platform, V: Verbs> PdObj<P, V> {
    /// Deregisters every MR. A failure is ignored, as in OFW's `WvPdFree`: the PD is going
    /// away regardless.
    pub fn deregister_all(&self, lower: &V) {
        let mrs = core::mem::take(&mut *self.mrs.lock());
        for mr in mrs.into_iter().filter_map(|(_, mr)| mr) {
            let _ = lower.deregister_mr(mr);
        }
    }

    pub fn destroy_handles(&self, lower: &V) {
        if let Some(pd) = self.pd.take() {
            lower.deallocate_pd(pd);
        }
    }

    /// Records a registered region; returns a region the lkey replaced (a controller bug), or
    /// the region back when there is no room (nothing is allocated under the lock).
    fn insert_mr(&self, lkey: u32, mr: V::Mr) -> Result<Option<V::Mr>, V::Mr> {
        let mut mrs = self.mrs.lock();
        match mrs.binary_search_by_key(&lkey, |(key, _)| *key) {
            Ok(at) => Ok(mrs[at].1.replace(mr)),
            Err(_) if mrs.len() == mrs.capacity() => Err(mr),
            Err(at) => {
                mrs.insert(at, (lkey, Some(mr)));
                Ok(None)
            }
        }
    }

    /// Takes a region out for deregistration, leaving its entry in place.
    fn take_mr(&self, lkey: u32) -> Option<V::Mr> {
        let mut mrs = self.mrs.lock();
        let at = mrs.binary_search_by_key(&lkey, |(key, _)| *key).ok()?;
        mrs[at].1.take()
    }

    /// Puts back a region the controller refused to deregister.
    fn restore_mr(&self, lkey: u32, mr: V::Mr) {
        let mut mrs = self.mrs.lock();
        if let Ok(at) = mrs.binary_search_by_key(&lkey, |(key, _)| *key) {
            mrs[at].1 = Some(mr);
        }
    }

    /// Drops the entry of a deregistered region.
    fn forget_mr(&self, lkey: u32) {
        let mut mrs = self.mrs.lock();
        if let Ok(at) = mrs.binary_search_by_key(&lkey, |(key, _)| *key)
            && mrs[at].1.is_none()
        {
            mrs.remove(at);
        }
    }
}

impl<P: Platform, V: Verbs> Teardown<P, V> for PdObj<P, V> {
    fn teardown(this: KArc<Self>, _shared: &Shared<P, V>) {
        if let Some(lower) = this.dev.lower() {
            this.deregister_all(&lower);
            this.destroy_handles(&lower);
        }
        this.dev.refs.put();
    }
}

/// What tells a PD's memory windows and address handles apart: the IOCTL that makes one, its
/// verbs handle and how that is made and destroyed. Both are otherwise the same object, a verbs
/// handle on a PD ([`PdChild`]), with one [`Create`] impl.
pub(crate) trait PdChildKind<V: Verbs>: Send + Sync + 'static {
    /// The creating IOCTL's input (its id names the PD).
    type Input: VerbsInput;
    type Handle: Send + Sync;
    /// What the output reports besides the new id.
    type Extra;
    fn create(
        lower: &V,
        pd: &V::Pd,
        input: &Self::Input,
        umv: &mut Umv<'_>,
    ) -> Result<(Self::Handle, Self::Extra), VerbsError>;
    /// Writes `extra` into the output.
    fn report(buf: &mut [u8], extra: Self::Extra);
    fn destroy(lower: &V, handle: Self::Handle);
}

/// Memory windows. MW_ALLOCATE: output `{Id = mw, VerbInfo, Data = rkey}`.
pub(crate) struct Mw;

impl<V: Verbs> PdChildKind<V> for Mw {
    type Input = WV_IO_ID;
    type Handle = V::Mw;
    type Extra = u32;
    fn create(
        lower: &V,
        pd: &V::Pd,
        _id: &WV_IO_ID,
        umv: &mut Umv<'_>,
    ) -> Result<(V::Mw, u32), VerbsError> {
        lower.create_mw(pd, umv)
    }
    fn report(buf: &mut [u8], rkey: u32) {
        write_data(buf, rkey).ok();
    }
    fn destroy(lower: &V, mw: V::Mw) {
        lower.destroy_mw(mw);
    }
}

/// Address handles. AH_CREATE: output `Id.Id = ah`, `Id.VerbInfo`; the address vector is
/// echoed.
pub(crate) struct Ah;

impl<V: Verbs> PdChildKind<V> for Ah {
    type Input = WV_IO_AH_CREATE;
    type Handle = V::Ah;
    type Extra = ();
    fn create(
        lower: &V,
        pd: &V::Pd,
        ah: &WV_IO_AH_CREATE,
        umv: &mut Umv<'_>,
    ) -> Result<(V::Ah, ()), VerbsError> {
        let av = av_from_abi(&ah.AddressVector);
        Ok((lower.create_ah(pd, &av, umv)?, ()))
    }
    fn report(_buf: &mut [u8], (): ()) {}
    fn destroy(lower: &V, ah: V::Ah) {
        lower.destroy_ah(ah);
    }
}

/// A verbs handle on a PD and nothing more: a memory window (OFW `WV_MEMORY_WINDOW`) or an
/// address handle (OFW `WV_ADDRESS_HANDLE`).
pub(crate) struct PdChild<P: Platform, V: Verbs, K: PdChildKind<V>> {
    pub pd: KArc<PdObj<P, V>>,
    pub dev: KArc<DeviceObj<P, V>>,
    pub handle: Handle<P, K::Handle>,
    pub refs: RefCount,
}

/// A memory window (OFW `WV_MEMORY_WINDOW`).
pub(crate) type MwObj<P, V> = PdChild<P, V, Mw>;

/// An address handle (OFW `WV_ADDRESS_HANDLE`).
pub(crate) type AhObj<P, V> = PdChild<P, V, Ah>;

impl<P: Platform, V: Verbs, K: PdChildKind<V>> PdChild<P, V, K> {
    pub fn destroy_handles(&self, lower: &V) {
        if let Some(handle) = self.handle.take() {
            K::destroy(lower, handle);
        }
    }
}

impl<P: Platform, V: Verbs, K: PdChildKind<V>> Teardown<P, V> for PdChild<P, V, K> {
    fn teardown(this: KArc<Self>, _shared: &Shared<P, V>) {
        if let Some(lower) = this.dev.lower() {
            this.destroy_handles(&lower);
        }
        this.pd.refs.put();
    }
}

/// PD_ALLOCATE: `STATUS_NO_SUCH_DEVICE` for a bad device id.
impl<P: Platform, V: Verbs> Create<P, V> for PdObj<P, V> {
    type Input = WV_IO_ID;
    type Made = V::Pd;
    type Kept = ();
    type Extra = ();
    type Parent = DeviceObj<P, V>;
    const NO_PARENT: NtStatus = NtStatus::NO_SUCH_DEVICE;

    fn prepare(_: &Provider<P, V>) -> Result<Prepared<P, V, Self>, NtStatus> {
        // OFW: the PD's allocation fails with STATUS_NO_MEMORY, before the verb.
        slots_only()
    }

    fn create(
        lower: &V,
        ca: &V::Ca,
        _: &WV_IO_ID,
        (): &(),
        umv: &mut Umv<'_>,
    ) -> Result<(V::Pd, ()), VerbsError> {
        Ok((lower.allocate_pd(ca, umv)?, ()))
    }

    fn new(dev: &KArc<DeviceObj<P, V>>, pd: Handle<P, V::Pd>, (): (), platform: &P) -> Self {
        PdObj {
            dev: KArc::clone(dev),
            pd,
            refs: RefCount::default(),
            mrs: platform.spin_lock(Vec::new()),
        }
    }
}

/// PD_CANCEL: validates the id. Registration runs synchronously in the caller's context
/// (spec §7.1-l), so there is nothing to cancel.
pub(crate) fn pd_cancel<P: Platform, V: Verbs>(prov: &Provider<P, V>, req: P::Request, id: u64) {
    let status = match prov.acquire::<PdObj<P, V>>(id) {
        Some(_) => NtStatus::SUCCESS,
        None => NtStatus::NOT_FOUND,
    };
    req.complete(status, 0);
}

/// MEMORY_REGISTER: runs in the caller's thread and process (the controller pins the caller's
/// pages; spec §7.1-l). `Information = 8`.
pub(crate) fn memory_register<P: Platform, V: Verbs>(
    prov: &Provider<P, V>,
    mut req: P::Request,
    reg: WV_IO_MEMORY_REGISTER,
) {
    let Some((pd, lower, handle)) = prov.acquire_live::<PdObj<P, V>>(reg.Id) else {
        return req.complete(NtStatus::NOT_FOUND, 0);
    };
    let region = MemoryRegion {
        address: reg.Address,
        length: reg.BufferLength,
        access: reg.AccessFlags,
    };
    // OFW allocates the MR's record before registering: STATUS_NO_MEMORY.
    if grow_locked(&pd.mrs, 1).is_err() {
        return req.complete(NtStatus::NO_MEMORY, 0);
    }
    let (mr, keys) = match lower.register_mr(&handle, &region) {
        Ok(registered) => registered,
        Err(e) => return req.complete(verbs_status(e), 0),
    };
    let stale = match pd.insert_mr(keys.lkey, mr) {
        Ok(stale) => stale,
        Err(mr) => {
            // The room made above went to a concurrent registration and no more can be had.
            let _ = lower.deregister_mr(mr);
            return req.complete(NtStatus::NO_MEMORY, 0);
        }
    };
    if let Some(stale) = stale {
        // The controller handed out an lkey that is still registered: its bug, but do not
        // leak the older region over it.
        let _ = lower.deregister_mr(stale);
    }
    let out = WV_IO_MEMORY_KEYS {
        Lkey: keys.lkey,
        Rkey: keys.rkey,
    };
    let info = write_prefix(req.buffer_mut(), &out).unwrap_or(0);
    req.complete(NtStatus::SUCCESS, info);
}

/// MEMORY_DEREGISTER `{Id = pd, Data = lkey}`: `STATUS_NOT_FOUND` for an unknown PD or lkey;
/// if the controller refuses, the region stays registered and the call fails.
pub(crate) fn memory_deregister<P: Platform, V: Verbs>(
    prov: &Provider<P, V>,
    req: P::Request,
    id: WV_IO_ID,
) {
    let Some(pd) = prov.acquire::<PdObj<P, V>>(id.Id) else {
        return req.complete(NtStatus::NOT_FOUND, 0);
    };
    let Some(lower) = pd.dev.lower() else {
        return req.complete(NtStatus::NOT_FOUND, 0);
    };
    let Some(mr) = pd.take_mr(id.Data) else {
        return req.complete(NtStatus::NOT_FOUND, 0);
    };
    let status = match lower.deregister_mr(mr) {
        Ok(()) => {
            pd.forget_mr(id.Data);
            NtStatus::SUCCESS
        }
        Err((mr, e)) => {
            pd.restore_mr(id.Data, mr);
            verbs_status(e)
        }
    };
    req.complete(status, 0);
}

/// MW_ALLOCATE and AH_CREATE ([`PdChildKind`] says which): on the PD the input names, the
/// verbs handle and what the output reports besides the new id. OFW: a bad PD is
/// `STATUS_NOT_FOUND`, the object's allocation fails with `STATUS_NO_MEMORY` before the verb.
impl<P: Platform, V: Verbs, K: PdChildKind<V>> Create<P, V> for PdChild<P, V, K>
where
    Self: Object<P, V>,
{
    type Input = K::Input;
    type Extra = K::Extra;
    type Made = K::Handle;
    type Kept = ();
    type Parent = PdObj<P, V>;
    const NO_PARENT: NtStatus = NtStatus::NOT_FOUND;

    fn create(
        lower: &V,
        pd: &V::Pd,
        input: &K::Input,
        (): &(),
        umv: &mut Umv<'_>,
    ) -> Result<(K::Handle, K::Extra), VerbsError> {
        K::create(lower, pd, input, umv)
    }

    fn prepare(_: &Provider<P, V>) -> Result<Prepared<P, V, Self>, NtStatus> {
        slots_only()
    }

    fn new(pd: &KArc<PdObj<P, V>>, handle: Handle<P, K::Handle>, (): (), _: &P) -> Self {
        PdChild {
            pd: KArc::clone(pd),
            dev: KArc::clone(&pd.dev),
            handle,
            refs: RefCount::default(),
        }
    }

    fn report(buf: &mut [u8], extra: K::Extra) {
        K::report(buf, extra);
    }
}
