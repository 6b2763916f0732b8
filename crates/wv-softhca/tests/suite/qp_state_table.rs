//! `state_table` against a reference written apart from it: the IB core's `qp_state_table`
//! (Linux `drivers/infiniband/core/verbs.c`) for RC, UC and UD, with the attribute bits as
//! their numeric values in rdma-core's `verbs.h` (`enum ibv_qp_attr_mask`), and
//! `ib_modify_qp_is_ok`'s rule over it.

use wv_hal::{QpState, QpType};
use wv_softhca::state_table::{self, ib};

// `enum ibv_qp_attr_mask` of rdma-core's `verbs.h`.
pub const STATE: u32 = 0x1;
pub const CUR_STATE: u32 = 0x2;
pub const EN_SQD_ASYNC_NOTIFY: u32 = 0x4;
pub const ACCESS_FLAGS: u32 = 0x8;
pub const PKEY_INDEX: u32 = 0x10;
pub const PORT: u32 = 0x20;
pub const QKEY: u32 = 0x40;
pub const AV: u32 = 0x80;
pub const PATH_MTU: u32 = 0x100;
pub const TIMEOUT: u32 = 0x200;
pub const RETRY_CNT: u32 = 0x400;
pub const RNR_RETRY: u32 = 0x800;
pub const RQ_PSN: u32 = 0x1000;
pub const MAX_QP_RD_ATOMIC: u32 = 0x2000;
pub const ALT_PATH: u32 = 0x4000;
pub const MIN_RNR_TIMER: u32 = 0x8000;
pub const SQ_PSN: u32 = 0x1_0000;
pub const MAX_DEST_RD_ATOMIC: u32 = 0x2_0000;
pub const PATH_MIG_STATE: u32 = 0x4_0000;
pub const CAP: u32 = 0x8_0000;
pub const DEST_QPN: u32 = 0x10_0000;

/// Every `IBV_QP_*` bit a modify may carry.
const BITS: [u32; 21] = [
    STATE,
    CUR_STATE,
    EN_SQD_ASYNC_NOTIFY,
    ACCESS_FLAGS,
    PKEY_INDEX,
    PORT,
    QKEY,
    AV,
    PATH_MTU,
    TIMEOUT,
    RETRY_CNT,
    RNR_RETRY,
    RQ_PSN,
    MAX_QP_RD_ATOMIC,
    ALT_PATH,
    MIN_RNR_TIMER,
    SQ_PSN,
    MAX_DEST_RD_ATOMIC,
    PATH_MIG_STATE,
    CAP,
    DEST_QPN,
];

pub const STATES: [QpState; 7] = [
    QpState::Reset,
    QpState::Init,
    QpState::Rtr,
    QpState::Rts,
    QpState::Sqd,
    QpState::SqError,
    QpState::Error,
];
pub const TYPES: [QpType; 3] = [QpType::Rc, QpType::Uc, QpType::Ud];

/// The kernel's cell for `cur → next` of a QP of type `t`: `None` where it is not valid, else
/// (required, optional) attributes.
pub fn kernel_cell(cur: QpState, next: QpState, t: QpType) -> Option<(u32, u32)> {
    use QpState::*;
    use QpType::*;
    let cell = match (cur, next, t) {
        // Into RESET from anywhere and into ERR from anywhere but RESET: nothing else.
        (_, Reset, _) => (0, 0),
        (Reset, Error, _) => return None,
        (_, Error, _) => (0, 0),
        (Reset, Init, Rc | Uc) => (PKEY_INDEX | PORT | ACCESS_FLAGS, 0),
        (Reset, Init, Ud) => (PKEY_INDEX | PORT | QKEY, 0),
        (Init, Init, Rc | Uc) => (0, PKEY_INDEX | PORT | ACCESS_FLAGS),
        (Init, Init, Ud) => (0, PKEY_INDEX | PORT | QKEY),
        (Init, Rtr, Rc) => (
            AV | PATH_MTU | DEST_QPN | RQ_PSN | MAX_DEST_RD_ATOMIC | MIN_RNR_TIMER,
            ALT_PATH | ACCESS_FLAGS | PKEY_INDEX,
        ),
        (Init, Rtr, Uc) => (
            AV | PATH_MTU | DEST_QPN | RQ_PSN,
            ALT_PATH | ACCESS_FLAGS | PKEY_INDEX,
        ),
        (Init, Rtr, Ud) => (0, PKEY_INDEX | QKEY),
        (Rtr, Rts, Rc) => (
            TIMEOUT | RETRY_CNT | RNR_RETRY | SQ_PSN | MAX_QP_RD_ATOMIC,
            CUR_STATE | ALT_PATH | ACCESS_FLAGS | MIN_RNR_TIMER | PATH_MIG_STATE,
        ),
        (Rtr, Rts, Uc) => (SQ_PSN, CUR_STATE | ALT_PATH | ACCESS_FLAGS | PATH_MIG_STATE),
        (Rtr, Rts, Ud) => (SQ_PSN, CUR_STATE | QKEY),
        (Rts | Sqd, Rts, Rc) => (
            0,
            CUR_STATE | ACCESS_FLAGS | ALT_PATH | PATH_MIG_STATE | MIN_RNR_TIMER,
        ),
        (Rts | Sqd, Rts, Uc) => (0, CUR_STATE | ACCESS_FLAGS | ALT_PATH | PATH_MIG_STATE),
        (Rts | Sqd, Rts, Ud) => (0, CUR_STATE | QKEY),
        (Rts, Sqd, _) => (0, EN_SQD_ASYNC_NOTIFY),
        (Sqd, Sqd, Rc) => (
            0,
            PORT | AV
                | TIMEOUT
                | RETRY_CNT
                | RNR_RETRY
                | MAX_QP_RD_ATOMIC
                | MAX_DEST_RD_ATOMIC
                | ALT_PATH
                | ACCESS_FLAGS
                | PKEY_INDEX
                | MIN_RNR_TIMER
                | PATH_MIG_STATE,
        ),
        (Sqd, Sqd, Uc) => (
            0,
            AV | ALT_PATH | ACCESS_FLAGS | PKEY_INDEX | PATH_MIG_STATE,
        ),
        (Sqd, Sqd, Ud) => (0, PKEY_INDEX | QKEY),
        // The kernel lists no optional attribute of an RC QP leaving SQE.
        (SqError, Rts, Rc) => (0, 0),
        (SqError, Rts, Uc) => (0, CUR_STATE | ACCESS_FLAGS),
        (SqError, Rts, Ud) => (0, CUR_STATE | QKEY),
        _ => return None,
    };
    Some(cell)
}

