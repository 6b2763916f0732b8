//! A quick look at the performance shape (not the benchmark of record): polling send latency
//! on two soft HCAs, and 64 KiB RDMA-write bandwidth against `memcpy`, in one process.
//!
//! `cargo run --release -p wv-softhca --example shape`
#![allow(clippy::disallowed_methods)] // a host tool may allocate infallibly (clippy.toml)

use std::sync::Arc;
use std::time::Instant;

use wv_abi::consts::*;
use wv_hal::*;
use wv_host::HostPlatform;
use wv_softhca::*;

struct Side {
    dev: DirectClient<HostPlatform>,
    cq: UvpCq,
    qp: UvpQp,
    soft_qp: SoftQp,
    _soft_cq: SoftCq,
    pool: BufferPool,
}

fn side(p: &HostPlatform, mac: u8) -> Side {
    let pool = BufferPool::new();
    let dev = DirectClient::create(
        Arc::new(p.clone()),
        DeviceConfig::new("x", [2, 0, 0, 0, 0, mac]),
        ClientMemory::pool(pool.clone()),
        wv_hal::KArc::new(NoEvents).into(),
    )
    .unwrap();
    let (soft_cq, cq) = dev
        .create_cq(4096, wv_hal::KArc::new(NoEvents).into())
        .unwrap();
    let (soft_qp, qp) = dev
        .create_rc_qp(
            &soft_cq,
            &soft_cq,
            [1024, 1024],
            64,
            wv_hal::KArc::new(NoEvents).into(),
        )
        .unwrap();
    Side {
        dev,
        cq,
        qp,
        soft_qp,
        _soft_cq: soft_cq,
        pool,
    }
}

/// RESET → INIT → RTR → RTS towards the peer's QP.
fn up(s: &Side, dgid: Gid, dqpn: u32) {
    s.dev.connect_rc(&s.soft_qp, dgid, dqpn).unwrap();
}

