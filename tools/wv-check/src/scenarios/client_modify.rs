//! QP_MODIFY as real WinVerbs clients send it, byte for byte: WinOFED's libibverbs port
//! (`ibv_modify_qp` puts the application's mask in `Options`, `IBV_QP_*` = `WV_QP_ATTR_*`),
//! as WinOFED's rc_pingpong, uc_pingpong and ud_pingpong and its librdmacm call it, and the
//! NetworkDirect providers over WinVerbs (ND v1 and v2 move a new RC QP to INIT with
//! `STATE | PORT_NUMBER | PKEY_INDEX` and no access flags; ND v2's Flush is
//! `Modify(ERROR, STATE)`), plus `Options = 0`.
//!
//! The bytes are rebuilt the way the client libraries build them. `ibv_modify_qp` converts the
//! application's `ibv_qp_attr` into a `WV_QP_ATTRIBUTES` on its own stack, which it never
//! clears: it writes the fields it converts, the route only for a global address, the alternate
//! path only with `IBV_QP_ALT_PATH`; winverbs.dll then copies that struct field by field into
//! `WV_IO_QP_ATTRIBUTES`, sets the QP id and zeroes `Reserved`, and leaves `Id.VerbInfo` and
//! `Id.Data` as its own stack had them. Everything nobody wrote is filled here with 0xCC, the
//! pattern of MSVC's uninitialised-stack checks, so a driver or controller that reads a field
//! the target state does not carry shows up as a failure. The application's own struct is
//! cleared where the program clears it (every INIT call; uc_pingpong's RTR) and 0xCC elsewhere.
//!
//! WinOFED's examples address the peer by LID alone (`is_global = 0`), as an InfiniBand subnet
//! does; a RoCE port refuses such a path, so on one the same calls carry a global route to the
//! peer's GID 0, as an application must send them there.
//!
//! The QPs move as on OFW, where the target `QpState` alone decides what the driver hands the
//! controller; `QP_QUERY` then shows the attributes that travelled.

use wv_abi::consts::*;
use wv_abi::ioctl::*;
use wv_abi::{NtStatus, WV_IO_PORT_ATTRIBUTES, WV_IO_QP_ATTRIBUTES};
use wv_client::raw::RawFile;
use zerocopy::{FromBytes, IntoBytes};

use super::raw::*;
use crate::env::Env;
use crate::runner::Clock;
use crate::runner::{Outcome, Scenario};

pub fn scenarios<E: Env>() -> Vec<Scenario<E>> {
    vec![
        Scenario {
            name: "qp-modify-libibverbs",
            run: libibverbs,
            clock: Clock::Own,
        },
        Scenario {
            name: "qp-modify-netdirect",
            run: netdirect,
            clock: Clock::Own,
        },
        Scenario {
            name: "qp-modify-options-zero",
            run: options_zero,
            clock: Clock::Own,
        },
    ]
}

/// What an uninitialised stack holds (MSVC's `/RTCs` fill).
const UNINIT: u8 = 0xCC;
/// The PSNs the pingpong examples exchange (any 24-bit values).
const PSN_A: u32 = 0x00_1234;
const PSN_B: u32 = 0x00_5678;

/// A `WV_IO_QP_ATTRIBUTES` whose every byte is uninitialised stack.
fn uninit() -> WV_IO_QP_ATTRIBUTES {
    WV_IO_QP_ATTRIBUTES::read_from_bytes(&[UNINIT; size_of::<WV_IO_QP_ATTRIBUTES>()])
        .unwrap_or_default()
}

/// WinOFED's `struct ibv_ah_attr` (with its `ibv_global_route`).
#[derive(Clone, Copy)]
struct IbvAhAttr {
    dgid: [u8; 16],
    flow_label: u32,
    sgid_index: u8,
    hop_limit: u8,
    traffic_class: u8,
    dlid: u16,
    sl: u8,
    src_path_bits: u8,
    static_rate: u8,
    is_global: u8,
    port_num: u8,
}

