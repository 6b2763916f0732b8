//! The raw interface of the in-process transport: IOCTL bytes in, inline-vs-pending and
//! NTSTATUS out, cancel, close, and the admin actions of a controller's owner.

use std::time::Duration;

use wv_abi::consts::*;
use wv_abi::ioctl::*;
use wv_abi::{NtStatus, WV_IO_GUID_LIST, WV_IO_ID, read_prefix};
use wv_client::raw::{IoStatus, RawFile, RawIo};
use wv_inproc::{File, Io, QpModifyMode, Stack, StackConfig, StackError};
use zerocopy::IntoBytes;

/// A hang guard only: every wait here ends in microseconds when the code is right.
const GUARD: Duration = Duration::from_secs(20);

fn id(id: u64, data: u32) -> Vec<u8> {
    WV_IO_ID::new(id, data).as_bytes().to_vec()
}

#[track_caller]
fn inline(file: &File, code: u32, input: &[u8], out: usize) -> IoStatus {
    let io = file.device_io_control(code, input, out);
    assert!(!io.pending(), "IOCTL {code:#x} pended");
    io.wait()
}

#[track_caller]
fn ok(file: &File, code: u32, input: &[u8], out: usize) -> IoStatus {
    let st = inline(file, code, input, out);
    assert_eq!(st.nt_status(), NtStatus::SUCCESS, "{st:?}");
    st
}

#[track_caller]
fn parked(file: &File, code: u32, input: &[u8], out: usize) -> Io {
    let io = file.device_io_control(code, input, out);
    assert!(
        io.pending(),
        "IOCTL {code:#x} did not pend: {:?}",
        io.try_result()
    );
    assert!(!io.is_complete());
    io
}

#[track_caller]
fn ended(io: Io) -> IoStatus {
    let st = io.wait_timeout(GUARD).expect("request never completed");
    assert_eq!(
        io.wait(),
        st,
        "wait after wait_timeout sees the same result"
    );
    st
}

/// Opens device `guid` and creates a CQ with the soft UVP's vendor output room.
fn dev_and_cq(file: &File, guid: u64) -> (u64, u64) {
    let st = ok(file, WV_IOCTL_DEVICE_OPEN, &id(guid, 0), 16 + 24);
    let dev = read_prefix::<WV_IO_ID>(&st.output).unwrap().Id;
    let st = ok(file, WV_IOCTL_CQ_CREATE, &id(dev, 16), 16 + 24);
    let cq = read_prefix::<WV_IO_ID>(&st.output).unwrap().Id;
    (dev, cq)
}

/// A stack as `config` says and a handle open on it.
fn stack_and_file(config: StackConfig) -> (Stack, File) {
    let stack = Stack::new(config);
    let file = stack.open().unwrap();
    (stack, file)
}

fn guid_list(file: &File) -> Vec<u64> {
    let st = ok(file, WV_IOCTL_GUID_QUERY, &[], 8 + 8 * 8);
    let head: WV_IO_GUID_LIST = read_prefix(&st.output).unwrap();
    assert_eq!(st.information, 8 + 8 * head.Count as usize);
    st.output[8..]
        .chunks_exact(8)
        .map(|c| u64::from_ne_bytes(c.try_into().unwrap()))
        .collect()
}

