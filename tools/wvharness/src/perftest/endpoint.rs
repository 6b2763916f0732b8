//! One side of a benchmark connection (perftest's `pingpong_context`), the out-of-band
//! exchange between the two sides, and the driver that runs both sides of a test as two
//! threads and prints perftest's report.
//!
//! Every verbs call of the benchmarks goes through [`Side`], so the loops in `send.rs`,
//! `write.rs` and `read.rs` read like perftest's `run_iter_*`.

use std::io::{self, Write};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use wv_client::raw::RawFile;
use wv_client::verbs::{
    self, Buffer, Cq, Mr, Mtu, Pending, Provider, Qp, QpAttr, QpInit, QpType, RecvWr, SendWr, Srq,
    UdAddress, WV_ACCESS_LOCAL_WRITE, WV_ACCESS_REMOTE_READ, WV_ACCESS_REMOTE_WRITE, WcStatus,
    WorkCompletion, WrOpcode, send_flags,
};
use wv_inproc::StackConfig;

use super::cqe_poll::CqePoll;
use super::report::{self, TestInfo};
use super::{Connection, Params, PerftestArgs, Row, Samples, Test, Verb};
use crate::progress::Progress;
use crate::target::{DeviceSpec, Opener, Target, TargetTask, other_device, resolve_device};

/// perftest's UD Q_Key (`DEF_QKEY`).
pub const QKEY: u32 = 0x1111_1111;
/// Bytes of the GRH in front of every UD receive.
pub const GRH: usize = verbs::GRH_BYTES;

/// What one side tells the other out of band (perftest's `pingpong_dest`, rc_pingpong's
/// `LID:QPN:PSN:GID`), plus the buffer address and rkey for RDMA.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dest {
    /// Port LID.
    pub lid: u16,
    /// QP number.
    pub qpn: u32,
    /// First packet sequence number.
    pub psn: u32,
    /// Port GID 0.
    pub gid: [u8; 16],
    /// Remote key of the buffer.
    pub rkey: u32,
    /// Buffer address.
    pub vaddr: u64,
    /// Reads and atomics it keeps in flight (perftest's `out_reads`, the `OUT` field).
    pub out_reads: u32,
}

/// A random 24-bit PSN (rc_pingpong's `lrand48() & 0xffffff`), from the clock: it only has
/// to differ between runs, not be unpredictable.
pub fn random_psn(salt: u32) -> u32 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let mut x = u64::from(nanos) ^ (u64::from(salt) << 32) ^ 0x9e37_79b9_7f4a_7c15;
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    (x as u32) & 0xff_ffff
}

/// How to build one side.
#[derive(Clone, Copy, Debug)]
pub struct SideConfig {
    /// Transport.
    pub connection: Connection,
    /// Send queue depth.
    pub tx_depth: u32,
    /// Receive queue depth.
    pub rx_depth: u32,
    /// Inline threshold.
    pub inline_size: u32,
    /// Buffer size (the largest message; UD receives get 40 more bytes for the GRH).
    pub buf_size: usize,
    /// Use a shared receive queue.
    pub srq: bool,
    /// Separate send and receive CQs (perftest) or one shared CQ (rc_pingpong).
    pub split_cqs: bool,
    /// Reads and atomics in flight (perftest's `out_reads`): the QP's initiator depth and
    /// responder resources.
    pub out_reads: u32,
}

/// How long an event-mode wait may last before it is reported as a lost notification.
pub const EVENT_DEADLINE: Duration = Duration::from_secs(10);

/// A CQ as the benchmark loops use it: polled, or slept on until its event (`-e`).
pub trait LoopCq {
    /// Polls up to `wc.len()` completions.
    fn poll(&self, wc: &mut [WorkCompletion]) -> usize;
    /// Sleeps until the armed notification fires, then re-arms before returning, so no
    /// completion is missed (the first call only arms).
    ///
    /// # Errors
    /// The other side failed, or the event never came.
    fn wait(&self, abort: &AtomicBool) -> Result<(), String>;
    /// Whether the last poll left the CQ empty, so the next completion needs an event
    /// (kept in event mode only).
    fn drained(&self) -> &AtomicBool;
}

/// The send-queue request of the bytes `sge` describes, as both data paths build it (so the
/// filter-overhead baseline posts what the stack posts): signalled if asked, inline when it
/// fits `inline_size` (never a read), towards `remote` (address, rkey) for RDMA.
pub fn send_wr(
    wr_id: u64,
    opcode: WrOpcode,
    sge: &[wv_softhca::Sge],
    signaled: bool,
    inline_size: u32,
    remote: Option<(u64, u32)>,
) -> SendWr<'_> {
    let mut wr = SendWr::new(wr_id, opcode);
    wr.sg_list = sge;
    if signaled {
        wr.send_flags |= send_flags::SIGNALED;
    }
    let len: u32 = sge.iter().map(|s| s.length).sum();
    if opcode != WrOpcode::RdmaRead && len <= inline_size {
        wr.send_flags |= send_flags::INLINE;
    }
    if let Some((addr, rkey)) = remote {
        wr.remote_addr = addr;
        wr.rkey = rkey;
    }
    wr
}

/// Joins the server's and the client's threads; a side that panicked ends with the error
/// `panicked(side)`.
pub fn join_sides<T>(
    server: std::thread::ScopedJoinHandle<'_, Result<T, String>>,
    client: std::thread::ScopedJoinHandle<'_, Result<T, String>>,
    panicked: impl Fn(&str) -> String,
) -> (Result<T, String>, Result<T, String>) {
    (
        server.join().unwrap_or_else(|_| Err(panicked("server"))),
        client.join().unwrap_or_else(|_| Err(panicked("client"))),
    )
}