/// WinOFED's `struct ibv_qp_attr`, the fields `ibv_modify_qp` reads. The enums are 4 bytes and
/// `qp_access_flags` an `int`, as in its verbs.h.
#[derive(Clone, Copy)]
struct IbvQpAttr {
    qp_state: u32,
    cur_qp_state: u32,
    path_mtu: u32,
    path_mig_state: u32,
    qkey: u32,
    rq_psn: u32,
    sq_psn: u32,
    dest_qp_num: u32,
    qp_access_flags: u32,
    /// `cap`: max_send_wr, max_recv_wr, max_send_sge, max_recv_sge, max_inline_data.
    cap: [u32; 5],
    ah_attr: IbvAhAttr,
    alt_ah_attr: IbvAhAttr,
    pkey_index: u16,
    alt_pkey_index: u16,
    max_rd_atomic: u8,
    max_dest_rd_atomic: u8,
    min_rnr_timer: u8,
    port_num: u8,
    timeout: u8,
    retry_cnt: u8,
    rnr_retry: u8,
    alt_port_num: u8,
    alt_timeout: u8,
}

impl IbvAhAttr {
    fn filled(b: u8) -> Self {
        IbvAhAttr {
            dgid: [b; 16],
            flow_label: u32::from_ne_bytes([b; 4]),
            sgid_index: b,
            hop_limit: b,
            traffic_class: b,
            dlid: u16::from_ne_bytes([b; 2]),
            sl: b,
            src_path_bits: b,
            static_rate: b,
            is_global: b,
            port_num: b,
        }
    }
}

impl IbvQpAttr {
    /// Every byte `b`: 0 after a memset, [`UNINIT`] for a struct the program did not clear.
    fn filled(b: u8) -> Self {
        let w = u32::from_ne_bytes([b; 4]);
        IbvQpAttr {
            qp_state: w,
            cur_qp_state: w,
            path_mtu: w,
            path_mig_state: w,
            qkey: w,
            rq_psn: w,
            sq_psn: w,
            dest_qp_num: w,
            qp_access_flags: w,
            cap: [w; 5],
            ah_attr: IbvAhAttr::filled(b),
            alt_ah_attr: IbvAhAttr::filled(b),
            pkey_index: u16::from_ne_bytes([b; 2]),
            alt_pkey_index: u16::from_ne_bytes([b; 2]),
            max_rd_atomic: b,
            max_dest_rd_atomic: b,
            min_rnr_timer: b,
            port_num: b,
            timeout: b,
            retry_cnt: b,
            rnr_retry: b,
            alt_port_num: b,
            alt_timeout: b,
        }
    }

    fn cleared() -> Self {
        Self::filled(0)
    }

    fn garbage() -> Self {
        Self::filled(UNINIT)
    }
}

/// `ibv_convert_ah_attr`: the route only for a global address, its SGID looked up by
/// `QueryGid(port_num, sgid_index)` (whose failure leaves the stack's bytes).
fn convert_ah(av: &mut wv_abi::WV_IO_AV, a: &IbvAhAttr, sgid: &dyn Fn(u8, u8) -> Option<[u8; 16]>) {
    av.NetworkRouteValid = a.is_global;
    if a.is_global != 0 {
        av.DGid = a.dgid;
        if let Some(g) = sgid(a.port_num, a.sgid_index) {
            av.SGid = g;
        }
        av.TrafficClass = a.traffic_class;
        av.FlowLabel = a.flow_label.to_be();
        av.HopLimit = a.hop_limit;
    }
    av.DLid = a.dlid.to_be();
    av.ServiceLevel = a.sl;
    av.SourcePathBits = a.src_path_bits;
    av.StaticRate = a.static_rate;
    av.PortNumber = a.port_num;
}

