//! The filter-overhead baseline: perftest's send_lat loop on two soft HCAs driven directly
//! (their kernel half through `wv_hal::Verbs`, their data path through the user-mode
//! provider), with no driver core: in event mode the soft HCA's DPC calls a completion sink
//! that wakes the waiting thread itself, where the stack completes a parked CQ_NOTIFY.
//!
//! Same host platform (threaded), same fabric, same QP attributes, same loop shape as
//! `perftest/send.rs`: the difference between the two is what the driver adds.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::Thread;
use std::time::{Duration, Instant};

use wv_abi::consts::{WV_ACCESS_LOCAL_WRITE, WV_ACCESS_REMOTE_READ, WV_ACCESS_REMOTE_WRITE};
use wv_hal::{
    AddressVector, CaEvent, CaEventSink, CqEventSink, Gid, MemoryRegion, Mtu, QpCreate, QpEvent,
    QpEventSink, QpInit, QpModify, QpModifyOptions, QpPath, QpRtr, QpRts, QpState, QpType, Umv,
    Verbs,
};
use wv_host::HostPlatform;
use wv_softhca::abi::{self, CqResp, QpResp};
use wv_softhca::{
    BufferPool, ClientMemory, DeviceConfig, DmaBuffer, Fabric, RecvWr, SendWr, Sge, SoftHca,
    UvpContext, UvpCq, UvpQp, WcStatus, WorkCompletion, WrOpcode, send_flags,
};

use crate::baseline::Measured;

/// A CQ's completion sink: remembers that the CQ fired and wakes the thread waiting for it.
#[derive(Default)]
struct Wake {
    fired: AtomicBool,
    waiter: std::sync::Mutex<Option<Thread>>,
}

impl Wake {
    fn wait(&self, deadline: Instant) -> Result<(), String> {
        while !self.fired.swap(false, Ordering::AcqRel) {
            if Instant::now() > deadline {
                return Err("direct baseline: no completion event".into());
            }
            std::thread::park_timeout(Duration::from_millis(100));
        }
        Ok(())
    }
}

impl CqEventSink for Wake {
    fn on_completion(&self) {
        self.fired.store(true, Ordering::Release);
        if let Some(t) = &*self.waiter.lock().unwrap_or_else(|e| e.into_inner()) {
            t.unpark();
        }
    }
    fn on_error(&self) {}
}

struct NoSink;
impl CaEventSink for NoSink {
    fn on_event(&self, _: CaEvent) {}
}
impl QpEventSink for NoSink {
    fn on_event(&self, _: QpEvent) {}
}

/// One side: a soft HCA, separate send and receive CQs with their sinks, an RC QP, a buffer.
struct Side {
    hca: Arc<SoftHca<HostPlatform>>,
    qp: UvpQp,
    soft_qp: wv_softhca::SoftQp,
    send_cq: UvpCq,
    recv_cq: UvpCq,
    send_wake: Arc<Wake>,
    recv_wake: Arc<Wake>,
    buf: DmaBuffer,
    lkey: u32,
    // Kept alive for the life of the side.
    _keep: (
        wv_softhca::SoftCa,
        wv_softhca::SoftPd,
        wv_softhca::SoftCq,
        wv_softhca::SoftCq,
    ),
}