/// One side's data path as the benchmark loops drive it: the stack's [`Side`], or the
/// filter-overhead baseline's soft HCA driven without the driver (`bench/direct.rs`), which
/// so runs the very same loop and work requests.
pub trait DataPath {
    /// Its CQs.
    type Cq: LoopCq;
    /// The send CQ.
    fn send_cq(&self) -> &Self::Cq;
    /// The receive CQ.
    fn recv_cq(&self) -> &Self::Cq;
    /// Posts one send-queue request of the first `len` bytes of the buffer (inline when it fits
    /// the threshold), towards the start of the peer's landing half for RDMA.
    ///
    /// # Errors
    /// The provider refused the request.
    fn post(&self, wr_id: u64, opcode: WrOpcode, len: usize, signaled: bool) -> Result<(), String>;
    /// Posts one receive of the whole landing half of the buffer.
    ///
    /// # Errors
    /// The provider refused the request.
    fn post_recv(&self, wr_id: u64) -> Result<(), String>;
}

/// A CQ and its notification, for `-e`: rdma-core's completion-channel pattern (wait for
/// the event, re-arm, then poll; an event may come with nothing to poll).
pub struct EventCq<F: RawFile + Send + Sync + 'static> {
    /// The CQ.
    pub cq: Cq<F>,
    armed: Mutex<Option<Pending<()>>>,
    /// The last poll left the CQ empty (it returned fewer completions than it asked for): the
    /// next completion needs an event.
    drained: AtomicBool,
}

impl<F: RawFile + Send + Sync + 'static> EventCq<F> {
    fn new(cq: Cq<F>) -> Self {
        EventCq {
            cq,
            armed: Mutex::new(None),
            drained: AtomicBool::new(true),
        }
    }

    /// Requests a notification for the next completion (CQ_NOTIFY, then arm: spec §3.7).
    pub fn arm(&self) -> Result<(), String> {
        let p = self.cq.notify(false).map_err(|e| e.to_string())?;
        *self.armed.lock().unwrap_or_else(|e| e.into_inner()) = Some(p);
        Ok(())
    }

    /// Sleeps until the armed notification fires, then re-arms (before polling, so no
    /// completion is missed). Checks `abort` every 100 ms so a failed peer cannot hang us, and
    /// gives up after [`EVENT_DEADLINE`]: in a ping-pong the peer answers at once, so an event
    /// that never comes is a lost notification, reported as an error instead of a hang.
    pub fn wait(&self, abort: &AtomicBool) -> Result<(), String> {
        let p = self.armed.lock().unwrap_or_else(|e| e.into_inner()).take();
        let Some(p) = p else {
            return self.arm();
        };
        let start = Instant::now();
        loop {
            if let Some(r) = p.wait_timeout(Duration::from_millis(100)) {
                r.map_err(|e| e.to_string())?;
                break;
            }
            if abort.load(Ordering::Relaxed) {
                return Err(aborted());
            }
            if start.elapsed() > EVENT_DEADLINE {
                return Err(format!(
                    "no completion event within {} s of arming the CQ (a lost notification)",
                    EVENT_DEADLINE.as_secs()
                ));
            }
        }
        self.arm()
    }

    /// Polls up to `wc.len()` completions.
    pub fn poll(&self, wc: &mut [WorkCompletion]) -> usize {
        self.cq.poll(wc)
    }
}

impl<F: RawFile + Send + Sync + 'static> LoopCq for EventCq<F> {
    fn poll(&self, wc: &mut [WorkCompletion]) -> usize {
        EventCq::poll(self, wc)
    }
    fn wait(&self, abort: &AtomicBool) -> Result<(), String> {
        EventCq::wait(self, abort)
    }
    fn drained(&self) -> &AtomicBool {
        &self.drained
    }
}

impl<F: RawFile + Send + Sync + 'static> DataPath for Side<F> {
    type Cq = EventCq<F>;
    fn send_cq(&self) -> &EventCq<F> {
        &self.send_cq
    }
    fn recv_cq(&self) -> &EventCq<F> {
        &self.recv_cq
    }
    fn post(&self, wr_id: u64, opcode: WrOpcode, len: usize, signaled: bool) -> Result<(), String> {
        let sge = [self.mr.sge(0, len as u32)];
        let remote = self.remote.as_ref().map(|r| (r.vaddr, r.rkey));
        let mut wr = send_wr(wr_id, opcode, &sge, signaled, self.inline_size, remote);
        wr.ud = self.ud_remote;
        self.qp
            .post_send(&wr)
            .map_err(|e| format!("post send failed: {e:?} (errno {})", e.errno()))
    }

    /// Posts one receive of the whole receive buffer.
    fn post_recv(&self, wr_id: u64) -> Result<(), String> {
        let sge = [self.buf.sge(
            self.land_off,
            (self.buf.len() - self.land_off) as u32,
            self.mr.lkey(),
        )];
        let wr = RecvWr {
            wr_id,
            sg_list: &sge,
        };
        let r = match &self.srq {
            Some(srq) => srq.post_recv(&wr),
            None => self.qp.post_recv(&wr),
        };
        r.map_err(|e| format!("post receive failed: {e:?} (errno {})", e.errno()))
    }
}