/// The `WV_IO_QP_ATTRIBUTES` bytes WinOFED's `ibv_modify_qp(qp, a, mask)` makes winverbs.dll
/// send (verbs.cpp, then `CWVQueuePair::Modify` / `WvIoConvertQpAttr`). Narrowing casts keep
/// the low byte (`(UINT8) QpState`), widening ones zero-extend (`max_rd_atomic` → `SIZE_T`),
/// and `0x80 << path_mtu` shifts by the count's low five bits, as x64 does.
fn ibv_modify_qp(
    qp: u64,
    a: &IbvQpAttr,
    mask: u32,
    sgid: &dyn Fn(u8, u8) -> Option<[u8; 16]>,
) -> Vec<u8> {
    let mut w = uninit();
    w.Id.Id = qp;
    [
        w.SendDepth,
        w.ReceiveDepth,
        w.SendSge,
        w.ReceiveSge,
        w.MaxInlineSend,
    ] = a.cap;
    w.InitiatorDepth = a.max_rd_atomic.into();
    w.ResponderResources = a.max_dest_rd_atomic.into();
    w.CurrentQpState = a.cur_qp_state as u8;
    w.QpState = a.qp_state as u8;
    w.ApmState = a.path_mig_state as u8;
    w.DestinationQpn = a.dest_qp_num.to_be();
    w.Qkey = a.qkey.to_be();
    w.SendPsn = a.sq_psn.to_be();
    w.ReceivePsn = a.rq_psn.to_be();
    w.AccessFlags = a.qp_access_flags as u8;
    w.QpFlags = 0;
    convert_ah(&mut w.AddressVector, &a.ah_attr, sgid);
    w.AddressVector.PortNumber = a.port_num;
    w.PathMtu = 0x80u32.wrapping_shl(a.path_mtu);
    w.PkeyIndex = a.pkey_index;
    w.LocalAckTimeout = a.timeout;
    if mask & WV_IO_QP_ATTR_ALTERNATE_AV != 0 {
        convert_ah(&mut w.AlternateAddressVector, &a.alt_ah_attr, sgid);
        w.AlternateAddressVector.PortNumber = a.alt_port_num;
        w.AlternatePathMtu = 0x80u32.wrapping_shl(a.path_mtu);
        w.AlternatePkeyIndex = a.alt_pkey_index;
        w.AlternateLocalAckTimeout = a.alt_timeout;
    }
    w.RnrNakTimeout = a.min_rnr_timer;
    w.SequenceErrorRetryCount = a.retry_cnt;
    w.RnrRetryCount = a.rnr_retry;
    w.Options = mask;
    w.Reserved = [0; _];
    w.as_bytes().to_vec()
}

const IBV_QPS_INIT: u8 = WV_IO_QP_STATE_INIT;
const IBV_QPS_RTR: u8 = WV_IO_QP_STATE_RTR;
const IBV_QPS_RTS: u8 = WV_IO_QP_STATE_RTS;
const IBV_QPS_ERR: u8 = WV_IO_QP_STATE_ERROR;
const IBV_MTU_1024: u32 = 3;
/// In WinOFED's verbs.h `IBV_QP_PATH_MTU` is `WV_QP_ATTR_AV` and `IBV_QP_PORT`
/// `WV_QP_ATTR_PORT_NUMBER`.
const IBV_QP_PATH_MTU: u32 = WV_IO_QP_ATTR_AV;

/// A pingpong flavour: its QP type, the masks of its three `ibv_modify_qp` calls, and whether
/// it clears the struct of its RTR call.
struct Pingpong {
    name: &'static str,
    qp_type: u8,
    init_mask: u32,
    rtr_mask: u32,
    rts_mask: u32,
    rtr_cleared: bool,
}

/// `pp_init_ctx`'s INIT mask before its last attribute (access flags, or the Q_Key on UD).
const PP_INIT: u32 = WV_IO_QP_ATTR_STATE | WV_IO_QP_ATTR_PKEY_INDEX | WV_IO_QP_ATTR_PORT_NUMBER;
/// `pp_connect_ctx`'s RTR mask on a connected QP, before RC's responder attributes.
const PP_RTR_CONNECTED: u32 = WV_IO_QP_ATTR_STATE
    | WV_IO_QP_ATTR_AV
    | IBV_QP_PATH_MTU
    | WV_IO_QP_ATTR_DESTINATION_QPN
    | WV_IO_QP_ATTR_RECEIVE_PSN;

