//! Verbs-level set-up shared by the bad-flow and traffic scenarios: a provider on the
//! environment's handle, one "end" (device, PD, CQ, QP, registered buffer) per device, RC/UD
//! connection the way ibv_rc_pingpong / ibv_ud_pingpong do it, and bounded polling.

use std::sync::Arc;
use std::time::{Duration, Instant};

use wv_client::verbs::{
    AddressVector, Buffer, Cq, Device, Mr, Mtu, Pd, Provider, Qp, QpAttr, QpInit, QpType, RecvWr,
    STATUS_DLL_NOT_FOUND, SendWr, Sge, VerbsError, WV_ACCESS_LOCAL_WRITE, WV_ACCESS_REMOTE_READ,
    WV_ACCESS_REMOTE_WRITE, WorkCompletion, WrOpcode, send_flags,
};

use crate::env::Env;
use crate::runner::Problem;

/// `ud_pingpong`'s Q_Key.
pub const QKEY: u32 = 0x1111_1111;
/// Every access a traffic buffer needs.
pub const ACCESS_ALL: u32 = WV_ACCESS_LOCAL_WRITE | WV_ACCESS_REMOTE_WRITE | WV_ACCESS_REMOTE_READ;

/// A verbs error as a FAIL message.
pub fn verr(what: &str) -> impl Fn(VerbsError) -> String + '_ {
    move |e| format!("{what}: {e}")
}

/// A provider over a new handle of the environment.
pub fn provider<E: Env>(env: &E) -> Result<Provider<E::File>, Problem> {
    Ok(Provider::new(env.open()?))
}

/// Opens device `guid` through the verbs API. A device whose user-mode provider this build does
/// not have (every real HCA on Windows: only the soft HCA's is built in) makes the scenario
/// SKIP rather than FAIL: the data path cannot be driven without it.
pub fn device<F: wv_client::raw::RawFile + Send + Sync + 'static>(
    p: &Provider<F>,
    guid: u64,
) -> Result<Device<F>, Problem> {
    match p.open_device(guid) {
        Ok(d) => Ok(d),
        Err(e) if e.status == STATUS_DLL_NOT_FOUND => Err(Problem::Skip(format!(
            "the data path needs the device's user-mode provider ({e})"
        ))),
        Err(e) => Err(Problem::Fail(format!("open device {guid:#x}: {e}"))),
    }
}

/// One side of a connection.
pub struct End<F: wv_client::raw::RawFile> {
    /// Its PD.
    pub pd: Pd<F>,
    /// One CQ for both queues.
    pub cq: Cq<F>,
    /// The QP.
    pub qp: Qp<F>,
    /// A registered buffer.
    pub buf: Buffer,
    /// Its registration (all access rights).
    pub mr: Mr,
    /// Port 1's GID 0.
    pub gid: [u8; 16],
}

impl<F: wv_client::raw::RawFile> End<F> {
    /// Posts one receive into `len` bytes of the buffer at `offset`; `what` names the post in
    /// the error.
    pub fn post_recv(&self, wr_id: u64, offset: usize, len: u32, what: &str) -> Result<(), String> {
        self.qp
            .post_recv(&RecvWr {
                wr_id,
                sg_list: &[self.mr.sge(offset, len)],
            })
            .map_err(|e| format!("{what}: {e:?}"))
    }
}

/// What an end is created with.
#[derive(Clone, Copy)]
pub struct Shape {
    /// QP type.
    pub qp_type: QpType,
    /// CQ entries asked for.
    pub cq_entries: u32,
    /// Send queue depth.
    pub send_wr: u32,
    /// Receive queue depth.
    pub recv_wr: u32,
    /// SGEs per request, both ways.
    pub sge: u32,
    /// Largest inline send.
    pub inline: u32,
    /// Every send signalled.
    pub sig_all: bool,
    /// Buffer bytes.
    pub buf_len: usize,
}

impl Shape {
    /// An RC end with room for small tests.
    pub fn rc() -> Shape {
        Shape {
            qp_type: QpType::Rc,
            cq_entries: 64,
            send_wr: 16,
            recv_wr: 16,
            sge: 2,
            inline: 64,
            sig_all: true,
            buf_len: 64 * 1024,
        }
    }

    /// A UD end.
    pub fn ud() -> Shape {
        Shape {
            qp_type: QpType::Ud,
            ..Shape::rc()
        }
    }
}

