//! QP_MODIFY as real WinVerbs clients send it, byte for byte: WinOFED's libibverbs port
//! (`ibv_modify_qp` puts the application's mask in `Options`, `IBV_QP_*` = `WV_QP_ATTR_*`),
//! as rc_pingpong, uc_pingpong and ud_pingpong call it, and the NetworkDirect providers over
//! WinVerbs (ND v1 and v2 move a new RC QP to INIT with `STATE | PORT_NUMBER | PKEY_INDEX`
//! and no access flags; ND v2's Flush is `Modify(ERROR, STATE)`), plus `Options = 0`.
//!
//! What the applications leave uninitialised on their stack travels too (their attribute
//! structs are not cleared before the RTR/RTS calls, nor ND's): it is filled here with 0xCC,
//! the pattern of MSVC's uninitialised-stack checks, so a driver or controller that reads a
//! field the target state does not carry shows up as a failure.
//!
//! The QPs move as on OFW, where the target `QpState` alone decides what the driver hands the
//! controller; `QP_QUERY` then shows the attributes that travelled.

use wv_abi::consts::*;
use wv_abi::ioctl::*;
use wv_abi::{NtStatus, WV_IO_QP_ATTRIBUTES};
use wv_client::raw::RawFile;
use zerocopy::{FromBytes, IntoBytes};

use super::env::Env;
use super::raw::*;
use super::{Outcome, Scenario};

pub fn scenarios<E: Env>() -> Vec<Scenario<E>> {
    vec![
        Scenario {
            name: "qp-modify-libibverbs",
            run: libibverbs,
        },
        Scenario {
            name: "qp-modify-netdirect",
            run: netdirect,
        },
        Scenario {
            name: "qp-modify-options-zero",
            run: options_zero,
        },
    ]
}

/// What an application's uninitialised stack holds (MSVC's `/RTCs` fill).
const UNINIT: u8 = 0xCC;
/// The PSNs the pingpong examples exchange (any 24-bit values).
const PSN_A: u32 = 0x00_1234;
const PSN_B: u32 = 0x00_5678;

/// A `WV_IO_QP_ATTRIBUTES` whose every byte is uninitialised stack.
fn uninit() -> WV_IO_QP_ATTRIBUTES {
    WV_IO_QP_ATTRIBUTES::read_from_bytes(&[UNINIT; size_of::<WV_IO_QP_ATTRIBUTES>()])
        .unwrap_or_default()
}

/// `ibv_qp_attr` / `ibv_ah_attr` fields the pingpong examples set.
#[derive(Clone, Copy)]
struct IbvAttr {
    qp_state: u8,
    path_mtu: u32,
    dest_qp_num: u32,
    rq_psn: u32,
    sq_psn: u32,
    qkey: u32,
    max_dest_rd_atomic: u32,
    max_rd_atomic: u32,
    min_rnr_timer: u8,
    timeout: u8,
    retry_cnt: u8,
    rnr_retry: u8,
    pkey_index: u16,
    port_num: u8,
    qp_access_flags: u8,
    /// `ah_attr`: is_global with this DGID, hop limit 1, SGID index 0 (rc_pingpong `-g 0`).
    ah_dgid: Option<[u8; 16]>,
    ah_port_num: u8,
}

