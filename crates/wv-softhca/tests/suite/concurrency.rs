//! Several threads on the data path at once: two QPs sending to each other from two threads
//! (each thread also runs the responder of the other's traffic), senders parked on RNR waits
//! woken by receives posted from another thread, and CQ notifications through the threaded
//! host platform. Checks completion counts and bytes, and that nothing deadlocks.

use std::sync::Arc;

use crate::common::*;
use wv_hal::*;
use wv_host::HostPlatform;
use wv_softhca::*;

#[test]
fn two_threads_sending_to_each_other_with_rnr_waits() {
    let p = HostPlatform::threaded(2);
    let (_f, a, b) = pair(&p);
    let (ca, cb, qa, qb) = deep_rc_qps(&a, &b, 4096, 512);
    let ma = Arc::new(a.mem(1 << 16, ALL_ACCESS));
    let mb = Arc::new(b.mem(1 << 16, ALL_ACCESS));
    const N: u64 = 2000;
    let run = |qp: UvpQp, cq: UvpCq, mem: Arc<Mem>, tag: u8| {
        std::thread::spawn(move || {
            let mut sent = 0u64;
            let mut recvd = 0u64;
            let mut send_done = 0u64;
            let mut posted_recv = 0u64;
            let mut wc = [WorkCompletion::default(); 32];
            while recvd < N || send_done < N {
                // Keep few receives posted so that the peer often hits RNR and waits.
                if posted_recv < N && posted_recv < recvd + 4 {
                    let s = mem.sge(32768 + (posted_recv as usize % 64) * 8, 8);
                    qp.post_recv(&recv_wr(posted_recv, &[s])).unwrap();
                    posted_recv += 1;
                }
                if sent < N && sent < send_done + 64 {
                    mem.buf.write((sent as usize % 64) * 8, &[tag; 8]).unwrap();
                    let s = [mem.sge((sent as usize % 64) * 8, 8)];
                    qp.post_send(&send_wr(sent, WrOpcode::Send, &s)).unwrap();
                    sent += 1;
                }
                let n = cq.poll(&mut wc);
                for w in &wc[..n] {
                    assert_eq!(w.status, WcStatus::Success);
                    if w.opcode == WcOpcode::Recv {
                        assert_eq!(w.wr_id, recvd);
                        recvd += 1;
                    } else {
                        assert_eq!(w.wr_id, send_done);
                        send_done += 1;
                    }
                }
                std::thread::yield_now();
            }
        })
    };
    let ta = run(qa.uvp.clone(), ca.uvp.clone(), ma.clone(), b'a');
    let tb = run(qb.uvp.clone(), cb.uvp.clone(), mb.clone(), b'b');
    ta.join().unwrap();
    tb.join().unwrap();
    assert!(
        mb.buf.to_vec()[32768..32768 + 512]
            .iter()
            .all(|&x| x == b'a')
    );
    assert!(
        ma.buf.to_vec()[32768..32768 + 512]
            .iter()
            .all(|&x| x == b'b')
    );
    settle(&p);
}

#[test]
fn many_threads_on_one_shared_cq_with_notifications() {
    let p = HostPlatform::threaded(2);
    let (_f, a, b) = pair(&p);
    let shared = Arc::new(b.cq(8192));
    let cs = a.cq(8192);
    let rb = Arc::new(b.mem(4096, ALL_ACCESS));
    let ma = Arc::new(a.mem(4096, ALL_ACCESS));
    const T: usize = 4;
    const N: u64 = 500;
    let mut pairs = Vec::new();
    for _ in 0..T {
        let qa = a.qp_with(QpType::Rc, &cs, &cs, None, 1024, 1, 0, false);
        let qb = b.qp_with(QpType::Rc, &shared, &shared, None, 1024, 1, 0, true);
        connect(&a, &qa, &b, &qb, Conn::default());
        for i in 0..N {
            post_recv(&qb, i, rb.sge(0, 64));
        }
        pairs.push((qa, qb));
    }
    shared.uvp.arm(false);
    let threads = spawn_unsignaled_senders(&pairs, &ma, N);
    for t in threads {
        t.join().unwrap();
    }
    let wcs = poll_all(&shared);
    assert_eq!(wcs.len(), T * N as usize);
    assert!(wcs.iter().all(|w| w.status == WcStatus::Success));
    // One arm, at least one notification; never more than one per arm.
    assert_eq!(shared.sink.completions(), 1);
    settle(&p);
    let _ = pairs;
}