/// One side: device, PD, CQs, QP, a registered buffer.
pub struct Side<F: RawFile + Send + Sync + 'static> {
    /// Send CQ.
    pub send_cq: std::sync::Arc<EventCq<F>>,
    /// Receive CQ (the same as `send_cq` unless split).
    pub recv_cq: std::sync::Arc<EventCq<F>>,
    /// The QP.
    pub qp: Qp<F>,
    /// The SRQ, with `--srq`.
    pub srq: Option<Srq<F>>,
    /// The protection domain (address handles are made in it).
    pd: verbs::Pd<F>,
    /// The UD address handle of the peer (perftest and ud_pingpong create one; creating it is
    /// where a RoCE port refuses an address without a GID).
    ah: Option<verbs::Ah<F>>,
    /// Port 1's GID table.
    gids: Vec<[u8; 16]>,
    /// Reads and atomics in flight.
    out_reads: u32,
    /// The registered buffer: messages go out from `[0, land_off)`; receives and the peer's
    /// RDMA land in `[land_off, ..)` (perftest's two halves, so incoming data never overwrites
    /// the next outgoing message).
    pub buf: Buffer,
    /// Where the landing half starts (the largest message size).
    pub land_off: usize,
    mr: Mr,
    mtu: Mtu,
    /// This side's address.
    pub local: Dest,
    /// The peer's address, once connected.
    pub remote: Option<Dest>,
    /// Transport.
    pub connection: Connection,
    /// Inline threshold.
    pub inline_size: u32,
    /// Whether this side's bandwidth loops still adapt their CQE poll batch (perftest's
    /// `dynamic_cqe_poll`, one per process: it stays off for later sizes once a run settled).
    pub dynamic_poll: AtomicBool,
    ud_remote: Option<UdAddress>,
}

/// A read depth as the QP attributes carry it (one byte).
fn rd_atom(n: u32) -> u8 {
    n.min(u32::from(u8::MAX)) as u8
}

fn err(what: &str, e: impl std::fmt::Display) -> String {
    format!("{what}: {e}")
}

/// The message when the peer thread failed first.
pub fn aborted() -> String {
    "the other side stopped".into()
}

impl<F: RawFile + Send + Sync + 'static> Side<F> {
    /// Opens the device `guid` on `provider` and creates everything (perftest's `ctx_init`).
    pub fn open(
        provider: &Provider<F>,
        guid: u64,
        c: SideConfig,
        salt: u32,
    ) -> Result<Self, String> {
        let device = provider
            .open_device(guid)
            .map_err(|e| err("opening the device", e))?;
        let port = device
            .query_port(1)
            .map_err(|e| err("querying port 1", e))?;
        let gids = device.query_gids(1).map_err(|e| err("querying GIDs", e))?;
        let pd = device.alloc_pd().map_err(|e| err("allocating a PD", e))?;
        let cq_entries = c.tx_depth + c.rx_depth + 1;
        let send_cq = std::sync::Arc::new(EventCq::new(
            device
                .create_cq(cq_entries)
                .map_err(|e| err("creating a CQ", e))?,
        ));
        let recv_cq = if c.split_cqs {
            std::sync::Arc::new(EventCq::new(
                device
                    .create_cq(c.rx_depth + 1)
                    .map_err(|e| err("creating a CQ", e))?,
            ))
        } else {
            send_cq.clone()
        };
        let ud = c.connection == Connection::Ud;
        // The landing half starts half a page past a page boundary: buffers are page aligned,
        // so a landing area at a multiple of 4096 from the source would put every copy's
        // source and destination at the same offset within a page, where the CPU's 4K-aliasing
        // check (loads that seem to depend on earlier stores) slows a 64 KiB memmove by about
        // 40 % on the machines this runs on. perftest's buffers move by DMA, which does not care.
        let land_off = c.buf_size.max(64).next_multiple_of(4096) + 2048;
        let buf = device.alloc_buffer(2 * land_off + if ud { GRH } else { 0 });
        let access = WV_ACCESS_LOCAL_WRITE | WV_ACCESS_REMOTE_WRITE | WV_ACCESS_REMOTE_READ;
        let mr = pd
            .reg_mr(&buf, access)
            .map_err(|e| err("registering memory", e))?;
        let srq = if c.srq {
            Some(
                pd.create_srq(c.rx_depth, 1, 0)
                    .map_err(|e| err("creating an SRQ", e))?,
            )
        } else {
            None
        };
        let qp = pd
            .create_qp(&QpInit {
                qp_type: match c.connection {
                    Connection::Rc => QpType::Rc,
                    Connection::Uc => QpType::Uc,
                    Connection::Ud => QpType::Ud,
                },
                send_cq: &send_cq.cq,
                recv_cq: &recv_cq.cq,
                srq: srq.as_ref(),
                max_send_wr: c.tx_depth.max(1),
                max_recv_wr: c.rx_depth.max(1),
                max_send_sge: 1,
                max_recv_sge: 1,
                max_inline: c.inline_size,
                sq_sig_all: false,
            })
            .map_err(|e| err("creating a QP", e))?;
        let local = Dest {
            lid: u16::from_be(port.Lid),
            qpn: qp.qpn(),
            psn: random_psn(salt),
            // perftest uses GID index 0 on an Ethernet port when -x names none.
            gid: gids.first().copied().unwrap_or([0; 16]),
            rkey: mr.rkey(),
            vaddr: buf.addr() + land_off as u64,
            out_reads: c.out_reads.max(1),
        };
        // The QP holds its PD and the PD its device.
        drop(device);
        Ok(Side {
            pd,
            ah: None,
            gids,
            out_reads: c.out_reads.max(1),
            send_cq,
            recv_cq,
            qp,
            srq,
            buf,
            land_off,
            mr,
            mtu: mtu_enum(port.ActiveMtu),
            local,
            remote: None,
            connection: c.connection,
            inline_size: c.inline_size,
            dynamic_poll: AtomicBool::new(false),
            ud_remote: None,
        })
    }

    /// GID `index` of port 1, for `-g` (rc_pingpong's message when there is none).
    ///
    /// # Errors
    /// No such entry.
    pub fn gid(&self, index: u32) -> Result<[u8; 16], String> {
        self.gids
            .get(index as usize)
            .copied()
            .ok_or_else(|| format!("Could not get local gid for gid index {index}"))
    }

    /// Moves the QP to RTS towards `remote` with rc_pingpong's / perftest's attributes (RC/UC:
    /// INIT, RTR with the path, RTS with timeout 14, retry 7, RNR retry 7; UD: Q_Key, no path).
    pub fn connect(&mut self, remote: Dest) -> Result<(), String> {
        let access = WV_ACCESS_LOCAL_WRITE | WV_ACCESS_REMOTE_WRITE | WV_ACCESS_REMOTE_READ;
        let step = |attr: QpAttr, what: &str| self.qp.modify(&attr).map_err(|e| err(what, e));
        let av = verbs::AddressVector {
            dgid: remote.gid,
            dlid: remote.lid,
            // rc_pingpong routes by GID when the peer has one, with hop limit 1.
            grh_valid: remote.gid != [0; 16],
            hop_limit: 1,
            port: 1,
            ..Default::default()
        };
        match self.connection {
            Connection::Ud => {
                step(QpAttr::init_ud(1, 0, QKEY), "moving the QP to INIT")?;
                step(QpAttr::rtr_ud(), "moving the QP to RTR")?;
                step(QpAttr::rts_ud(self.local.psn), "moving the QP to RTS")?;
                self.ah = Some(
                    self.pd
                        .create_ah(&av)
                        .map_err(|e| err("Failed to create AH", e))?,
                );
                self.ud_remote = Some(UdAddress {
                    dgid: remote.gid,
                    dlid: remote.lid,
                    grh: av.grh_valid,
                    hop_limit: av.hop_limit,
                    remote_qpn: remote.qpn,
                    remote_qkey: QKEY,
                    ..UdAddress::default()
                });
            }
            Connection::Uc => {
                step(QpAttr::init(1, 0, access), "moving the QP to INIT")?;
                step(
                    QpAttr::rtr_uc(remote.qpn, remote.psn, &av, self.mtu),
                    "moving the QP to RTR",
                )?;
                step(QpAttr::rts_ud(self.local.psn), "moving the QP to RTS")?;
            }
            Connection::Rc => {
                step(QpAttr::init(1, 0, access), "moving the QP to INIT")?;
                // perftest: max_dest_rd_atomic and max_rd_atomic are its out_reads.
                step(
                    QpAttr::rtr(
                        remote.qpn,
                        remote.psn,
                        &av,
                        self.mtu,
                        rd_atom(self.out_reads),
                        12,
                    ),
                    "moving the QP to RTR",
                )?;
                step(
                    QpAttr::rts(self.local.psn, 14, 7, 7, rd_atom(self.out_reads)),
                    "moving the QP to RTS",
                )?;
            }
        }
        self.remote = Some(remote);
        Ok(())
    }

    /// Offset of a received message's payload in the receive buffer (after the GRH on UD).
    pub fn recv_payload_offset(&self) -> usize {
        if self.connection == Connection::Ud {
            GRH
        } else {
            0
        }
    }
}