/// What WinOFED's `ibv_modify_qp` writes into `WV_QP_ATTRIBUTES` (and winverbs.dll copies into
/// `WV_IO_QP_ATTRIBUTES`) for `attr`, over a struct that starts as `base`: the application's
/// values where it set them, `base` (zero after a memset, 0xCC otherwise) elsewhere.
fn ibv_modify_qp(
    qp: u64,
    base: WV_IO_QP_ATTRIBUTES,
    a: &IbvAttr,
    sgid: [u8; 16],
    mask: u32,
) -> Vec<u8> {
    let mut w = base;
    w.Id.Id = qp;
    w.Id.VerbInfo = 0;
    w.InitiatorDepth = a.max_rd_atomic;
    w.ResponderResources = a.max_dest_rd_atomic;
    w.QpState = a.qp_state;
    w.DestinationQpn = a.dest_qp_num.to_be();
    w.Qkey = a.qkey.to_be();
    w.SendPsn = a.sq_psn.to_be();
    w.ReceivePsn = a.rq_psn.to_be();
    w.AccessFlags = a.qp_access_flags;
    w.QpFlags = 0;
    // ibv_convert_ah_attr: the route only when the AH is global.
    w.AddressVector.NetworkRouteValid = u8::from(a.ah_dgid.is_some());
    if let Some(dgid) = a.ah_dgid {
        w.AddressVector.DGid = dgid;
        w.AddressVector.SGid = sgid;
        w.AddressVector.HopLimit = 1;
    }
    w.AddressVector.DLid = 0;
    w.AddressVector.ServiceLevel = 0;
    w.AddressVector.SourcePathBits = 0;
    w.AddressVector.PortNumber = a.ah_port_num;
    // …then overwritten with attr->port_num, whatever the state.
    w.AddressVector.PortNumber = a.port_num;
    w.PathMtu = 0x80u32.wrapping_shl(a.path_mtu);
    w.PkeyIndex = a.pkey_index;
    w.LocalAckTimeout = a.timeout;
    w.RnrNakTimeout = a.min_rnr_timer;
    w.SequenceErrorRetryCount = a.retry_cnt;
    w.RnrRetryCount = a.rnr_retry;
    w.Options = mask;
    w.Reserved = [0; _];
    w.as_bytes().to_vec()
}

/// `memset(&attr, 0, sizeof attr)` as rc_pingpong does before the INIT call.
fn zeroed_ibv() -> IbvAttr {
    IbvAttr {
        qp_state: 0,
        path_mtu: 0,
        dest_qp_num: 0,
        rq_psn: 0,
        sq_psn: 0,
        qkey: 0,
        max_dest_rd_atomic: 0,
        max_rd_atomic: 0,
        min_rnr_timer: 0,
        timeout: 0,
        retry_cnt: 0,
        rnr_retry: 0,
        pkey_index: 0,
        port_num: 0,
        qp_access_flags: 0,
        ah_dgid: None,
        ah_port_num: 0,
    }
}

/// The same attribute struct when the application did not clear it: every field it does not
/// set is stack garbage.
fn garbage_ibv() -> IbvAttr {
    let b = UNINIT;
    let w = u32::from_ne_bytes([b; 4]);
    IbvAttr {
        qp_state: b,
        path_mtu: w,
        dest_qp_num: w,
        rq_psn: w,
        sq_psn: w,
        qkey: w,
        max_dest_rd_atomic: w,
        max_rd_atomic: w,
        min_rnr_timer: b,
        timeout: b,
        retry_cnt: b,
        rnr_retry: b,
        pkey_index: u16::from_ne_bytes([b; 2]),
        port_num: b,
        qp_access_flags: b,
        ah_dgid: None,
        ah_port_num: b,
    }
}

const IBV_QPS_INIT: u8 = WV_IO_QP_STATE_INIT;
const IBV_QPS_RTR: u8 = WV_IO_QP_STATE_RTR;
const IBV_QPS_RTS: u8 = WV_IO_QP_STATE_RTS;
const IBV_QPS_ERR: u8 = WV_IO_QP_STATE_ERROR;
const IBV_MTU_1024: u32 = 3;

/// A pingpong flavour: its QP type and the masks of its three `ibv_modify_qp` calls.
struct Pingpong {
    name: &'static str,
    qp_type: u8,
    init_mask: u32,
    rtr_mask: u32,
    rts_mask: u32,
}

