//! The QP-transition workload both the benchmark and the default summary measure: RC QPs on
//! one device, each connected to itself (nothing flows, only the state machine runs), cycled
//! RESET → INIT → RTR → RTS → RESET with overlapped QP_MODIFYs.

use wv_client::raw::RawFile;
use wv_client::verbs::{
    AddressVector, Cq, Device, Mtu, Pd, Provider, Qp, QpAttr, QpInit, QpState, QpType, VerbsError,
    WV_ACCESS_LOCAL_WRITE,
};

use std::time::Instant;

use crate::target::{DeviceSpec, Opener, TargetTask, resolve_device};

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

/// How the modifies of a [`ModifyTask`] overlap.
#[derive(Clone, Copy, Debug)]
pub enum Overlap {
    /// Each step issued on every QP before waiting for any (as an application bringing up many
    /// connections does).
    PerStep,
    /// `threads` threads, each keeping `in_flight` modifies outstanding (a sliding window).
    Window { threads: usize, in_flight: usize },
}

/// QP_MODIFY throughput: `qps` RC QPs cycled RESET → INIT → RTR → RTS → RESET `rounds` times,
/// the modifies overlapping as `overlap` says. Returns transitions per second.
pub struct ModifyTask {
    pub qps: usize,
    pub rounds: usize,
    pub overlap: Overlap,
}

impl TargetTask for ModifyTask {
    type Output = Result<f64, String>;

    fn run<O: Opener>(self, opener: &O, device: Option<DeviceSpec>) -> Self::Output {
        let rig = CyclingQps::open(opener, device, self.qps)?;
        let started = Instant::now();
        let transitions = match self.overlap {
            Overlap::PerStep => per_step(&rig, self.rounds)?,
            Overlap::Window { threads, in_flight } => {
                windowed(&rig, self.rounds, threads, in_flight)?
            }
        };
        Ok(transitions as f64 / started.elapsed().as_secs_f64())
    }
}

/// [`Overlap::PerStep`]: the transitions made.
fn per_step<F: RawFile + Send + Sync + 'static>(
    rig: &CyclingQps<F>,
    rounds: usize,
) -> Result<u64, String> {
    let (qps, e) = (&rig.qps, context);
    let mut transitions = 0u64;
    for _ in 0..rounds {
        for step in 0..STEPS {
            let pending = qps
                .iter()
                .map(|qp| qp.modify_async(&rig.attr(step, qp)))
                .collect::<Result<Vec<_>, _>>()
                .map_err(e("QP_MODIFY"))?;
            for p in pending {
                p.wait().map_err(e("QP_MODIFY"))?;
            }
            transitions += qps.len() as u64;
        }
    }
    Ok(transitions)
}

/// [`Overlap::Window`]: the transitions made.
fn windowed<F: RawFile + Send + Sync + 'static>(
    rig: &CyclingQps<F>,
    rounds: usize,
    threads: usize,
    in_flight: usize,
) -> Result<u64, String> {
    let (qps, e) = (&rig.qps, context);
    let per_thread = qps.len().div_ceil(threads.max(1));
    std::thread::scope(|s| {
        let handles: Vec<_> = qps
            .chunks(per_thread)
            .map(|mine| {
                s.spawn(move || -> Result<u64, String> {
                    // A sliding window: `in_flight` modifies outstanding at every moment
                    // (each QP's own modifies stay in order: the driver runs them FIFO).
                    let mut window = std::collections::VecDeque::new();
                    let mut n = 0u64;
                    for _ in 0..rounds {
                        for step in 0..STEPS {
                            for qp in mine {
                                let attr = rig.attr(step, qp);
                                window.push_back(qp.modify_async(&attr).map_err(e("QP_MODIFY"))?);
                                if window.len() >= in_flight.max(1)
                                    && let Some(p) = window.pop_front()
                                {
                                    p.wait().map_err(e("QP_MODIFY"))?;
                                    n += 1;
                                }
                            }
                        }
                    }
                    for p in window {
                        p.wait().map_err(e("QP_MODIFY"))?;
                        n += 1;
                    }
                    Ok(n)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("a modify thread panicked".into()))
            })
            .sum::<Result<u64, String>>()
    })
}
