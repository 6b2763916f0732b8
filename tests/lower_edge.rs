//! End-to-end tests of the driver package: the whole stack the way winverbs.sys runs it — the
//! driver core reaching each RDMA controller through its C verbs table (`CiVerbs` over the soft
//! HCA's `ci_interface_t`), requests routed as the glue routes them — on the host model of
//! KMDF. (The glue itself, `driver/`, is type-checked by `tools/kmdf-check`; it cannot run
//! here.)

use std::time::Duration;

use wv_abi::NtStatus;
use wv_abi::ioctl::{Completion, Ioctl};
use wv_client::verbs::*;
use wv_core::control::runs_in_caller_context;
use wv_inproc::{LowerEdge, Stack, StackConfig, open_inproc};

#[allow(dead_code)]
#[path = "support/rc_side.rs"]
mod rc_side;
use rc_side::{connect, side};

const GUARD: Duration = Duration::from_secs(20);

#[test]
fn traffic_and_events_run_through_the_controllers_c_tables() {
    let stack = Stack::new(StackConfig::default());
    assert_eq!(stack.lower_edge(), LowerEdge::CTable);
    assert_eq!(stack.table_references(), 2, "one table per controller");
    assert_eq!(stack.cm_table_references(), 2, "and one CM table each");
    let p = open_inproc(&stack).unwrap();
    let guids = p.device_guids().unwrap();
    let (a, b) = (side(&p, guids[0]), side(&p, guids[1]));
    connect(&a, &b);

    // An event-mode receive: CQ_NOTIFY parks, the controller's DPC completes it through the
    // table's completion callback.
    let notify = b.cq.notify(false).unwrap();
    b.qp.post_recv(&RecvWr {
        wr_id: 1,
        sg_list: &[b.mr.sge(0, 64)],
    })
    .unwrap();
    a.buf.write(0, b"through the C verbs table").unwrap();
    let mut wr = SendWr::new(2, WrOpcode::Send);
    let sge = [a.mr.sge(0, 25)];
    wr.sg_list = &sge;
    wr.send_flags = send_flags::SIGNALED;
    a.qp.post_send(&wr).unwrap();
    notify
        .wait_timeout(GUARD)
        .expect("notify never ended")
        .unwrap();
    let mut wc = [WorkCompletion::default(); 4];
    assert_eq!(b.cq.poll(&mut wc), 1);
    assert_eq!((wc[0].wr_id, wc[0].byte_len), (1, 25));
    assert_eq!(&b.buf.to_vec()[..25], b"through the C verbs table");

    drop((a, b, p));
    assert_eq!(stack.unload(), Vec::<String>::new());
}

#[test]
fn removal_ends_parked_requests_and_gives_the_table_back() {
    let stack = Stack::new(StackConfig::default());
    let p = open_inproc(&stack).unwrap();
    let guids = p.device_guids().unwrap();
    let a = side(&p, guids[0]);
    let parked = a.cq.notify(false).unwrap();
    assert!(parked.pended());

    assert!(stack.remove_device(0));
    let err = parked
        .wait_timeout(GUARD)
        .expect("removal must end the parked notify")
        .unwrap_err();
    assert_eq!(err.status, NtStatus::DEVICE_REMOVED);
    assert_eq!(
        stack.table_references(),
        1,
        "the removed controller's table was released"
    );
    assert_eq!(stack.cm_table_references(), 1, "and its CM table");

    // A controller arriving later is taken with a reference of its own.
    stack.add_device();
    assert_eq!(stack.table_references(), 2);
    assert_eq!(stack.cm_table_references(), 2);
    let q = a.qp.query().unwrap_err();
    assert_eq!(q.status, NtStatus::NOT_FOUND);
    drop((a, p));
    assert_eq!(stack.unload(), Vec::<String>::new());
}

#[test]
fn the_glue_routes_each_ioctl_by_its_completion_class() {
    // EvtIoInCallerContext runs the IOCTLs that always complete inline (among them the ones
    // that pin or map the caller's memory); the rest go through the queue, where they may park.
    let mut inline = 0;
    for ioctl in Ioctl::ALL {
        let expected = ioctl.completion() == Completion::Inline;
        assert_eq!(
            runs_in_caller_context(ioctl.code()),
            expected,
            "{}",
            ioctl.name()
        );
        inline += usize::from(expected);
    }
    assert!(inline > 0 && inline < Ioctl::ALL.len());
    for creation in [
        Ioctl::DeviceOpen,
        Ioctl::MemoryRegister,
        Ioctl::CqCreate,
        Ioctl::QpCreate,
        Ioctl::SrqCreate,
    ] {
        assert!(
            runs_in_caller_context(creation.code()),
            "{}",
            creation.name()
        );
    }
}
