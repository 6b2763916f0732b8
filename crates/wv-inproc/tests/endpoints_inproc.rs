//! Connection endpoints over the in-process stack: the soft HCAs' connection manager below
//! the driver core, reached through the C tables (the default) or directly, addresses from the
//! stack's fabric; listen, connect, accept, data, reject and disconnect as librdmacm drives
//! them.

use std::net::{IpAddr, SocketAddr};

use wv_abi::NtStatus;
use wv_client::verbs::*;
use wv_inproc::{File, LowerEdge, Stack, StackConfig};

#[allow(dead_code)]
#[path = "../../../tests/support/rc_side.rs"]
mod rc_side;
use rc_side::{ACCESS, param, poll_one, side};

type Side = rc_side::Side<F>;

type F = File;

/// A default stack, a provider on it, and a client side on its second device.
fn client_stack() -> (Stack, Provider<F>, Side) {
    let stack = Stack::new(StackConfig::default());
    let p = Provider::new(stack.open().unwrap());
    let guids = p.device_guids().unwrap();
    let client = side(&p, guids[1]);
    (stack, p, client)
}

/// A connection between device 0 (server, listening on `server_ip`) and device 1 (client),
/// with private data both ways; returns the server's connected endpoint and the client's.
struct Connected {
    server: Side,
    client: Side,
    _listener: Endpoint<F>,
    server_ep: Endpoint<F>,
    client_ep: Endpoint<F>,
}

fn connected(stack: &Stack, p: &Provider<F>, server_ip: IpAddr, client_ip: IpAddr) -> Connected {
    let guids = p.device_guids().unwrap();
    let server = side(p, guids[0]);
    let client = side(p, guids[1]);

    let listener = p.create_endpoint().unwrap();
    let bound = listener
        .bind(SocketAddr::new(server_ip, 7174), stack)
        .unwrap();
    assert_eq!(bound.port(), 7174);
    listener.listen(0).unwrap();
    let server_ep = p.create_endpoint().unwrap();
    let request = listener.get_request(&server_ep).unwrap();

    let client_ep = p.create_endpoint().unwrap();
    let local = client_ep
        .bind(SocketAddr::new(client_ip, 0), stack)
        .unwrap();
    assert_ne!(local.port(), 0, "port 0 picks a free port");
    client_ep
        .resolve_route(client_ip, server_ip, stack)
        .unwrap();
    let connecting = client_ep
        .connect(&client.qp, bound, &param(b"from client"))
        .unwrap();

    request.wait().unwrap();
    let attr = server_ep.query().unwrap();
    assert_eq!(
        attr.peer,
        Some(local),
        "the client's address from the IP-CM header"
    );
    assert_eq!(attr.local.map(|a| a.ip()), Some(server_ip));
    assert_eq!(attr.device.device_guid, guids[0]);
    assert_eq!(&attr.param.private_data[..11], b"from client");
    let accepting = server_ep
        .accept(&server.qp, &param(b"from server"))
        .unwrap();
    connecting.wait().unwrap();
    let attr = client_ep.query().unwrap();
    assert_eq!(&attr.param.private_data[..11], b"from server");
    client_ep
        .accept(&client.qp, &param(&[]))
        .unwrap()
        .wait()
        .unwrap();
    accepting.wait().unwrap();
    assert_eq!(client.qp.state(), QpState::Rts);
    assert_eq!(server.qp.state(), QpState::Rts);
    Connected {
        server,
        client,
        _listener: listener,
        server_ep,
        client_ep,
    }
}

/// An RDMA write from the client and a send back, over the connected QPs.
fn traffic(c: &Connected) {
    let sbuf = c.server.pd.device().alloc_buffer(64);
    let smr = c.server.pd.reg_mr(&sbuf, ACCESS).unwrap();
    let cbuf = c.client.pd.device().alloc_buffer(64);
    let cmr = c.client.pd.reg_mr(&cbuf, ACCESS).unwrap();
    cbuf.write(0, b"written").unwrap();
    let mut wr = SendWr::new(1, WrOpcode::RdmaWrite);
    let sge = [cmr.sge(0, 7)];
    wr.sg_list = &sge;
    wr.send_flags = send_flags::SIGNALED;
    wr.remote_addr = smr.addr();
    wr.rkey = smr.rkey();
    c.client.qp.post_send(&wr).unwrap();
    assert_eq!(poll_one(&c.client.cq).status, WcStatus::Success);
    assert_eq!(&sbuf.to_vec()[..7], b"written");
}