/// Polls `cq` until at least one completion arrives (busy, or sleeping on events), checks
/// each completion's status and returns how many were taken. Gives up with [`aborted`] when
/// the other side failed, and with [`STOPPED`] once the client has finished size `size_ix`
/// (a receiver waiting for messages that a duration run will not send).
///
/// With events it waits first, as perftest's `-e` does (`ctx_notify_events`: get the CQ
/// event, acknowledge, re-arm, then poll), and waits again when the poll finds nothing (the
/// first call only arms, so a completion that came before it is found by the poll that
/// follows). Latency tests wait before every poll, as perftest's latency loops do; bandwidth
/// tests wait only once a poll has emptied the CQ (perftest polls until empty after each
/// event), since completions that were already there raise no new event.
pub fn poll_some<C: LoopCq + ?Sized>(
    cq: &C,
    wc: &mut [WorkCompletion],
    events: bool,
    sh: &Shared,
    size_ix: usize,
) -> Result<usize, String> {
    poll_batch(cq, wc, None, events, sh, size_ix)
}

/// [`poll_some`] asking each poll for the batch `batch` gives (at most `wc.len()`), and telling
/// it what every poll, empty ones included, returned after how many completions (`count`), as
/// perftest's bandwidth loops do.
pub fn poll_batch<C: LoopCq + ?Sized>(
    cq: &C,
    wc: &mut [WorkCompletion],
    mut batch: Option<(&mut CqePoll<'_>, u64)>,
    events: bool,
    sh: &Shared,
    size_ix: usize,
) -> Result<usize, String> {
    let mut spins = 0u32;
    loop {
        if events && (sh.wait_every_poll || cq.drained().load(Ordering::Relaxed)) {
            cq.wait(&sh.abort)?;
        }
        let want = batch
            .as_ref()
            .map_or(wc.len(), |(b, _)| b.batch().min(wc.len()));
        let n = cq.poll(&mut wc[..want]);
        if let Some((b, count)) = batch.as_mut() {
            b.observe(n, *count);
        }
        if events {
            // Only a waiter needs to know; polling keeps no bookkeeping.
            cq.drained().store(n < want, Ordering::Relaxed);
        }
        if n > 0 {
            for w in &wc[..n] {
                if w.status != WcStatus::Success {
                    sh.abort.store(true, Ordering::Relaxed);
                    return Err(format!(
                        "Completion with error: status {:?} ({}) for wr_id {}",
                        w.status, w.status as u8, w.wr_id
                    ));
                }
            }
            return Ok(n);
        }
        if !events {
            spins = spins.wrapping_add(1);
            // Checking the flags on every empty poll would put two more shared cache lines in
            // the latency path; every 1024th costs nothing measurable.
            if spins.is_multiple_of(1024) {
                sh.check(size_ix)?;
            }
            std::hint::spin_loop();
        }
    }
}

/// Returned by waits that ended because the client finished the size.
pub const STOPPED: &str = "stopped";

/// Duration mode (`-D`): perftest's states — warm up for the first quarter, sample until the
/// last quarter, then stop.
pub struct Window {
    start: Instant,
    begin: Duration,
    end: Duration,
    sampled_from: Option<(Instant, u64)>,
    result: Option<(u64, u64)>,
}

impl Window {
    /// A window for a run of `total`.
    pub fn new(total: Duration) -> Window {
        let margin = total / 4;
        Window {
            start: Instant::now(),
            begin: margin,
            end: total - margin,
            sampled_from: None,
            result: None,
        }
    }

    /// The window of a duration run (`p.duration`) and how many iterations a loop may run:
    /// unbounded in duration mode (the window ends it), else the size's count.
    pub fn for_run(p: &Params, run: Run) -> (Option<Window>, u64) {
        let window = p.duration.map(Window::new);
        let iters = if window.is_some() {
            u64::MAX
        } else {
            run.iters
        };
        (window, iters)
    }

    /// Called after each completed iteration (`count` so far); returns `false` when the run is
    /// over.
    pub fn tick(&mut self, count: u64) -> bool {
        let now = Instant::now();
        let t = now - self.start;
        if self.sampled_from.is_none() && t >= self.begin {
            self.sampled_from = Some((now, count));
        }
        if t >= self.end {
            let (from, c0) = self.sampled_from.unwrap_or((now, count));
            self.result = Some((count - c0, (now - from).as_nanos() as u64));
            return false;
        }
        true
    }

    /// `(iterations, nanoseconds)` of the sampling window.
    pub fn result(&self) -> Option<(u64, u64)> {
        self.result
    }
}

/// A two-party rendezvous that gives up when the other party failed (a `Barrier` would wait
/// forever).
pub struct Rendezvous {
    state: Mutex<(u64, u32)>,
    cv: Condvar,
}

impl Default for Rendezvous {
    fn default() -> Self {
        Rendezvous {
            state: Mutex::new((0, 0)),
            cv: Condvar::new(),
        }
    }
}

impl Rendezvous {
    /// Waits until both parties arrive.
    pub fn meet(&self, abort: &AtomicBool) -> Result<(), String> {
        let mut g = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let generation = g.0;
        g.1 += 1;
        if g.1 == 2 {
            g.0 += 1;
            g.1 = 0;
            self.cv.notify_all();
            return Ok(());
        }
        while g.0 == generation {
            if abort.load(Ordering::Relaxed) {
                return Err(aborted());
            }
            g = self
                .cv
                .wait_timeout(g, Duration::from_millis(50))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        Ok(())
    }
}

/// Which end of the connection a thread plays.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// perftest's server (the side started without an address).
    Server,
    /// perftest's client (the side that measures).
    Client,
}

/// What both threads share.
pub struct Shared {
    /// Set by the first side that fails; the other gives up.
    pub abort: AtomicBool,
    /// How many sizes the client has finished (a receiver still waiting gives up: duration runs
    /// and unreliable transports have no fixed message count).
    pub stop: AtomicU64,
    /// Lockstep between sizes (perftest's `ctx_hand_shake`).
    pub sync: Rendezvous,
    /// The common time origin of the timestamps.
    pub origin: Instant,
    /// Event mode waits before every poll (latency tests), not only once the CQ is empty.
    pub wait_every_poll: bool,
}

impl Shared {
    /// [`aborted`] if the peer failed, [`STOPPED`] if the client finished size `size_ix`.
    pub fn check(&self, size_ix: usize) -> Result<(), String> {
        if self.abort.load(Ordering::Relaxed) {
            return Err(aborted());
        }
        if self.stop.load(Ordering::Acquire) > size_ix as u64 {
            return Err(STOPPED.into());
        }
        Ok(())
    }

    /// Nanoseconds since the origin.
    pub fn now(&self) -> u64 {
        self.origin.elapsed().as_nanos() as u64
    }
}

/// What a latency loop records: the client's post times, or in duration mode the sampling
/// window its iterations run in.
pub struct LatLog {
    window: Option<Window>,
    posted: Vec<u64>,
}

impl LatLog {
    /// For a loop of `iters` iterations, or of a duration `window` ([`Window::for_run`]).
    pub fn new(window: Option<Window>, iters: u64) -> LatLog {
        let n = if window.is_some() { 0 } else { iters as usize };
        LatLog {
            window,
            posted: Vec::with_capacity(n),
        }
    }

    /// Just before `role` posts: the client's timestamp (none in duration mode).
    pub fn stamp(&mut self, role: Role, sh: &Shared) {
        if role == Role::Client && self.window.is_none() {
            self.posted.push(sh.now());
        }
    }

    /// After `role` completed `count` iterations: `false` once the client's duration window
    /// is over (the loop ends).
    pub fn tick(&mut self, role: Role, count: u64) -> bool {
        match &mut self.window {
            Some(w) if role == Role::Client => w.tick(count),
            _ => true,
        }
    }

    /// The samples of the loop.
    pub fn samples(self) -> Samples {
        Samples {
            posted: self.posted,
            completed: Vec::new(),
            window: self.window.and_then(|w| w.result()),
            switches: None,
        }
    }
}

/// What every test loop is given: one side's part in one size of the test.
pub struct Step<'a, D> {
    /// The side's data path.
    pub side: &'a D,
    /// Client or server.
    pub role: Role,
    /// The test's parameters.
    pub p: &'a Params,
    /// The size being run.
    pub run: Run,
    /// What both sides share.
    pub sh: &'a Shared,
}

