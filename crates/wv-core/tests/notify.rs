//! Parked requests: port, CQ and SRQ notifications, their cancellation, sticky errors, and the
//! DPC-to-completion path (deterministic host mode).
#![allow(clippy::disallowed_methods)] // tests may allocate infallibly; the core may not (clippy.toml)

mod common;

use common::*;
use wv_abi::consts::*;
use wv_abi::ioctl::*;
use wv_abi::*;
use wv_hal::{CaEventKind, SrqEvent};
use wv_host::fake_verbs::FakeCall;

fn notify_in(dev: u64, port: u32) -> Vec<u8> {
    id(dev, 0, port)
}

#[test]
fn device_notify_parks_until_a_port_event() {
    let (fx, f, dev) = device_fixture();
    let a = pend(&f, WV_IOCTL_DEVICE_NOTIFY, &notify_in(dev, 1), 4);
    let b = pend(&f, WV_IOCTL_DEVICE_NOTIFY, &notify_in(dev, 1), 4);
    fx.hca.port_event(1, CaEventKind::LidChange);
    fx.run();
    for io in [&a, &b] {
        let st = done(io);
        expect(&st, NtStatus::SUCCESS);
        assert_eq!(st.information, 4);
        assert_eq!(st.output, WV_IO_EVENT_LINK_ADDRESS.to_ne_bytes());
    }
    // Ignored events complete nothing.
    let c = pend(&f, WV_IOCTL_DEVICE_NOTIFY, &notify_in(dev, 1), 4);
    fx.hca.port_event(1, CaEventKind::Other);
    fx.run();
    assert!(!c.is_complete());
    id_ioctl(&f, WV_IOCTL_DEVICE_CANCEL, dev, NtStatus::SUCCESS);
    let st = done(&c);
    expect(&st, NtStatus::CANCELLED);
    assert_eq!(st.information, 4);
    assert!(st.output.is_empty(), "error status: nothing copied back");
}

#[test]
fn port_flags_accumulate_while_nobody_waits() {
    let (fx, f, dev) = device_fixture();
    fx.hca.port_event(1, CaEventKind::PortDown);
    fx.hca.port_event(1, CaEventKind::GidChange);
    fx.hca.port_event(1, CaEventKind::SmChange);
    fx.run();
    let st = ioctl(&f, WV_IOCTL_DEVICE_NOTIFY, &notify_in(dev, 1), 4);
    expect(&st, NtStatus::SUCCESS);
    assert_eq!(st.information, 4);
    let want = WV_IO_EVENT_STATE | WV_IO_EVENT_ADDRESS | WV_IO_EVENT_MANAGEMENT;
    assert_eq!(st.output, want.to_ne_bytes());
    // Cleared by that notify: the next one parks.
    let io = pend(&f, WV_IOCTL_DEVICE_NOTIFY, &notify_in(dev, 1), 4);
    // LOCAL_FATAL goes to every port.
    fx.hca.port_event(0, CaEventKind::LocalFatal);
    fx.run();
    let st = done(&io);
    assert_eq!(st.output, WV_IO_EVENT_ERROR.to_ne_bytes());
}

#[test]
fn device_notify_errors() {
    let (_fx, f, dev) = device_fixture();
    let notify = |input: &[u8], out_len| ioctl(&f, WV_IOCTL_DEVICE_NOTIFY, input, out_len);
    expect(&notify(&notify_in(9, 1), 4), NtStatus::NOT_FOUND);
    for port in [0, 2] {
        expect(
            &notify(&notify_in(dev, port), 4),
            NtStatus::INVALID_PORT_HANDLE,
        );
    }
    expect(&notify(&notify_in(dev, 1), 3), NtStatus::BUFFER_TOO_SMALL);
    expect(
        &notify(&notify_in(dev, 1)[..15], 4),
        NtStatus::BUFFER_TOO_SMALL,
    );
    id_ioctl(&f, WV_IOCTL_DEVICE_CANCEL, 9, NtStatus::NOT_FOUND);
    // A parked notify keeps the device busy? No: parked requests hold no reference, so the
    // close succeeds and ends it with STATUS_CANCELLED.
    let io = pend(&f, WV_IOCTL_DEVICE_NOTIFY, &notify_in(dev, 1), 4);
    id_ioctl(&f, WV_IOCTL_DEVICE_CLOSE, dev, NtStatus::SUCCESS);
    expect(&done(&io), NtStatus::CANCELLED);
}