/// Creates an end on `dev`.
pub fn end<F: wv_client::raw::RawFile + Send + Sync + 'static>(
    dev: &Device<F>,
    shape: Shape,
) -> Result<End<F>, String> {
    let pd = dev.alloc_pd().map_err(verr("PD_ALLOCATE"))?;
    let cq = dev.create_cq(shape.cq_entries).map_err(verr("CQ_CREATE"))?;
    let mut init = QpInit::new(shape.qp_type, &cq, &cq);
    init.max_send_wr = shape.send_wr;
    init.max_recv_wr = shape.recv_wr;
    init.max_send_sge = shape.sge;
    init.max_recv_sge = shape.sge;
    init.max_inline = shape.inline;
    init.sq_sig_all = shape.sig_all;
    let qp = pd.create_qp(&init).map_err(verr("QP_CREATE"))?;
    let buf = dev.alloc_buffer(shape.buf_len);
    let mr = pd
        .reg_mr(&buf, ACCESS_ALL)
        .map_err(verr("MEMORY_REGISTER"))?;
    let gid = dev
        .query_gids(1)
        .map_err(verr("DEVICE_GID_QUERY"))?
        .first()
        .copied()
        .ok_or("port 1 has no GID")?;
    Ok(End {
        pd,
        cq,
        qp,
        buf,
        mr,
        gid,
    })
}

/// The address vector from `from` to `to` over port 1 (a global route, as RoCE needs).
pub fn av<F: wv_client::raw::RawFile>(from: &End<F>, to: &End<F>) -> AddressVector {
    AddressVector {
        grh_valid: true,
        hop_limit: 64,
        sgid: from.gid,
        dgid: to.gid,
        port: 1,
        ..AddressVector::default()
    }
}

/// RESET → INIT → RTR → RTS of `a` towards `b`, with rc_pingpong's attributes.
pub fn rc_to_rts<F: wv_client::raw::RawFile + Send + Sync + 'static>(
    a: &End<F>,
    b: &End<F>,
) -> Result<(), String> {
    rc_to_rts_with(a, b, WV_ACCESS_REMOTE_WRITE | WV_ACCESS_REMOTE_READ, 1)
}

/// [`rc_to_rts`] with the QP's remote `access` and `depth` reads/atomics each way
/// (`max_rd_atomic` and `max_dest_rd_atomic`).
pub fn rc_to_rts_with<F: wv_client::raw::RawFile + Send + Sync + 'static>(
    a: &End<F>,
    b: &End<F>,
    access: u32,
    depth: u8,
) -> Result<(), String> {
    a.qp.modify(&QpAttr::init(1, 0, access))
        .map_err(verr("QP_MODIFY(INIT)"))?;
    a.qp.modify(&QpAttr::rtr(
        b.qp.qpn(),
        0,
        &av(a, b),
        Mtu::Mtu1024,
        depth,
        12,
    ))
    .map_err(verr("QP_MODIFY(RTR)"))?;
    a.qp.modify(&QpAttr::rts(0, 14, 7, 7, depth))
        .map_err(verr("QP_MODIFY(RTS)"))
}

/// Connects two RC ends both ways with the QPs' remote `access` and `depth`.
pub fn connect_rc_with<F: wv_client::raw::RawFile + Send + Sync + 'static>(
    a: &End<F>,
    b: &End<F>,
    access: u32,
    depth: u8,
) -> Result<(), String> {
    rc_to_rts_with(a, b, access, depth)?;
    rc_to_rts_with(b, a, access, depth)
}

/// Connects two RC ends both ways.
pub fn connect_rc<F: wv_client::raw::RawFile + Send + Sync + 'static>(
    a: &End<F>,
    b: &End<F>,
) -> Result<(), String> {
    rc_to_rts(a, b)?;
    rc_to_rts(b, a)
}

/// RESET → INIT → RTR → RTS of a UD end (ud_pingpong's attributes).
pub fn ud_to_rts<F: wv_client::raw::RawFile + Send + Sync + 'static>(
    a: &End<F>,
) -> Result<(), String> {
    a.qp.modify(&QpAttr::init_ud(1, 0, QKEY))
        .map_err(verr("QP_MODIFY(INIT)"))?;
    a.qp.modify(&QpAttr::rtr_ud())
        .map_err(verr("QP_MODIFY(RTR)"))?;
    a.qp.modify(&QpAttr::rts_ud(0))
        .map_err(verr("QP_MODIFY(RTS)"))
}

/// A provider and two ends on it.
pub type Pair<F> = (Provider<F>, End<F>, End<F>);

