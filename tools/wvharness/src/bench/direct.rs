//! The filter-overhead baseline: perftest's send_lat loop on two soft HCAs driven directly
//! (their kernel half through `wv_hal::Verbs`, their data path through the user-mode
//! provider), with no driver core: in event mode the soft HCA's DPC calls a completion sink
//! that wakes the waiting thread itself, where the stack completes a parked CQ_NOTIFY.
//!
//! Like for like: the loop is the stack's own (`perftest::send::lat`, generic over the data
//! path), with the same parameters, queue and CQ sizes, buffer layout, work requests (the
//! same SGE into the registered buffer, inline under the same threshold, the same receive
//! length), the same start rendezvous and timestamps, on the same host platform and fabric.
//! What differs is only what the driver adds: the client library's verbs objects around the
//! same user-mode provider, and in event mode the CQ_NOTIFY round trip.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::thread::Thread;
use std::time::{Duration, Instant};

use wv_abi::consts::{WV_ACCESS_LOCAL_WRITE, WV_ACCESS_REMOTE_READ, WV_ACCESS_REMOTE_WRITE};
use wv_hal::{CaEvent, CaEventSink, CqEventSink, Gid, MemoryRegion, QpEvent, QpEventSink, Verbs};
use wv_host::HostPlatform;
use wv_softhca::{
    BufferPool, ClientMemory, DeviceConfig, DirectClient, DirectError, DmaBuffer, Fabric, RecvWr,
    Sge, UvpCq, UvpQp, WorkCompletion, WrOpcode,
};

use crate::baseline::Measured;
use crate::perftest::endpoint::{
    DataPath, EVENT_DEADLINE, LoopCq, Rendezvous, Role, Run, Shared, Step, aborted, join_sides,
    send_wr,
};
use crate::perftest::{self, PerftestArgs, Test};

