//! Opened devices (OFW `WV_DEVICE`): DEVICE_OPEN/CLOSE/QUERY, port/GID/pkey queries, port event
//! notification, and device removal.

use alloc::vec::Vec;
use core::mem::size_of;

use wv_abi::encode::{write_array, write_at, write_id, write_prefix, write_verb_info};
use wv_abi::{
    NtStatus, Vendor, WV_IO_DEVICE_PORT_QUERY, WV_IO_GID, WV_IO_ID, WV_IO_PORT_ATTRIBUTES,
    read_prefix,
};
use wv_hal::{
    CaEvent, CaEventKind, CaEventSink, Event, IoRequest, KArc, KWeak, Platform, PortAttributes,
    RequestQueue, SpinLock, Verbs, VerbsError,
};

use crate::convert::{device_attr_to_abi, port_attr_to_abi, port_event_flag};
use crate::cq::CqObj;
use crate::fallible::{grow_locked, push_locked, vec_with_capacity};
use crate::notify::complete_all;
use crate::pd::{AhObj, MwObj, PdObj};
use crate::provider::{Held, Object, Provider, Teardown};
use crate::qp::QpObj;
use crate::rdma_device::RdmaDevice;
use crate::shared::Shared;
use crate::srq::SrqObj;
use crate::status::REMOVED;
use crate::sync::{Gate, Handle, RefCount};
use crate::umv::with_umv;

/// One port's notification state (OFW `WV_PORT`).
pub(crate) struct Port<P: Platform> {
    /// Parked DEVICE_NOTIFYs.
    queue: P::Queue,
    /// Events that arrived while nobody waited; they accumulate until the next DEVICE_NOTIFY.
    /// The lock also makes "flags are 0, so park" atomic against "set flags, then complete
    /// whoever is parked".
    flags: P::SpinLock<u32>,
}

/// The ports of an opened device; shared with the device's event sink.
pub(crate) struct Ports<P: Platform> {
    ports: Vec<Port<P>>,
}

impl<P: Platform> Ports<P> {
    /// Adds `event` to the port's flags and completes every parked DEVICE_NOTIFY with the
    /// accumulated flags (`Information = 4`); the flags clear only if someone was waiting
    /// (OFW `WvDeviceCompleteRequests`). IRQL <= DISPATCH_LEVEL.
    ///
    /// The requests are completed with the port lock held, as OFW completes them under the
    /// queue's lock: that keeps "flags are 0, so park" atomic against "set the flags, then
    /// complete whoever is parked" without a list of taken requests (which would allocate in
    /// the DPC). Completion is legal at DISPATCH_LEVEL and calls nothing back into the driver.
    fn signal(&self, index: usize, status: NtStatus, event: u32) {
        let port = &self.ports[index];
        let mut flags = port.flags.lock();
        *flags |= event;
        let value = *flags;
        let mut woken = false;
        while let Some(mut request) = port.queue.retrieve_next() {
            woken = true;
            write_at(request.buffer_mut(), 0, &value).ok();
            request.complete(status, size_of::<u32>());
        }
        if woken {
            *flags = 0;
        }
    }

    fn purge(&self) {
        for port in &self.ports {
            port.queue.purge();
        }
    }

    fn fail_all(&self, status: NtStatus) {
        for port in &self.ports {
            complete_all::<P>(&port.queue, status);
        }
    }
}

/// Receives the lower device's asynchronous events at DISPATCH_LEVEL and completes the port
/// notifies directly (no thread hop).
struct PortSink<P: Platform> {
    ports: KArc<Ports<P>>,
}

impl<P: Platform> CaEventSink for PortSink<P> {
    fn on_event(&self, event: CaEvent) {
        let flag = port_event_flag(event.kind);
        if flag == 0 {
            return;
        }
        if event.kind == CaEventKind::LocalFatal {
            for index in 0..self.ports.ports.len() {
                self.ports.signal(index, NtStatus::SUCCESS, flag);
            }
        } else if let Some(index) = usize::from(event.port).checked_sub(1)
            && index < self.ports.ports.len()
        {
            // OFW only asserts the port number; an event for a port we do not know is dropped.
            self.ports.signal(index, NtStatus::SUCCESS, flag);
        }
    }
}