fn main() {
    let p = HostPlatform::threaded(1);
    let fabric = Fabric::new();
    let a = side(&p, 1);
    let b = side(&p, 2);
    fabric.attach(&a.dev.hca);
    fabric.attach(&b.dev.hca);
    up(&a, b.dev.hca.gid(), b.qp.qpn());
    up(&b, a.dev.hca.gid(), a.qp.qpn());
    let reg = |s: &Side, len: usize| {
        let buf = s.pool.alloc(len);
        let (mr, k) = s
            .dev
            .hca
            .register_mr(
                &s.dev.pd,
                &MemoryRegion {
                    address: buf.addr(),
                    length: len as u64,
                    access: WV_ACCESS_LOCAL_WRITE | WV_ACCESS_REMOTE_WRITE,
                },
            )
            .unwrap();
        let _ = mr;
        (buf, k.lkey)
    };
    let (la, lka) = reg(&a, 1 << 16);
    let (lb, lkb) = reg(&b, 1 << 16);

    // Polling send latency: A sends 2 bytes inline, polls its send CQE (signaled).
    let n = 200_000u32;
    let mut wc = [WorkCompletion::default(); 16];
    let data = [1u8, 2];
    let rsge = [Sge {
        addr: lb.addr(),
        length: 64,
        lkey: lkb,
    }];
    let t = Instant::now();
    for i in 0..n {
        b.qp.post_recv(&RecvWr {
            wr_id: u64::from(i),
            sg_list: &rsge,
        })
        .unwrap();
        let mut wr = SendWr::new(u64::from(i), WrOpcode::Send);
        wr.inline_data = Some(&data);
        wr.send_flags = send_flags::SIGNALED;
        a.qp.post_send(&wr).unwrap();
        while a.cq.poll(&mut wc[..1]) == 0 {}
        while b.cq.poll(&mut wc[..1]) == 0 {}
    }
    let ns = t.elapsed().as_nanos() as f64 / f64::from(n);
    println!("send + poll (both sides), one thread: {ns:.0} ns/op");

    // Two threads: A sends, B polls its receive and answers; A polls its receive (perftest's
    // send_lat shape), against a cache-line ping-pong between two threads.
    let iters = 100_000u32;
    for i in 0..16 {
        a.qp.post_recv(&RecvWr {
            wr_id: i,
            sg_list: &[Sge {
                addr: la.addr(),
                length: 64,
                lkey: lka,
            }],
        })
        .unwrap();
        b.qp.post_recv(&RecvWr {
            wr_id: i,
            sg_list: &rsge,
        })
        .unwrap();
    }
    let pong = {
        let (qp, cq) = (b.qp.clone(), b.cq.clone());
        std::thread::spawn(move || {
            let mut wc = [WorkCompletion::default(); 4];
            let data = [2u8; 2];
            for i in 0..iters {
                loop {
                    let n = cq.poll(&mut wc);
                    if wc[..n].iter().any(|w| w.opcode == WcOpcode::Recv) {
                        break;
                    }
                }
                qp.post_recv(&RecvWr {
                    wr_id: u64::from(i),
                    sg_list: &rsge,
                })
                .unwrap();
                let mut wr = SendWr::new(u64::from(i), WrOpcode::Send);
                wr.inline_data = Some(&data);
                qp.post_send(&wr).unwrap();
            }
        })
    };
    let t = Instant::now();
    for i in 0..iters {
        let mut wr = SendWr::new(u64::from(i), WrOpcode::Send);
        wr.inline_data = Some(&data);
        a.qp.post_send(&wr).unwrap();
        loop {
            let n = a.cq.poll(&mut wc[..4]);
            if wc[..n].iter().any(|w| w.opcode == WcOpcode::Recv) {
                break;
            }
        }
        a.qp.post_recv(&RecvWr {
            wr_id: u64::from(i),
            sg_list: &[Sge {
                addr: la.addr(),
                length: 64,
                lkey: lka,
            }],
        })
        .unwrap();
    }
    let rtt = t.elapsed().as_nanos() as f64 / f64::from(iters);
    pong.join().unwrap();
    let flag = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let f2 = flag.clone();
    let n2 = u64::from(iters);
    let th = std::thread::spawn(move || {
        for i in 0..n2 {
            while f2.load(std::sync::atomic::Ordering::Acquire) != 2 * i + 1 {}
            f2.store(2 * i + 2, std::sync::atomic::Ordering::Release);
        }
    });
    let t = Instant::now();
    for i in 0..n2 {
        flag.store(2 * i + 1, std::sync::atomic::Ordering::Release);
        while flag.load(std::sync::atomic::Ordering::Acquire) != 2 * i + 2 {}
    }
    let base = t.elapsed().as_nanos() as f64 / f64::from(iters);
    th.join().unwrap();
    println!(
        "two-thread send ping-pong: {:.0} ns one-way; cache-line ping-pong {:.0} ns one-way; ratio {:.1}",
        rtt / 2.0,
        base / 2.0,
        rtt / base
    );

    // 64 KiB RDMA write bandwidth vs memcpy.
    let size = 1 << 16;
    let iters = 20_000u32;
    let sge = [Sge {
        addr: la.addr(),
        length: size as u32,
        lkey: lka,
    }];
    let t = Instant::now();
    for i in 0..iters {
        let mut wr = SendWr::new(u64::from(i), WrOpcode::RdmaWrite);
        wr.sg_list = &sge;
        wr.remote_addr = lb.addr();
        wr.rkey = lkb;
        if i % 64 == 63 {
            wr.send_flags = send_flags::SIGNALED;
        }
        a.qp.post_send(&wr).unwrap();
        if i % 64 == 63 {
            while a.cq.poll(&mut wc) == 0 {}
        }
    }
    let wr_gbs = f64::from(iters) * size as f64 / t.elapsed().as_secs_f64() / 1e9;
    let src = vec![1u8; size];
    let mut dst = vec![0u8; size];
    let t = Instant::now();
    for i in 0..iters {
        dst.copy_from_slice(&src);
        std::hint::black_box(&mut dst);
        let _ = i;
    }
    let mc_gbs = f64::from(iters) * size as f64 / t.elapsed().as_secs_f64() / 1e9;
    println!(
        "64 KiB RDMA write: {wr_gbs:.2} GB/s; memcpy: {mc_gbs:.2} GB/s; ratio {:.0}%",
        100.0 * wr_gbs / mc_gbs
    );
}