const PINGPONGS: [Pingpong; 3] = [
    Pingpong {
        name: "rc_pingpong",
        qp_type: 0,
        init_mask: WV_IO_QP_ATTR_STATE
            | WV_IO_QP_ATTR_PKEY_INDEX
            | WV_IO_QP_ATTR_PORT_NUMBER
            | WV_IO_QP_ATTR_ACCESS_FLAGS,
        // IBV_QP_PATH_MTU is WV_QP_ATTR_AV in WinOFED's verbs.h.
        rtr_mask: WV_IO_QP_ATTR_STATE
            | WV_IO_QP_ATTR_AV
            | WV_IO_QP_ATTR_DESTINATION_QPN
            | WV_IO_QP_ATTR_RECEIVE_PSN
            | WV_IO_QP_ATTR_RESPONDER_RESOURCES
            | WV_IO_QP_ATTR_RNR_NAK_TIMEOUT,
        rts_mask: WV_IO_QP_ATTR_STATE
            | WV_IO_QP_ATTR_ACK_TIMEOUT
            | WV_IO_QP_ATTR_ERROR_RETRY_COUNT
            | WV_IO_QP_ATTR_RNR_RETRY_COUNT
            | WV_IO_QP_ATTR_SEND_PSN
            | WV_IO_QP_ATTR_INITIATOR_DEPTH,
    },
    Pingpong {
        name: "uc_pingpong",
        qp_type: 1,
        init_mask: WV_IO_QP_ATTR_STATE
            | WV_IO_QP_ATTR_PKEY_INDEX
            | WV_IO_QP_ATTR_PORT_NUMBER
            | WV_IO_QP_ATTR_ACCESS_FLAGS,
        rtr_mask: WV_IO_QP_ATTR_STATE
            | WV_IO_QP_ATTR_AV
            | WV_IO_QP_ATTR_DESTINATION_QPN
            | WV_IO_QP_ATTR_RECEIVE_PSN,
        rts_mask: WV_IO_QP_ATTR_STATE | WV_IO_QP_ATTR_SEND_PSN,
    },
    Pingpong {
        name: "ud_pingpong",
        qp_type: 3,
        init_mask: WV_IO_QP_ATTR_STATE
            | WV_IO_QP_ATTR_PKEY_INDEX
            | WV_IO_QP_ATTR_PORT_NUMBER
            | WV_IO_QP_ATTR_QKEY,
        rtr_mask: WV_IO_QP_ATTR_STATE,
        rts_mask: WV_IO_QP_ATTR_STATE | WV_IO_QP_ATTR_SEND_PSN,
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
    let st = wait(park(f, WV_IOCTL_QP_MODIFY, input, 8)?, what)?;
    expect_info(&st, NtStatus::SUCCESS, 8, what)?;
    let attr = query_qp(f, qp)?;
    ensure!(
        attr.QpState == want,
        "{what}: QP_QUERY says state {}, want {want}",
        attr.QpState
    );
    Ok(attr)
}

/// The pingpong's calls on one side: INIT (cleared struct), RTR and RTS (uncleared struct).
fn pingpong_side<F: RawFile>(
    f: &F,
    pp: &Pingpong,
    qp: u64,
    gid: [u8; 16],
    peer_qpn: u32,
    my_psn: u32,
    peer_psn: u32,
) -> Result<WV_IO_QP_ATTRIBUTES, String> {
    let what = |step: &str| format!("{} {step}", pp.name);
    let mut init = zeroed_ibv();
    init.qp_state = IBV_QPS_INIT;
    init.port_num = 1;
    if pp.qp_type == 3 {
        init.qkey = 0x1111_1111;
    }
    let zero = WV_IO_QP_ATTRIBUTES::default();
    modify_to(
        f,
        qp,
        &ibv_modify_qp(qp, zero, &init, gid, pp.init_mask),
        IBV_QPS_INIT,
        &what("INIT"),
    )?;

    let mut attr = garbage_ibv();
    attr.qp_state = IBV_QPS_RTR;
    if pp.qp_type != 3 {
        attr.path_mtu = IBV_MTU_1024;
        attr.dest_qp_num = peer_qpn;
        attr.rq_psn = peer_psn;
        attr.ah_dgid = Some(gid);
        attr.ah_port_num = 1;
        if pp.qp_type == 0 {
            attr.max_dest_rd_atomic = 1;
            attr.min_rnr_timer = 12;
        }
    }
    let stack = uninit();
    modify_to(
        f,
        qp,
        &ibv_modify_qp(qp, stack, &attr, gid, pp.rtr_mask),
        IBV_QPS_RTR,
        &what("RTR"),
    )?;

    attr.qp_state = IBV_QPS_RTS;
    attr.sq_psn = my_psn;
    if pp.qp_type == 0 {
        attr.timeout = 14;
        attr.retry_cnt = 7;
        attr.rnr_retry = 7;
        attr.max_rd_atomic = 1;
    }
    modify_to(
        f,
        qp,
        &ibv_modify_qp(qp, stack, &attr, gid, pp.rts_mask),
        IBV_QPS_RTS,
        &what("RTS"),
    )
}

/// rc/uc/ud_pingpong's exact calls on two QPs connected to each other, then librdmacm's
/// `ibv_modify_qp(ERR, IBV_QP_STATE)` with an uncleared struct.
fn libibverbs<E: Env>(env: &E) -> Outcome {
    let f = env.open()?;
    let guid = env.guid(&f)?;
    let dev = open_dev(&f, guid)?;
    let gid = gid0(&f, dev)?;
    let pd = alloc_pd(&f, dev)?;
    let cq = create_cq(&f, dev, 16)?;
    let mut seen = Vec::new();
    for pp in &PINGPONGS {
        let a = create_qp(&f, pd, cq, cq, 0, pp.qp_type)?;
        let b = create_qp(&f, pd, cq, cq, 0, pp.qp_type)?;
        let qpn = |qp| -> Result<u32, String> { Ok(u32::from_be(query_qp(&f, qp)?.Qpn)) };
        let (qpn_a, qpn_b) = (qpn(a)?, qpn(b)?);
        let qa = pingpong_side(&f, pp, a, gid, qpn_b, PSN_A, PSN_B)?;
        pingpong_side(&f, pp, b, gid, qpn_a, PSN_B, PSN_A)?;
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
        // librdmacm's disconnect: ERR with IBV_QP_STATE, the rest uncleared.
        let mut err = garbage_ibv();
        err.qp_state = IBV_QPS_ERR;
        for qp in [a, b] {
            modify_to(
                &f,
                qp,
                &ibv_modify_qp(qp, uninit(), &err, gid, WV_IO_QP_ATTR_STATE),
                IBV_QPS_ERR,
                &format!("{} ERR", pp.name),
            )?;
        }
        seen.push(pp.name);
    }
    Ok(format!(
        "{}: INIT (cleared struct), RTR and RTS (uncleared, 0xCC) with the examples' masks, \
         each pends and ends SUCCESS in the target state; PSNs, QPN, MTU, Q_Key and retry \
         counts as sent; →ERR with IBV_QP_STATE alone moves both QPs",
        seen.join(", ")
    ))
}

/// ND v1 (`nd_ep.cpp`) and ND v2 (`nd_qp.cpp`): INIT with `STATE | PORT_NUMBER | PKEY_INDEX`
/// over an uncleared struct, then ND v2's Flush.
fn netdirect<E: Env>(env: &E) -> Outcome {
    let f = env.open()?;
    let guid = env.guid(&f)?;
    let o = objects(&f, guid)?;
    let nd_init = |qp: u64| {
        let mut a = uninit();
        a.Id.Id = qp;
        a.Id.VerbInfo = 0;
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
        a.Id.VerbInfo = 0;
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
    let f = env.open()?;
    let guid = env.guid(&f)?;
    let o = objects(&f, guid)?;
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
