//! Completion queues: a CQE ring shared with user mode, one-shot arming, overrun detection,
//! and resizing with the completions not yet polled carried over.
//!
//! The producers of a CQ are the sides of the QPs bound to it (a QP's send side posts its send
//! completions, its receive side its receive completions), each serialised by that side's own
//! lock. Each side posts through a [`CqPort`] kept under that lock. When one side is a CQ's only
//! producer (perftest's separate send and receive CQs, one QP per CQ) its port holds the ring
//! and posts without the CQ's lock: its own side lock already serialises every producer there
//! is. The commands that bind a second side, unbind one or resize take the bound side's lock
//! before they change that (and nothing else posts to a CQ), so a port never posts lock-free
//! beside another producer or into a ring being replaced.

use alloc::vec::Vec;
use core::sync::atomic::{AtomicBool, Ordering};

use crate::lock::Mutex;
use wv_hal::{AllocError, CqEventSink, KArc, KWeak, VerbsError};

use crate::device::{AsyncEvent, Device, Rundown};
use crate::fallible::{self, no_memory};
use crate::qp::Qp;
use crate::ring::{Padded, Ring, Word};
use crate::wr::{CQE_WORDS, WorkCompletion};

/// Which side of a QP produces into a CQ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Side {
    /// Send completions (the QP's requester, under its `sq_ctx`).
    Send,
    /// Receive completions (the QP's responder, under its `resp`).
    Recv,
}

/// A completion queue (aligned and padded like `Qp`).
#[repr(align(64))]
pub(crate) struct Cq {
    pub handle: u32,
    /// The ring the device writes, under the lock that serialises shared producers (the
    /// sides of several QPs, or both sides of one). A resize replaces it.
    prod: Padded<Mutex<KArc<Ring>>>,
    /// The QP sides bound to the CQ (commands only).
    bound: Mutex<Vec<(KWeak<Qp>, Side)>>,
    /// The CQ handle is in the CQ-notify ring (at most once, so the ring never overflows).
    pub queued: AtomicBool,
    /// The CQ overran: it is in error for good and takes no more CQEs.
    pub overrun: AtomicBool,
    pub sink: KArc<dyn CqEventSink>,
    pub rundown: Rundown,
}

/// A QP side's producer end of a CQ, kept in that side's locked context (`SqCtx`, `RespCtx`).
pub(crate) struct CqPort {
    pub cq: KArc<Cq>,
    /// The CQ's ring when this side is its only producer: posts then go straight to it. Set
    /// and cleared only with the side's lock held (the CQ's binding commands).
    sole: Option<KArc<Ring>>,
}

impl core::fmt::Debug for CqPort {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("CqPort")
            .field("cq", &self.cq.handle)
            .field("sole", &self.sole.is_some())
            .finish()
    }
}

impl CqPort {
    /// A port that posts under the CQ's lock until a binding makes it the sole producer.
    pub(crate) fn new(cq: KArc<Cq>) -> Self {
        CqPort { cq, sole: None }
    }

    /// Stops posting without the CQ's lock (the side is being destroyed).
    pub(crate) fn detach(&mut self) {
        self.sole = None;
    }

    /// Writes a CQE; raises the CQ interrupt if the CQ was armed for it, or the CQ error event
    /// on overrun. Returns `false` when the CQE was lost to an overrun. The caller holds its
    /// side's lock.
    pub(crate) fn post(&self, dev: &Device, wc: &WorkCompletion, solicited: bool) -> bool {
        self.post_with(dev, solicited, |slot| wc.encode(slot))
    }

    /// [`CqPort::post`] of the CQE `fill` writes straight into its slot (a caller that builds
    /// it there, with nothing in between).
    #[inline]
    pub(crate) fn post_with(
        &self,
        dev: &Device,
        solicited: bool,
        fill: impl FnOnce(&[Word]),
    ) -> bool {
        let posted = {
            // One call of `write` for both ways to the ring, so that it is inlined here.
            let locked;
            let ring: &Ring = match &self.sole {
                Some(ring) => ring,
                None => {
                    locked = self.cq.prod.lock();
                    &locked
                }
            };
            self.cq.write(ring, solicited, fill)
        };
        match posted {
            Posted::Quiet => true,
            Posted::Fired => {
                dev.cq_notify(&self.cq);
                true
            }
            Posted::Overrun { first } => {
                if first {
                    dev.post_async(AsyncEvent::CqErr, self.cq.handle);
                }
                false
            }
        }
    }
}

/// What writing a CQE did.
enum Posted {
    /// Written; nobody was armed for it.
    Quiet,
    /// Written, and it took the arm: the CQ event is to be raised.
    Fired,
    /// Lost: the CQ is (`first`: has just become) overrun.
    Overrun { first: bool },
}

impl Cq {
    /// CQ `handle` with a ring of at least `entries` CQEs, unless they cannot be allocated.
    pub(crate) fn try_new(
        handle: u32,
        entries: u32,
        sink: KArc<dyn CqEventSink>,
    ) -> Result<KArc<Self>, AllocError> {
        let ring = Self::new_ring(entries)?;
        KArc::try_new(Cq {
            handle,
            prod: Padded(Mutex::new(ring)),
            bound: Mutex::new(Vec::new()),
            queued: AtomicBool::new(false),
            overrun: AtomicBool::new(false),
            sink,
            rundown: Rundown::new(),
        })
    }

