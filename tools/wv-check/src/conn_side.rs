//! One side of a connection over endpoints, as the endpoint scenarios and wvharness's `rping`
//! and `conn` build it: the device objects, librdmacm's connect parameters, and waiting on a CQ
//! with a hang guard.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use wv_client::raw::RawFile;
use wv_client::verbs::{
    ConnectParam, Cq, Device, Pd, PostError, Qp, QpAttr, QpInit, QpType, Result as VerbsResult,
    SendWr, Sge, WV_ACCESS_LOCAL_WRITE, WorkCompletion, WrOpcode, send_flags,
};

/// How long a side waits for a completion or a connection step before it gives up (a hang
/// guard: every step takes microseconds when things work).
pub const STEP_GUARD: Duration = Duration::from_secs(30);

/// A device's PD, CQ and RC QP for one connection.
pub struct ConnSide<F: RawFile + Send + Sync + 'static> {
    /// The PD the QP is on.
    pub pd: Pd<F>,
    /// One CQ for both queues.
    pub cq: Cq<F>,
    /// The RC QP, in INIT once built.
    pub qp: Qp<F>,
}

impl<F: RawFile + Send + Sync + 'static> ConnSide<F> {
    /// rping's QP: one CQ for both queues, `send_wr` sends, `recv_wr` receives, one SGE each;
    /// moved to INIT on `port` as `rdma_create_qp` does, so receives can be posted before the
    /// connection exists.
    pub fn new(dev: &Device<F>, port: u8, send_wr: u32, recv_wr: u32) -> VerbsResult<Self> {
        let pd = dev.alloc_pd()?;
        Self::on(&pd, port, send_wr, recv_wr)
    }

    /// The same on an existing PD.
    pub fn on(pd: &Pd<F>, port: u8, send_wr: u32, recv_wr: u32) -> VerbsResult<Self> {
        let cq = pd.device().create_cq((send_wr + recv_wr).max(2))?;
        let mut init = QpInit::new(QpType::Rc, &cq, &cq);
        init.max_send_wr = send_wr;
        init.max_recv_wr = recv_wr;
        init.max_send_sge = 1;
        init.max_recv_sge = 1;
        let qp = pd.create_qp(&init)?;
        qp.modify(&QpAttr::init(port, 0, WV_ACCESS_LOCAL_WRITE))?;
        Ok(ConnSide {
            pd: pd.clone(),
            cq,
            qp,
        })
    }

    /// Posts the signalled work request `wr_id` of one gather entry `sge`: `opcode`, and for
    /// an RDMA one the peer's `remote` (address, rkey; ignored by a send).
    ///
    /// # Errors
    /// The post's refusal.
    pub fn post_signaled(
        &self,
        wr_id: u64,
        opcode: WrOpcode,
        sge: Sge,
        remote: (u64, u32),
    ) -> Result<(), PostError> {
        let sg = [sge];
        let mut wr = SendWr::new(wr_id, opcode);
        wr.sg_list = &sg;
        wr.send_flags = send_flags::SIGNALED;
        (wr.remote_addr, wr.rkey) = remote;
        self.qp.post_send(&wr)
    }
}

/// librdmacm's usual connect parameters (rping's): one read each way, 7 retries of each kind.
pub fn rdma_cm_param(private_data: &[u8]) -> ConnectParam {
    ConnectParam {
        private_data: private_data.to_vec(),
        responder_resources: 1,
        initiator_depth: 1,
        retry_count: 7,
        rnr_retry_count: 7,
    }
}

/// Polls `cq` for one completion; gives up when `abort` is set or after [`STEP_GUARD`].
///
/// # Errors
/// The abort or the guard, as text.
pub fn next_completion<F: RawFile + Send + Sync + 'static>(
    cq: &Cq<F>,
    abort: &AtomicBool,
    mut interrupted: impl FnMut() -> bool,
) -> Result<Option<WorkCompletion>, String> {
    let mut wc = [WorkCompletion::default(); 1];
    let start = Instant::now();
    let mut spins = 0u32;
    loop {
        if cq.poll(&mut wc) == 1 {
            return Ok(Some(wc[0]));
        }
        if interrupted() {
            return Ok(None);
        }
        if abort.load(Ordering::Relaxed) {
            return Err("the other side failed".into());
        }
        spins += 1;
        if spins.is_multiple_of(1024) && start.elapsed() > STEP_GUARD {
            return Err(format!("no completion in {} s", STEP_GUARD.as_secs()));
        }
        std::thread::yield_now();
    }
}
