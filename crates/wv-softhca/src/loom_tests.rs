//! loom models of the soft HCA's lock-free hand-offs on the polling path, run on the shipped
//! code (`--cfg loom` builds `ring` and `sched` on loom's atomics):
//!
//! * the CQ publish/arm race: a producer publishing CQEs ([`Ring::publish_notify`]) and a
//!   consumer arming the CQ ([`Ring::arm`]) never leave the consumer asleep with a CQE waiting,
//!   the CQ event fires at most once per arm, and a consumer that is told to poll again reads
//!   the CQE the producer wrote;
//! * the doorbell scheduling of a send queue ([`crate::sched::schedule`]): whatever the
//!   interleaving of two doorbells and the runner, every posted request is processed.
//!
//! `RUSTFLAGS="--cfg loom" cargo test -p wv-softhca --lib --release loom_tests`. Weakening
//! what these rely on makes them fail (see docs/VERIFICATION.md): the CQ publish as a relaxed
//! CAS (the consumer reads a stale CQE), the publish as a load and a store instead of a CAS
//! (an arm is overwritten: the consumer sleeps with a CQE waiting), the runner's look after
//! unlocking as a load instead of a swap (a doorbell is lost).

extern crate std;

use loom::sync::Arc;
use loom::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use crate::ring::Ring;
use crate::sched::{Pending, schedule};
use wv_host::loom_model::model;

/// One CQE: its first word carries `wr_id`.
fn post(ring: &Ring, wr_id: u64, solicited: bool) -> bool {
    let slot = ring.producer_slot().expect("room");
    slot[0].store(wr_id, Ordering::Relaxed);
    ring.publish_notify(solicited)
}

#[test]
fn cq_publish_and_arm_never_lose_an_event() {
    model("cq_publish_arm", 3, || {
        let ring = Arc::new(Ring::try_new(4, 1).unwrap());
        let fired = Arc::new(AtomicU32::new(0));
        let producer = {
            let (ring, fired) = (ring.clone(), fired.clone());
            loom::thread::spawn(move || {
                for wr_id in [11, 12] {
                    if post(&ring, wr_id, false) {
                        fired.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        };
        // The consumer: arm; if completions wait, poll them (they must be the producer's);
        // otherwise it would sleep until the event.
        let waiting = ring.arm(false);
        if waiting {
            let slot = ring.consumer_slot().expect("arm said completions wait");
            assert_eq!(slot[0].load(Ordering::Relaxed), 11, "a stale CQE");
            ring.consume(1);
        }
        producer.join().unwrap();
        let fired = fired.load(Ordering::Relaxed);
        assert!(fired <= 1, "one arm fired {fired} events");
        if !waiting {
            assert_eq!(
                fired, 1,
                "the consumer sleeps with a CQE waiting and no event"
            );
        }
    });
}

#[test]
fn cq_solicited_arm_waits_for_a_solicited_completion() {
    model("cq_solicited_arm", 3, || {
        let ring = Arc::new(Ring::try_new(4, 1).unwrap());
        let producer = {
            let ring = ring.clone();
            loom::thread::spawn(move || (post(&ring, 1, false), post(&ring, 2, true)))
        };
        let waiting = ring.arm(true);
        let (first, second) = producer.join().unwrap();
        assert!(!first, "an unsolicited completion took a solicited arm");
        if !waiting {
            assert!(second, "the solicited completion raised no event");
        }
    });
}

/// A send queue as the scheduler sees it: requests posted, a lock, the requests processed.
struct Queue {
    pending: Pending,
    lock: AtomicBool,
    posted: AtomicU32,
    processed: AtomicU32,
}

impl Queue {
    /// A doorbell: post one request, then run the queue or leave it to its runner. The lock
    /// is taken and released as `spin::Mutex` does (CAS acquire, store release).
    fn doorbell(&self) {
        self.posted.fetch_add(1, Ordering::Release);
        schedule(&self.pending, || {
            self.lock
                .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                .ok()?;
            // Processing: everything posted so far.
            let seen = self.posted.load(Ordering::Acquire);
            self.processed.store(seen, Ordering::Relaxed);
            self.lock.store(false, Ordering::Release);
            Some(())
        });
    }
}

#[test]
fn sq_doorbells_are_never_lost() {
    model("sq_schedule", 3, || {
        let q = Arc::new(Queue {
            pending: Pending::new(),
            lock: AtomicBool::new(false),
            posted: AtomicU32::new(0),
            processed: AtomicU32::new(0),
        });
        let other = {
            let q = q.clone();
            loom::thread::spawn(move || q.doorbell())
        };
        q.doorbell();
        other.join().unwrap();
        assert_eq!(
            q.processed.load(Ordering::Relaxed),
            2,
            "a posted request was left with nobody running the queue"
        );
    });
}
