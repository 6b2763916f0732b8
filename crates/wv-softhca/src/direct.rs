//! A client of a soft HCA without the driver: the device's kernel half called through
//! [`wv_hal::Verbs`] and its data path through the user-mode provider, as the baselines and
//! examples that measure what the driver adds use it. Each step hands the device's vendor
//! output to the provider the way the client library does after the matching IOCTL.

use alloc::sync::Arc;
use core::fmt;

use zerocopy::FromBytes;

use wv_abi::consts::{WV_ACCESS_LOCAL_WRITE, WV_ACCESS_REMOTE_READ, WV_ACCESS_REMOTE_WRITE};
use wv_hal::{
    AddressVector, CaEventSink, CqEventSink, DeviceModelPlatform, Gid, KArc, Mtu, QpCreate,
    QpEventSink, QpInit, QpModify, QpPath, QpRtr, QpRts, QpType, Umv, Verbs, VerbsError,
};

use crate::abi;
use crate::device::DeviceConfig;
use crate::dma::ClientMemory;
use crate::uvp::{UvpContext, UvpCq, UvpQp};
use crate::verbs_impl::{SoftCa, SoftCq, SoftHca, SoftPd, SoftQp};

/// Room for any vendor output of the soft HCA (the open's, a CQ's or a QP's reply).
const VENDOR_OUT: usize = 64;

/// The step of a direct opening that failed, and how.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DirectError {
    /// What was being done: `open CA`, `context`, `PD`, `CQ`, `CQ map`, `QP`, `modify` …
    pub step: &'static str,
    /// How it failed (`Other` for vendor output the provider cannot read).
    pub error: VerbsError,
}

impl fmt::Display for DirectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {:?}", self.step, self.error)
    }
}

fn at(step: &'static str) -> impl Fn(VerbsError) -> DirectError {
    move |error| DirectError { step, error }
}