// Not derived: the derive would ask `D: Copy`, and a step only holds a reference to it.
impl<D> Clone for Step<'_, D> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<D> Copy for Step<'_, D> {}

impl<'a, D> Step<'a, D> {
    /// The step's fields as a tuple, for loops that use them all by name.
    pub fn parts(self) -> (&'a D, Role, &'a Params, Run, &'a Shared) {
        (self.side, self.role, self.p, self.run, self.sh)
    }
}

/// Runs one side of test `p.test` for one size (dispatching to the test family's loop).
fn run_size<F: RawFile + Send + Sync + 'static>(
    step: Step<'_, Side<F>>,
) -> Result<Samples, String> {
    let Step {
        role, p, run, sh, ..
    } = step;
    // Both sides start each size together (perftest's hand-shake between sizes), after each
    // has prepared (receives posted, landing byte cleared).
    let r = match p.test {
        Test::SendLat => super::send::lat(step),
        Test::SendBw => super::send::bw(step),
        Test::WriteLat => super::write::lat(step),
        Test::WriteBw => super::one_sided_bw(step, WrOpcode::RdmaWrite),
        Test::ReadLat => super::read::lat(step),
        Test::ReadBw => super::one_sided_bw(step, WrOpcode::RdmaRead),
    };
    if role == Role::Client {
        sh.stop.store(run.ix as u64 + 1, Ordering::Release);
    }
    match r {
        Err(e) if e == STOPPED => Ok(Samples::default()),
        r => r,
    }
}

