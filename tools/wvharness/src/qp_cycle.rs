//! The QP-transition workload both the benchmark and the default summary measure: RC QPs on
//! one device, each connected to itself (nothing flows, only the state machine runs), cycled
//! RESET → INIT → RTR → RTS → RESET with overlapped QP_MODIFYs.

use wv_client::raw::RawFile;
use wv_client::verbs::{
    AddressVector, Cq, Device, Mtu, Pd, Provider, Qp, QpAttr, QpInit, QpState, QpType, VerbsError,
    WV_ACCESS_LOCAL_WRITE,
};

use crate::target::{DeviceSpec, Opener, resolve_device};

/// The transitions of one cycle, in order.
pub const STEPS: usize = 4;

/// `qps` RC QPs ready to cycle, with the objects they stand on (dropped after them).
pub struct CyclingQps<F: RawFile> {
    pub qps: Vec<Qp<F>>,
    av: AddressVector,
    _cq: Cq<F>,
    _pd: Pd<F>,
    _dev: Device<F>,
    _provider: Provider<F>,
}

/// An error of a verb, with what was being done.
pub fn context(what: &'static str) -> impl Fn(VerbsError) -> String {
    move |err| format!("{what}: {err}")
}

impl<F: RawFile + Send + Sync + 'static> CyclingQps<F> {
    /// Opens the device (`device`, or the only one) and creates `qps` QPs in RESET.
    pub fn open<O: Opener<File = F>>(
        opener: &O,
        device: Option<DeviceSpec>,
        qps: usize,
    ) -> Result<Self, String> {
        let provider = Provider::new(opener.open_file().map_err(|e| e.0)?);
        let guids = provider
            .device_guids()
            .map_err(context("listing devices"))?;
        let guid = guids[resolve_device(&guids, device).map_err(|e| e.0)?];
        let dev = provider
            .open_device(guid)
            .map_err(context("opening the device"))?;
        let gid = dev
            .query_gids(1)
            .map_err(context("querying GIDs"))?
            .first()
            .copied()
            .unwrap_or([0; 16]);
        let pd = dev.alloc_pd().map_err(context("allocating a PD"))?;
        let cq = dev.create_cq(16).map_err(context("creating a CQ"))?;
        let qps = (0..qps)
            .map(|_| pd.create_qp(&QpInit::new(QpType::Rc, &cq, &cq)))
            .collect::<Result<Vec<_>, _>>()
            .map_err(context("creating a QP"))?;
        let av = AddressVector {
            dgid: gid,
            grh_valid: true,
            hop_limit: 1,
            port: 1,
            ..AddressVector::default()
        };
        Ok(CyclingQps {
            qps,
            av,
            _cq: cq,
            _pd: pd,
            _dev: dev,
            _provider: provider,
        })
    }

    /// The attributes of transition `step` (0..STEPS) of `qp`.
    pub fn attr(&self, step: usize, qp: &Qp<F>) -> QpAttr {
        match step {
            0 => QpAttr::init(1, 0, WV_ACCESS_LOCAL_WRITE),
            1 => QpAttr::rtr(qp.qpn(), 0, &self.av, Mtu::Mtu1024, 1, 12),
            2 => QpAttr::rts(0, 14, 7, 7, 1),
            _ => QpAttr::to_state(QpState::Reset),
        }
    }
}