/// Runs `verb` with room for its vendor output; returns what it made and that output.
fn answered<T>(
    step: &'static str,
    verb: impl FnOnce(&mut Umv<'_>) -> Result<T, VerbsError>,
) -> Result<(T, [u8; VENDOR_OUT]), DirectError> {
    let mut out = [0u8; VENDOR_OUT];
    let made = verb(&mut Umv::new(0, 0, VENDOR_OUT, &mut out)).map_err(at(step))?;
    Ok((made, out))
}

/// An object the device made and the provider's view of it.
pub type Made<K, U> = Result<(K, U), DirectError>;

/// Runs the verb `create` that makes an object (with room for its vendor output), reads that
/// output and has the provider `map` it; `steps` name the three for an error.
fn mapped<K, N, R: FromBytes + Copy, U>(
    steps: [&'static str; 3],
    create: impl FnOnce(&mut Umv<'_>) -> Result<(K, N), VerbsError>,
    map: impl FnOnce(&R) -> Result<U, VerbsError>,
) -> Made<K, U> {
    let [made, read, mapping] = steps;
    let ((object, _), out) = answered(made, create)?;
    let resp = abi::parse(&out).ok_or(DirectError {
        step: read,
        error: VerbsError::Other,
    })?;
    Ok((object, map(&resp).map_err(at(mapping))?))
}

/// A soft HCA opened by one client without the driver: its CA, the user-mode provider made
/// from the open's reply, and a PD.
pub struct DirectClient<P: DeviceModelPlatform> {
    /// The device.
    pub hca: Arc<SoftHca<P>>,
    /// The client's open of the device.
    pub ca: SoftCa,
    /// The user-mode provider of this open.
    pub uvp: UvpContext,
    /// The client's protection domain.
    pub pd: SoftPd,
}

impl<P: DeviceModelPlatform> DirectClient<P> {
    /// A new soft HCA on `platform` (as [`SoftHca::try_new`] makes it), opened as
    /// [`DirectClient::open`] does.
    ///
    /// # Errors
    /// The step that failed: `device` when the device cannot be made, then as
    /// [`DirectClient::open`].
    pub fn create(
        platform: Arc<P>,
        config: DeviceConfig,
        memory: ClientMemory,
        events: KArc<dyn CaEventSink>,
    ) -> Result<Self, DirectError> {
        let hca = SoftHca::try_new(platform, config, memory).map_err(at("device"))?;
        Self::open(hca, events)
    }

    /// Opens `hca` (its asynchronous events to `events`), makes the user-mode provider from the
    /// open's reply and allocates a PD.
    ///
    /// # Errors
    /// The step that failed: `open CA`, `context` or `PD`.
    pub fn open(hca: Arc<SoftHca<P>>, events: KArc<dyn CaEventSink>) -> Result<Self, DirectError> {
        let (ca, out) = answered("open CA", |umv| hca.open_ca(umv, events))?;
        let uvp = UvpContext::from_open_resp(&out).map_err(at("context"))?;
        let pd = hca.allocate_pd(&ca, &mut Umv::none()).map_err(at("PD"))?;
        Ok(DirectClient { hca, ca, uvp, pd })
    }

    /// A CQ of `entries` (its completion callbacks to `events`) and the provider's view of it.
    ///
    /// # Errors
    /// The step that failed: `CQ`, `CQ response` or `CQ map`.
    pub fn create_cq(&self, entries: u32, events: KArc<dyn CqEventSink>) -> Made<SoftCq, UvpCq> {
        mapped(
            ["CQ", "CQ response", "CQ map"],
            |umv| self.hca.create_cq(&self.ca, entries, events, umv),
            |resp| self.uvp.map_cq(resp),
        )
    }

    /// An RC QP in the client's PD over `send_cq` and `recv_cq` with `[send, receive]`
    /// requests of one SGE each (`depths`), up to `max_inline` bytes inline and only the sends
    /// asked for signaled, as perftest makes one (its events to `events`), and the provider's
    /// view of it.
    ///
    /// # Errors
    /// The step that failed: `QP`, `QP response` or `QP map`.
    pub fn create_rc_qp(
        &self,
        send_cq: &SoftCq,
        recv_cq: &SoftCq,
        depths: [u32; 2],
        max_inline: u32,
        events: KArc<dyn QpEventSink>,
    ) -> Made<SoftQp, UvpQp> {
        let [sq_depth, rq_depth] = depths;
        let create = QpCreate {
            qp_type: QpType::Rc,
            sq_depth,
            rq_depth,
            sq_sge: 1,
            rq_sge: 1,
            sq_max_inline: max_inline,
            sq_signaled: false,
            send_cq,
            recv_cq,
            srq: None,
        };
        mapped(
            ["QP", "QP response", "QP map"],
            |umv| self.hca.create_qp(&self.pd, &create, events, umv),
            |resp| self.uvp.map_qp(resp),
        )
    }

    /// Takes an RC QP from RESET through INIT and RTR to RTS towards QP `dqpn` at `dgid` on
    /// port 1, with the attributes perftest gives its RC QPs (4096-byte MTU, remote read and
    /// write, one outstanding read each way, retries for ever on RNR).
    ///
    /// # Errors
    /// `modify`, with the first transition's failure.
    pub fn connect_rc(&self, qp: &SoftQp, dgid: Gid, dqpn: u32) -> Result<(), DirectError> {
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
        let modify = |step: QpModify| self.hca.modify_qp(qp, &step, &mut []);
        modify(QpModify::Init(QpInit {
            port: 1,
            qkey: 0,
            pkey_index: 0,
            access: WV_ACCESS_LOCAL_WRITE | WV_ACCESS_REMOTE_WRITE | WV_ACCESS_REMOTE_READ,
        }))
        .and_then(|()| {
            modify(QpModify::Rtr(QpRtr {
                dest_qpn: dqpn,
                primary: path,
                responder_resources: 1,
                rnr_nak_timeout: 12,
                ..QpRtr::default()
            }))
        })
        .and_then(|()| {
            modify(QpModify::Rts(QpRts {
                retry_cnt: 7,
                rnr_retry_cnt: 7,
                local_ack_timeout: 14,
                initiator_depth: 1,
                rnr_nak_timeout: 12,
                responder_resources: 1,
                primary: path,
                ..QpRts::default()
            }))
        })
        .map_err(at("modify"))
    }
}