/// Two ends of `shape`: on the chosen device and on the next one (loopback on the same device
/// when there is only one).
pub fn pair<E: Env>(env: &E, shape: Shape) -> Result<Pair<E::File>, Problem> {
    let p = provider(env)?;
    let guid = env.guid(p.file())?;
    let other = env.other_guid(p.file())?;
    let da = device(&p, guid)?;
    let db = device(&p, other)?;
    let a = end(&da, shape)?;
    let b = end(&db, shape)?;
    Ok((p, a, b))
}

/// Posts a signalled RDMA write `wr_id` of `sge` from `from` to `addr` under `rkey`.
pub fn post_rdma_write<F: wv_client::raw::RawFile + Send + Sync + 'static>(
    from: &End<F>,
    wr_id: u64,
    sge: Sge,
    addr: u64,
    rkey: u32,
) -> Result<(), String> {
    let sg = [sge];
    let mut wr = SendWr::new(wr_id, WrOpcode::RdmaWrite);
    wr.sg_list = &sg;
    wr.send_flags = send_flags::SIGNALED;
    wr.remote_addr = addr;
    wr.rkey = rkey;
    from.qp
        .post_send(&wr)
        .map_err(|e| format!("RDMA write: {e:?}"))
}

/// Two RC ends ([`pair`]), connected both ways.
pub fn rc_pair<E: Env>(env: &E) -> Result<Pair<E::File>, Problem> {
    let (p, a, b) = pair(env, Shape::rc())?;
    connect_rc(&a, &b)?;
    Ok((p, a, b))
}

/// How long a completion may take to show up.
const POLL_LIMIT: Duration = Duration::from_secs(5);

/// Polls `cq` until `n` completions arrived (bounded).
pub fn poll_n<F: wv_client::raw::RawFile>(
    cq: &Cq<F>,
    n: usize,
    what: &str,
) -> Result<Vec<WorkCompletion>, String> {
    let mut got = Vec::with_capacity(n);
    let mut wc = [WorkCompletion::default(); 16];
    let deadline = Instant::now() + POLL_LIMIT;
    while got.len() < n {
        let k = cq.poll(&mut wc[..(n - got.len()).min(16)]);
        got.extend_from_slice(&wc[..k]);
        if k == 0 {
            if Instant::now() > deadline {
                return Err(format!(
                    "{what}: {} of {n} completions after {} s",
                    got.len(),
                    POLL_LIMIT.as_secs()
                ));
            }
            std::thread::yield_now();
        }
    }
    Ok(got)
}

/// Posts `wr` on `qp`, waiting (bounded) while the send queue is full. A device that runs its
/// queues asynchronously (a device service's, a real HCA) frees slots as it executes them, so
/// a burst longer than the queue waits for it, as an application would; the in-process soft
/// HCA runs each post in the poster's thread and never fills up here.
pub fn post_send_waiting<F: wv_client::raw::RawFile + Send + Sync + 'static>(
    qp: &Qp<F>,
    wr: &wv_client::verbs::SendWr<'_>,
) -> Result<(), wv_client::verbs::PostError> {
    let deadline = Instant::now() + POLL_LIMIT;
    loop {
        match qp.post_send(wr) {
            Err(wv_client::verbs::PostError::QueueFull) if Instant::now() < deadline => {
                std::thread::yield_now();
            }
            other => return other,
        }
    }
}

/// Polls one completion.
pub fn poll_one<F: wv_client::raw::RawFile>(
    cq: &Cq<F>,
    what: &str,
) -> Result<WorkCompletion, String> {
    poll_n(cq, 1, what).map(|mut v| v.remove(0))
}

/// Nothing more arrives on `cq` (checked once, after the fact).
pub fn cq_empty<F: wv_client::raw::RawFile>(cq: &Cq<F>, what: &str) -> Result<(), String> {
    let mut wc = [WorkCompletion::default(); 4];
    let k = cq.poll(&mut wc);
    if k == 0 {
        Ok(())
    } else {
        Err(format!(
            "{what}: {k} unexpected completion(s): {:?}",
            &wc[..k]
        ))
    }
}

/// A byte pattern that differs at every offset and per seed.
pub fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) ^ (i >> 8) as u8)
        .collect()
}

/// The raw handle under a provider (for CQ_NOTIFY waiters beyond the verbs API's).
pub fn file<F>(p: &Provider<F>) -> &Arc<F>
where
    F: wv_client::raw::RawFile + Send + Sync + 'static,
{
    p.file()
}
