//! The device model under the verbs: the identity a MAC gives the device (its EUI-64 as node
//! GUID and link-local GID), the GID index an address handle's source GID has, the CQ-notify
//! ring's room, the tables' reused handles (a region or QP made in a freed place is the one
//! its key or number names), and the device's conduct towards its platform: interrupts only
//! for latched causes, several command slots holding their latencies at once, and a command
//! that finds every slot taken re-checking every tenth of the command latency.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use crate::common::*;
use wv_hal::*;
use wv_host::HostPlatform;
use wv_softhca::abi::{self, AhResp};
use wv_softhca::device::eui64;
use wv_softhca::*;

#[test]
fn the_node_guid_and_gid_0_are_the_macs_modified_eui64() {
    // RFC 4291 appendix A: the MAC's halves around FF:FE, the universal/local bit inverted.
    assert_eq!(
        eui64([0x00, 0x15, 0x5D, 0x01, 0x02, 0x03]),
        [0x02, 0x15, 0x5D, 0xFF, 0xFE, 0x01, 0x02, 0x03]
    );
    let mac = [0x02, 0x00, 0x00, 0xAB, 0xCD, 0xEF];
    let interface = [0x00, 0x00, 0x00, 0xFF, 0xFE, 0xAB, 0xCD, 0xEF];
    assert_eq!(eui64(mac), interface);

    let p = HostPlatform::deterministic();
    let node = Node::new(&p, DeviceConfig::new("eui", mac));
    // GID 0: fe80::/64 and the interface id.
    let gid = node.hca.query_gid(1, 0).unwrap();
    assert_eq!(gid[..8], [0xFE, 0x80, 0, 0, 0, 0, 0, 0]);
    assert_eq!(gid[8..], interface);
    assert_eq!(node.hca.gid(), gid);
    // The node GUID in network order, as `ib_ca_attr_t` carries it.
    let ca = node.hca.query_ca().unwrap();
    assert_eq!(ca.node_guid.to_ne_bytes(), interface);
    assert_eq!(node.hca.guid(), ca.node_guid);
    settle(&p);
}

#[test]
fn an_address_handle_reports_the_index_of_its_source_gid() {
    let (p, _f, a, b) = deterministic_pair();
    let first = a.hca.add_ipv4_gid(1, [10, 0, 0, 1]).unwrap();
    let second = a.hca.add_ipv4_gid(1, [10, 0, 0, 2]).unwrap();
    assert_ne!(first, second);
    let sgid_index = |sgid: Gid| {
        let av = AddressVector {
            grh_valid: true,
            sgid,
            dgid: b.hca.gid(),
            hop_limit: 1,
            port: 1,
            ..AddressVector::default()
        };
        let mut out = [0u8; 64];
        let ah = a
            .hca
            .create_ah(&a.pd, &av, &mut Umv::new(0, 0, 64, &mut out))?;
        a.hca.destroy_ah(ah);
        Ok::<u32, VerbsError>(abi::parse::<AhResp>(&out).unwrap().sgid_index)
    };
    for index in [0, first, second] {
        let gid = a.hca.query_gid(1, index).unwrap();
        assert_eq!(sgid_index(gid), Ok(index), "GID {index}");
    }
    // A zero SGID is GID 0; a GID the port does not have is refused.
    assert_eq!(sgid_index([0; 16]), Ok(0));
    assert_eq!(sgid_index([7; 16]), Err(VerbsError::InvalidParameter));
    settle(&p);
}

