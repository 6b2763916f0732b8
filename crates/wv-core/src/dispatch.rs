//! IOCTL dispatch (OFW `WvIoDeviceControl`): the provider gate, decoding through `wv-abi`, and
//! the hand-off to the handler that completes, parks or queues the request.

use wv_abi::consts::WV_CQ_NEXT_COMPLETION;
use wv_abi::encode::{write_guid_list, write_library_name};
use wv_abi::ioctl::WV_IOCTL_CQ_NOTIFY;
use wv_abi::{
    NtStatus, Request, Vendor, WV_IO_AH_CREATE, WV_IO_DEVICE_PORT_QUERY, WV_IO_ID,
    WV_IO_MEMORY_REGISTER, WV_IO_QP_ATTRIBUTES, WV_IO_QP_CREATE, WV_IO_QP_MULTICAST,
    WV_IO_SRQ_ATTRIBUTES, decode, read_u64_id,
};
use wv_hal::{IoRequest, KArc, Platform, SpinLock, Umv, Verbs};

use crate::ep;
use crate::ep::ops::EpCall;
use crate::provider::Provider;
use crate::{cq, device, pd, qp, qp_modify, srq};

/// The vendor (UMV) lengths of a request: the bytes themselves stay in the system buffer,
/// where the controller reads and writes them in place.
#[derive(Clone, Copy, Debug)]
pub(crate) struct VendorLens {
    pub input: usize,
    pub output: usize,
}

impl From<Vendor<'_>> for VendorLens {
    fn from(vendor: Vendor<'_>) -> Self {
        VendorLens {
            input: vendor.input.len(),
            output: vendor.output_len,
        }
    }
}

