//! Traffic through the glue: two soft HCAs below the filter, an RC pair connected with QP
//! modifies the glue runs on system work items, a send and an RDMA write on the data path,
//! and a CQ notify completed from the controller's DPC through the glue's manual queue — on
//! RoCE and InfiniBand ports.

use wdf_emu::{EmuStack, EmuStackConfig};
use wdf_emu_scenarios::winverbs_entry;
use wv_client::verbs::*;
use wv_softhca::LinkLayer;

#[allow(dead_code)]
#[path = "../../../../tests/support/rc_side.rs"]
mod rc_side;
use rc_side::{connect, param, poll_one, side};

/// Two tests of `$run`: `$roce` on RoCE ports, `$ib` on InfiniBand ports.
macro_rules! per_link_layer {
    ($run:ident: $roce:ident, $ib:ident) => {
        #[test]
        fn $roce() {
            $run(LinkLayer::Ethernet);
        }

        #[test]
        fn $ib() {
            $run(LinkLayer::InfiniBand);
        }
    };
}

/// The glue loaded on the emulated stack, its ports of `link_layer`.
fn stack_on(link_layer: LinkLayer) -> EmuStack {
    EmuStack::new(
        EmuStackConfig {
            link_layer,
            ..EmuStackConfig::default()
        },
        winverbs_entry(),
    )
    .expect("DriverEntry")
}

fn traffic(link_layer: LinkLayer) {
    let stack = stack_on(link_layer);
    let provider = Provider::new(stack.open().expect("CreateFile"));
    let guids = provider.device_guids().expect("GUID_QUERY");
    assert_eq!(guids, stack.device_guids());
    let a = side(&provider, guids[0]);
    let b = side(&provider, guids[1]);
    connect(&a, &b);

    // A send, its receive completion announced through a parked CQ notify.
    let notify = b.cq.notify(false).expect("CQ_NOTIFY");
    a.buf.write(0, b"through the glue").unwrap();
    b.qp.post_recv(&RecvWr {
        wr_id: 7,
        sg_list: &[b.mr.sge(100, 64)],
    })
    .unwrap();
    let sge = [a.mr.sge(0, 16)];
    let mut wr = SendWr::new(1, WrOpcode::Send);
    wr.sg_list = &sge;
    wr.send_flags = send_flags::SIGNALED;
    a.qp.post_send(&wr).unwrap();
    notify
        .wait()
        .expect("the CQ event completed the parked notify");
    let wc = poll_one(&b.cq);
    assert_eq!(
        (wc.wr_id, wc.status, wc.byte_len),
        (7, WcStatus::Success, 16)
    );
    let mut got = [0u8; 16];
    b.buf.read(100, &mut got).unwrap();
    assert_eq!(&got, b"through the glue");
    assert_eq!(poll_one(&a.cq).wr_id, 1);

    // An RDMA write into b's buffer.
    a.buf.write(200, b"written remotely").unwrap();
    let sge = [a.mr.sge(200, 16)];
    let mut wr = SendWr::new(2, WrOpcode::RdmaWrite);
    wr.sg_list = &sge;
    wr.send_flags = send_flags::SIGNALED;
    wr.remote_addr = b.mr.addr() + 300;
    wr.rkey = b.mr.rkey();
    a.qp.post_send(&wr).unwrap();
    assert_eq!(poll_one(&a.cq).status, WcStatus::Success);
    let mut got = [0u8; 16];
    b.buf.read(300, &mut got).unwrap();
    assert_eq!(&got, b"written remotely");

    drop((a, b, provider));
    let machine_stats = stack.machine().stat("requests presented");
    assert!(
        machine_stats > 0,
        "the modifies and the notify went through the queue"
    );
    stack.unload().assert_clean();
}

per_link_layer!(traffic: rc_traffic_on_roce_ports, rc_traffic_on_infiniband_ports);

/// Connection endpoints through the glue: the CM interface the filter took from the stack,
/// listen, a connection request parked and completed, connect, accept, a send, a disconnect.
fn endpoints(link_layer: LinkLayer) {
    use std::net::SocketAddr;
    let stack = stack_on(link_layer);
    let p = Provider::new(stack.open().expect("CreateFile"));
    let guids = p.device_guids().expect("GUID_QUERY");
    let server = side(&p, guids[0]);
    let client = side(&p, guids[1]);
    let (server_ip, client_ip) = (stack.address(0, 1), stack.address(1, 1));

    let listener = p.create_endpoint().expect("EP_CREATE");
    let bound = listener
        .bind(SocketAddr::new(server_ip, 7174), &stack)
        .expect("EP_BIND");
    listener.listen(0).expect("EP_LISTEN");
    // A GET_REQUEST cancelled while it waits (CancelIoEx): the framework completes it from the
    // endpoint's queue, and the listener gives that endpoint back on the next one.
    let abandoned = p.create_endpoint().expect("EP_CREATE");
    let waiting = listener.get_request(&abandoned).expect("EP_GET_REQUEST");
    assert!(waiting.cancel(), "a parked GET_REQUEST is cancellable");
    assert_eq!(
        waiting.wait().expect_err("cancelled").status,
        wv_abi::NtStatus::CANCELLED
    );
    // The next IOCTL on it finds it given back (the queue its request waited in is empty).
    abandoned
        .query()
        .expect("EP_QUERY of the given-back endpoint");
    let server_ep = p.create_endpoint().expect("EP_CREATE");
    let request = listener.get_request(&server_ep).expect("EP_GET_REQUEST");

    let client_ep = p.create_endpoint().expect("EP_CREATE");
    client_ep
        .bind(SocketAddr::new(client_ip, 0), &stack)
        .expect("EP_BIND");
    client_ep
        .resolve_route(client_ip, server_ip, &stack)
        .expect("route");
    let connecting = client_ep
        .connect(&client.qp, bound, &param(b"hello"))
        .expect("EP_CONNECT");
    request.wait().expect("the connection request");
    let accepting = server_ep
        .accept(&server.qp, &param(b"welcome"))
        .expect("EP_ACCEPT");
    connecting.wait().expect("connected");
    client_ep
        .accept(&client.qp, &param(&[]))
        .expect("EP_ACCEPT (RTU)")
        .wait()
        .expect("RTU");
    accepting.wait().expect("accepted");
    assert_eq!(client.qp.state(), QpState::Rts);

    server
        .qp
        .post_recv(&RecvWr {
            wr_id: 9,
            sg_list: &[server.mr.sge(0, 64)],
        })
        .unwrap();
    client.buf.write(0, b"over the CM").unwrap();
    let sge = [client.mr.sge(0, 11)];
    let mut wr = SendWr::new(3, WrOpcode::Send);
    wr.sg_list = &sge;
    wr.send_flags = send_flags::SIGNALED;
    client.qp.post_send(&wr).unwrap();
    assert_eq!(poll_one(&server.cq).byte_len, 11);

    let _ = client_ep
        .disconnect(Some(&client.qp))
        .expect("EP_DISCONNECT");
    drop((server_ep, client_ep, abandoned, listener, server, client, p));
    stack.unload().assert_clean();
}

per_link_layer!(endpoints: endpoints_on_roce_ports, endpoints_on_infiniband_ports);
