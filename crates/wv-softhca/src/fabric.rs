//! The link between soft HCAs in one process: routing by GID or LID, in-order delivery, and an
//! optional fault-injection mode with a seeded generator that drops, delays or corrupts packets.
//!
//! Delivery is a call in the sender's thread, so the link is ordered and lossless by default.
//! Faults are decided per packet before it has any effect:
//! * dropped: the packet never arrives;
//! * corrupted: it arrives with a bad ICRC and the receiver discards it (so, like a drop, but
//!   counted apart);
//! * delayed: it arrives after the requester's retransmission timer fired: the responder
//!   executes it but the acknowledgement comes too late, so the requester retransmits and the
//!   responder must recognise the duplicate by its PSN.
//!
//! Timers elapse instantly: a retry happens at once in the sender's thread.

use alloc::sync::{Arc, Weak};
use alloc::vec::Vec;
use core::sync::atomic::{AtomicBool, AtomicU16, AtomicU64, Ordering};

use spin::{Mutex, RwLock};
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

/// What the link did with a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fate {
    Deliver,
    Drop,
    Corrupt,
    Delay,
}

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
    /// Whether `faults` is set: the lossless fast path does not take the lock.
    faulty: AtomicBool,
    delivered: AtomicU64,
    dropped: AtomicU64,
    corrupted: AtomicU64,
    delayed: AtomicU64,
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
    pub fn new() -> Arc<Fabric> {
        Arc::new(Fabric {
            devices: RwLock::new(Vec::new()),
            next_lid: AtomicU16::new(1),
            faults: Mutex::new(None),
            faulty: AtomicBool::new(false),
            delivered: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            corrupted: AtomicU64::new(0),
            delayed: AtomicU64::new(0),
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
        self.faulty.store(f.is_some(), Ordering::Release);
    }

    /// The link's counters.
    pub fn stats(&self) -> LinkStats {
        LinkStats {
            delivered: self.delivered.load(Ordering::Relaxed)
                + self
                    .devices
                    .read()
                    .iter()
                    .filter_map(Weak::upgrade)
                    .map(|d| d.tx_delivered.load(Ordering::Relaxed))
                    .sum::<u64>(),
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

    /// Decides the fate of one packet between two devices.
    /// Decides the fate of one packet `from` a device.
    pub(crate) fn fate_from(&self, from: &Device) -> Fate {
        if !self.faulty.load(Ordering::Acquire) {
            from.tx_delivered.fetch_add(1, Ordering::Relaxed);
            return Fate::Deliver;
        }
        self.fate()
    }

    fn fate(&self) -> Fate {
        let fate = {
            let mut f = self.faults.lock();
            match f.as_mut() {
                None => Fate::Deliver,
                Some(f) => {
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
