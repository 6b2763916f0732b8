//! The WinVerbs driver core: everything the filter driver does between "an IOCTL arrived" and
//! "the IRP is completed", in portable `no_std` Rust.
//!
//! [`Driver`] implements [`wv_hal::FilterDriver`]: the WDF glue (`driver/`) and the host model
//! (`wv-host`) call it for lower-device arrival and removal and for the control device's file and
//! IOCTL callbacks. It is generic over the operating-system services ([`wv_hal::Platform`]) and
//! the lower RDMA controller ([`wv_hal::Verbs`]), so the same code runs in the kernel, in the
//! host model's tests and under loom.
//!
//! The behaviour matches OFW WinVerbs byte for byte (`winverbs-spec.md` §2), with the bugs of
//! spec §7.1 that concern the core fixed; each fix is named where it is made (`§7.1-x`).
//!
//! # Concurrency in one paragraph
//! Per-file state lives in a provider (one per open file) behind a gate that counts IOCTLs in flight
//! ([`sync::Gate`]); objects live in per-type id tables under one spin lock, and an IOCTL that
//! uses an object holds a reference on it plus a share of its device's gate, which device
//! removal closes and drains before it destroys verbs handles. No verb is ever called and no
//! wait ever happens with a spin lock held. Parked requests sit in platform queues and are
//! completed straight from the lower device's DPC callbacks. QP modifies run on work items,
//! one drainer per QP ([`sync::ModifySched`]).
//!
//! # Memory
//! Every allocation on a request path can fail and fails the request (OFW's status, usually
//! `STATUS_NO_MEMORY`), never the machine: shared objects are [`wv_hal::KArc`]s, allocated
//! before the lower device is called so nothing can fail after it; collections grow with
//! `try_reserve`, never while a spin lock is held (`fallible.rs`). Cleanup, removal and the
//! DPC callbacks allocate nothing.
//!
//! # OFW bugs (spec §7.1) and the core
//! Fixed, each with a test that fails on the OFW behaviour: (a) the 8-byte CQ_NOTIFY of
//! `BatchNotify` parks as a next-completion notify; (b) no lock is held on any failure path
//! (the host verifier fails a callback that returns holding one);
//! (d) CQ and SRQ errors are sticky; (e) lower-device removal completes every parked request
//! with `STATUS_DEVICE_REMOVED` and destroys every verbs handle; (i) the provider gate is one
//! closed flag and one counter under one lock; (j) DEVICE_QUERY fills `MaxInlineSend` and zeroes
//! `Reserved`, QP_QUERY writes its `Id` header, QP_QUERY/SRQ_QUERY report verb failures;
//! (k) every queue-creation or work-item failure fails the IOCTL that needed it, leaking nothing
//! (`tests/resources.rs`); (l) device open, MR registration
//! and CQ/QP creation run in the caller's thread.
//!
//! Kept for compatibility: every verbs failure is `STATUS_UNSUCCESSFUL`; a failing `query_ca` or
//! `query_port` in the device queries is `STATUS_NO_MEMORY`; DEVICE_NOTIFY/CANCEL answer
//! `STATUS_NOT_FOUND` for a bad device id where the other device calls answer
//! `STATUS_NO_SUCH_DEVICE`; CQ_RESIZE, SRQ_MODIFY and QP_MODIFY report `Information = outlen`
//! on failure; MRs hold no PD reference and PD_DEALLOCATE deregisters them; QP_QUERY reports
//! `Options = 0`, `AlternatePkeyIndex = PkeyIndex`, `RnrNakTimeout = 0` and 8-bit access flags.
//! Changed: QP_MODIFY pends and runs on a work item (`QpModifyMode::Inline` restores OFW),
//! except while the device's QP commands measure much shorter than a hand-off to a worker
//! (`hand_off`), when it runs in the caller's thread as in OFW; under the same measure
//! EP_ACCEPT, which OFW always queued, runs in the caller's thread, and an active
//! EP_DISCONNECT moves its QP to ERROR there before the DREQ rather than after the DREP.
#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

pub mod control;
mod convert;
mod cq;
mod create;
mod device;
mod dispatch;
mod driver;
mod ep;
mod fallible;
pub mod filter;
mod hand_off;
mod ids;
mod notify;
mod pd;
mod provider;
mod qp;
mod qp_modify;
mod rdma_device;
mod shared;
mod srq;
mod status;
pub mod sync;
mod umv;

pub use driver::Driver;
pub use provider::FileContext;
#[cfg(feature = "fault-injection")]
pub use shared::RawCompleter;

/// How QP_MODIFY runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum QpModifyMode {
    /// The request pends and the modify runs on a work item at PASSIVE_LEVEL, FIFO per QP, so
    /// the caller's thread never waits for the controller's command round trip and modifies of
    /// different QPs overlap (the model the WinVerbs authors measured as faster). While the
    /// device's QP commands measure far shorter than a hand-off to a worker, a modify of a QP
    /// with nothing queued runs in the caller's thread instead, in the work item's place (see
    /// `qp_modify`); EP_ACCEPT and an active EP_DISCONNECT's QP step follow the same measure.
    #[default]
    Async,
    /// The modify runs in the caller's thread and the request completes inline, as in the OFW
    /// driver; kept so the benchmarks can compare both.
    Inline,
}

/// Deliberate bugs, so tests can show that each detector of the host model (and of the
/// allocation-failure walk, the fuzz target and the stress run) catches them. Compiled only
/// with the `fault-injection` feature, which nothing shipped enables: the driver built for
/// Windows has none of this code.
#[cfg(feature = "fault-injection")]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Faults {
    /// CQ_DESTROY and cleanup forget the lower CQ instead of destroying it (a leak).
    pub leak_cq_on_destroy: bool,
    /// The CQ completion callback waits on an event at DISPATCH_LEVEL (IRQL misuse).
    pub block_in_cq_callback: bool,
    /// CQ_CANCEL completes its request, then completes the same IRP again through the
    /// platform's raw-IRP layer (see `Driver::set_raw_completer`): a double completion.
    pub complete_twice: bool,
    /// CQ_CANCEL forgets its request: it is never completed (a missing completion).
    pub lose_cq_cancel: bool,
    /// The QP-modify drainer stops without waking a destroy that waits for it (a hang).
    pub lose_modify_wakeup: bool,
    /// DEVICE_OPEN keeps the provider lock when the id table is full (OFW's §7.1-b).
    pub keep_lock_on_full_table: bool,
}

/// Driver settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DriverConfig {
    /// Where QP_MODIFY runs.
    pub qp_modify: QpModifyMode,
    /// Largest number of live ids per provider and object type; an insert beyond it fails with
    /// `STATUS_NO_MEMORY` like OFW's id table when the pool is exhausted. Tests lower it to
    /// reach those paths.
    pub max_ids_per_type: u32,
}

impl Default for DriverConfig {
    fn default() -> Self {
        DriverConfig {
            qp_modify: QpModifyMode::Async,
            max_ids_per_type: u32::MAX,
        }
    }
}