/// One size of a run.
#[derive(Clone, Copy, Debug)]
pub struct Run {
    /// Index of the size in the sweep.
    pub ix: usize,
    /// Message size.
    pub size: usize,
    /// Iterations (ignored in duration mode).
    pub iters: u64,
}

/// What a running test reports, in order: perftest's text before the results, then one row
/// per size as each completes (a sweep prints as it goes, as perftest does).
pub enum Out<'a> {
    /// Lines printed verbatim (header block, address lines, column header).
    Text(&'a str),
    /// One size's result.
    Row {
        /// Message size.
        size: u64,
        /// perftest's row text.
        text: &'a str,
        /// The same numbers for JSON.
        row: &'a Row,
        /// What the measuring side recorded.
        samples: &'a Samples,
    },
}

/// The task that runs a test on a target.
pub struct PerfTask<'a> {
    /// The resolved parameters.
    pub params: Params,
    /// Where results go.
    pub out: &'a mut dyn FnMut(Out<'_>) -> io::Result<()>,
}

impl TargetTask for PerfTask<'_> {
    type Output = Result<(), String>;

    fn run<O: Opener>(self, opener: &O, device: Option<DeviceSpec>) -> Self::Output {
        let mut p = self.params;
        let out = self.out;
        let io_err = |e: io::Error| e.to_string();
        let provider = Provider::new(opener.open_file().map_err(|e| e.0)?);
        let guids = provider
            .device_guids()
            .map_err(|e| err("listing devices", e))?;
        let server_ix = resolve_device(&guids, device).map_err(|e| e.0)?;
        let client_ix = other_device(guids.len(), server_ix);
        let dev = provider
            .open_device(guids[server_ix])
            .map_err(|e| err("opening the device", e))?;
        let port = dev.query_port(1).map_err(|e| err("querying port 1", e))?;
        let attr = dev.query().map_err(|e| err("querying the device", e))?;
        let mtu = mtu_bytes(port.ActiveMtu);
        // WV_IO_PORT_ATTRIBUTES.Transport: 2 is Ethernet (RoCE), as ibv_devinfo reads it.
        let ethernet = port.Transport == 2;
        let name = crate::target::device_name(
            &crate::target::library_name(&opener.open_file().map_err(|e| e.0)?, guids[server_ix])?,
            server_ix,
        );
        drop(dev);
        drop(provider);
        // perftest's ctx_set_out_reads: the device's max_qp_rd_atom unless -o asks for fewer.
        if p.test.verb() == Verb::Read {
            let max = attr.MaxQpResponderResources.max(1);
            if p.out_reads > max {
                eprintln!("{}", report::RESULT_LINE);
                eprintln!(" Number of outstanding reads is above max = {max}");
                eprintln!(" Changing to that max value");
            }
            p.out_reads = if p.out_reads == 0 {
                max
            } else {
                p.out_reads.min(max)
            };
        }
        let info = TestInfo {
            verb: p.test.verb_str(),
            latency: p.test.is_latency(),
            device: &name,
            connection: p.connection.as_str(),
            srq: false,
            tx_depth: p.tx_depth,
            // The client's header: the server's RX depth line is not in it (perftest prints it
            // on the server only).
            rx_depth: None,
            cq_mod: (!p.test.is_latency()).then_some(p.cq_mod),
            cqe_poll: (!p.dynamic_cqe_poll).then_some(p.cqe_poll),
            disabling_notice: p.disabling_notice,
            peak_warning: p.peak_warning,
            mtu,
            inline_or_outstanding: if p.test.verb() == Verb::Read {
                p.out_reads
            } else {
                p.inline_size
            },
            events: p.events,
            link: if ethernet { "Ethernet" } else { "IB" },
        };
        out(Out::Text(&report::format_test_info(&info))).map_err(io_err)?;
        let json_info = report::json_test_info(&info);
        let cfg = SideConfig {
            connection: p.connection,
            tx_depth: p.tx_depth,
            rx_depth: if p.test.verb() == Verb::Send {
                p.rx_depth
            } else {
                1
            },
            inline_size: p.inline_size,
            buf_size: p.max_size() as usize,
            srq: false,
            split_cqs: true,
            out_reads: p.out_reads,
        };
        let sh = Shared {
            abort: AtomicBool::new(false),
            stop: AtomicU64::new(0),
            sync: Rendezvous::default(),
            origin: Instant::now(),
            wait_every_poll: p.test.is_latency(),
        };
        let (to_client, from_server) = mpsc::channel::<Dest>();
        let (to_server, from_client) = mpsc::channel::<Dest>();
        let (events_tx, events_rx) = mpsc::channel::<Event>();
        let body = |role: Role,
                    guid: u64,
                    tx: mpsc::Sender<Dest>,
                    rx: mpsc::Receiver<Dest>,
                    events: Option<mpsc::Sender<Event>>|
         -> Result<(), String> {
            let result = (|| {
                if let Some((server, client)) = p.cpus {
                    super::pin_to(if role == Role::Server { server } else { client })?;
                }
                // Each side opens its own handle, as a separate process would.
                let provider = Provider::new(opener.open_file().map_err(|e| e.0)?);
                let mut side = Side::open(&provider, guid, cfg, role as u32)?;
                side.dynamic_poll
                    .store(p.dynamic_cqe_poll, Ordering::Relaxed);
                tx.send(side.local).map_err(|_| aborted())?;
                let remote = rx
                    .recv_timeout(Duration::from_secs(30))
                    .map_err(|_| aborted())?;
                side.connect(remote)?;
                if let Some(ev) = &events {
                    ev.send(Event::Connected(side.local, remote))
                        .map_err(|_| aborted())?;
                }
                for (ix, &(size, iters)) in p.sizes.iter().enumerate() {
                    let run = Run {
                        ix,
                        size: size as usize,
                        iters,
                    };
                    let before = (role == Role::Client)
                        .then(crate::ctx_switches::Switches::now)
                        .flatten();
                    let mut s = run_size(Step {
                        side: &side,
                        role,
                        p: &p,
                        run,
                        sh: &sh,
                    })?;
                    s.switches = before
                        .and_then(|b| crate::ctx_switches::Switches::now().map(|a| a.since(&b)));
                    if let Some(ev) = &events {
                        ev.send(Event::Done(size, s)).map_err(|_| aborted())?;
                    }
                }
                // Neither side tears down while the other still has traffic in flight.
                sh.sync.meet(&sh.abort)?;
                Ok(())
            })();
            if result.is_err() {
                sh.abort.store(true, Ordering::Relaxed);
            }
            result
        };
        let mut printed: Result<(), String> = Ok(());
        let (server, client) = std::thread::scope(|s| {
            let server =
                s.spawn(|| body(Role::Server, guids[server_ix], to_client, from_client, None));
            let client = s.spawn(|| {
                body(
                    Role::Client,
                    guids[client_ix],
                    to_server,
                    from_server,
                    Some(events_tx),
                )
            });
            for ev in events_rx {
                let r = match ev {
                    Event::Connected(local, remote) => {
                        let gid = |d: &Dest| {
                            if ethernet {
                                format!("\n{}", gid_line(&d.gid))
                            } else {
                                String::new()
                            }
                        };
                        let text = format!(
                            "{}{}\n{}{}\n{}\n{}",
                            address_line("local", &local, p.test.verb()),
                            gid(&local),
                            address_line("remote", &remote, p.test.verb()),
                            gid(&remote),
                            report::RESULT_LINE,
                            super::column_header(&p)
                        );
                        out(Out::Text(&text)).map_err(io_err)
                    }
                    Event::Done(size, samples) => {
                        super::row_for(&p, size, &samples).and_then(|(text, row)| {
                            if let Some(path) = &p.out_json {
                                // perftest rewrites the file at every report: a sweep leaves
                                // the last size's.
                                std::fs::write(path, report::json_report(&json_info, &row))
                                    .map_err(|e| {
                                        format!("failed to open {}: {e}", path.display())
                                    })?;
                            }
                            out(Out::Row {
                                size,
                                text: &text,
                                row: &row,
                                samples: &samples,
                            })
                            .map_err(io_err)
                        })
                    }
                };
                if let Err(e) = r {
                    sh.abort.store(true, Ordering::Relaxed);
                    printed = Err(e);
                    break;
                }
            }
            join_sides(server, client, |side| format!("the {side} thread panicked"))
        });
        // Report the first real failure, not the other side's "stopped" echo of it.
        for r in [printed, client, server] {
            if let Err(e) = r
                && e != aborted()
            {
                return Err(e);
            }
        }
        out(Out::Text(report::RESULT_LINE)).map_err(io_err)
    }
}