#[test]
fn modify_racing_posts_loses_no_doorbell() {
    let p = HostPlatform::threaded(2);
    let (_f, a, b) = pair(&p);
    let (ca, cb, qa, qb) = deep_rc_qps(&a, &b, 8192, 4096);
    let (m, rb) = mems(&a, 64, &b, 64);
    const N: u64 = 3000;
    for i in 0..N {
        post_recv(&qb, i, rb.sge(0, 8));
    }
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let hca = a.hca.clone();
    let soft = qa.soft;
    let st = stop.clone();
    let (started_tx, started) = std::sync::mpsc::channel();
    let modifier = std::thread::spawn(move || {
        let mut n = 0u64;
        loop {
            let mut mm = attrs(wv_abi::consts::WV_IO_QP_ATTR_ACCESS_FLAGS);
            mm.access = ALL_ACCESS;
            hca.modify_qp(&soft, &mm.to(QpState::Rts), &mut []).unwrap();
            n += 1;
            if n == 1 {
                started_tx.send(()).unwrap();
            }
            if st.load(std::sync::atomic::Ordering::Relaxed) {
                return (soft, n);
            }
        }
    });
    // Post while the modifier is running.
    started.recv().unwrap();
    let sg = [m.sge(0, 8)];
    for i in 0..N {
        qa.uvp.post_send(&send_wr(i, WrOpcode::Send, &sg)).unwrap();
        if i % 512 == 511 {
            poll_all(&ca);
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (_soft, modifies) = modifier.join().unwrap();
    assert!(modifies > 0);
    // Every send ran, though some doorbells found the queue held by a modify.
    assert_eq!(poll_all(&cb).len(), N as usize);
    settle(&p);
}

#[test]
fn srq_consumers_race_and_senders_waiting_on_rnr_all_get_through() {
    let p = HostPlatform::threaded(2);
    let (_f, a, b) = pair(&p);
    let (ca, cb) = two_cqs(&a, &b, 8192);
    let srq = b.srq(64, 0);
    let mut senders = Vec::new();
    for _ in 0..3 {
        let qa = a.qp_with(QpType::Rc, &ca, &ca, None, 1024, 1, 0, false);
        let qb = b.qp_with(QpType::Rc, &cb, &cb, Some(&srq), 16, 1, 0, true);
        connect(&a, &qa, &b, &qb, Conn::default());
        senders.push((qa, qb));
    }
    let m = Arc::new(a.mem(64, ALL_ACCESS));
    let rb = b.mem(64, ALL_ACCESS);
    const N: u64 = 300;
    // The send queues are deep enough for all of them; many get RNR NAKs and retry when
    // their RNR timer (on the real clock) expires.
    let threads = spawn_unsignaled_senders(&senders, &m, N);
    // Feed the SRQ a few receives at a time until every message has landed.
    let mut got = 0usize;
    let mut posted = 0u64;
    let mut wc = [WorkCompletion::default(); 64];
    while got < 3 * N as usize {
        while posted < 3 * N && posted < got as u64 + 8 {
            if srq
                .uvp
                .post_recv(&recv_wr(posted, &[rb.sge(0, 8)]))
                .is_err()
            {
                break;
            }
            posted += 1;
        }
        let n = cb.uvp.poll(&mut wc);
        assert!(wc[..n].iter().all(|w| w.status == WcStatus::Success));
        got += n;
        std::thread::yield_now();
    }
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(got, 3 * N as usize);
    settle(&p);
}

/// One thread per connection, each posting `n` unsignaled 8-byte sends from `mem` on the
/// connection's first QP: the racing senders of the tests above.
fn spawn_unsignaled_senders(
    connections: &[(Qp, Qp)],
    mem: &Arc<Mem>,
    n: u64,
) -> Vec<std::thread::JoinHandle<()>> {
    connections
        .iter()
        .map(|(qa, _)| {
            let q = qa.uvp.clone();
            let m = mem.clone();
            std::thread::spawn(move || {
                for i in 0..n {
                    let s = [m.sge(0, 8)];
                    let mut wr = send_wr(i, WrOpcode::Send, &s);
                    wr.send_flags = 0;
                    q.post_send(&wr).unwrap();
                }
            })
        })
        .collect()
}