const PINGPONGS: [Pingpong; 3] = [
    Pingpong {
        name: "rc_pingpong",
        qp_type: 0,
        init_mask: PP_INIT | WV_IO_QP_ATTR_ACCESS_FLAGS,
        rtr_mask: PP_RTR_CONNECTED
            | WV_IO_QP_ATTR_RESPONDER_RESOURCES
            | WV_IO_QP_ATTR_RNR_NAK_TIMEOUT,
        rts_mask: WV_IO_QP_ATTR_STATE
            | WV_IO_QP_ATTR_ACK_TIMEOUT
            | WV_IO_QP_ATTR_ERROR_RETRY_COUNT
            | WV_IO_QP_ATTR_RNR_RETRY_COUNT
            | WV_IO_QP_ATTR_SEND_PSN
            | WV_IO_QP_ATTR_INITIATOR_DEPTH,
        rtr_cleared: false,
    },
    Pingpong {
        name: "uc_pingpong",
        qp_type: 1,
        init_mask: PP_INIT | WV_IO_QP_ATTR_ACCESS_FLAGS,
        rtr_mask: PP_RTR_CONNECTED,
        rts_mask: WV_IO_QP_ATTR_STATE | WV_IO_QP_ATTR_SEND_PSN,
        rtr_cleared: true,
    },
    Pingpong {
        name: "ud_pingpong",
        qp_type: 3,
        init_mask: PP_INIT | WV_IO_QP_ATTR_QKEY,
        rtr_mask: WV_IO_QP_ATTR_STATE,
        rts_mask: WV_IO_QP_ATTR_STATE | WV_IO_QP_ATTR_SEND_PSN,
        rtr_cleared: false,
    },
];

/// One QP_MODIFY that must succeed and leave the QP in `want` (checked with QP_QUERY).
fn modify_to<F: RawFile>(
    f: &F,
    qp: u64,
    input: &[u8],
    want: u8,
    what: &str,
) -> Result<WV_IO_QP_ATTRIBUTES, String> {
    let st = wait(submit(f, WV_IOCTL_QP_MODIFY, input, 8), what)?;
    expect_info(&st, NtStatus::SUCCESS, 8, what)?;
    let attr = query_qp(f, qp)?;
    ensure!(
        attr.QpState == want,
        "{what}: QP_QUERY says state {}, want {want}",
        attr.QpState
    );
    Ok(attr)
}

/// How the peer is addressed: by LID on an InfiniBand port, by its GID on RoCE.
#[derive(Clone, Copy)]
enum Peer {
    Lid(u16),
    Gid([u8; 16]),
}

impl Peer {
    /// The examples' `ah_attr` for this peer on `port`, over `ah` (cleared or not).
    fn ah_attr(self, mut ah: IbvAhAttr, port: u8) -> IbvAhAttr {
        match self {
            Peer::Lid(lid) => {
                ah.is_global = 0;
                ah.dlid = lid;
            }
            Peer::Gid(gid) => {
                ah.is_global = 1;
                ah.dgid = gid;
                ah.sgid_index = 0;
                ah.hop_limit = 1;
                ah.dlid = 0;
            }
        }
        ah.sl = 0;
        ah.src_path_bits = 0;
        ah.port_num = port;
        ah
    }
}

/// One side of a pingpong: its INIT (cleared struct) from `pp_init_ctx`, then
/// `pp_connect_ctx`'s RTR and RTS over one struct.
#[allow(clippy::too_many_arguments)]
fn pingpong_side<F: RawFile>(
    f: &F,
    pp: &Pingpong,
    qp: u64,
    peer: Peer,
    peer_qpn: u32,
    my_psn: u32,
    peer_psn: u32,
    sgid: &dyn Fn(u8, u8) -> Option<[u8; 16]>,
) -> Result<WV_IO_QP_ATTRIBUTES, String> {
    // One transition: it must succeed and leave the QP in `want`.
    let modify = |attr: &IbvQpAttr, mask: u32, want: u8, step: &str| {
        let input = ibv_modify_qp(qp, attr, mask, sgid);
        modify_to(f, qp, &input, want, &format!("{} {step}", pp.name))
    };
    let mut init = IbvQpAttr::cleared();
    init.qp_state = IBV_QPS_INIT.into();
    init.pkey_index = 0;
    init.port_num = 1;
    if pp.qp_type == 3 {
        init.qkey = 0x1111_1111;
    } else {
        init.qp_access_flags = 0;
    }
    modify(&init, pp.init_mask, IBV_QPS_INIT, "INIT")?;

    let mut attr = if pp.rtr_cleared {
        IbvQpAttr::cleared()
    } else {
        IbvQpAttr::garbage()
    };
    attr.qp_state = IBV_QPS_RTR.into();
    if pp.qp_type != 3 {
        attr.path_mtu = IBV_MTU_1024;
        attr.dest_qp_num = peer_qpn;
        attr.rq_psn = peer_psn;
        attr.ah_attr = peer.ah_attr(attr.ah_attr, 1);
        if pp.qp_type == 0 {
            attr.max_dest_rd_atomic = 1;
            attr.min_rnr_timer = 12;
        }
    }
    modify(&attr, pp.rtr_mask, IBV_QPS_RTR, "RTR")?;

    attr.qp_state = IBV_QPS_RTS.into();
    attr.sq_psn = my_psn;
    if pp.qp_type == 0 {
        attr.timeout = 14;
        attr.retry_cnt = 7;
        attr.rnr_retry = 7;
        attr.max_rd_atomic = 1;
    }
    modify(&attr, pp.rts_mask, IBV_QPS_RTS, "RTS")
}