#[test]
fn a_cq_gets_its_event_while_a_destroyed_cqs_notification_is_still_queued() {
    // Two CQs at most; the CQ-notify ring is drained only when the DPC runs.
    let (p, _fabric, a, b) = deterministic_configured_pair("two cqs", |c| c.limits.max_cq = 2);
    let (_cb, qb) = qp_up(&b, QpType::Ud, 16, [0; 16], 0, Conn::default());
    let m = a.mem(64, ALL_ACCESS);
    let to = ud_to(b.hca.gid(), qb.uvp.qpn());
    let armed_sender = || {
        let (cq, qp) = qp_up(&a, QpType::Ud, 4, [0; 16], 0, Conn::default());
        assert!(!cq.uvp.arm(false), "nothing waits yet");
        (cq, qp)
    };
    // A CQ's notification is queued, then the CQ goes before the DPC takes it.
    let (c1, q1) = armed_sender();
    ud_send(&q1, 1, m.sge(0, 8), to);
    a.hca.destroy_qp(q1.soft);
    a.hca.destroy_cq(c1.soft);
    // Both CQs the limit allows complete meanwhile.
    let (c2, q2) = armed_sender();
    let (c3, q3) = armed_sender();
    ud_send(&q2, 2, m.sge(0, 8), to);
    ud_send(&q3, 3, m.sge(0, 8), to);
    p.run_until_idle();
    assert!(c2.sink.completions() >= 1, "the second CQ's event");
    assert!(c3.sink.completions() >= 1, "the third CQ's event");
    assert_eq!(a.hca.async_overflows(), 0);
    settle(&p);
}

#[test]
fn a_region_registered_in_a_freed_place_is_the_one_its_key_names() {
    let (p, _f, a, b, ca, cb, qa, qb) = deterministic_rc_pair();
    let m = a.mem_holding(64, b"one two");
    let old = b.mem(64, ALL_ACCESS);
    post_recv(&qb, 1, old.sge(0, 64));
    post_send(&qa, 1, m.sge(0, 3));
    assert_eq!(poll_all(&cb)[0].status, WcStatus::Success);
    assert_eq!(&old.buf.to_vec()[..3], b"one");
    // The region goes and another one takes its handle, and so its key.
    let old_key = old.lkey;
    b.hca.deregister_mr(old.mr).map_err(|(_, e)| e).unwrap();
    let new = b.mem(64, ALL_ACCESS);
    assert_eq!(new.lkey, old_key, "the freed handle is reused");
    post_recv(&qb, 2, new.sge(0, 64));
    post_send(&qa, 2, m.sge(4, 3));
    let wcs = poll_all(&cb);
    assert_eq!((wcs[0].wr_id, wcs[0].status), (2, WcStatus::Success));
    assert_eq!(&new.buf.to_vec()[..3], b"two");
    assert_eq!(
        &old.buf.to_vec()[..3],
        b"one",
        "the old buffer is not the target"
    );
    assert!(poll_all(&ca).iter().all(|w| w.status == WcStatus::Success));
    settle(&p);
}

#[test]
fn a_qp_created_in_a_freed_place_is_the_one_its_number_names() {
    let (p, _f, a, b) = deterministic_pair();
    let (ca, qa) = qp_up(&a, QpType::Ud, 16, [0; 16], 0, Conn::default());
    let cb = b.cq(16);
    let (m, rb) = mems(&a, 64, &b, 256);
    let receiver = |id: u64| {
        let q = b.qp(QpType::Ud, &cb);
        bring_up(&b, &q, [0; 16], 0, Conn::default());
        post_recv(&q, id, rb.sge(0, 256));
        q
    };
    let old = receiver(10);
    let qpn = old.uvp.qpn();
    ud_send(&qa, 1, m.sge(0, 8), ud_to(b.hca.gid(), qpn));
    assert_eq!(poll_all(&cb)[0].wr_id, 10);
    // The QP goes and another one gets its number: datagrams to that number reach it.
    b.hca.destroy_qp(old.soft);
    let new = receiver(20);
    assert_eq!(new.uvp.qpn(), qpn, "the freed handle is reused");
    ud_send(&qa, 2, m.sge(0, 8), ud_to(b.hca.gid(), qpn));
    let wcs = poll_all(&cb);
    assert_eq!(wcs.len(), 1, "{wcs:?}");
    assert_eq!((wcs[0].wr_id, wcs[0].status), (20, WcStatus::Success));
    assert!(poll_all(&ca).iter().all(|w| w.status == WcStatus::Success));
    settle(&p);
}