/// An opened device (OFW `WV_DEVICE`).
pub(crate) struct DeviceObj<P: Platform, V: Verbs> {
    pub rdma: KArc<RdmaDevice<P, V>>,
    /// The file it belongs to, so removal can find its children.
    pub provider: KWeak<Provider<P, V>>,
    pub ca: Handle<P, V::Ca>,
    /// Users of this device's verbs handles (every object of the device shares it); removal
    /// closes it and waits before destroying them (OFW's provider remove lock, per device).
    pub gate: Gate<P>,
    /// Set when removal has destroyed every verbs handle of the device.
    pub removed: P::Event,
    /// PDs, CQs and IOCTLs in flight.
    pub refs: RefCount,
    ports: KArc<Ports<P>>,
}

impl<P: Platform, V: Verbs> DeviceObj<P, V> {
    pub fn lower(&self) -> Option<KArc<V>> {
        self.rdma.lower()
    }

    /// 0-based index of a 1-based port number, if the device has it (OFW decrements the byte
    /// and compares unsigned, so port 0 is out of range too).
    fn port_index(&self, port: u32) -> Option<usize> {
        let index = usize::try_from(port.checked_sub(1)?).ok()?;
        (index < self.ports.ports.len()).then_some(index)
    }
}

impl<P: Platform, V: Verbs> Teardown<P, V> for DeviceObj<P, V> {
    fn teardown(this: KArc<Self>, _shared: &Shared<P, V>) {
        if let Some(ca) = this.ca.take()
            && let Some(lower) = this.lower()
        {
            lower.close_ca(ca);
        }
        // After close_ca no event callback runs, so nothing parks or signals any more.
        this.ports.purge();
        let me = KArc::as_ptr(&this);
        this.rdma
            .opens
            .lock()
            .retain(|d| d.as_ptr() != me && d.strong_count() > 0);
    }
}

/// DEVICE_OPEN (OFW `WvDeviceOpen`).
pub(crate) fn device_open<P: Platform, V: Verbs>(
    prov: &KArc<Provider<P, V>>,
    mut req: P::Request,
    id: WV_IO_ID,
    vendor: Vendor,
) {
    let shared = &prov.shared;
    let Some(rdma) = shared.enter_device(id.Id) else {
        return req.complete(NtStatus::NO_SUCH_DEVICE, 0);
    };
    let status = open(prov, &mut req, &rdma, id, vendor);
    rdma.gate.leave();
    match status {
        Ok(()) => {
            let len = req.output_len();
            req.complete(NtStatus::SUCCESS, len);
        }
        Err(status) => req.complete(status, 0),
    }
}

fn open<P: Platform, V: Verbs>(
    prov: &KArc<Provider<P, V>>,
    req: &mut P::Request,
    rdma: &KArc<RdmaDevice<P, V>>,
    id: WV_IO_ID,
    vendor: Vendor,
) -> Result<(), NtStatus> {
    let platform = prov.platform();
    let lower = rdma.lower().ok_or(NtStatus::NO_SUCH_DEVICE)?;
    // Everything the device needs is allocated before the controller is called, so nothing
    // can fail after `open_ca` but the id table. OFW answers a failed device allocation with
    // STATUS_NO_MEMORY and anything that fails while initialising it (the port array and
    // queues, the verbs) with STATUS_UNSUCCESSFUL.
    let dev_slot = KArc::try_reserve()?;
    let ca_slot = KArc::try_reserve()?;
    let sink_slot = KArc::try_reserve()?;
    let gate = Gate::new(platform).map_err(|_| NtStatus::NO_MEMORY)?;
    let removed = platform.event().map_err(|_| NtStatus::NO_MEMORY)?;
    grow_locked(&rdma.opens, 1)?;
    // One notify queue per port. Every failure is reported (OFW §7.1-k: no queue, no device).
    let attr = lower.query_ca().map_err(|_| NtStatus::UNSUCCESSFUL)?;
    let mut ports =
        vec_with_capacity(usize::from(attr.port_count)).map_err(|_| NtStatus::UNSUCCESSFUL)?;
    for _ in 0..attr.port_count {
        let queue = platform
            .create_queue()
            .map_err(|_| NtStatus::UNSUCCESSFUL)?;
        ports.push(Port {
            queue,
            flags: platform.spin_lock(0),
        });
    }
    let ports = KArc::try_new(Ports { ports }).map_err(|_| NtStatus::UNSUCCESSFUL)?;
    let sink: KArc<dyn CaEventSink> = sink_slot
        .write(PortSink {
            ports: KArc::clone(&ports),
        })
        .into();
    let (ca, verb_info) = with_umv(req, &id, vendor, |umv| lower.open_ca(umv, sink));
    let Ok(ca) = ca else {
        ports.purge();
        return Err(NtStatus::UNSUCCESSFUL);
    };
    let dev = dev_slot.write(DeviceObj {
        rdma: KArc::clone(rdma),
        provider: KArc::downgrade(prov),
        ca: Handle::new(platform, ca_slot.write(ca)),
        gate,
        removed,
        refs: RefCount::default(),
        ports,
    });
    // Room was made above; another open may have taken it meanwhile.
    if let Err((_, e)) = push_locked(&rdma.opens, KArc::downgrade(&dev)) {
        DeviceObj::teardown(dev, &prov.shared);
        return Err(e.into());
    }
    // OFW §7.1-b: its id-table failure path kept the provider mutex; here no lock is held.
    let new_id = match prov.insert_or_teardown(dev) {
        Ok(new_id) => new_id,
        Err(status) => {
            #[cfg(feature = "fault-injection")]
            if prov.shared.faults().keep_lock_on_full_table {
                core::mem::forget(prov.tables.lock());
            }
            return Err(status);
        }
    };
    let buf = req.buffer_mut();
    write_id(buf, new_id).ok();
    write_verb_info(buf, verb_info).ok();
    Ok(())
}

