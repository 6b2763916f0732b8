//! The link between soft HCAs in one process: routing by GID or LID, in-order delivery, and an
//! optional fault-injection mode with a seeded generator that drops, delays or corrupts packets.
//!
//! Delivery is a call in the sender's thread, so the link is ordered and lossless by default.
//! A message travels as packets of the path MTU, each with its PSN. Faults are decided per
//! packet before it has any effect, either scripted ([`Fabric::script`]: the fates of the next
//! packets, in order) or drawn from the seeded generator:
//! * dropped: the packet never arrives;
//! * corrupted: it arrives with a bad ICRC and the receiver discards it (so, like a drop, but
//!   counted apart);
//! * delayed: it arrives after the requester's retransmission timer fired: the responder
//!   executes it but the acknowledgement comes too late, so the requester retransmits and the
//!   responder must recognise the duplicate by its PSN.
//!
//! A lost packet is noticed the way InfiniBand notices it: the next packet arrives out of
//! sequence and the responder answers with a sequence-error NAK (the requester resends from
//! the lost packet at once), or, when nothing follows, the requester's local ACK timer
//! expires (on the platform's clock) and it resends from the oldest unacknowledged packet.

use alloc::collections::VecDeque;
use alloc::sync::{Arc, Weak};
use alloc::vec::Vec;
use core::sync::atomic::{AtomicBool, AtomicU16, AtomicU64, Ordering};

use crate::lock::{Mutex, RwLock};
use wv_hal::{DeviceModelPlatform, Gid};

use crate::device::Device;
use crate::verbs_impl::SoftHca;

/// Fault injection settings: probabilities in parts per million of each packet.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FaultConfig {
    /// Seed of the generator (the same seed gives the same faults for the same traffic).
    pub seed: u64,
    /// Dropped packets.
    pub drop_ppm: u32,
    /// Corrupted packets.
    pub corrupt_ppm: u32,
    /// Delayed packets.
    pub delay_ppm: u32,
}

/// What the link does with a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PacketFate {
    /// Arrives intact and in time.
    Deliver,
    /// Never arrives.
    Drop,
    /// Arrives with a bad ICRC: discarded by the receiver.
    Corrupt,
    /// Arrives, but its response (ACK, read or atomic response) comes after the requester's
    /// timer: the responder acts on it, the requester resends.
    Delay,
}

pub(crate) use PacketFate as Fate;

/// Packet counters of the link.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinkStats {
    /// Packets delivered intact and in time.
    pub delivered: u64,
    /// Packets dropped.
    pub dropped: u64,
    /// Packets corrupted (discarded by the receiver).
    pub corrupted: u64,
    /// Packets delayed past the retransmission timer.
    pub delayed: u64,
}

struct Faults {
    cfg: FaultConfig,
    state: u64,
}

impl Faults {
    fn next(&mut self) -> u32 {
        // xorshift64*: small, seeded, reproducible.
        let mut x = self.state;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.state = x;
        (x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 32) as u32 % 1_000_000
    }
}

/// Several soft HCAs joined by one in-process link.
pub struct Fabric {
    devices: RwLock<Vec<Weak<Device>>>,
    next_lid: AtomicU16,
    faults: Mutex<Option<Faults>>,
    /// Fates of the next packets, before the generator's.
    script: Mutex<VecDeque<Fate>>,
    /// Whether `faults` is set or `script` is not empty: the lossless fast path does not take
    /// the locks.
    faulty: AtomicBool,
    delivered: AtomicU64,
    dropped: AtomicU64,
    corrupted: AtomicU64,
    delayed: AtomicU64,
    /// The connection manager's listens: the host's, so a listen takes requests arriving at
    /// any device of the fabric.
    pub(crate) cm_listens: Mutex<crate::cm::Listens>,
    /// IP addresses of the devices' ports and the port space.
    pub(crate) addresses: Mutex<crate::address::AddressBook>,
}

impl core::fmt::Debug for Fabric {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Fabric")
            .field("stats", &self.stats())
            .finish()
    }
}