fn run(stack: &Stack, v6: bool, passive_disconnects: bool) {
    let p = Provider::new(stack.open().unwrap());
    let (sip, cip) = if v6 {
        (stack.address_v6(0, 1), stack.address_v6(1, 1))
    } else {
        (stack.address(0, 1), stack.address(1, 1))
    };
    let c = connected(stack, &p, sip, cip);
    traffic(&c);
    let (first, first_qp, second, second_qp) = if passive_disconnects {
        (&c.server_ep, &c.server.qp, &c.client_ep, &c.client.qp)
    } else {
        (&c.client_ep, &c.client.qp, &c.server_ep, &c.server.qp)
    };
    let notified = second.notify_disconnect().unwrap();
    let disconnecting = first.disconnect(Some(first_qp)).unwrap();
    notified.wait().unwrap();
    second.disconnect(Some(second_qp)).unwrap().wait().unwrap();
    disconnecting.wait().unwrap();
    assert_eq!(c.client.qp.state(), QpState::Error);
    assert_eq!(c.server.qp.state(), QpState::Error);
    drop(c);
    drop(p);
    stack.run_until_idle();
    assert_eq!(stack.verifier_violations(), Vec::<String>::new());
}

#[test]
fn connect_accept_write_disconnect_on_every_lower_edge_and_mode() {
    for lower in [LowerEdge::CTable, LowerEdge::Direct] {
        for deterministic in [true, false] {
            let stack = Stack::new(StackConfig {
                lower,
                deterministic,
                ..StackConfig::default()
            });
            run(&stack, false, false);
            run(&stack, false, true);
            run(&stack, true, false);
            assert_eq!(
                stack.unload(),
                Vec::<String>::new(),
                "{lower:?} {deterministic}"
            );
        }
    }
}

#[test]
fn a_rejected_connection_carries_the_private_data() {
    let (stack, p, client) = client_stack();
    let listener = p.create_endpoint().unwrap();
    let server = SocketAddr::new(stack.address(0, 1), 7000);
    listener.bind(server, &stack).unwrap();
    listener.listen(4).unwrap();
    let ep = p.create_endpoint().unwrap();
    let request = listener.get_request(&ep).unwrap();
    let client_ep = p.create_endpoint().unwrap();
    let cip = stack.address(1, 1);
    client_ep.bind(SocketAddr::new(cip, 0), &stack).unwrap();
    client_ep.resolve_route(cip, server.ip(), &stack).unwrap();
    let connecting = client_ep
        .connect(&client.qp, server, &param(b"hi"))
        .unwrap();
    request.wait().unwrap();
    ep.reject(b"go away").unwrap();
    let e = connecting.wait().unwrap_err();
    assert_eq!(e.status, NtStatus::CONNECTION_REFUSED);
    let attr = client_ep.query().unwrap();
    assert_eq!(&attr.param.private_data[..7], b"go away");
    drop((listener, ep, client_ep, client, p));
    assert_eq!(stack.unload(), Vec::<String>::new());
}

#[test]
fn nobody_listening_is_a_refused_connection_and_addresses_are_checked() {
    let (stack, p, client) = client_stack();
    let ep = p.create_endpoint().unwrap();
    let cip = stack.address(1, 1);
    let bound = ep.bind(SocketAddr::new(cip, 0), &stack).unwrap();
    // The port is the endpoint's while it lives.
    let other = p.create_endpoint().unwrap();
    let e = other.bind(bound, &stack).unwrap_err();
    assert_eq!(e.status, STATUS_ADDRESS_ALREADY_EXISTS);
    let e = other
        .bind(SocketAddr::new("10.9.9.9".parse().unwrap(), 0), &stack)
        .unwrap_err();
    assert_eq!(e.status, STATUS_INVALID_ADDRESS);
    let e = other
        .resolve_route(cip, "10.9.9.9".parse().unwrap(), &stack)
        .unwrap_err();
    assert_eq!(e.status, STATUS_HOST_UNREACHABLE);

    let server = SocketAddr::new(stack.address(0, 1), 7001);
    ep.resolve_route(cip, server.ip(), &stack).unwrap();
    let e = ep
        .connect(&client.qp, server, &param(&[]))
        .unwrap()
        .wait()
        .unwrap_err();
    assert_eq!(e.status, NtStatus::CONNECTION_REFUSED);
    drop((ep, other));
    // Once the endpoint is gone, its port is free again.
    let again = p.create_endpoint().unwrap();
    again.bind(bound, &stack).unwrap();
    drop((again, client, p));
    assert_eq!(stack.unload(), Vec::<String>::new());
}