/// What a device did to its platform.
#[derive(Default)]
struct Seen {
    /// `delay` calls, in order.
    delays: Vec<u64>,
    /// Hold the next `delay` until another one comes.
    hold_next: bool,
    holding: bool,
    /// Delays of at least `gather_ns` wait until `gather` of them are under way at once
    /// (bounded, as a held delay is), so commands that may overlap do, however the machine
    /// schedules their threads.
    gather: usize,
    gather_ns: u64,
    gathered: bool,
    under_way: usize,
    /// The most delays of at least `gather_ns` that were under way at once.
    most_under_way: usize,
}

/// The host platform, recording the device's delays and its interrupts' outcome.
struct Recording {
    host: HostPlatform,
    seen: Mutex<Seen>,
    changed: Condvar,
    unclaimed: AtomicUsize,
}

impl Recording {
    fn new(host: &HostPlatform) -> Arc<Recording> {
        Arc::new(Recording {
            host: host.clone(),
            seen: Mutex::new(Seen::default()),
            changed: Condvar::new(),
            unclaimed: AtomicUsize::new(0),
        })
    }
    fn take_delays(&self) -> Vec<u64> {
        std::mem::take(&mut self.seen.lock().unwrap().delays)
    }
}

impl Platform for Recording {
    type Request = <HostPlatform as Platform>::Request;
    type Queue = <HostPlatform as Platform>::Queue;
    type SpinLock<T: Send> = <HostPlatform as Platform>::SpinLock<T>;
    type Event = <HostPlatform as Platform>::Event;
    fn create_queue(&self) -> Result<Self::Queue, NtStatus> {
        self.host.create_queue()
    }
    fn spin_lock<T: Send>(&self, value: T) -> Self::SpinLock<T> {
        self.host.spin_lock(value)
    }
    fn event(&self) -> Result<Self::Event, NtStatus> {
        self.host.event()
    }
    fn queue_work(&self, work: KArc<dyn WorkItem>) -> Result<(), NtStatus> {
        self.host.queue_work(work)
    }
    fn irql(&self) -> Irql {
        self.host.irql()
    }
    fn paged_code(&self) {
        self.host.paged_code()
    }
    fn now_ns(&self) -> u64 {
        self.host.now_ns()
    }
}

impl DeviceModelPlatform for Recording {
    fn queue_dpc(&self, dpc: &KArc<dyn Dpc>) -> bool {
        self.host.queue_dpc(dpc)
    }
    fn interrupt(&self, isr: &dyn InterruptService) -> bool {
        let serviced = self.host.interrupt(isr);
        if !serviced {
            self.unclaimed.fetch_add(1, Ordering::SeqCst);
        }
        serviced
    }
    fn set_timer(&self, timer: &KArc<dyn Dpc>, due_ns: u64) {
        self.host.set_timer(timer, due_ns)
    }
    fn cancel_timer(&self, timer: &KArc<dyn Dpc>) -> bool {
        self.host.cancel_timer(timer)
    }
    /// Returns at once (the deterministic host's clock does not move), except that a held
    /// delay waits until the next one is made (bounded, so a device that never makes one
    /// fails the test instead of hanging it).
    fn delay(&self, ns: u64) {
        let mut seen = self.seen.lock().unwrap();
        seen.delays.push(ns);
        self.changed.notify_all();
        if seen.gather > 0 && ns >= seen.gather_ns {
            seen.under_way += 1;
            seen.most_under_way = seen.most_under_way.max(seen.under_way);
            seen.gathered |= seen.under_way >= seen.gather;
            self.changed.notify_all();
            let (mut seen, _) = self
                .changed
                .wait_timeout_while(seen, Duration::from_secs(3), |s| !s.gathered)
                .unwrap();
            seen.under_way -= 1;
            return;
        }
        if std::mem::take(&mut seen.hold_next) {
            seen.holding = true;
            let n = seen.delays.len();
            self.changed.notify_all();
            let (mut seen, _) = self
                .changed
                .wait_timeout_while(seen, Duration::from_secs(2), |s| s.delays.len() == n)
                .unwrap();
            seen.holding = false;
        }
    }
}

