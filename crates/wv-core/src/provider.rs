//! The provider: the state of one open file (`\\.\WinVerbs` handle), its id tables, the IOCTL
//! gate, object lookup with references (OFW `Wv*Acquire`), destroy and cleanup.

use core::marker::PhantomData;
use core::ops::Deref;

use wv_abi::NtStatus;
use wv_abi::encode::{write_id, write_verb_info};
use wv_hal::{Event, IoRequest, KArc, Platform, SpinLock, Verbs};

use crate::cq::CqObj;
use crate::device::DeviceObj;
use crate::ep::EpObj;
use crate::ids::{IdTable, Insert, Spare};
use crate::pd::{AhObj, MwObj, PdObj};
use crate::qp::QpObj;
use crate::shared::Shared;
use crate::srq::SrqObj;
use crate::sync::{Gate, Handle, RefCount};

/// The type table, in the role of `rxe_type_info[]` in rdma-core's rxe: every kind of object
/// with an id, the field of [`Tables`] that holds it, and where it keeps its device. It makes
/// [`Tables`] and each kind's [`Object`] impl; the kinds' modules write only what differs, their
/// [`Teardown`].
macro_rules! object_types {
    ($($(#[$doc:meta])* $field:ident: $kind:ident, device: $device:tt, verbs: $verb:ident $handle:ident;)*) => {
        /// The per-type id tables of one provider (OFW `DevIndex`, `PdIndex`, …, `EpIndex`).
        pub(crate) struct Tables<P: Platform, V: Verbs> {
            $($(#[$doc])* pub $field: IdTable<KArc<$kind<P, V>>>,)*
            /// Endpoints (they live on no device, so they are no [`Object`]).
            pub eps: IdTable<KArc<EpObj<P, V>>>,
        }

        impl<P: Platform, V: Verbs> Tables<P, V> {
            fn new(limit: u32) -> Self {
                Tables {
                    $($field: IdTable::new(limit),)*
                    eps: IdTable::new(limit),
                }
            }
        }

        $(impl<P: Platform, V: Verbs> Object<P, V> for $kind<P, V> {
            fn table(tables: &mut Tables<P, V>) -> &mut IdTable<KArc<Self>> {
                &mut tables.$field
            }
            fn device(this: &KArc<Self>) -> &KArc<DeviceObj<P, V>> {
                object_types!(@device this $device)
            }
            fn refs(&self) -> &RefCount {
                &self.refs
            }
            type Verb = V::$verb;
            fn verb(&self) -> &Handle<P, V::$verb> {
                &self.$handle
            }
        })*
    };
    (@device $this:ident self) => { $this };
    (@device $this:ident $field:ident) => { &$this.$field };
}

object_types! {
    /// Opened devices.
    devices: DeviceObj, device: self, verbs: Ca ca;
    /// Protection domains.
    pds: PdObj, device: dev, verbs: Pd pd;
    /// Completion queues.
    cqs: CqObj, device: dev, verbs: Cq cq;
    /// Shared receive queues.
    srqs: SrqObj, device: dev, verbs: Srq srq;
    /// Queue pairs.
    qps: QpObj, device: dev, verbs: Qp qp;
    /// Memory windows.
    mws: MwObj, device: dev, verbs: Mw handle;
    /// Address handles.
    ahs: AhObj, device: dev, verbs: Ah handle;
}

/// What every object with an id has in common (its row of the type table).
pub(crate) trait Object<P: Platform, V: Verbs>:
    Teardown<P, V> + Send + Sync + 'static
{
    /// The object's table.
    fn table(tables: &mut Tables<P, V>) -> &mut IdTable<KArc<Self>>;
    /// The opened device the object lives on (itself for a device).
    fn device(this: &KArc<Self>) -> &KArc<DeviceObj<P, V>>;
    /// Children and in-flight users.
    fn refs(&self) -> &RefCount;
    /// The kind of verbs handle it holds (`V::Ca` for a device, `V::Pd` for a PD, …).
    type Verb: Send + Sync;
    /// Its verbs handle.
    fn verb(&self) -> &Handle<P, Self::Verb>;
    /// Its device's verbs interface and its own verbs handle, for one verb; `None` once
    /// device removal or teardown has destroyed them.
    fn live(this: &KArc<Self>) -> Option<(KArc<V>, KArc<Self::Verb>)> {
        let (Some(lower), Some(handle)) = (Self::device(this).lower(), this.verb().get()) else {
            return None;
        };
        Some((lower, handle))
    }
}

/// What differs between the kinds of objects: how one is destroyed.
pub(crate) trait Teardown<P: Platform, V: Verbs>: Sized {
    /// Destroys what is left of the object after it left its table: its verbs handle (unless
    /// device removal destroyed it already), its parked requests, its references on parents.
    /// PASSIVE_LEVEL, no lock held; the caller holds the device gate or removal has finished.
    fn teardown(this: KArc<Self>, shared: &Shared<P, V>);
}

/// One open file.
pub(crate) struct Provider<P: Platform, V: Verbs> {
    pub shared: KArc<Shared<P, V>>,
    /// IOCTLs in flight; cleanup closes it (later IOCTLs get `STATUS_FILE_CLOSED`).
    pub gate: Gate<P>,
    pub tables: P::SpinLock<Tables<P, V>>,
}

/// The per-file context the platform keeps in the file object (`FilterDriver::File`).
pub struct FileContext<P: Platform, V: Verbs> {
    pub(crate) provider: KArc<Provider<P, V>>,
}

/// An object found by id, with a reference and a share of its device gate: its verbs handles
/// stay valid and destroy answers `STATUS_ACCESS_DENIED` until this is dropped.
pub(crate) struct Held<P: Platform, V: Verbs, T: Object<P, V>> {
    obj: KArc<T>,
    _types: PhantomData<(P, V)>,
}

impl<P: Platform, V: Verbs, T: Object<P, V>> Held<P, V, T> {
    /// The object itself.
    pub fn arc(&self) -> &KArc<T> {
        &self.obj
    }
}

impl<P: Platform, V: Verbs, T: Object<P, V>> Deref for Held<P, V, T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.obj
    }
}

impl<P: Platform, V: Verbs, T: Object<P, V>> Drop for Held<P, V, T> {
    fn drop(&mut self) {
        self.obj.refs().put();
        T::device(&self.obj).gate.leave();
    }
}

/// Takes a reference and a share of the device gate on an object already found under the
/// provider lock; `None` when its device has been removed (OFW: the handle is NULL).
pub(crate) fn hold<P: Platform, V: Verbs, T: Object<P, V>>(obj: &KArc<T>) -> Option<Held<P, V, T>> {
    if !T::device(obj).gate.enter() {
        return None;
    }
    obj.refs().get();
    Some(Held {
        obj: KArc::clone(obj),
        _types: PhantomData,
    })
}

impl<P: Platform, V: Verbs> Provider<P, V> {
    /// A provider for a new file; fails with the platform's status when out of resources.
    pub fn new(shared: KArc<Shared<P, V>>) -> Result<Self, NtStatus> {
        let limit = shared.config.max_ids_per_type;
        let platform = &shared.platform;
        Ok(Provider {
            gate: Gate::new(platform)?,
            tables: platform.spin_lock(Tables::new(limit)),
            shared,
        })
    }

    pub fn platform(&self) -> &P {
        &self.shared.platform
    }

    /// OFW `Wv*Acquire`: the object with this id, referenced, if it exists and its device is
    /// still there.
    pub fn acquire<T: Object<P, V>>(&self, id: u64) -> Option<Held<P, V, T>> {
        let mut tables = self.tables.lock();
        let obj = T::table(&mut tables).get(id)?;
        hold(obj)
    }

    /// [`Provider::acquire`] with what a verb on the object needs ([`Object::live`]): `None`
    /// too when device removal has destroyed the object's verbs handles. The caller keeps the
    /// held object (its share of the device gate) for as long as it uses the handles.
    #[allow(clippy::type_complexity)]
    pub fn acquire_live<T: Object<P, V>>(
        &self,
        id: u64,
    ) -> Option<(Held<P, V, T>, KArc<V>, KArc<T::Verb>)> {
        let held = self.acquire::<T>(id)?;
        let (lower, handle) = T::live(held.arc())?;
        Some((held, lower, handle))
    }

    /// Inserts a new object. `STATUS_NO_MEMORY` when the table is at its limit or cannot grow
    /// (OFW: `IndexListInsertHead` returns 0); the object comes back so the caller can tear
    /// it down. The table grows with the lock released ([`Spare`]).
    pub fn insert<T: Object<P, V>>(&self, obj: KArc<T>) -> Result<u64, (KArc<T>, NtStatus)> {
        self.insert_in(obj, T::table)
    }

    /// [`Provider::insert`], tearing the object down again when the table refuses it.
    pub fn insert_or_teardown<T: Object<P, V>>(&self, obj: KArc<T>) -> Result<u64, NtStatus> {
        self.insert(obj).map_err(|(obj, status)| {
            T::teardown(obj, &self.shared);
            status
        })
    }

    /// The end of every create: the new object goes into its table (torn down again and the
    /// request failed with the table's status when it is refused), then the output gets the
    /// new id, the verbs' `verb_info` and whatever `write` adds, and the request completes
    /// with the whole output.
    pub fn publish<T: Object<P, V>>(
        &self,
        mut req: P::Request,
        obj: KArc<T>,
        verb_info: u32,
        write: impl FnOnce(&mut [u8]),
    ) {
        let new_id = match self.insert_or_teardown(obj) {
            Ok(new_id) => new_id,
            Err(status) => return req.complete(status, 0),
        };
        let buf = req.buffer_mut();
        write_id(buf, new_id).ok();
        write_verb_info(buf, verb_info).ok();
        write(buf);
        let len = req.output_len();
        req.complete(NtStatus::SUCCESS, len);
    }

    /// [`Provider::insert`] for an endpoint (which lives on no device).
    pub fn insert_ep(&self, ep: KArc<EpObj<P, V>>) -> Result<u64, (KArc<EpObj<P, V>>, NtStatus)> {
        self.insert_in(ep, |t| &mut t.eps)
    }

    fn insert_in<T>(
        &self,
        obj: KArc<T>,
        table: fn(&mut Tables<P, V>) -> &mut IdTable<KArc<T>>,
    ) -> Result<u64, (KArc<T>, NtStatus)> {
        let mut obj = obj;
        loop {
            let want = match table(&mut self.tables.lock()).insert(obj) {
                Insert::Done(id) => return Ok(id),
                Insert::Full(back) => return Err((back, NtStatus::NO_MEMORY)),
                Insert::Grow(back, want) => {
                    obj = back;
                    want
                }
            };
            let spare = match Spare::new(want) {
                Ok(spare) => spare,
                Err(e) => return Err((obj, e.into())),
            };
            let leftover = table(&mut self.tables.lock()).adopt(spare);
            drop(leftover);
        }
    }

    /// OFW's destroy IOCTLs: `not_found` for an unknown id, `STATUS_ACCESS_DENIED` while the
    /// object has children or users (unless `force`, used by cleanup once nothing can use the
    /// file any more), otherwise the object leaves its table and is torn down.
    ///
    /// Device removal and destroy are serialised by the device gate: a destroy either holds a
    /// share of it for the whole teardown (removal waits), or finds it closed and waits until
    /// removal has destroyed the verbs handles, then only does the bookkeeping.
    pub fn destroy<T: Object<P, V>>(&self, id: u64, not_found: NtStatus, force: bool) -> NtStatus {
        let (obj, gated) = {
            let mut tables = self.tables.lock();
            let Some(obj) = T::table(&mut tables).get(id).cloned() else {
                return not_found;
            };
            let dev = KArc::clone(T::device(&obj));
            if dev.gate.enter() {
                if obj.refs().is_held() && !force {
                    drop(tables);
                    dev.gate.leave();
                    return NtStatus::ACCESS_DENIED;
                }
                T::table(&mut tables).remove(id);
                (obj, Some(dev))
            } else {
                drop(tables);
                // Removal is destroying this device's handles right now: let it finish.
                dev.removed.wait();
                let mut tables = self.tables.lock();
                match T::table(&mut tables).get(id) {
                    Some(current) if KArc::ptr_eq(current, &obj) => {}
                    _ => return not_found,
                }
                if obj.refs().is_held() && !force {
                    return NtStatus::ACCESS_DENIED;
                }
                T::table(&mut tables).remove(id);
                (obj, None)
            }
        };
        T::teardown(obj, &self.shared);
        if let Some(dev) = gated {
            dev.gate.leave();
        }
        NtStatus::SUCCESS
    }

    /// A destroy IOCTL (DEVICE_CLOSE, PD_DEALLOCATE, …, QP_DESTROY): [`Self::destroy`] without
    /// `force`, the request completed with its status.
    pub fn destroy_ioctl<T: Object<P, V>>(&self, req: P::Request, id: u64, not_found: NtStatus) {
        req.complete(self.destroy::<T>(id, not_found, false), 0);
    }

    /// `IRP_MJ_CLEANUP`: refuses new IOCTLs, waits for those in flight, then destroys every
    /// object in OFW's order (EP, AH, MW, QP, SRQ, PD, CQ, device), which ends every parked
    /// request (`STATUS_CANCELLED`) and waits for running QP modifies. Runs once.
    pub fn cleanup(&self) {
        if !self.gate.close() {
            return;
        }
        self.gate.wait_drained();
        self.cleanup_eps();
        self.destroy_all::<AhObj<P, V>>();
        self.destroy_all::<MwObj<P, V>>();
        self.destroy_all::<QpObj<P, V>>();
        self.destroy_all::<SrqObj<P, V>>();
        self.destroy_all::<PdObj<P, V>>();
        self.destroy_all::<CqObj<P, V>>();
        self.destroy_all::<DeviceObj<P, V>>();
    }

    fn destroy_all<T: Object<P, V>>(&self) {
        // One id at a time: cleanup cannot fail, so it allocates nothing.
        let mut at = 0;
        loop {
            let next = T::table(&mut self.tables.lock())
                .next_after(at)
                .map(|(id, _)| id);
            let Some(id) = next else { break };
            at = id;
            // Children went first and nothing else can hold a reference: force only guards
            // against leaking an object if that reasoning were ever wrong.
            let status = self.destroy::<T>(id, NtStatus::NOT_FOUND, true);
            debug_assert_eq!(status, NtStatus::SUCCESS);
        }
    }
}