/// Runs `call` with the request's vendor data (the system buffer after the `fixed`-byte
/// struct, OFW `WvInitVerbsData`) and returns its result and the controller's vendor status
/// (what goes back in `VerbInfo`).
pub(crate) fn with_umv<R: IoRequest, T>(
    req: &mut R,
    fixed: usize,
    command: u32,
    lens: VendorLens,
    call: impl FnOnce(&mut Umv<'_>) -> T,
) -> (T, u32) {
    let buf = req.buffer_mut();
    let tail = buf.get_mut(fixed..).unwrap_or_default();
    let mut umv = Umv::new(command, lens.input, lens.output, tail);
    let result = call(&mut umv);
    (result, umv.status)
}

/// A decoded request, owning what the handler needs so the system buffer is free again.
enum Op {
    GuidQuery {
        output_len: usize,
    },
    LibraryQuery {
        guid: u64,
        output_len: usize,
    },
    DeviceOpen {
        id: WV_IO_ID,
        vendor: VendorLens,
    },
    DeviceClose {
        id: u64,
    },
    DeviceQuery {
        id: u64,
    },
    DevicePortQuery {
        query: WV_IO_DEVICE_PORT_QUERY,
    },
    DeviceGidQuery {
        query: WV_IO_DEVICE_PORT_QUERY,
        output_len: usize,
    },
    DevicePkeyQuery {
        query: WV_IO_DEVICE_PORT_QUERY,
        output_len: usize,
    },
    DeviceNotify {
        id: WV_IO_ID,
    },
    DeviceCancel {
        id: u64,
    },
    PdAllocate {
        id: WV_IO_ID,
        vendor: VendorLens,
    },
    PdDeallocate {
        id: u64,
    },
    PdCancel {
        id: u64,
    },
    MemoryRegister {
        reg: WV_IO_MEMORY_REGISTER,
    },
    MemoryDeregister {
        id: WV_IO_ID,
    },
    MwAllocate {
        id: WV_IO_ID,
        vendor: VendorLens,
    },
    MwDeallocate {
        id: u64,
    },
    AhCreate {
        ah: WV_IO_AH_CREATE,
        vendor: VendorLens,
    },
    AhDestroy {
        id: u64,
    },
    CqCreate {
        id: WV_IO_ID,
        vendor: VendorLens,
    },
    CqDestroy {
        id: u64,
    },
    CqResize {
        id: WV_IO_ID,
        vendor: VendorLens,
    },
    CqNotify {
        id: u64,
        kind: u32,
    },
    CqCancel {
        id: u64,
    },
    SrqCreate {
        attr: WV_IO_SRQ_ATTRIBUTES,
        vendor: VendorLens,
    },
    SrqDestroy {
        id: u64,
    },
    SrqQuery {
        attr: WV_IO_SRQ_ATTRIBUTES,
        vendor: VendorLens,
    },
    SrqModify {
        attr: WV_IO_SRQ_ATTRIBUTES,
        vendor: VendorLens,
    },
    SrqNotify {
        id: u64,
    },
    SrqCancel {
        id: u64,
    },
    QpCreate {
        create: WV_IO_QP_CREATE,
        vendor: VendorLens,
    },
    QpDestroy {
        id: u64,
    },
    QpQuery {
        id: u64,
    },
    QpModify {
        attr: WV_IO_QP_ATTRIBUTES,
    },
    QpAttach {
        mc: WV_IO_QP_MULTICAST,
    },
    QpDetach {
        mc: WV_IO_QP_MULTICAST,
    },
    QpCancel {
        id: u64,
    },
    /// The endpoint IOCTLs, handled by [`crate::ep`].
    Endpoint(EpCall),
}

impl From<Request<'_>> for Op {
    fn from(request: Request<'_>) -> Self {
        use Request as R;
        match request {
            R::GuidQuery { output_len } => Op::GuidQuery { output_len },
            R::LibraryQuery { guid, output_len } => Op::LibraryQuery { guid, output_len },
            R::DeviceOpen { id, vendor } => Op::DeviceOpen {
                id,
                vendor: vendor.into(),
            },
            R::DeviceClose { id } => Op::DeviceClose { id },
            R::DeviceQuery { id, .. } => Op::DeviceQuery { id },
            R::DevicePortQuery { query, .. } => Op::DevicePortQuery { query },
            R::DeviceGidQuery { query, output_len } => Op::DeviceGidQuery { query, output_len },
            R::DevicePkeyQuery { query, output_len } => Op::DevicePkeyQuery { query, output_len },
            R::DeviceNotify { id } => Op::DeviceNotify { id },
            R::DeviceCancel { id } => Op::DeviceCancel { id },
            R::PdAllocate { id, vendor } => Op::PdAllocate {
                id,
                vendor: vendor.into(),
            },
            R::PdDeallocate { id } => Op::PdDeallocate { id },
            R::PdCancel { id } => Op::PdCancel { id },
            R::MemoryRegister { reg } => Op::MemoryRegister { reg },
            R::MemoryDeregister { id } => Op::MemoryDeregister { id },
            R::MwAllocate { id, vendor } => Op::MwAllocate {
                id,
                vendor: vendor.into(),
            },
            R::MwDeallocate { id } => Op::MwDeallocate { id },
            R::AhCreate { ah, vendor } => Op::AhCreate {
                ah,
                vendor: vendor.into(),
            },
            R::AhDestroy { id } => Op::AhDestroy { id },
            R::CqCreate { id, vendor } => Op::CqCreate {
                id,
                vendor: vendor.into(),
            },
            R::CqDestroy { id } => Op::CqDestroy { id },
            R::CqResize { id, vendor } => Op::CqResize {
                id,
                vendor: vendor.into(),
            },
            R::CqNotify { id } => Op::CqNotify {
                id: id.Id,
                kind: id.Data,
            },
            R::CqCancel { id } => Op::CqCancel { id },
            R::SrqCreate { attr, vendor } => Op::SrqCreate {
                attr,
                vendor: vendor.into(),
            },
            R::SrqDestroy { id } => Op::SrqDestroy { id },
            R::SrqQuery { attr, vendor } => Op::SrqQuery {
                attr,
                vendor: vendor.into(),
            },
            R::SrqModify { attr, vendor } => Op::SrqModify {
                attr,
                vendor: vendor.into(),
            },
            R::SrqNotify { id } => Op::SrqNotify { id },
            R::SrqCancel { id } => Op::SrqCancel { id },
            R::QpCreate { create, vendor } => Op::QpCreate {
                create,
                vendor: vendor.into(),
            },
            R::QpDestroy { id } => Op::QpDestroy { id },
            R::QpQuery { id } => Op::QpQuery { id },
            R::QpModify { attr, .. } => Op::QpModify { attr },
            R::QpAttach { mc } => Op::QpAttach { mc },
            R::QpDetach { mc } => Op::QpDetach { mc },
            R::QpCancel { id } => Op::QpCancel { id },
            ep => match EpCall::of(&ep) {
                Some(call) => Op::Endpoint(call),
                // Every other request is matched above.
                None => Op::Endpoint(EpCall::NotImplemented),
            },
        }
    }
}