fn side(p: &HostPlatform, mac: u8, pool: &BufferPool) -> Result<Side, String> {
    let e = |what: &'static str| {
        move |err: wv_hal::VerbsError| format!("direct baseline: {what}: {err:?}")
    };
    let hca = SoftHca::new(
        Arc::new(p.clone()),
        DeviceConfig::new("direct", [2, 0x44, 0, 0, 0, mac]),
        ClientMemory::pool(pool.clone()),
    );
    let mut out = [0u8; 64];
    let ca = hca
        .open_ca(
            &mut Umv::new(0, 0, 64, &mut out),
            wv_hal::KArc::new(NoSink).into(),
        )
        .map_err(e("open CA"))?;
    let uvp = UvpContext::from_open_resp(&out).map_err(e("context"))?;
    let pd = hca.allocate_pd(&ca, &mut Umv::none()).map_err(e("PD"))?;
    let mut cq = |wake: &Arc<Wake>| -> Result<(wv_softhca::SoftCq, UvpCq), String> {
        let (soft, _) = hca
            .create_cq(
                &ca,
                1024,
                wv_hal::KArc::new(Relay(Arc::clone(wake))).into(),
                &mut Umv::new(0, 0, 64, &mut out),
            )
            .map_err(e("CQ"))?;
        let u = uvp
            .map_cq(&abi::parse::<CqResp>(&out).ok_or("direct baseline: CQ response")?)
            .map_err(e("CQ map"))?;
        Ok((soft, u))
    };
    let send_wake = Arc::new(Wake::default());
    let recv_wake = Arc::new(Wake::default());
    let (soft_send, send_cq) = cq(&send_wake)?;
    let (soft_recv, recv_cq) = cq(&recv_wake)?;
    let create = QpCreate {
        qp_type: QpType::Rc,
        sq_depth: 16,
        rq_depth: 512,
        sq_sge: 1,
        rq_sge: 1,
        sq_max_inline: 236,
        sq_signaled: false,
        send_cq: &soft_send,
        recv_cq: &soft_recv,
        srq: None,
    };
    let (soft_qp, _) = hca
        .create_qp(
            &pd,
            &create,
            wv_hal::KArc::new(NoSink).into(),
            &mut Umv::new(0, 0, 64, &mut out),
        )
        .map_err(e("QP"))?;
    let qp = uvp
        .map_qp(&abi::parse::<QpResp>(&out).ok_or("direct baseline: QP response")?)
        .map_err(e("QP map"))?;
    let buf = pool.alloc(4096);
    let (_mr, keys) = hca
        .register_mr(
            &pd,
            &MemoryRegion {
                address: buf.addr(),
                length: 4096,
                access: WV_ACCESS_LOCAL_WRITE | WV_ACCESS_REMOTE_WRITE | WV_ACCESS_REMOTE_READ,
            },
        )
        .map_err(e("MR"))?;
    Ok(Side {
        hca,
        qp,
        soft_qp,
        send_cq,
        recv_cq,
        send_wake,
        recv_wake,
        buf,
        lkey: keys.lkey,
        _keep: (ca, pd, soft_send, soft_recv),
    })
}

/// Forwards the device's completion callback to a shared [`Wake`].
struct Relay(Arc<Wake>);
impl CqEventSink for Relay {
    fn on_completion(&self) {
        self.0.on_completion();
    }
    fn on_error(&self) {}
}

/// RESET → INIT → RTR → RTS with perftest's RC attributes.
fn connect(s: &Side, dgid: Gid, dqpn: u32) -> Result<(), String> {
    let path = QpPath {
        av: AddressVector {
            grh_valid: true,
            dgid,
            hop_limit: 1,
            port: 1,
            ..AddressVector::default()
        },
        path_mtu: Some(Mtu::Mtu4096),
        local_ack_timeout: 14,
        seq_err_retry_cnt: 7,
        rnr_retry_cnt: 7,
    };
    let m = |q: QpModify| {
        s.hca
            .modify_qp(&s.soft_qp, &q, &mut [])
            .map_err(|e| format!("direct baseline: modify: {e:?}"))
    };
    m(QpModify::Init(QpInit {
        port: 1,
        qkey: 0,
        pkey_index: 0,
        access: WV_ACCESS_LOCAL_WRITE | WV_ACCESS_REMOTE_WRITE | WV_ACCESS_REMOTE_READ,
    }))?;
    m(QpModify::Rtr(QpRtr {
        dest_qpn: dqpn,
        primary: path,
        responder_resources: 1,
        rnr_nak_timeout: 12,
        ..QpRtr::default()
    }))?;
    m(QpModify::Rts(QpRts {
        sq_psn: 0,
        retry_cnt: 7,
        rnr_retry_cnt: 7,
        local_ack_timeout: 14,
        initiator_depth: 1,
        opts: QpModifyOptions::default(),
        rnr_nak_timeout: 12,
        current_state: QpState::Rtr,
        qkey: 0,
        access: 0,
        responder_resources: 1,
        primary: path,
        alternate: wv_hal::QpPath::default(),
        sq_depth: 0,
        rq_depth: 0,
        apm_state: 0,
        port: 1,
        pkey_index: 0,
    }))
}