#[test]
fn cancel_io_ex_ends_any_parked_request() {
    let (fx, f) = file_fixture();
    let s = qp_rts(&fx, &f);
    let srq = srq(&f, s.pd);
    let ios = park_notifies(&f, &s, srq);
    for io in &ios {
        assert!(f.cancel_io_ex(io));
        expect(&done(io), NtStatus::CANCELLED);
    }
    // The objects still work afterwards.
    let io = park_cq_notify(&f, s.cq, WV_CQ_NEXT_COMPLETION);
    fx.hca.cq_completion(fx.last_created(FakeCall::CreateCq));
    fx.run();
    expect(&done(&io), NtStatus::SUCCESS);
}

#[test]
fn cq_notify_broadcast_and_queues() {
    let (fx, f, cq, fake) = cq_fixture();
    let next = park_cq_notify(&f, cq, WV_CQ_NEXT_COMPLETION);
    let solicited = park_cq_notify(&f, cq, WV_CQ_SOLICITED);
    let error = park_cq_notify(&f, cq, WV_CQ_ERROR);
    // The kernel never arms the CQ: user mode does.
    assert_eq!(fx.hca.call_count(FakeCall::ResizeCq), 0);
    fx.hca.cq_completion(fake);
    fx.run();
    for io in [&next, &solicited] {
        let st = done(io);
        expect(&st, NtStatus::SUCCESS);
        assert_eq!(st.information, 0);
    }
    assert!(
        !error.is_complete(),
        "completions do not wake error waiters"
    );
    id_ioctl(&f, WV_IOCTL_CQ_CANCEL, cq, NtStatus::SUCCESS);
    expect(&done(&error), NtStatus::CANCELLED);
    id_ioctl(&f, WV_IOCTL_CQ_CANCEL, 7, NtStatus::NOT_FOUND);
    expect_ioctl(&f, WV_IOCTL_CQ_NOTIFY, &id(7, 0, 1), 0, NtStatus::NOT_FOUND);
    // Destroy ends parked notifies.
    let a = park_cq_notify(&f, cq, WV_CQ_NEXT_COMPLETION);
    id_ioctl(&f, WV_IOCTL_CQ_DESTROY, cq, NtStatus::SUCCESS);
    expect(&done(&a), NtStatus::CANCELLED);
}

#[test]
fn cq_completion_is_delivered_from_the_dpc_without_a_hop() {
    let (fx, f, cq, fake) = cq_fixture();
    let io = park_cq_notify(&f, cq, WV_CQ_NEXT_COMPLETION);
    fx.platform().run_until_idle();
    assert!(fx.hca.cq_completion(fake));
    if fx.platform().is_deterministic() {
        // Run only the device's DPC: a core that deferred to a work item would leave the
        // request pending behind it.
        assert!(fx.platform().run_one());
    }
    // Threaded mode: the DPC ran on this thread as the interrupt returned, so the request is
    // complete before `cq_completion` returns, with no worker involved.
    assert!(io.is_complete(), "completed inside the DPC");
}

#[test]
fn cq_error_is_sticky() {
    // §7.1-d: OFW lost an error that arrived while nobody waited; a later notify hung.
    let (fx, f, cq, fake) = cq_fixture();
    let a = park_cq_notify(&f, cq, WV_CQ_NEXT_COMPLETION);
    let b = park_cq_notify(&f, cq, WV_CQ_ERROR);
    fx.hca.cq_error(fake);
    fx.run();
    expect(&done(&a), NtStatus::UNEXPECTED_IO_ERROR);
    expect(&done(&b), NtStatus::UNEXPECTED_IO_ERROR);
    for kind in [WV_CQ_ERROR, WV_CQ_NEXT_COMPLETION, WV_CQ_SOLICITED] {
        let st = ioctl(&f, WV_IOCTL_CQ_NOTIFY, &id(cq, 0, kind), 0);
        expect(&st, NtStatus::UNEXPECTED_IO_ERROR);
    }
    id_ioctl(&f, WV_IOCTL_CQ_NOTIFY, cq, NtStatus::UNEXPECTED_IO_ERROR);
}