/// Port 1's attributes.
fn port1<F: RawFile>(f: &F, dev: u64) -> Result<WV_IO_PORT_ATTRIBUTES, String> {
    let st = ok(f, WV_IOCTL_DEVICE_PORT_QUERY, &port_in(dev, 1), 52)?;
    read(&st.output, "PORT_QUERY")
}

/// An application's `ibv_modify_qp(ERR, IBV_QP_STATE)` over an uncleared struct, on `qps`.
fn to_error<F: RawFile>(
    f: &F,
    qps: &[u64],
    name: &str,
    sgid: &dyn Fn(u8, u8) -> Option<[u8; 16]>,
) -> Result<(), String> {
    let mut err = IbvQpAttr::garbage();
    err.qp_state = IBV_QPS_ERR.into();
    for &qp in qps {
        modify_to(
            f,
            qp,
            &ibv_modify_qp(qp, &err, WV_IO_QP_ATTR_STATE, sgid),
            IBV_QPS_ERR,
            &format!("{name} ERR"),
        )?;
    }
    Ok(())
}

/// librdmacm's `ucma_modify_qp_init` (cleared struct, `STATE | PKEY_INDEX | PORT`: no access
/// flags, no Q_Key) for an RC and a UD QP, then `ucma_init_ud_qp`'s RTR (`STATE`) and RTS
/// (`STATE | SQ_PSN`, PSN 0) over one uncleared struct for the UD QP.
fn librdmacm<F: RawFile>(
    f: &F,
    rc: u64,
    ud: u64,
    sgid: &dyn Fn(u8, u8) -> Option<[u8; 16]>,
) -> Result<(), String> {
    let mut init = IbvQpAttr::cleared();
    init.qp_state = IBV_QPS_INIT.into();
    init.port_num = 1;
    init.pkey_index = 0;
    let mask = WV_IO_QP_ATTR_STATE | WV_IO_QP_ATTR_PKEY_INDEX | WV_IO_QP_ATTR_PORT_NUMBER;
    for (qp, what) in [(rc, "librdmacm RC INIT"), (ud, "librdmacm UD INIT")] {
        modify_to(
            f,
            qp,
            &ibv_modify_qp(qp, &init, mask, sgid),
            IBV_QPS_INIT,
            what,
        )?;
    }
    let mut attr = IbvQpAttr::garbage();
    attr.qp_state = IBV_QPS_RTR.into();
    modify_to(
        f,
        ud,
        &ibv_modify_qp(ud, &attr, WV_IO_QP_ATTR_STATE, sgid),
        IBV_QPS_RTR,
        "librdmacm UD RTR",
    )?;
    attr.qp_state = IBV_QPS_RTS.into();
    attr.sq_psn = 0;
    modify_to(
        f,
        ud,
        &ibv_modify_qp(
            ud,
            &attr,
            WV_IO_QP_ATTR_STATE | WV_IO_QP_ATTR_SEND_PSN,
            sgid,
        ),
        IBV_QPS_RTS,
        "librdmacm UD RTS",
    )?;
    Ok(())
}

