//! One side of an RC connection over any stack's file type: its device, PD, CQ, QP and a
//! registered buffer, the connection's QP transitions, and a bounded poll. Shared by path by the
//! end-to-end tests that drive the verbs over a stack: the driver package's (`tests/`), the
//! in-process stack's and the emulated KMDF's.

use wv_client::raw::RawFile;
use wv_client::verbs::*;

/// Every access right a test's regions and QPs use.
pub const ACCESS: u32 = WV_ACCESS_LOCAL_WRITE | WV_ACCESS_REMOTE_WRITE | WV_ACCESS_REMOTE_READ;

/// One side: an RC QP on its own PD and CQ, with a registered buffer.
pub struct Side<F: RawFile> {
    pub dev: Device<F>,
    pub pd: Pd<F>,
    pub cq: Cq<F>,
    pub qp: Qp<F>,
    pub buf: Buffer,
    pub mr: Mr,
}

/// An RC side on device `guid`: see [`side_of`].
pub fn side<F: RawFile + Send + Sync + 'static>(p: &Provider<F>, guid: u64) -> Side<F> {
    side_of(p, guid, QpType::Rc, None)
}

/// A side on device `guid` with a `qp_type` QP (receiving from `srq` if any): a 64-entry CQ,
/// 32 requests of 2 SGEs each way, 64 bytes inline, 8 KiB registered.
pub fn side_of<F: RawFile + Send + Sync + 'static>(
    p: &Provider<F>,
    guid: u64,
    qp_type: QpType,
    srq: Option<&Srq<F>>,
) -> Side<F> {
    let dev = p.open_device(guid).expect("DEVICE_OPEN");
    let pd = dev.alloc_pd().expect("PD_ALLOCATE");
    let cq = dev.create_cq(64).expect("CQ_CREATE");
    let mut init = QpInit::new(qp_type, &cq, &cq);
    init.srq = srq;
    init.max_send_wr = 32;
    init.max_recv_wr = 32;
    init.max_send_sge = 2;
    init.max_recv_sge = 2;
    init.max_inline = 64;
    let qp = pd.create_qp(&init).expect("QP_CREATE");
    let buf = dev.alloc_buffer(8192);
    let mr = pd.reg_mr(&buf, ACCESS).expect("MEMORY_REGISTER");
    Side {
        dev,
        pd,
        cq,
        qp,
        buf,
        mr,
    }
}

/// RESET → INIT → RTR → RTS of both QPs towards each other as ibv_rc_pingpong does, with a
/// global route (RoCE needs one; InfiniBand accepts one).
pub fn connect<F: RawFile + Send + Sync + 'static>(a: &Side<F>, b: &Side<F>) {
    connect_as(a, b, ACCESS, 0x123, 1);
}

/// Both sides to RTS with `access`, `psn` as both PSNs and `depth` RDMA reads/atomics each
/// way.
pub fn connect_as<F: RawFile + Send + Sync + 'static>(
    a: &Side<F>,
    b: &Side<F>,
    access: u32,
    psn: u32,
    depth: u8,
) {
    for (s, peer) in [(a, b), (b, a)] {
        s.qp.modify(&QpAttr::init(1, 0, access)).expect("INIT");
        let av = AddressVector {
            grh_valid: true,
            sgid: s.dev.query_gids(1).expect("GID_QUERY")[0],
            dgid: peer.dev.query_gids(1).expect("GID_QUERY")[0],
            hop_limit: 64,
            port: 1,
            ..AddressVector::default()
        };
        s.qp.modify(&QpAttr::rtr(
            peer.qp.qpn(),
            psn,
            &av,
            Mtu::Mtu1024,
            depth,
            12,
        ))
        .expect("RTR");
        s.qp.modify(&QpAttr::rts(psn, 14, 7, 7, depth))
            .expect("RTS");
        assert_eq!(s.qp.state(), QpState::Rts);
    }
}

/// Connect parameters with `data` as private data, one read each way, seven retries of each
/// kind.
pub fn param(data: &[u8]) -> ConnectParam {
    ConnectParam {
        private_data: data.to_vec(),
        responder_resources: 1,
        initiator_depth: 1,
        retry_count: 7,
        rnr_retry_count: 7,
    }
}

/// The next completion of `cq`, polled (a bounded number of times) until there is one.
pub fn poll_one<F: RawFile>(cq: &Cq<F>) -> WorkCompletion {
    let mut wc = [WorkCompletion::default(); 1];
    for _ in 0..1_000_000 {
        if cq.poll(&mut wc) == 1 {
            return wc[0];
        }
        std::thread::yield_now();
    }
    panic!("no completion");
}