/// A CQ's completion sink: remembers that the CQ fired and wakes the thread waiting for it.
#[derive(Default)]
struct Wake {
    fired: AtomicBool,
    waiter: std::sync::Mutex<Option<Thread>>,
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

/// Forwards the device's completion callback to a shared [`Wake`].
struct Relay(Arc<Wake>);
impl CqEventSink for Relay {
    fn on_completion(&self) {
        self.0.on_completion();
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

/// A CQ of the baseline: the user-mode provider's CQ, and for `-e` its sink's wake-up (where
/// the stack has CQ_NOTIFY).
struct DirectCq {
    cq: UvpCq,
    wake: Arc<Wake>,
    armed: AtomicBool,
    drained: AtomicBool,
}

impl LoopCq for DirectCq {
    fn poll(&self, wc: &mut [WorkCompletion]) -> usize {
        self.cq.poll(wc)
    }

    fn wait(&self, abort: &AtomicBool) -> Result<(), String> {
        if self.armed.swap(true, Ordering::Relaxed) {
            *self.wake.waiter.lock().unwrap_or_else(|e| e.into_inner()) =
                Some(std::thread::current());
            let start = Instant::now();
            while !self.wake.fired.swap(false, Ordering::AcqRel) {
                if abort.load(Ordering::Relaxed) {
                    return Err(aborted());
                }
                if start.elapsed() > EVENT_DEADLINE {
                    return Err("direct baseline: no completion event".into());
                }
                std::thread::park_timeout(Duration::from_millis(100));
            }
        }
        self.cq.arm(false);
        Ok(())
    }

    fn drained(&self) -> &AtomicBool {
        &self.drained
    }
}

/// One side, built as `perftest::endpoint::Side::open` builds the stack's: separate send and
/// receive CQs of the same sizes, an RC QP with the same depths, one registered buffer whose
/// landing half starts where the stack's does.
struct Side {
    dev: DirectClient<HostPlatform>,
    qp: UvpQp,
    soft_qp: wv_softhca::SoftQp,
    send_cq: DirectCq,
    recv_cq: DirectCq,
    buf: DmaBuffer,
    land_off: usize,
    lkey: u32,
    rkey: u32,
    /// The peer's landing half and rkey (RDMA fields the stack's sends carry too).
    remote: (u64, u32),
    inline_size: u32,
    // Kept alive for the life of the side.
    _keep: (wv_softhca::SoftCq, wv_softhca::SoftCq, wv_softhca::SoftMr),
}

impl DataPath for Side {
    type Cq = DirectCq;
    fn send_cq(&self) -> &DirectCq {
        &self.send_cq
    }
    fn recv_cq(&self) -> &DirectCq {
        &self.recv_cq
    }
    fn post(&self, wr_id: u64, opcode: WrOpcode, len: usize, signaled: bool) -> Result<(), String> {
        let sge = [Sge {
            addr: self.buf.addr(),
            length: len as u32,
            lkey: self.lkey,
        }];
        // The work request the stack's `Side` builds.
        let wr = send_wr(
            wr_id,
            opcode,
            &sge,
            signaled,
            self.inline_size,
            Some(self.remote),
        );
        self.qp
            .post_send(&wr)
            .map_err(|e| format!("direct baseline: post send failed: {e:?}"))
    }
    fn post_recv(&self, wr_id: u64) -> Result<(), String> {
        let sge = [Sge {
            addr: self.buf.addr() + self.land_off as u64,
            length: (self.buf.len() - self.land_off) as u32,
            lkey: self.lkey,
        }];
        self.qp
            .post_recv(&RecvWr {
                wr_id,
                sg_list: &sge,
            })
            .map_err(|e| format!("direct baseline: post receive failed: {e:?}"))
    }
}

fn side(
    p: &HostPlatform,
    mac: u8,
    pool: &BufferPool,
    params: &perftest::Params,
) -> Result<Side, String> {
    let e = |err: DirectError| format!("direct baseline: {err}");
    let dev = DirectClient::create(
        Arc::new(p.clone()),
        DeviceConfig::new("direct", [2, 0x44, 0, 0, 0, mac]),
        ClientMemory::pool(pool.clone()),
        wv_hal::KArc::new(NoSink).into(),
    )
    .map_err(e)?;
    let cq = |entries: u32| -> Result<(wv_softhca::SoftCq, DirectCq), String> {
        let wake = Arc::new(Wake::default());
        let (soft, cq) = dev
            .create_cq(entries, wv_hal::KArc::new(Relay(Arc::clone(&wake))).into())
            .map_err(e)?;
        Ok((
            soft,
            DirectCq {
                cq,
                wake,
                armed: AtomicBool::new(false),
                drained: AtomicBool::new(true),
            },
        ))
    };
    // The sizes `Side::open` asks the stack for.
    let (soft_send, send_cq) = cq(params.tx_depth + params.rx_depth + 1)?;
    let (soft_recv, recv_cq) = cq(params.rx_depth + 1)?;
    let depths = [params.tx_depth.max(1), params.rx_depth.max(1)];
    let (soft_qp, qp) = dev
        .create_rc_qp(
            &soft_send,
            &soft_recv,
            depths,
            params.inline_size,
            wv_hal::KArc::new(NoSink).into(),
        )
        .map_err(e)?;
    // As the stack's verbs library attaches a QP to its receive CQ.
    let qp = qp.with_recv_cq(&recv_cq.cq);
    // The stack's buffer layout (`Side::open`): the landing half half a page past a page
    // boundary beyond the largest message.
    let land_off = (params.max_size() as usize).max(64).next_multiple_of(4096) + 2048;
    let buf = pool.alloc(2 * land_off);
    let (mr, keys) = dev
        .hca
        .register_mr(
            &dev.pd,
            &MemoryRegion {
                address: buf.addr(),
                length: buf.len() as u64,
                access: WV_ACCESS_LOCAL_WRITE | WV_ACCESS_REMOTE_WRITE | WV_ACCESS_REMOTE_READ,
            },
        )
        .map_err(|err| format!("direct baseline: MR: {err:?}"))?;
    Ok(Side {
        dev,
        qp,
        soft_qp,
        send_cq,
        recv_cq,
        buf,
        land_off,
        lkey: keys.lkey,
        rkey: keys.rkey,
        remote: (0, 0),
        inline_size: params.inline_size,
        _keep: (soft_send, soft_recv, mr),
    })
}

/// RESET → INIT → RTR → RTS with perftest's RC attributes.
fn connect(s: &Side, dgid: Gid, dqpn: u32) -> Result<(), String> {
    s.dev
        .connect_rc(&s.soft_qp, dgid, dqpn)
        .map_err(|e| format!("direct baseline: {e}"))
}

/// Runs perftest's send_lat loop with `args` (2-byte messages, polling or `-e`) on two soft
/// HCAs without the driver and returns the per-iteration one-way times (half of each interval
/// between the client's posts, as perftest's send_lat and the stack's run report them).
pub fn send_lat(args: &PerftestArgs) -> Result<Measured, String> {
    let params = perftest::params(Test::SendLat, args, 4096)?;
    let &(size, iters) = params.sizes.first().ok_or("direct baseline: no size")?;
    let p = HostPlatform::threaded(2);
    let pool = BufferPool::new();
    let fabric = Fabric::new();
    let mut a = side(&p, 1, &pool, &params)?;
    let mut b = side(&p, 2, &pool, &params)?;
    a.remote = (b.buf.addr() + b.land_off as u64, b.rkey);
    b.remote = (a.buf.addr() + a.land_off as u64, a.rkey);
    fabric.attach(&a.dev.hca);
    fabric.attach(&b.dev.hca);
    connect(&a, b.dev.hca.gid(), b.qp.qpn())?;
    connect(&b, a.dev.hca.gid(), a.qp.qpn())?;
    let sh = Shared {
        abort: AtomicBool::new(false),
        stop: AtomicU64::new(0),
        sync: Rendezvous::default(),
        origin: Instant::now(),
        wait_every_poll: true,
    };
    let run = Run {
        ix: 0,
        size: size as usize,
        iters,
    };
    let (tx, rx) = mpsc::channel();
    let body = |s: &Side, role: Role, cpu: Option<usize>| -> Result<(), String> {
        let r = (|| {
            if let Some(cpu) = cpu {
                perftest::pin_to(cpu)?;
            }
            let samples = perftest::send::lat(Step {
                side: s,
                role,
                p: &params,
                run,
                sh: &sh,
            })?;
            if role == Role::Client {
                tx.send(samples.posted).map_err(|_| aborted())?;
            }
            // Neither side tears down while the other still has traffic in flight.
            sh.sync.meet(&sh.abort)
        })();
        if r.is_err() {
            sh.abort.store(true, Ordering::Relaxed);
        }
        r
    };
    let (server, client) = std::thread::scope(|sc| {
        let server = sc.spawn(|| body(&b, Role::Server, params.cpus.map(|c| c.0)));
        let client = sc.spawn(|| body(&a, Role::Client, params.cpus.map(|c| c.1)));
        join_sides(server, client, |side| {
            format!("direct baseline: {side} panicked")
        })
    });
    client?;
    server?;
    let posted: Vec<u64> = rx.recv().map_err(|_| aborted())?;
    drop((a, b));
    Ok(Measured::new(
        posted
            .windows(2)
            .map(|w| w[1].saturating_sub(w[0]) as f64 / 2.0)
            .collect(),
    ))
}

#[cfg(test)]
mod tests {
    use crate::perftest::PerftestArgs;

    // Shape only: performance never fails a unit test.
    #[test]
    fn the_direct_baseline_runs_in_both_modes() {
        for events in [false, true] {
            let args = PerftestArgs {
                iters: Some(50),
                events,
                ..PerftestArgs::default()
            };
            let m = super::send_lat(&args).unwrap();
            assert_eq!(m.samples.len(), 49);
        }
    }
}