/// DEVICE_QUERY. A failing `query_ca` is `STATUS_NO_MEMORY`, as in OFW (its query helper
/// returned NULL for both).
pub(crate) fn device_query<P: Platform, V: Verbs>(
    prov: &Provider<P, V>,
    mut req: P::Request,
    id: u64,
) {
    let Some(dev) = prov.acquire::<DeviceObj<P, V>>(id) else {
        return req.complete(NtStatus::NO_SUCH_DEVICE, 0);
    };
    let attr = dev.lower().map(|lower| lower.query_ca());
    drop(dev);
    match attr {
        Some(Ok(attr)) => {
            let info = write_prefix(req.buffer_mut(), &device_attr_to_abi(&attr)).unwrap_or(0);
            req.complete(NtStatus::SUCCESS, info);
        }
        _ => req.complete(NtStatus::NO_MEMORY, 0),
    }
}

/// The device (held, so removal waits for the caller's queries), its verbs interface and the
/// port of a port query, or the status to fail it with.
#[allow(clippy::type_complexity)]
fn port_of<P: Platform, V: Verbs>(
    prov: &Provider<P, V>,
    query: &WV_IO_DEVICE_PORT_QUERY,
) -> Result<(Held<P, V, DeviceObj<P, V>>, KArc<V>, u8), NtStatus> {
    let dev = prov
        .acquire::<DeviceObj<P, V>>(query.Id)
        .ok_or(NtStatus::NO_SUCH_DEVICE)?;
    dev.port_index(u32::from(query.PortNumber))
        .ok_or(NtStatus::INVALID_PORT_HANDLE)?;
    let lower = dev.lower().ok_or(NtStatus::NO_SUCH_DEVICE)?;
    Ok((dev, lower, query.PortNumber))
}

/// DEVICE_PORT_QUERY: `Information = 52`; the three tail padding bytes are left as they were.
pub(crate) fn port_query<P: Platform, V: Verbs>(
    prov: &Provider<P, V>,
    mut req: P::Request,
    query: WV_IO_DEVICE_PORT_QUERY,
) {
    let attr = port_of(prov, &query)
        .and_then(|(_dev, lower, port)| lower.query_port(port).map_err(|_| NtStatus::NO_MEMORY));
    match attr {
        Ok(attr) => {
            let buf = req.buffer_mut();
            let mut out: WV_IO_PORT_ATTRIBUTES = read_prefix(buf).unwrap_or_default();
            port_attr_to_abi(&mut out, &attr);
            let info = write_prefix(buf, &out).unwrap_or(0);
            req.complete(NtStatus::SUCCESS, info);
        }
        Err(status) => req.complete(status, 0),
    }
}

/// A port table DEVICE_GID_QUERY or DEVICE_PKEY_QUERY reads: its length in the port's
/// attributes and how one entry is read from the controller.
pub(crate) trait PortTable {
    type Entry: Copy;
    fn len(attr: &PortAttributes) -> usize;
    fn entry<V: Verbs>(lower: &V, port: u8, index: usize) -> Result<Self::Entry, VerbsError>;
    /// The entries into the output, as many as fit: `(status, bytes written)`.
    fn write(out: &mut [u8], entries: &[Self::Entry]) -> (NtStatus, usize);
}

/// DEVICE_GID_QUERY's table: the port's GIDs.
pub(crate) struct Gids;