    /// A CQE ring of at least `entries` entries (for a new CQ, or a resize).
    pub(crate) fn new_ring(entries: u32) -> Result<KArc<Ring>, AllocError> {
        KArc::try_new(Ring::try_new(entries, CQE_WORDS)?)
    }

    /// Writes the CQE `fill` writes into `ring`; the caller is the ring's only writer for now
    /// (it holds the CQ's lock, or it is the sole producer under its side lock).
    // Forced: one call site per caller of `post_with`, which LLVM still kept out of line.
    #[inline(always)]
    fn write(&self, ring: &Ring, solicited: bool, fill: impl FnOnce(&[Word])) -> Posted {
        if self.overrun.load(Ordering::Relaxed) {
            return Posted::Overrun { first: false };
        }
        // Publishes the CQE and takes the arm in one step: no fence, and no notify
        // bookkeeping at all when nobody armed the CQ.
        match ring.produce_notify(solicited, fill) {
            Some(true) => Posted::Fired,
            Some(false) => Posted::Quiet,
            None => {
                self.overrun.store(true, Ordering::Relaxed);
                // Where the user-mode provider sees it.
                ring.owner_word(crate::ring::OWNER_CQ_OVERRUN)
                    .store(1, Ordering::Release);
                Posted::Overrun { first: true }
            }
        }
    }

    /// The ring completions are written to now.
    pub(crate) fn ring(&self) -> KArc<Ring> {
        KArc::clone(&self.prod.lock())
    }

    /// Binds the `side` of `qp` (a new QP, whose ports are not sole) as a producer. The first
    /// side bound becomes the sole producer; binding a second one first takes the sole
    /// producer's lock and makes its port post under the CQ's lock again.
    ///
    /// # Errors
    /// `InsufficientMemory` when the binding list cannot grow (it grows with its lock
    /// released).
    pub(crate) fn bind(&self, qp: &KArc<Qp>, side: Side) -> Result<(), VerbsError> {
        let mut bound = fallible::with_room(|| self.bound.lock()).map_err(no_memory)?;
        match bound.len() {
            0 => {
                let ring = self.ring();
                Qp::with_port(qp, side, |port| port.sole = Some(ring));
            }
            1 => {
                if let Some(other) = bound[0].0.upgrade() {
                    Qp::with_port(&other, bound[0].1, |port| port.sole = None);
                }
            }
            _ => {}
        }
        // Within the room made above.
        bound.push((KArc::downgrade(qp), side));
        Ok(())
    }

    /// Unbinds the `side` of `qp` (being destroyed: its port no longer posts). A side left
    /// alone becomes the sole producer.
    pub(crate) fn unbind(&self, qp: &KArc<Qp>, side: Side) {
        let mut bound = self.bound.lock();
        let me = KArc::as_ptr(qp);
        bound.retain(|(q, s)| !(core::ptr::eq(q.as_ptr(), me) && *s == side));
        if let [(last, last_side)] = bound.as_slice()
            && let Some(last) = last.upgrade()
        {
            // Under its side lock: it is not posting (under the CQ's lock) meanwhile.
            Qp::with_port(&last, *last_side, |port| port.sole = Some(self.ring()));
        }
    }

    /// Resizes to the `new` ring (allocated by the caller, with [`Cq::new_ring`], before any
    /// lock was taken): it starts with the completions not yet polled, oldest first, and the
    /// arm. A ring of the current size keeps the current one. The consumer must not poll
    /// meanwhile (the user-mode provider holds its poll lock across the command, as libmlx4
    /// holds its CQ lock across `ibv_resize_cq`) and maps the ring returned. A sole producer is
    /// held off by its side lock and given the new ring.
    ///
    /// # Errors
    /// `InvalidParameter` when the new size cannot hold the completions waiting.
    pub(crate) fn resize(&self, new: KArc<Ring>) -> Result<KArc<Ring>, VerbsError> {
        let bound = self.bound.lock();
        let sole = match bound.as_slice() {
            [(qp, side)] => qp.upgrade().map(|qp| (qp, *side)),
            _ => None,
        };
        let swap = |port: Option<&mut CqPort>| -> Result<KArc<Ring>, VerbsError> {
            let mut ring = self.prod.lock();
            if new.entries() == ring.entries() {
                return Ok(KArc::clone(&ring));
            }
            if !ring.copy_pending_to(&new) {
                return Err(VerbsError::InvalidParameter);
            }
            *ring = KArc::clone(&new);
            if let Some(port) = port {
                port.sole = Some(KArc::clone(&new));
            }
            Ok(KArc::clone(&new))
        };
        match sole {
            Some((qp, side)) => Qp::with_port(&qp, side, |port| swap(Some(port))),
            None => swap(None),
        }
    }

    /// The arm doorbell; `ring` is the ring the consumer polls. Returns whether it already
    /// holds completions (the `REPORT_MISSED_EVENTS` answer: the caller must poll again).
    pub(crate) fn arm(&self, solicited_only: bool, ring: &Ring) -> bool {
        ring.arm(solicited_only)
    }
}