/// A soft HCA on `platform` with `config`, opened once.
fn open(
    platform: &Arc<Recording>,
    config: DeviceConfig,
) -> (Arc<SoftHca<Recording>>, SoftCa, BufferPool) {
    let pool = BufferPool::new();
    let hca = SoftHca::new(platform.clone(), config, ClientMemory::pool(pool.clone()));
    let (ca, _events, _out) = open_ca_logged(&*hca);
    (hca, ca, pool)
}

#[test]
fn a_command_that_finds_every_slot_taken_rechecks_every_tenth_of_the_latency() {
    const LATENCY: u64 = 50_000;
    let p = HostPlatform::deterministic();
    let rec = Recording::new(&p);
    let mut config = DeviceConfig::new("one slot", mac());
    config.command_latency_ns = LATENCY;
    config.command_slots = 1;
    let (hca, ca, _pool) = open(&rec, config);
    rec.take_delays();
    rec.seen.lock().unwrap().hold_next = true;
    std::thread::scope(|s| {
        // The first command holds the slot through its latency…
        let first = s.spawn(|| hca.allocate_pd(&ca, &mut Umv::none()).unwrap());
        drop(
            rec.changed
                .wait_while(rec.seen.lock().unwrap(), |s| !s.holding)
                .unwrap(),
        );
        // …while the second one waits for it.
        let second = s.spawn(|| hca.allocate_pd(&ca, &mut Umv::none()).unwrap());
        first.join().unwrap();
        second.join().unwrap();
    });
    let delays = rec.take_delays();
    // Each command's latency, and between them the second one's waits for the slot.
    assert_eq!(delays.first(), Some(&LATENCY), "{delays:?}");
    assert_eq!(delays.last(), Some(&LATENCY), "{delays:?}");
    let waits = &delays[1..delays.len() - 1];
    assert!(!waits.is_empty(), "the second command waited: {delays:?}");
    assert!(waits.iter().all(|&w| w == LATENCY / 10), "{delays:?}");
    settle(&p);
}

/// `callers` threads each allocate a PD at once on a device with `slots` command slots, each
/// command's latency waiting (up to 3 s) for `callers` latencies to be under way together;
/// returns the most that were.
fn latencies_under_way_at_once(slots: u32, callers: usize) -> usize {
    const LATENCY: u64 = 50_000;
    let p = HostPlatform::deterministic();
    let rec = Recording::new(&p);
    let mut config = DeviceConfig::new("slots", mac());
    config.command_latency_ns = LATENCY;
    config.command_slots = slots;
    let (hca, ca, _pool) = open(&rec, config);
    {
        let mut seen = rec.seen.lock().unwrap();
        (seen.gather, seen.gather_ns) = (callers, LATENCY);
    }
    std::thread::scope(|s| {
        let calls: Vec<_> = (0..callers)
            .map(|_| s.spawn(|| hca.allocate_pd(&ca, &mut Umv::none()).unwrap()))
            .collect();
        calls.into_iter().for_each(|c| drop(c.join().unwrap()));
    });
    let most = rec.seen.lock().unwrap().most_under_way;
    settle(&p);
    most
}

#[test]
fn several_slots_hold_their_commands_latencies_at_once() {
    // Three slots: three callers' latencies elapse together (the firmware works on all three).
    // (That fewer slots hold the others back is `one_slot_serialises_the_callers`.)
    assert_eq!(latencies_under_way_at_once(3, 3), 3);
}

#[test]
fn the_device_raises_only_the_vectors_whose_cause_is_latched() {
    let p = HostPlatform::deterministic();
    let rec = Recording::new(&p);
    let (hca, ca, _pool) = open(&rec, DeviceConfig::new("lines", mac()));
    // Commands (the response vector) and port events (the async vector).
    let pd = hca.allocate_pd(&ca, &mut Umv::none()).unwrap();
    hca.set_port_state(1, false).unwrap();
    hca.set_port_state(1, true).unwrap();
    hca.deallocate_pd(pd);
    p.run_until_idle();
    assert_eq!(
        rec.unclaimed.load(Ordering::SeqCst),
        0,
        "an interrupt its ISR found no cause for"
    );
    settle(&p);
}