#[test]
fn the_attribute_bits_are_rdma_cores() {
    let ours = [
        ib::STATE,
        ib::CUR_STATE,
        ib::EN_SQD_ASYNC_NOTIFY,
        ib::ACCESS_FLAGS,
        ib::PKEY_INDEX,
        ib::PORT,
        ib::QKEY,
        ib::AV,
        ib::PATH_MTU,
        ib::TIMEOUT,
        ib::RETRY_CNT,
        ib::RNR_RETRY,
        ib::RQ_PSN,
        ib::MAX_QP_RD_ATOMIC,
        ib::ALT_PATH,
        ib::MIN_RNR_TIMER,
        ib::SQ_PSN,
        ib::MAX_DEST_RD_ATOMIC,
        ib::PATH_MIG_STATE,
        ib::CAP,
        ib::DEST_QPN,
    ];
    assert_eq!(ours, BITS);
}

/// Every (current, next, type) cell, valid or not, is the kernel's.
#[test]
fn every_cell_is_the_kernels() {
    let mut valid = 0;
    for t in TYPES {
        for cur in STATES {
            for next in STATES {
                let want = kernel_cell(cur, next, t);
                assert_eq!(
                    state_table::transition(cur, next, t),
                    want,
                    "{t:?} {cur:?} -> {next:?}"
                );
                if let Some((req, opt)) = want {
                    // No attribute is both required and optional in a cell.
                    assert_eq!(req & opt, 0, "{t:?} {cur:?} -> {next:?}");
                    valid += 1;
                }
            }
        }
    }
    assert_eq!(valid, 3 * 22);
}

/// `ib_modify_qp_is_ok` over every cell: a mask is accepted when it holds every required
/// attribute and nothing but required, optional and `STATE`; `CUR_STATE` only from RTR, RTS,
/// SQD and SQE. The one extension (the crate's contract): a path MTU goes wherever an address
/// vector may, so SQD → SQD, whose cell has `AV` but no `PATH_MTU`, takes a new MTU with it.
#[test]
fn modify_is_ok_is_the_kernels_rule_on_every_cell() {
    for t in TYPES {
        for cur in STATES {
            for next in STATES {
                let cell = kernel_cell(cur, next, t);
                let ok = |mask: u32| state_table::modify_is_ok(cur, next, t, mask);
                let Some((req, opt)) = cell else {
                    assert!(!ok(STATE), "{t:?} {cur:?} -> {next:?} is not valid");
                    continue;
                };
                assert!(ok(STATE | req), "{t:?} {cur:?} -> {next:?}");
                // Without STATE too: the table never requires it.
                assert!(ok(req), "{t:?} {cur:?} -> {next:?}");
                for bit in BITS {
                    if req & bit != 0 {
                        assert!(
                            !ok(STATE | (req & !bit)),
                            "{t:?} {cur:?} -> {next:?} without required {bit:#x}"
                        );
                        continue;
                    }
                    let cur_state_allowed = matches!(
                        cur,
                        QpState::Rtr | QpState::Rts | QpState::Sqd | QpState::SqError
                    );
                    let allowed = bit == STATE
                        || (opt & bit != 0 && (bit != CUR_STATE || cur_state_allowed))
                        || (bit == PATH_MTU && (req | opt) & AV != 0);
                    assert_eq!(
                        ok(STATE | req | bit),
                        allowed,
                        "{t:?} {cur:?} -> {next:?} with {bit:#x}"
                    );
                }
            }
        }
    }
}

/// The cases the extension is there for, spelled out.
#[test]
fn a_path_mtu_goes_with_an_address_vector_and_nowhere_else() {
    use QpState::*;
    for t in [QpType::Rc, QpType::Uc] {
        assert!(state_table::modify_is_ok(
            Sqd,
            Sqd,
            t,
            STATE | AV | PATH_MTU
        ));
        assert!(state_table::modify_is_ok(Sqd, Sqd, t, STATE | AV));
    }
    assert!(!state_table::modify_is_ok(
        Sqd,
        Sqd,
        QpType::Ud,
        STATE | PATH_MTU
    ));
    for t in TYPES {
        assert!(!state_table::modify_is_ok(Rts, Rts, t, STATE | PATH_MTU));
        assert!(!state_table::modify_is_ok(Init, Init, t, STATE | PATH_MTU));
    }
}