#[test]
fn inline_and_pending_requests() {
    let (stack, file) = stack_and_file(StackConfig::default());
    let guids = guid_list(&file);
    assert_eq!(guids, stack.device_guids());
    assert_eq!(guids.len(), 2);

    let st = ok(&file, WV_IOCTL_LIBRARY_QUERY, &guids[0].to_ne_bytes(), 28);
    assert_eq!(st.output, b"softhcau\0");
    // An unknown GUID and an unknown code fail inline with the spec's statuses.
    let st = inline(&file, WV_IOCTL_LIBRARY_QUERY, &0x1234u64.to_ne_bytes(), 28);
    assert_eq!(st.nt_status(), NtStatus::NO_SUCH_DEVICE);
    assert!(st.output.is_empty(), "no output for an error status");
    let st = inline(&file, 0x003B_E0D8, &[], 0);
    assert_eq!(st.nt_status(), NtStatus::PROCEDURE_NOT_FOUND);

    // CQ_NOTIFY pends; CQ_CANCEL (inline) completes it with STATUS_CANCELLED.
    let (dev, cq) = dev_and_cq(&file, guids[0]);
    let notify = parked(&file, WV_IOCTL_CQ_NOTIFY, &id(cq, WV_CQ_NEXT_COMPLETION), 0);
    assert_eq!(notify.wait_timeout(Duration::ZERO), None);
    ok(&file, WV_IOCTL_CQ_CANCEL, &cq.to_ne_bytes(), 0);
    assert_eq!(ended(notify).nt_status(), NtStatus::CANCELLED);

    // Destroying a CQ that a request is parked on purges it, then CLOSE of the device.
    let notify = parked(&file, WV_IOCTL_CQ_NOTIFY, &id(cq, WV_CQ_ERROR), 0);
    ok(&file, WV_IOCTL_CQ_DESTROY, &cq.to_ne_bytes(), 0);
    assert_eq!(ended(notify).nt_status(), NtStatus::CANCELLED);
    ok(&file, WV_IOCTL_DEVICE_CLOSE, &dev.to_ne_bytes(), 0);
    drop(file);
    assert_eq!(stack.unload(), Vec::<String>::new());
}

#[test]
fn cancel_io_ex_cancels_one_parked_request() {
    let (stack, file) = stack_and_file(StackConfig::default());
    let (_dev, cq) = dev_and_cq(&file, stack.device_guids()[0]);
    let a = parked(&file, WV_IOCTL_CQ_NOTIFY, &id(cq, WV_CQ_NEXT_COMPLETION), 0);
    let b = parked(&file, WV_IOCTL_CQ_NOTIFY, &id(cq, WV_CQ_NEXT_COMPLETION), 0);
    assert!(file.cancel_io_ex(&a));
    assert_eq!(ended(a).nt_status(), NtStatus::CANCELLED);
    assert!(!b.is_complete(), "only the named request is cancelled");
    // Through the trait, as a transport-generic suite would.
    assert!(RawFile::cancel_io_ex(&file, &b));
    let st = RawIo::wait(b);
    assert_eq!(st.nt_status(), NtStatus::CANCELLED);
    assert_eq!(st.information, 0);

    // A completed request (inline) is not cancellable; neither is one of another file.
    let done = file.device_io_control(WV_IOCTL_GUID_QUERY, &[], 16);
    assert!(!file.cancel_io_ex(&done));
    let other = stack.open().unwrap();
    let c = parked(&file, WV_IOCTL_CQ_NOTIFY, &id(cq, WV_CQ_NEXT_COMPLETION), 0);
    assert!(!other.cancel_io_ex(&c));
    assert!(!c.is_complete());
    assert!(file.cancel_io_ex(&c));
    assert_eq!(ended(c).nt_status(), NtStatus::CANCELLED);
}

#[test]
fn close_with_parked_requests_and_io_outliving_its_file() {
    let (stack, file) = stack_and_file(StackConfig::default());
    let (dev, cq) = dev_and_cq(&file, stack.device_guids()[1]);
    let cqn = parked(&file, WV_IOCTL_CQ_NOTIFY, &id(cq, WV_CQ_NEXT_COMPLETION), 0);
    let cqe = parked(&file, WV_IOCTL_CQ_NOTIFY, &id(cq, WV_CQ_ERROR), 0);
    let port = parked(&file, WV_IOCTL_DEVICE_NOTIFY, &id(dev, 1), 4);
    let inline_done = file.device_io_control(WV_IOCTL_GUID_QUERY, &[], 32);
    // CloseHandle with three requests parked and objects alive: cleanup ends them all.
    drop(file);
    for io in [cqn, cqe, port] {
        assert_eq!(ended(io).nt_status(), NtStatus::CANCELLED);
    }
    // An OVERLAPPED that completed before the close still holds its result.
    let st = inline_done.wait();
    assert_eq!(st.nt_status(), NtStatus::SUCCESS);
    assert_eq!(st.information, 8 + 2 * 8);
    assert_eq!(stack.verifier_violations(), Vec::<String>::new());
}