/// rc/uc/ud_pingpong's exact calls on two QPs connected to each other, librdmacm's, then an
/// application's `ibv_modify_qp(ERR, IBV_QP_STATE)` with an uncleared struct.
fn libibverbs<E: Env>(env: &E) -> Outcome {
    let (f, dev) = open_device(env)?;
    let gid = gid0(&f, dev)?;
    let port = port1(&f, dev)?;
    let ib = port.Transport == 0;
    // Both QPs are on this port: the peer is the port itself.
    let peer = if ib {
        Peer::Lid(u16::from_be(port.Lid))
    } else {
        Peer::Gid(gid)
    };
    let sgid = move |port: u8, index: u8| (port == 1 && index == 0).then_some(gid);
    let pd = alloc_pd(&f, dev)?;
    let cq = create_cq(&f, dev, 16)?;
    let mut seen = Vec::new();
    for pp in &PINGPONGS {
        let a = create_qp(&f, pd, cq, cq, 0, pp.qp_type)?;
        let b = create_qp(&f, pd, cq, cq, 0, pp.qp_type)?;
        let qpn = |qp| -> Result<u32, String> { Ok(u32::from_be(query_qp(&f, qp)?.Qpn)) };
        let (qpn_a, qpn_b) = (qpn(a)?, qpn(b)?);
        let qa = pingpong_side(&f, pp, a, peer, qpn_b, PSN_A, PSN_B, &sgid)?;
        pingpong_side(&f, pp, b, peer, qpn_a, PSN_B, PSN_A, &sgid)?;
        // What travelled with RTR and RTS.
        ensure!(
            u32::from_be(qa.SendPsn) == PSN_A,
            "{}: SendPsn {:#x}, want {PSN_A:#x}",
            pp.name,
            u32::from_be(qa.SendPsn)
        );
        if pp.qp_type == 3 {
            ensure!(
                u32::from_be(qa.Qkey) == 0x1111_1111,
                "{}: Qkey {:#x} after INIT with IBV_QP_QKEY",
                pp.name,
                u32::from_be(qa.Qkey)
            );
        } else {
            ensure!(
                u32::from_be(qa.DestinationQpn) == qpn_b
                    && u32::from_be(qa.ReceivePsn) == PSN_B
                    && qa.PathMtu == 1024,
                "{}: DestinationQpn {:#x} ReceivePsn {:#x} PathMtu {}, want {qpn_b:#x} {PSN_B:#x} 1024",
                pp.name,
                u32::from_be(qa.DestinationQpn),
                u32::from_be(qa.ReceivePsn),
                qa.PathMtu
            );
            let av = qa.AddressVector;
            let route = match peer {
                Peer::Lid(lid) => av.NetworkRouteValid == 0 && u16::from_be(av.DLid) == lid,
                Peer::Gid(g) => av.NetworkRouteValid != 0 && av.DGid == g,
            };
            ensure!(
                route,
                "{}: QP_QUERY's address vector (route valid {}, DLid {:#x}) is not the peer's",
                pp.name,
                av.NetworkRouteValid,
                u16::from_be(av.DLid)
            );
        }
        if pp.qp_type == 0 {
            ensure!(
                (
                    qa.LocalAckTimeout,
                    qa.SequenceErrorRetryCount,
                    qa.RnrRetryCount
                ) == (14, 7, 7),
                "rc_pingpong: timeout/retry/rnr_retry {}/{}/{}, want 14/7/7",
                qa.LocalAckTimeout,
                qa.SequenceErrorRetryCount,
                qa.RnrRetryCount
            );
        }
        to_error(&f, &[a, b], pp.name, &sgid)?;
        seen.push(pp.name);
    }
    let rc = create_qp(&f, pd, cq, cq, 0, 0)?;
    let ud = create_qp(&f, pd, cq, cq, 0, 3)?;
    librdmacm(&f, rc, ud, &sgid)?;
    to_error(&f, &[rc, ud], "librdmacm", &sgid)?;
    Ok(format!(
        "{} ({}), then librdmacm's RC/UD INIT (no access flags, no Q_Key) and UD RTR/RTS: \
         each call's bytes as WinOFED's libibverbs builds them (its unwritten fields 0xCC), \
         each pends and ends SUCCESS in the target state; PSNs, QPN, MTU, Q_Key, route and \
         retry counts as sent; →ERR with IBV_QP_STATE alone moves every QP",
        seen.join(", "),
        if ib {
            "the peer by LID, as on an InfiniBand subnet"
        } else {
            "the peer by GID: this port is RoCE"
        }
    ))
}