/// Polls `cq` for one completion: spinning, or (events) waiting for the CQ's event first, then
/// re-arming and polling, as perftest's `-e` does.
fn poll_one(cq: &UvpCq, wake: &Wake, events: bool, armed: &mut bool) -> Result<(), String> {
    let mut wc = [WorkCompletion::default(); 1];
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut spins = 0u32;
    loop {
        if events {
            if *armed {
                wake.wait(deadline)?;
            }
            cq.arm(false);
            *armed = true;
        }
        if cq.poll(&mut wc) > 0 {
            if wc[0].status != WcStatus::Success {
                return Err(format!("direct baseline: completion {:?}", wc[0].status));
            }
            return Ok(());
        }
        if !events {
            // The clock only every 1024th empty poll, as the benchmark's own loop checks its
            // flags: a clock read per poll would lengthen the spin.
            spins = spins.wrapping_add(1);
            if spins.is_multiple_of(1024) && Instant::now() > deadline {
                return Err("direct baseline: no completion".into());
            }
            std::hint::spin_loop();
        }
    }
}

/// Runs `iters` round trips of 2-byte inline sends and returns the per-iteration one-way times
/// (half of each interval between the client's posts, as perftest's send_lat).
pub fn send_lat(
    iters: usize,
    events: bool,
    cpus: Option<(usize, usize)>,
) -> Result<Measured, String> {
    let p = HostPlatform::threaded(2);
    let pool = BufferPool::new();
    let fabric = Fabric::new();
    let a = side(&p, 1, &pool)?;
    let b = side(&p, 2, &pool)?;
    fabric.attach(&a.hca);
    fabric.attach(&b.hca);
    connect(&a, b.hca.gid(), b.qp.qpn())?;
    connect(&b, a.hca.gid(), a.qp.qpn())?;
    let run = |s: &Side, client: bool, cpu: Option<usize>| -> Result<Vec<Instant>, String> {
        if let Some(cpu) = cpu {
            crate::perftest::pin_to(cpu)?;
        }
        for w in [&s.send_wake, &s.recv_wake] {
            *w.waiter.lock().unwrap_or_else(|e| e.into_inner()) = Some(std::thread::current());
        }
        let rsge = [Sge {
            addr: s.buf.addr() + 2048,
            length: 2048,
            lkey: s.lkey,
        }];
        let recv = |i: u64| {
            s.qp.post_recv(&RecvWr {
                wr_id: i,
                sg_list: &rsge,
            })
            .map_err(|e| format!("direct baseline: post_recv {e:?}"))
        };
        let depth = iters.min(256) as u64;
        for i in 0..depth {
            recv(i)?;
        }
        let (mut send_armed, mut recv_armed) = (false, false);
        if events {
            // Arm before the peer can send (as rc_pingpong does).
            s.recv_cq.arm(false);
            recv_armed = true;
        }
        std::thread::sleep(Duration::from_millis(20));
        let data = [7u8; 2];
        let mut stamps = Vec::with_capacity(iters);
        let mut posted = depth;
        for i in 0..iters as u64 {
            if !(client && i == 0) {
                poll_one(&s.recv_cq, &s.recv_wake, events, &mut recv_armed)?;
                if posted < iters as u64 {
                    recv(posted)?;
                    posted += 1;
                }
            }
            if client {
                stamps.push(Instant::now());
            }
            let mut wr = SendWr::new(i, WrOpcode::Send);
            wr.inline_data = Some(&data);
            wr.send_flags = send_flags::SIGNALED | send_flags::INLINE;
            s.qp.post_send(&wr)
                .map_err(|e| format!("direct baseline: post_send {e:?}"))?;
            poll_one(&s.send_cq, &s.send_wake, events, &mut send_armed)?;
        }
        if client {
            // The server's last answer.
            poll_one(&s.recv_cq, &s.recv_wake, events, &mut recv_armed)?;
        }
        Ok(stamps)
    };
    let (server, client) = std::thread::scope(|sc| {
        let server = sc.spawn(|| run(&b, false, cpus.map(|c| c.0)));
        let client = sc.spawn(|| run(&a, true, cpus.map(|c| c.1)));
        (
            server
                .join()
                .unwrap_or_else(|_| Err("direct baseline: server panicked".into())),
            client
                .join()
                .unwrap_or_else(|_| Err("direct baseline: client panicked".into())),
        )
    });
    server?;
    let stamps = client?;
    drop((a, b));
    Ok(Measured::new(
        stamps
            .windows(2)
            .map(|w| (w[1] - w[0]).as_nanos() as f64 / 2.0)
            .collect(),
    ))
}

#[cfg(test)]
mod tests {
    // Shape only: performance never fails a unit test.
    #[test]
    fn the_direct_baseline_runs_in_both_modes() {
        for events in [false, true] {
            let m = super::send_lat(50, events, None).unwrap();
            assert_eq!(m.samples.len(), 49);
        }
    }
}