impl PortTable for Gids {
    type Entry = WV_IO_GID;
    fn len(attr: &PortAttributes) -> usize {
        attr.gid_table_len as usize
    }
    fn entry<V: Verbs>(lower: &V, port: u8, index: usize) -> Result<WV_IO_GID, VerbsError> {
        let raw = lower.query_gid(port, index as u32)?;
        Ok(WV_IO_GID { Raw: raw })
    }
    fn write(out: &mut [u8], entries: &[WV_IO_GID]) -> (NtStatus, usize) {
        write_array(out, entries)
    }
}

/// DEVICE_PKEY_QUERY's table: the port's pkeys (NET16 as stored).
pub(crate) struct Pkeys;

impl PortTable for Pkeys {
    type Entry = u16;
    fn len(attr: &PortAttributes) -> usize {
        usize::from(attr.pkey_table_len)
    }
    fn entry<V: Verbs>(lower: &V, port: u8, index: usize) -> Result<u16, VerbsError> {
        lower.query_pkey(port, index as u16)
    }
    fn write(out: &mut [u8], entries: &[u16]) -> (NtStatus, usize) {
        write_array(out, entries)
    }
}

/// DEVICE_GID_QUERY and DEVICE_PKEY_QUERY: as many entries of table `T` as fit;
/// `STATUS_MORE_ENTRIES` when the table is longer.
pub(crate) fn port_table_query<P: Platform, V: Verbs, T: PortTable>(
    prov: &Provider<P, V>,
    req: P::Request,
    query: WV_IO_DEVICE_PORT_QUERY,
    output_len: usize,
) {
    let table = port_table(prov, &query, output_len, T::len, T::entry::<V>);
    complete_table(req, table, T::write);
}

/// A GID or pkey table: its first entries, as many as `output_len` bytes hold, each read by
/// `entry`, and the table's length (`table_len`); any verb failure is `STATUS_NO_MEMORY` (OFW).
fn port_table<P: Platform, V: Verbs, T>(
    prov: &Provider<P, V>,
    query: &WV_IO_DEVICE_PORT_QUERY,
    output_len: usize,
    table_len: impl FnOnce(&PortAttributes) -> usize,
    entry: impl Fn(&V, u8, usize) -> Result<T, VerbsError>,
) -> Result<(Vec<T>, usize), NtStatus> {
    port_of(prov, query).and_then(|(_dev, lower, port)| {
        let attr = lower.query_port(port).map_err(|_| NtStatus::NO_MEMORY)?;
        let len = table_len(&attr);
        let fit = (output_len / size_of::<T>()).min(len);
        let mut entries = vec_with_capacity(fit)?;
        for index in 0..fit {
            entries.push(entry(&lower, port, index).map_err(|_| NtStatus::NO_MEMORY)?);
        }
        Ok((entries, len))
    })
}

/// Completes a GID/pkey query: copies as many entries as fit, `Information` = bytes copied,
/// `STATUS_MORE_ENTRIES` (a success) when the table was longer than the output.
fn complete_table<R: IoRequest, T: Copy>(
    mut request: R,
    table: Result<(Vec<T>, usize), NtStatus>,
    write: impl Fn(&mut [u8], &[T]) -> (NtStatus, usize),
) {
    match table {
        Ok((items, total)) => {
            let (_, info) = write(request.buffer_mut(), &items);
            let status = if items.len() < total {
                NtStatus::MORE_ENTRIES
            } else {
                NtStatus::SUCCESS
            };
            request.complete(status, info);
        }
        Err(status) => request.complete(status, 0),
    }
}

/// DEVICE_NOTIFY: completes at once with the accumulated port flags if any, otherwise parks
/// until the next port event. Bad device id: `STATUS_NOT_FOUND` (not NO_SUCH_DEVICE, as in
/// OFW); bad port: `STATUS_INVALID_PORT_HANDLE`.
pub(crate) fn device_notify<P: Platform, V: Verbs>(
    prov: &Provider<P, V>,
    req: P::Request,
    id: WV_IO_ID,
) {
    let Some(dev) = prov.acquire::<DeviceObj<P, V>>(id.Id) else {
        return req.complete(NtStatus::NOT_FOUND, 0);
    };
    let Some(index) = dev.port_index(id.Data) else {
        return req.complete(NtStatus::INVALID_PORT_HANDLE, 0);
    };
    let port = &dev.ports.ports[index];
    let outcome = {
        let mut flags = port.flags.lock();
        if *flags != 0 {
            Notify::Ready(req, core::mem::take(&mut *flags))
        } else {
            // Parked under the flags lock, so an event cannot slip in between the check and
            // the park.
            match port.queue.park(req) {
                Ok(()) => Notify::Parked,
                Err((req, status)) => Notify::Refused(req, status),
            }
        }
    };
    drop(dev);
    match outcome {
        Notify::Parked => {}
        Notify::Ready(mut req, value) => {
            write_at(req.buffer_mut(), 0, &value).ok();
            req.complete(NtStatus::SUCCESS, size_of::<u32>());
        }
        Notify::Refused(req, status) => req.complete(status, 0),
    }
}