/// ND v1 (`nd_ep.cpp`) and ND v2 (`nd_qp.cpp`): INIT with `STATE | PORT_NUMBER | PKEY_INDEX`
/// over an uncleared struct, then ND v2's Flush.
fn netdirect<E: Env>(env: &E) -> Outcome {
    let (f, o) = open_objects(env)?;
    let nd_init = |qp: u64| {
        let mut a = uninit();
        a.Id.Id = qp;
        a.Options = WV_IO_QP_ATTR_STATE | WV_IO_QP_ATTR_PORT_NUMBER | WV_IO_QP_ATTR_PKEY_INDEX;
        a.QpState = WV_IO_QP_STATE_INIT;
        a.PkeyIndex = 0;
        a.AddressVector.PortNumber = 1;
        a.Reserved = [0; _];
        a.as_bytes().to_vec()
    };
    let nd_flush = |qp: u64| {
        let mut a = uninit();
        a.Id.Id = qp;
        a.Options = WV_IO_QP_ATTR_STATE;
        a.QpState = WV_IO_QP_STATE_ERROR;
        a.Reserved = [0; _];
        a.as_bytes().to_vec()
    };
    // ND v1: the endpoint's QP.
    modify_to(&f, o.qp, &nd_init(o.qp), WV_IO_QP_STATE_INIT, "ND v1 INIT")?;
    // ND v2: a second RC QP, then INDQueuePair::Flush.
    let qp2 = create_qp(&f, o.pd, o.cq, o.cq, 0, 0)?;
    modify_to(&f, qp2, &nd_init(qp2), WV_IO_QP_STATE_INIT, "ND v2 INIT")?;
    modify_to(&f, qp2, &nd_flush(qp2), WV_IO_QP_STATE_ERROR, "ND v2 Flush")?;
    // Flush of a QP that never left RESET: accepted, and the QP stays in RESET (what OFW's
    // HCA drivers do: nothing can be outstanding there).
    let qp3 = create_qp(&f, o.pd, o.cq, o.cq, 0, 0)?;
    modify_to(
        &f,
        qp3,
        &nd_flush(qp3),
        WV_IO_QP_STATE_RESET,
        "ND v2 Flush in RESET",
    )?;
    Ok(
        "ND v1 and ND v2 INIT (STATE|PORT_NUMBER|PKEY_INDEX, no access flags, rest 0xCC) → \
         SUCCESS, INIT; ND v2 Flush (ERROR, STATE) → SUCCESS, ERROR; Flush of a RESET QP → \
         SUCCESS, stays RESET"
            .into(),
    )
}

/// `Options = 0`: the state is still requested, as on OFW.
fn options_zero<E: Env>(env: &E) -> Outcome {
    let (f, o) = open_objects(env)?;
    let gid = gid0(&f, o.dev)?;
    let qpn = u32::from_be(query_qp(&f, o.qp)?.Qpn);
    let zero_options = |state: u8| -> Result<Vec<u8>, String> {
        let mut attr: WV_IO_QP_ATTRIBUTES =
            read(&modify_in(o.qp, state, Some((qpn, gid))), "QP_MODIFY input")?;
        attr.Options = 0;
        Ok(attr.as_bytes().to_vec())
    };
    for (state, name) in [
        (WV_IO_QP_STATE_INIT, "INIT"),
        (WV_IO_QP_STATE_RTR, "RTR"),
        (WV_IO_QP_STATE_RTS, "RTS"),
        (WV_IO_QP_STATE_RTS, "RTS again"),
        (WV_IO_QP_STATE_ERROR, "ERROR"),
    ] {
        modify_to(
            &f,
            o.qp,
            &zero_options(state)?,
            state,
            &format!("Options=0 →{name}"),
        )?;
    }
    Ok("Options = 0 with QpState INIT, RTR, RTS, RTS, ERROR: each SUCCESS and QP_QUERY shows the new state".into())
}