#[test]
fn cq_error_with_nobody_waiting_is_not_lost() {
    let (fx, f, dev) = device_fixture();
    let cq = cq(&f, dev, 16);
    fx.hca.cq_error(fx.last_created(FakeCall::CreateCq));
    fx.run();
    // OFW would park this for ever.
    let st = ioctl(&f, WV_IOCTL_CQ_NOTIFY, &id(cq, 0, WV_CQ_ERROR), 0);
    expect(&st, NtStatus::UNEXPECTED_IO_ERROR);
}

#[test]
fn batch_notify_8_byte_form_is_a_next_completion_notify() {
    // §7.1-a: IWVCompletionQueue::BatchNotify sends only the 8-byte CQ id; OFW answered
    // STATUS_BUFFER_TOO_SMALL although DEVICE_QUERY advertises BATCH_NOTIFY_CQ.
    let (fx, f, dev) = device_fixture();
    let cq = cq(&f, dev, 16);
    let io = pend(&f, WV_IOCTL_CQ_NOTIFY, &u64_in(cq), 0);
    fx.hca.cq_completion(fx.last_created(FakeCall::CreateCq));
    fx.run();
    expect(&done(&io), NtStatus::SUCCESS);
    id_ioctl(&f, WV_IOCTL_CQ_NOTIFY, 9, NtStatus::NOT_FOUND);
    // Only exactly 8 bytes: other short inputs keep OFW's status.
    for len in [0usize, 7, 9, 15] {
        let input = vec![0u8; len];
        expect_ioctl(
            &f,
            WV_IOCTL_CQ_NOTIFY,
            &input,
            0,
            NtStatus::BUFFER_TOO_SMALL,
        );
    }
}

#[test]
fn srq_notify_statuses() {
    let (fx, f, dev) = device_fixture();
    let pd = alloc_pd(&f, dev);
    let s = srq(&f, pd);
    let fake = fx.last_created(FakeCall::CreateSrq);
    for (event, want) in [
        (SrqEvent::LimitReached, NtStatus::ALERTED),
        (SrqEvent::LastWqeReached, NtStatus::NOTIFY_CLEANUP),
    ] {
        let a = pend(&f, WV_IOCTL_SRQ_NOTIFY, &u64_in(s), 0);
        let b = pend(&f, WV_IOCTL_SRQ_NOTIFY, &u64_in(s), 0);
        fx.hca.srq_event(fake, event);
        fx.run();
        expect(&done(&a), want);
        expect(&done(&b), want);
    }
    let a = pend(&f, WV_IOCTL_SRQ_NOTIFY, &u64_in(s), 0);
    id_ioctl(&f, WV_IOCTL_SRQ_CANCEL, s, NtStatus::SUCCESS);
    expect(&done(&a), NtStatus::CANCELLED);
    id_ioctl(&f, WV_IOCTL_SRQ_CANCEL, 8, NtStatus::NOT_FOUND);
    id_ioctl(&f, WV_IOCTL_SRQ_NOTIFY, 8, NtStatus::NOT_FOUND);
    let a = pend(&f, WV_IOCTL_SRQ_NOTIFY, &u64_in(s), 0);
    fx.hca.srq_event(fake, SrqEvent::Error);
    fx.run();
    expect(&done(&a), NtStatus::UNEXPECTED_IO_ERROR);
    // Sticky (§7.1-d).
    id_ioctl(&f, WV_IOCTL_SRQ_NOTIFY, s, NtStatus::UNEXPECTED_IO_ERROR);
    let b = pend(&f, WV_IOCTL_CQ_NOTIFY, &id(cq(&f, dev, 4), 0, 1), 0);
    id_ioctl(&f, WV_IOCTL_SRQ_DESTROY, s, NtStatus::SUCCESS);
    id_ioctl(&f, WV_IOCTL_CQ_CANCEL, 1, NtStatus::SUCCESS);
    expect(&done(&b), NtStatus::CANCELLED);
}

#[test]
fn srq_destroy_ends_parked_notifies() {
    let (_fx, f, dev) = device_fixture();
    let pd = alloc_pd(&f, dev);
    let s = srq(&f, pd);
    let a = pend(&f, WV_IOCTL_SRQ_NOTIFY, &u64_in(s), 0);
    id_ioctl(&f, WV_IOCTL_SRQ_DESTROY, s, NtStatus::SUCCESS);
    expect(&done(&a), NtStatus::CANCELLED);
}
