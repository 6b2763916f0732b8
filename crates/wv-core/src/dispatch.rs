//! IOCTL dispatch (OFW `WvIoDeviceControl`): the provider gate, decoding through `wv-abi`, and
//! the hand-off to the handler that completes, parks or queues the request: one table, a row
//! per IOCTL, from the decoded [`Request`] to its handler.

use wv_abi::consts::WV_CQ_NEXT_COMPLETION;
use wv_abi::encode::{write_guid_list, write_library_name};
use wv_abi::ioctl::WV_IOCTL_CQ_NOTIFY;
use wv_abi::{NtStatus, Request, WV_IO_ID, decode, read_u64_id};
use wv_hal::{IoRequest, KArc, Platform, SpinLock, Verbs};

use crate::cq::CqObj;
use crate::create::create;
use crate::device::DeviceObj;
use crate::ep;
use crate::ep::ops as ep_ops;
use crate::pd::{AhObj, MwObj, PdObj};
use crate::provider::Provider;
use crate::qp::QpObj;
use crate::srq::SrqObj;
use crate::{cq, device, pd, qp, qp_modify, srq};

/// Decodes a request. The one departure from the decoder is `IWVCompletionQueue::BatchNotify`:
/// it sends CQ_NOTIFY with only the 8-byte CQ id, which OFW (and the decoder) reject with
/// `STATUS_BUFFER_TOO_SMALL`; the core takes exactly that shape as a next-completion notify
/// (fix of spec §7.1-a), which makes the `BATCH_NOTIFY_CQ` capability DEVICE_QUERY reports true.
fn decode_request<R: IoRequest>(req: &R) -> Result<Request, NtStatus> {
    let code = req.ioctl_code();
    let buf = req.buffer();
    let input = &buf[..req.input_len().min(buf.len())];
    match decode(code, input, req.output_len()) {
        Err(NtStatus::BUFFER_TOO_SMALL) if code == WV_IOCTL_CQ_NOTIFY && input.len() == 8 => {
            Ok(Request::CqNotify {
                id: WV_IO_ID::new(read_u64_id(input)?, WV_CQ_NEXT_COMPLETION),
            })
        }
        decoded => decoded,
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

/// The handler of each IOCTL, one row each, called with what the decoder read (the request
/// owns it: the system buffer is free for the handler's output).
fn dispatch<P: Platform, V: Verbs>(prov: &KArc<Provider<P, V>>, req: P::Request) {
    let request = match decode_request(&req) {
        Ok(request) => request,
        Err(status) => return req.complete(status, 0),
    };
    let p = &**prov;
    // What a destroy of an unknown id answers.
    let (no_device, not_found) = (NtStatus::NO_SUCH_DEVICE, NtStatus::NOT_FOUND);
    use Request as R;
    match request {
        R::GuidQuery { output_len } => guid_query(p, req, output_len),
        R::LibraryQuery { guid, output_len } => library_query(p, req, guid, output_len),
        R::DeviceOpen { id, vendor } => device::device_open(prov, req, id, vendor),
        // `STATUS_ACCESS_DENIED` while PDs, CQs or IOCTLs use the device.
        R::DeviceClose { id } => p.destroy_ioctl::<DeviceObj<P, V>>(req, id, no_device),
        R::DeviceQuery { id, .. } => device::device_query(p, req, id),
        R::DevicePortQuery { query, .. } => device::port_query(p, req, query),
        R::DeviceGidQuery { query, output_len } => {
            device::port_table_query::<P, V, device::Gids>(p, req, query, output_len)
        }
        R::DevicePkeyQuery { query, output_len } => {
            device::port_table_query::<P, V, device::Pkeys>(p, req, query, output_len)
        }
        R::DeviceNotify { id } => device::device_notify(p, req, id),
        R::DeviceCancel { id } => device::device_cancel(p, req, id),
        R::PdAllocate { id, vendor } => create::<P, V, PdObj<P, V>>(p, req, id, vendor),
        // `STATUS_ACCESS_DENIED` while SRQs, QPs, MWs or AHs use the PD.
        R::PdDeallocate { id } => p.destroy_ioctl::<PdObj<P, V>>(req, id, not_found),
        R::PdCancel { id } => pd::pd_cancel(p, req, id),
        R::MemoryRegister { reg } => pd::memory_register(p, req, reg),
        R::MemoryDeregister { id } => pd::memory_deregister(p, req, id),
        R::MwAllocate { id, vendor } => create::<P, V, MwObj<P, V>>(p, req, id, vendor),
        // Nothing ever references an MW or an AH, so OFW's missing `Ref > 1` check (spec
        // §7.1-j) cannot matter; the generic check is made anyway.
        R::MwDeallocate { id } => p.destroy_ioctl::<MwObj<P, V>>(req, id, not_found),
        R::AhCreate { ah, vendor } => create::<P, V, AhObj<P, V>>(p, req, ah, vendor),
        R::AhDestroy { id } => p.destroy_ioctl::<AhObj<P, V>>(req, id, not_found),
        R::CqCreate { id, vendor } => create::<P, V, CqObj<P, V>>(p, req, id, vendor),
        // `STATUS_ACCESS_DENIED` while QPs use the CQ; parked notifies end cancelled.
        R::CqDestroy { id } => p.destroy_ioctl::<CqObj<P, V>>(req, id, not_found),
        R::CqResize { id, vendor } => cq::cq_resize(p, req, id, vendor),
        R::CqNotify { id } => cq::cq_notify(p, req, id.Id, id.Data),
        R::CqCancel { id } => cq::cq_cancel(p, req, id),
        R::SrqCreate { attr, vendor } => create::<P, V, SrqObj<P, V>>(p, req, attr, vendor),
        // `STATUS_ACCESS_DENIED` while QPs use the SRQ.
        R::SrqDestroy { id } => p.destroy_ioctl::<SrqObj<P, V>>(req, id, not_found),
        R::SrqQuery { attr, vendor } => srq::srq_query(p, req, attr, vendor),
        R::SrqModify { attr, vendor } => srq::srq_modify(p, req, attr, vendor),
        R::SrqNotify { id } => srq::srq_notify(p, req, id),
        R::SrqCancel { id } => srq::srq_cancel(p, req, id),
        R::QpCreate { create, vendor } => qp::qp_create(p, req, create, vendor),
        // `STATUS_ACCESS_DENIED` while an IOCTL uses the QP; queued modifies end cancelled
        // and a running one is waited for.
        R::QpDestroy { id } => p.destroy_ioctl::<QpObj<P, V>>(req, id, not_found),
        R::QpQuery { id } => qp::qp_query(p, req, id),
        R::QpModify { id, .. } => qp_modify::qp_modify(p, req, id),
        R::QpAttach { mc } => qp::qp_attach(p, req, mc),
        R::QpDetach { mc } => qp::qp_detach(p, req, mc),
        R::QpCancel { id } => qp::qp_cancel(p, req, id),
        R::EpCreate { ep_type } => ep_ops::create(prov, req, ep_type),
        R::EpDestroy { id } => ep_ops::destroy(p, req, id),
        R::EpModify { id, route } => ep_ops::modify(p, req, id.Id, route),
        R::EpBind { bind } => ep_ops::bind(p, req, bind),
        R::EpReject {
            id,
            private_data_len,
        } => ep_ops::reject(p, req, id.Id, private_data_len),
        R::EpConnect { connect } => ep_ops::connect(p, req, connect),
        R::EpAccept { accept, .. } => ep_ops::accept(p, req, accept),
        R::EpDisconnect { disconnect, .. } => ep_ops::disconnect(p, req, disconnect),
        R::EpDisconnectNotify { id } => ep_ops::disconnect_notify(p, req, id),
        R::EpQuery { id } => ep_ops::query(p, req, id),
        R::EpCancel { id } => ep_ops::cancel(p, req, id),
        R::EpListen { listen } => ep::listen::listen(p, req, listen),
        R::EpGetRequest { req: get } => ep::listen::get_request(p, req, get),
        R::EpLookup | R::EpMulticastJoin | R::EpMulticastLeave => {
            req.complete(NtStatus::NOT_IMPLEMENTED, 0)
        }
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