#[test]
fn port_state_changes_complete_port_notifies_and_accumulate() {
    let (stack, file) = stack_and_file(StackConfig {
        ports_per_device: 2,
        ..StackConfig::default()
    });
    let (dev, _cq) = dev_and_cq(&file, stack.device_guids()[0]);
    let p1 = parked(&file, WV_IOCTL_DEVICE_NOTIFY, &id(dev, 1), 4);
    let p2 = parked(&file, WV_IOCTL_DEVICE_NOTIFY, &id(dev, 2), 4);
    stack.set_port_state(0, 2, false).unwrap();
    let st = ended(p2);
    assert_eq!(st.nt_status(), NtStatus::SUCCESS);
    assert_eq!(st.output, WV_IO_EVENT_STATE.to_ne_bytes());
    assert!(!p1.is_complete(), "port 1 saw no event");

    // With nobody waiting, the flags accumulate; the next notify returns them inline.
    stack.set_port_state(0, 2, true).unwrap();
    let st = ok(&file, WV_IOCTL_DEVICE_NOTIFY, &id(dev, 2), 4);
    assert_eq!(st.output, WV_IO_EVENT_STATE.to_ne_bytes());
    // Device 1's events do not reach device 0's opens.
    stack.set_port_state(1, 1, false).unwrap();
    assert!(!p1.is_complete());
    ok(&file, WV_IOCTL_DEVICE_CANCEL, &dev.to_ne_bytes(), 0);
    assert_eq!(ended(p1).nt_status(), NtStatus::CANCELLED);

    assert_eq!(
        stack.set_port_state(0, 3, true),
        Err(StackError::BadPort { device: 0, port: 3 })
    );
    assert_eq!(
        stack.set_port_state(7, 1, true),
        Err(StackError::NoSuchDevice(7))
    );
    drop(file);
    assert_eq!(stack.unload(), Vec::<String>::new());
}

#[test]
fn surprise_removal_completes_parked_requests_and_hot_add_arrives() {
    let (stack, file) = stack_and_file(StackConfig::default());
    let guids = stack.device_guids();
    let (dev, cq) = dev_and_cq(&file, guids[0]);
    let (dev1, cq1) = dev_and_cq(&file, guids[1]);
    let cqn = parked(&file, WV_IOCTL_CQ_NOTIFY, &id(cq, WV_CQ_NEXT_COMPLETION), 0);
    let port = parked(&file, WV_IOCTL_DEVICE_NOTIFY, &id(dev, 1), 4);
    let other = parked(
        &file,
        WV_IOCTL_CQ_NOTIFY,
        &id(cq1, WV_CQ_NEXT_COMPLETION),
        0,
    );

    assert!(stack.remove_device(0));
    for io in [cqn, port] {
        let st = ended(io);
        assert_eq!(st.nt_status(), NtStatus::DEVICE_REMOVED);
        assert_eq!(st.information, 0);
    }
    assert!(!other.is_complete(), "the other device is untouched");
    assert!(!stack.remove_device(0), "already removed");
    assert!(!stack.remove_device(9), "no such device");
    assert_eq!(
        stack.set_port_state(0, 1, true),
        Err(StackError::DeviceRemoved(0))
    );
    assert_eq!(guid_list(&file), vec![guids[1]]);
    assert_eq!(stack.device_guids(), vec![guids[1]]);
    // Handles of the removed device are dead, but destroys still succeed.
    let st = inline(&file, WV_IOCTL_DEVICE_QUERY, &dev.to_ne_bytes(), 152);
    assert!(st.nt_status().is_error(), "{st:?}");
    ok(&file, WV_IOCTL_CQ_DESTROY, &cq.to_ne_bytes(), 0);
    ok(&file, WV_IOCTL_DEVICE_CLOSE, &dev.to_ne_bytes(), 0);

    // Hot add: a new device joins the fabric and the driver lists it.
    let index = stack.add_device();
    assert_eq!(index, 2);
    let new_guid = stack.device_guid(2).unwrap();
    assert_eq!(guid_list(&file), vec![guids[1], new_guid]);
    let (_dev2, _cq2) = dev_and_cq(&file, new_guid);
    ok(&file, WV_IOCTL_CQ_CANCEL, &cq1.to_ne_bytes(), 0);
    assert_eq!(ended(other).nt_status(), NtStatus::CANCELLED);
    let _ = dev1;
    drop(file);
    assert_eq!(stack.unload(), Vec::<String>::new());
}