/// Decodes a request. The one departure from the decoder is `IWVCompletionQueue::BatchNotify`:
/// it sends CQ_NOTIFY with only the 8-byte CQ id, which OFW (and the decoder) reject with
/// `STATUS_BUFFER_TOO_SMALL`; the core takes exactly that shape as a next-completion notify
/// (fix of spec §7.1-a), which makes the `BATCH_NOTIFY_CQ` capability DEVICE_QUERY reports true.
fn decode_op<R: IoRequest>(req: &R) -> Result<Op, NtStatus> {
    let code = req.ioctl_code();
    let buf = req.buffer();
    let input = &buf[..req.input_len().min(buf.len())];
    match decode(code, input, req.output_len()) {
        Ok(request) => Ok(request.into()),
        Err(NtStatus::BUFFER_TOO_SMALL) if code == WV_IOCTL_CQ_NOTIFY && input.len() == 8 => {
            Ok(Op::CqNotify {
                id: read_u64_id(input)?,
                kind: WV_CQ_NEXT_COMPLETION,
            })
        }
        Err(status) => Err(status),
    }
}

/// `EvtIoDeviceControl`: the provider gate, then the handler. Runs in the caller's thread at
/// PASSIVE_LEVEL; every handler that creates objects or registers memory calls the controller
/// right here, never on another thread (spec §7.1-l).
pub(crate) fn device_io_control<P: Platform, V: Verbs>(
    prov: &KArc<Provider<P, V>>,
    req: P::Request,
) {
    let Some(_in_flight) = prov.gate.share() else {
        return req.complete(NtStatus::FILE_CLOSED, 0);
    };
    dispatch(prov, req);
}