/// What the client thread tells the printing thread.
enum Event {
    Connected(Dest, Dest),
    Done(u64, Samples),
}

/// C's `%#0Nx`: `0x` and zero padding to `width` characters in all (no `0x` for zero).
fn c_alt_hex(v: u64, width: usize) -> String {
    if v == 0 {
        format!("{:0width$x}", 0)
    } else {
        format!("{v:#0width$x}")
    }
}

/// perftest's GID line under an address on a RoCE port: each byte in decimal, two digits at
/// least (`" GID: %02d:%02d:…"`).
fn gid_line(gid: &[u8; 16]) -> String {
    let bytes: Vec<String> = gid.iter().map(|b| format!("{b:02}")).collect();
    format!(" GID: {}", bytes.join(":"))
}

/// perftest's address line (`BASIC_ADDR_FMT`, then `READ_FMT`/`RDMA_FMT` for RDMA verbs).
fn address_line(side: &str, d: &Dest, verb: Verb) -> String {
    let mut s = format!(
        " {side} address: LID {} QPN {} PSN {}",
        c_alt_hex(u64::from(d.lid), 4),
        c_alt_hex(u64::from(d.qpn), 6),
        c_alt_hex(u64::from(d.psn), 6)
    );
    if verb == Verb::Read {
        s.push_str(&format!(" OUT {}", c_alt_hex(u64::from(d.out_reads), 4)));
    }
    if verb != Verb::Send {
        s.push_str(&format!(
            " RKey {} VAddr {}",
            c_alt_hex(u64::from(d.rkey), 8),
            c_alt_hex(d.vaddr, 16)
        ));
    }
    s
}