#[test]
fn deterministic_stack_runs_deferred_work_when_waited_on() {
    for qp_modify in [QpModifyMode::Async, QpModifyMode::Inline] {
        let (stack, file) = stack_and_file(StackConfig {
            devices: 1,
            deterministic: true,
            qp_modify,
            ..StackConfig::default()
        });
        let (dev, cq) = dev_and_cq(&file, stack.device_guids()[0]);
        let st = ok(&file, WV_IOCTL_PD_ALLOCATE, &id(dev, 0), 16);
        let pd = read_prefix::<WV_IO_ID>(&st.output).unwrap().Id;
        let create = wv_abi::WV_IO_QP_CREATE {
            Id: WV_IO_ID::new(pd, 0),
            SendCqId: cq,
            ReceiveCqId: cq,
            SendDepth: 4,
            SendSge: 1,
            ReceiveDepth: 4,
            ReceiveSge: 1,
            QpType: 0,
            ..Default::default()
        };
        let st = ok(
            &file,
            WV_IOCTL_QP_CREATE,
            create.as_bytes(),
            72 + size_of::<wv_softhca::abi::QpResp>(),
        );
        let qp = read_prefix::<wv_abi::WV_IO_QP_CREATE>(&st.output)
            .unwrap()
            .Id
            .Id;
        let mut attr = wv_abi::WV_IO_QP_ATTRIBUTES::default();
        attr.Id.Id = qp;
        attr.QpState = WV_IO_QP_STATE_INIT;
        attr.Options = WV_IO_QP_ATTR_STATE
            | WV_IO_QP_ATTR_PKEY_INDEX
            | WV_IO_QP_ATTR_PORT_NUMBER
            | WV_IO_QP_ATTR_ACCESS_FLAGS;
        attr.AddressVector.PortNumber = 1;
        let io = file.device_io_control(WV_IOCTL_QP_MODIFY, attr.as_bytes(), 8);
        assert_eq!(io.pending(), qp_modify == QpModifyMode::Async);
        if io.pending() {
            assert!(
                !io.is_complete(),
                "the work item runs only when someone waits"
            );
        }
        let st = io.wait();
        assert_eq!(st.nt_status(), NtStatus::SUCCESS);
        assert_eq!(st.information, 8);
        assert_eq!(st.output[0], WV_IO_QP_STATE_INIT);
        drop(file);
        assert_eq!(stack.unload(), Vec::<String>::new());
    }
}

#[test]
fn unload_with_a_handle_open_reports_instead_of_panicking() {
    let (stack, file) = stack_and_file(StackConfig {
        devices: 1,
        ..StackConfig::default()
    });
    let found = stack.unload();
    assert_eq!(
        found,
        vec!["verifier: 0 requests / 0 queues / 1 files alive at unload".to_string()]
    );
    // The handle still works against the driver left loaded; closing it is harmless.
    let st = file.device_io_control(WV_IOCTL_GUID_QUERY, &[], 16).wait();
    assert_eq!(st.nt_status(), NtStatus::SUCCESS);
    drop(file);
}