fn dispatch<P: Platform, V: Verbs>(prov: &KArc<Provider<P, V>>, req: P::Request) {
    let op = match decode_op(&req) {
        Ok(op) => op,
        Err(status) => return req.complete(status, 0),
    };
    let p = &**prov;
    match op {
        Op::GuidQuery { output_len } => guid_query(p, req, output_len),
        Op::LibraryQuery { guid, output_len } => library_query(p, req, guid, output_len),
        Op::DeviceOpen { id, vendor } => device::device_open(prov, req, id, vendor),
        Op::DeviceClose { id } => device::device_close(p, req, id),
        Op::DeviceQuery { id } => device::device_query(p, req, id),
        Op::DevicePortQuery { query } => device::port_query(p, req, query),
        Op::DeviceGidQuery { query, output_len } => device::gid_query(p, req, query, output_len),
        Op::DevicePkeyQuery { query, output_len } => device::pkey_query(p, req, query, output_len),
        Op::DeviceNotify { id } => device::device_notify(p, req, id),
        Op::DeviceCancel { id } => device::device_cancel(p, req, id),
        Op::PdAllocate { id, vendor } => pd::pd_allocate(p, req, id, vendor),
        Op::PdDeallocate { id } => pd::pd_deallocate(p, req, id),
        Op::PdCancel { id } => pd::pd_cancel(p, req, id),
        Op::MemoryRegister { reg } => pd::memory_register(p, req, reg),
        Op::MemoryDeregister { id } => pd::memory_deregister(p, req, id),
        Op::MwAllocate { id, vendor } => pd::mw_allocate(p, req, id, vendor),
        Op::MwDeallocate { id } => pd::mw_deallocate(p, req, id),
        Op::AhCreate { ah, vendor } => pd::ah_create(p, req, ah, vendor),
        Op::AhDestroy { id } => pd::ah_destroy(p, req, id),
        Op::CqCreate { id, vendor } => cq::cq_create(p, req, id, vendor),
        Op::CqDestroy { id } => cq::cq_destroy(p, req, id),
        Op::CqResize { id, vendor } => cq::cq_resize(p, req, id, vendor),
        Op::CqNotify { id, kind } => cq::cq_notify(p, req, id, kind),
        Op::CqCancel { id } => cq::cq_cancel(p, req, id),
        Op::SrqCreate { attr, vendor } => srq::srq_create(p, req, attr, vendor),
        Op::SrqDestroy { id } => srq::srq_destroy(p, req, id),
        Op::SrqQuery { attr, vendor } => srq::srq_query(p, req, attr, vendor),
        Op::SrqModify { attr, vendor } => srq::srq_modify(p, req, attr, vendor),
        Op::SrqNotify { id } => srq::srq_notify(p, req, id),
        Op::SrqCancel { id } => srq::srq_cancel(p, req, id),
        Op::QpCreate { create, vendor } => qp::qp_create(p, req, create, vendor),
        Op::QpDestroy { id } => qp::qp_destroy(p, req, id),
        Op::QpQuery { id } => qp::qp_query(p, req, id),
        Op::QpModify { attr } => qp_modify::qp_modify(p, req, attr),
        Op::QpAttach { mc } => qp::qp_attach(p, req, mc),
        Op::QpDetach { mc } => qp::qp_detach(p, req, mc),
        Op::QpCancel { id } => qp::qp_cancel(p, req, id),
        Op::Endpoint(call) => ep::ops::dispatch(prov, req, call),
    }
}

/// GUID_QUERY: `Count` = every lower device, as many GUIDs as fit, `Information = 8 + 8n`,
/// SUCCESS even when truncated.
fn guid_query<P: Platform, V: Verbs>(
    prov: &Provider<P, V>,
    mut req: P::Request,
    output_len: usize,
) {
    let buf = req.buffer_mut();
    let out_len = output_len.min(buf.len());
    // Written straight from the list under its lock: no copy, no allocation.
    let info = {
        let devices = prov.shared.devices.lock();
        write_guid_list(
            &mut buf[..out_len],
            devices.len() as u64,
            devices.iter().map(|d| d.guid),
        )
    };
    req.complete(NtStatus::SUCCESS, info);
}

/// LIBRARY_QUERY: the user-mode provider's library name with its NUL; `STATUS_NO_SUCH_DEVICE`
/// for an unknown GUID, `STATUS_BUFFER_TOO_SMALL` (`Information = 1`) when it does not fit.
fn library_query<P: Platform, V: Verbs>(
    prov: &Provider<P, V>,
    mut req: P::Request,
    guid: u64,
    output_len: usize,
) {
    let Some(rdma) = prov.shared.enter_device(guid) else {
        return req.complete(NtStatus::NO_SUCH_DEVICE, 0);
    };
    let (status, info) = match rdma.lower() {
        Some(lower) => {
            let buf = req.buffer_mut();
            let out_len = output_len.min(buf.len());
            write_library_name(&mut buf[..out_len], lower.library_name().as_bytes())
        }
        None => (NtStatus::NO_SUCH_DEVICE, 0),
    };
    rdma.gate.leave();
    req.complete(status, info);
}