/// Resolves the parameters, runs the test on the target the options name, and prints perftest's
/// report (or JSON).
pub fn run_test(test: Test, args: &PerftestArgs) -> io::Result<ExitCode> {
    // The soft HCA's port MTU (4096) bounds UD messages; a real device's is checked against
    // the port once open.
    let p = match super::params(test, args, 4096) {
        Ok(p) => p,
        Err(e) => {
            if super::warned_before(test, args, &e) {
                println!("{}", super::PEAK_WARNING);
            }
            println!("{}", report::RESULT_LINE);
            eprintln!(" {e}");
            return Ok(ExitCode::FAILURE);
        }
    };
    let (target, device) = Target::open(&args.target, StackConfig::default())?;
    let json = args.json;
    let mut rows: Vec<Row> = Vec::new();
    let mut stdout = io::stdout().lock();
    let long = p.sizes.len() > 1 || p.duration.is_some();
    let mut bar = Progress::new(test.name(), p.sizes.len() as u64, long && !json);
    if let Some(d) = p.duration {
        bar.working_on(&format!("running for {} s", d.as_secs()));
    }
    // A reader that went away (`wvharness send_lat | head`) ends the run quietly.
    let pipe_closed = std::cell::Cell::new(false);
    let mut sink = |o: Out<'_>| -> io::Result<()> {
        let written = (|| -> io::Result<()> {
            match o {
                Out::Text(t) if !json => {
                    bar.finish();
                    writeln!(stdout, "{t}")?;
                }
                Out::Text(_) => {}
                Out::Row {
                    size, text, row, ..
                } => {
                    bar.finish();
                    if !json {
                        writeln!(stdout, "{text}")?;
                    }
                    rows.push(row.clone());
                    bar.step(&format!("{size} bytes"));
                }
            }
            Ok(())
        })()
        .and_then(|()| stdout.flush());
        if written
            .as_ref()
            .is_err_and(|e| e.kind() == io::ErrorKind::BrokenPipe)
        {
            pipe_closed.set(true);
        }
        written
    };
    let result = target.run(
        PerfTask {
            params: p.clone(),
            out: &mut sink,
        },
        device,
    );
    bar.finish();
    drop(bar);
    if pipe_closed.get() {
        return Ok(ExitCode::SUCCESS);
    }
    if let Err(e) = result {
        eprintln!("wvharness {}: {e}", test.name());
        return Ok(ExitCode::FAILURE);
    }
    if json {
        let doc = serde_json::json!({
            "test": test.name(),
            "connection": p.connection.as_str(),
            "tx_depth": p.tx_depth,
            "rx_depth": (test.verb() == Verb::Send).then_some(p.rx_depth),
            "cq_mod": (!test.is_latency()).then_some(p.cq_mod),
            "inline_size": p.inline_size,
            "events": p.events,
            "columns": super::column_header(&p).trim(),
            "results": rows,
        });
        let mut stdout = io::stdout().lock();
        serde_json::to_writer_pretty(&mut stdout, &doc).map_err(io::Error::other)?;
        writeln!(stdout)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// One size of a quiet run: perftest's row and the measuring side's per-iteration times.
#[derive(Clone, Debug)]
pub struct Measurement {
    /// perftest's numbers.
    pub row: Row,
    /// Latency tests: each iteration's time in ns as the row reports it (half a round trip for
    /// send and write, the whole operation for read), unsorted. Bandwidth tests: empty.
    pub iteration_ns: Vec<f64>,
    /// Context switches of the process while the client ran this size (`Samples::switches`).
    pub context_switches: Option<u64>,
}

/// Runs a test quietly on a fresh in-process stack built with `config` (or on the target the
/// options name) and returns its rows with their samples. `sizes` replaces the options' sizes
/// (`(size, iterations)` each), so one connection runs several sizes.
pub fn measure_sizes(
    test: Test,
    args: &PerftestArgs,
    sizes: Option<&[(u64, u64)]>,
    config: StackConfig,
) -> Result<Vec<Measurement>, String> {
    let mut p = super::params(test, args, 4096)?;
    if let Some(sizes) = sizes {
        p.sizes = sizes.to_vec();
    }
    let rtt = f64::from(p.test.rtt() as u8);
    let (target, device) = Target::open(&args.target, config).map_err(|e| e.0)?;
    let mut rows = Vec::new();
    let mut sink = |o: Out<'_>| -> io::Result<()> {
        if let Out::Row { row, samples, .. } = o {
            let iteration_ns = samples
                .posted
                .windows(2)
                .map(|w| w[1].saturating_sub(w[0]) as f64 / rtt)
                .collect();
            rows.push(Measurement {
                row: row.clone(),
                iteration_ns,
                context_switches: samples.switches,
            });
        }
        Ok(())
    };
    target.run(
        PerfTask {
            params: p,
            out: &mut sink,
        },
        device,
    )?;
    Ok(rows)
}

/// Runs a test quietly and returns its rows (for the default run's summary).
pub fn measure(test: Test, args: &PerftestArgs) -> Result<Vec<Row>, String> {
    Ok(measure_sizes(test, args, None, StackConfig::default())?
        .into_iter()
        .map(|m| m.row)
        .collect())
}

/// The port's MTU in bytes (`WV_IO_PORT_ATTRIBUTES` reports bytes; 0 means unknown).
pub fn mtu_bytes(bytes: u32) -> u32 {
    if bytes == 0 { 1024 } else { bytes }
}

/// The path MTU for a port MTU in bytes.
fn mtu_enum(bytes: u32) -> Mtu {
    match bytes {
        0..=256 => Mtu::Mtu256,
        257..=512 => Mtu::Mtu512,
        513..=1024 => Mtu::Mtu1024,
        1025..=2048 => Mtu::Mtu2048,
        _ => Mtu::Mtu4096,
    }
}