impl Fabric {
    /// An empty, lossless fabric.
    #[allow(
        clippy::disallowed_methods,
        reason = "set up with the devices (the test bench's wiring), not on a request path"
    )]
    pub fn new() -> Arc<Fabric> {
        Arc::new(Fabric {
            devices: RwLock::new(Vec::new()),
            next_lid: AtomicU16::new(1),
            faults: Mutex::new(None),
            script: Mutex::new(VecDeque::new()),
            faulty: AtomicBool::new(false),
            delivered: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            corrupted: AtomicU64::new(0),
            delayed: AtomicU64::new(0),
            cm_listens: Mutex::new(crate::cm::Listens::new()),
            addresses: Mutex::new(crate::address::AddressBook::new()),
        })
    }

    /// Connects a soft HCA to the fabric and gives each of its ports a LID.
    pub fn attach<P: DeviceModelPlatform>(self: &Arc<Self>, hca: &SoftHca<P>) {
        let dev = hca.device();
        if dev.fabric.get().is_some() {
            // A device joins one fabric, once.
            return;
        }
        dev.fabric.call_once(|| self.clone());
        for (i, p) in dev.ports.write().iter_mut().enumerate() {
            p.lid = self.next_lid.fetch_add(1, Ordering::Relaxed);
            dev.port_lid[i].store(p.lid, Ordering::Release);
        }
        self.devices.write().push(Arc::downgrade(dev));
    }

    /// Turns fault injection on (`Some`) or off (`None`).
    pub fn set_faults(&self, cfg: Option<FaultConfig>) {
        let mut f = self.faults.lock();
        *f = cfg.map(|cfg| Faults {
            cfg,
            state: cfg.seed | 1,
        });
        let scripted = !self.script.lock().is_empty();
        self.faulty
            .store(f.is_some() || scripted, Ordering::Release);
    }

    /// Scripts the fates of the next packets the devices of the fabric send, in the order
    /// they are sent (data packets, a device's loopback packets included; responses share
    /// their request's fate): a deterministic
    /// way to lose exactly the packet a test wants lost. Appends to what is still scripted;
    /// once the script is used up, the generator of [`Fabric::set_faults`] (if any) decides.
    pub fn script(&self, fates: &[PacketFate]) {
        let _f = self.faults.lock();
        let mut s = self.script.lock();
        s.extend(fates.iter().copied());
        self.faulty.store(true, Ordering::Release);
    }

    /// The link's counters.
    pub fn stats(&self) -> LinkStats {
        // Lossless deliveries are counted by each sending QP (in its send context, which only
        // its runner writes) and, once it is destroyed, by its device.
        let devices: Vec<Arc<Device>> = self
            .devices
            .read()
            .iter()
            .filter_map(Weak::upgrade)
            .collect();
        let lossless: u64 = devices
            .iter()
            .map(|d| {
                let mut n = d.tx_delivered.load(Ordering::Relaxed);
                d.qps.for_each(|q| n += q.sq_ctx.lock().ctx.delivered);
                n
            })
            .sum();
        LinkStats {
            delivered: self.delivered.load(Ordering::Relaxed) + lossless,
            dropped: self.dropped.load(Ordering::Relaxed),
            corrupted: self.corrupted.load(Ordering::Relaxed),
            delayed: self.delayed.load(Ordering::Relaxed),
        }
    }

    pub(crate) fn find(&self, grh: bool, gid: &Gid, lid: u16) -> Option<Arc<Device>> {
        let devs = self.devices.read();
        devs.iter()
            .filter_map(Weak::upgrade)
            .find(|d| !d.is_removed() && d.owns(grh, gid, lid))
    }

    /// Calls `f` for every live device on the fabric.
    pub(crate) fn for_each(&self, mut f: impl FnMut(&Arc<Device>)) {
        for d in self.devices.read().iter().filter_map(Weak::upgrade) {
            if !d.is_removed() {
                f(&d);
            }
        }
    }

    /// Decides the fate of one packet a device sends outside any QP (a CM MAD), counted in the
    /// device's own counter.
    pub(crate) fn fate_of_device_packet(&self, from: &Device) -> Fate {
        let mut delivered = 0;
        let fate = self.fate_from(&mut delivered);
        from.tx_delivered.fetch_add(delivered, Ordering::Relaxed);
        fate
    }

    /// Decides the fate of one packet of a sender whose lossless count is `delivered`.
    pub(crate) fn fate_from(&self, delivered: &mut u64) -> Fate {
        match self.fates_from(delivered, 1) {
            (1, _) => Fate::Deliver,
            (_, fate) => fate.unwrap_or(Fate::Drop),
        }
    }

    /// Decides the fates of up to `n` consecutive packets of a sender: how many in a row are
    /// delivered, and the fate of the next one when it is not (the packets after it are not
    /// decided yet). On a lossless link the sender counts them itself, in `delivered` (its
    /// send context's count: no shared counter on the fast path).
    #[inline]
    pub(crate) fn fates_from(&self, delivered: &mut u64, n: u32) -> (u32, Option<Fate>) {
        if !self.faulty.load(Ordering::Acquire) {
            *delivered += u64::from(n);
            return (n, None);
        }
        self.fates_drawn(n)
    }

    /// `fates_from` on a link with faults or a script: each packet's fate drawn in turn. Out of
    /// line and cold, so the lossless check above is all the data path carries.
    #[cold]
    fn fates_drawn(&self, n: u32) -> (u32, Option<Fate>) {
        for i in 0..n {
            let f = self.fate();
            if f != Fate::Deliver {
                return (i, Some(f));
            }
        }
        (n, None)
    }

    fn fate(&self) -> Fate {
        let fate = {
            let mut f = self.faults.lock();
            let scripted = {
                let mut s = self.script.lock();
                let next = s.pop_front();
                if s.is_empty() && f.is_none() {
                    self.faulty.store(false, Ordering::Release);
                }
                next
            };
            match (scripted, f.as_mut()) {
                (Some(fate), _) => fate,
                (None, None) => Fate::Deliver,
                (None, Some(f)) => {
                    let r = f.next();
                    let c = f.cfg;
                    if r < c.drop_ppm {
                        Fate::Drop
                    } else if r < c.drop_ppm.saturating_add(c.corrupt_ppm) {
                        Fate::Corrupt
                    } else if r < c
                        .drop_ppm
                        .saturating_add(c.corrupt_ppm)
                        .saturating_add(c.delay_ppm)
                    {
                        Fate::Delay
                    } else {
                        Fate::Deliver
                    }
                }
            }
        };
        let counter = match fate {
            Fate::Deliver => &self.delivered,
            Fate::Drop => &self.dropped,
            Fate::Corrupt => &self.corrupted,
            Fate::Delay => &self.delayed,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        fate
    }
}