/// What DEVICE_NOTIFY did with its request under the port lock.
enum Notify<R> {
    Parked,
    Ready(R, u32),
    Refused(R, NtStatus),
}

/// DEVICE_CANCEL: every parked DEVICE_NOTIFY of every port completes with `STATUS_CANCELLED`
/// (`Information = 4`, the flags travel in the buffer but an error status is not copied back).
pub(crate) fn device_cancel<P: Platform, V: Verbs>(
    prov: &Provider<P, V>,
    req: P::Request,
    id: u64,
) {
    let Some(dev) = prov.acquire::<DeviceObj<P, V>>(id) else {
        return req.complete(NtStatus::NOT_FOUND, 0);
    };
    for index in 0..dev.ports.ports.len() {
        dev.ports.signal(index, NtStatus::CANCELLED, 0);
    }
    drop(dev);
    req.complete(NtStatus::SUCCESS, 0);
}

/// Lower-device removal of one opened device (fix of spec §7.1-e): waits for every user of
/// its handles, completes every request parked on it or its objects with
/// `STATUS_DEVICE_REMOVED`, destroys every verbs handle in OFW's order (MW, AH, MR, QP, SRQ, PD,
/// CQ, then the device itself) and marks it removed. The objects stay in their id tables:
/// later calls fail as OFW's `Acquire` would, destroys still succeed.
pub(crate) fn remove<P: Platform, V: Verbs>(dev: &KArc<DeviceObj<P, V>>, shared: &Shared<P, V>) {
    dev.gate.close();
    dev.gate.wait_drained();
    let prov = dev.provider.upgrade();
    let prov = prov.as_deref();
    dev.ports.fail_all(REMOVED);
    each_on_device::<P, V, CqObj<P, V>>(prov, dev, |cq| cq.fail_parked(REMOVED));
    each_on_device::<P, V, SrqObj<P, V>>(prov, dev, |srq| srq.fail_parked(REMOVED));
    each_on_device::<P, V, QpObj<P, V>>(prov, dev, |qp| qp.fail_parked(REMOVED));
    if let Some(lower) = dev.lower() {
        each_on_device::<P, V, MwObj<P, V>>(prov, dev, |mw| mw.destroy_handles(&lower));
        each_on_device::<P, V, AhObj<P, V>>(prov, dev, |ah| ah.destroy_handles(&lower));
        each_on_device::<P, V, PdObj<P, V>>(prov, dev, |pd| pd.deregister_all(&lower));
        each_on_device::<P, V, QpObj<P, V>>(prov, dev, |qp| qp.destroy_handles(&lower));
        each_on_device::<P, V, SrqObj<P, V>>(prov, dev, |srq| srq.destroy_handles(&lower));
        each_on_device::<P, V, PdObj<P, V>>(prov, dev, |pd| pd.destroy_handles(&lower));
        each_on_device::<P, V, CqObj<P, V>>(prov, dev, |cq| cq.destroy_handles(&lower, shared));
        if let Some(ca) = dev.ca.take() {
            lower.close_ca(ca);
        }
    }
    dev.removed.set();
}

/// Calls `f` on every object of type `T` that lives on the opened device `dev`, in id order,
/// one at a time with the provider lock released (removal cannot fail, so it builds no list;
/// the device gate is closed and drained, so no object of `dev` comes or goes meanwhile).
fn each_on_device<P: Platform, V: Verbs, T: Object<P, V>>(
    prov: Option<&Provider<P, V>>,
    dev: &KArc<DeviceObj<P, V>>,
    mut f: impl FnMut(&KArc<T>),
) {
    let Some(prov) = prov else { return };
    let mut at = 0;
    loop {
        let next = {
            let mut tables = prov.tables.lock();
            let table = T::table(&mut tables);
            let mut cursor = at;
            loop {
                match table.next_after(cursor) {
                    Some((id, obj)) if KArc::ptr_eq(T::device(obj), dev) => {
                        break Some((id, KArc::clone(obj)));
                    }
                    Some((id, _)) => cursor = id,
                    None => break None,
                }
            }
        };
        let Some((id, obj)) = next else { break };
        at = id;
        f(&obj);
    }
}
