//! Resource exhaustion in the platform (spec §7.1-k): when the framework cannot create a
//! queue or allocate a work item, the IOCTL that needed it fails with a status, nothing is
//! leaked, no request is left pending, and the same call works once resources are back. The
//! OFW driver went on without its queues (an invalid WDFQUEUE handle, an ASSERT on checked
//! builds), which these tests would catch as a crash, a hang or a leak at teardown.
#![allow(clippy::disallowed_methods)] // tests may allocate infallibly; the core may not (clippy.toml)

mod common;

use common::*;
use wv_abi::ioctl::*;
use wv_abi::*;
use wv_hal::QpState;
use wv_host::fake_verbs::{FakeCall, ObjectKind};

#[test]
fn device_open_without_port_queues_fails_and_leaks_nothing() {
    let (fx, f) = file_fixture();
    fx.platform().fail_queues(0, 1);
    let st = ioctl(&f, WV_IOCTL_DEVICE_OPEN, &id(fx.guid(), 0, 0), 16);
    expect(&st, NtStatus::UNSUCCESSFUL);
    assert_eq!(fx.hca.live_count(ObjectKind::Ca), 0);
    // Resources are back: the open works and takes the first id.
    assert_eq!(open_device(&fx, &f), 1);
}

#[test]
fn cq_create_without_both_queues_fails_and_leaks_nothing() {
    let (fx, f, dev) = device_fixture();
    // The first, then the second, of the CQ's two queues cannot be created.
    for skip in [0, 1] {
        fx.platform().fail_queues(skip, 1);
        let st = ioctl(&f, WV_IOCTL_CQ_CREATE, &id(dev, 0, 8), 16);
        expect(&st, NtStatus::INSUFFICIENT_RESOURCES);
        assert_eq!(fx.hca.live_count(ObjectKind::Cq), 0);
    }
    assert_eq!(cq(&f, dev, 8), 1, "failed creations took no id");
    assert_eq!(fx.hca.live_count(ObjectKind::Cq), 1);
}

#[test]
fn srq_and_qp_create_without_a_queue_fail_and_leak_nothing() {
    let (fx, f, dev) = device_fixture();
    let pd = alloc_pd(&f, dev);
    let c = cq(&f, dev, 8);

    // OFW's `WvSrqAlloc` answers a queue it cannot create with STATUS_UNSUCCESSFUL (CQ_CREATE
    // passes the framework's status on; SRQ_CREATE does not).
    fx.platform().fail_queues(0, 1);
    let st = ioctl(&f, WV_IOCTL_SRQ_CREATE, &bytes(&srq_attr(pd, 8, 0)), 32);
    expect(&st, NtStatus::UNSUCCESSFUL);
    assert_eq!(fx.hca.live_count(ObjectKind::Srq), 0);

    fx.platform().fail_queues(0, 1);
    expect(
        &qp_create(&f, pd, c, c, 0),
        NtStatus::INSUFFICIENT_RESOURCES,
    );
    assert_eq!(fx.hca.live_count(ObjectKind::Qp), 0);

    // The failed creations took no id and left every reference as it was.
    assert_eq!(srq(&f, pd), 1);
    assert_eq!(qp(&f, pd, c, c, 0), 1);
    id_ioctl(&f, WV_IOCTL_QP_DESTROY, 1, NtStatus::SUCCESS);
    id_ioctl(&f, WV_IOCTL_SRQ_DESTROY, 1, NtStatus::SUCCESS);
    id_ioctl(&f, WV_IOCTL_CQ_DESTROY, c, NtStatus::SUCCESS);
    id_ioctl(&f, WV_IOCTL_PD_DEALLOCATE, pd, NtStatus::SUCCESS);
}

#[test]
fn qp_modify_without_a_work_item_completes_with_a_status_and_the_next_one_runs() {
    let (fx, f) = file_fixture();
    let q = qp_reset(&fx, &f, 8).qp;
    fx.platform().fail_next_work_items(1);
    let io = f.device_io_control(WV_IOCTL_QP_MODIFY, &modify_in(q, QpState::Init), 8);
    // Never left pending for ever: it ends with the platform's status.
    expect(&done(&io), NtStatus::INSUFFICIENT_RESOURCES);
    assert_eq!(
        fx.hca.qp_state(fx.last_created(FakeCall::CreateQp)),
        Some(QpState::Reset)
    );
    expect(&modify(&f, q, QpState::Init), NtStatus::SUCCESS);
}
