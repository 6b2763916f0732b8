//! The QP state machine of the IB core (`ib_modify_qp_is_ok`): which transitions are valid for
//! which QP type, and which attributes each requires and allows. Masks use the `IB_QP_*` bits,
//! which the device derives from an OFW modification (`modify_attr`).

use wv_hal::{QpState, QpType};

/// `IB_QP_*` attribute bits (`enum ib_qp_attr_mask`, = `IBV_QP_*`).
#[allow(missing_docs)]
pub mod ib {
    pub const STATE: u32 = 1 << 0;
    pub const CUR_STATE: u32 = 1 << 1;
    pub const EN_SQD_ASYNC_NOTIFY: u32 = 1 << 2;
    pub const ACCESS_FLAGS: u32 = 1 << 3;
    pub const PKEY_INDEX: u32 = 1 << 4;
    pub const PORT: u32 = 1 << 5;
    pub const QKEY: u32 = 1 << 6;
    pub const AV: u32 = 1 << 7;
    pub const PATH_MTU: u32 = 1 << 8;
    pub const TIMEOUT: u32 = 1 << 9;
    pub const RETRY_CNT: u32 = 1 << 10;
    pub const RNR_RETRY: u32 = 1 << 11;
    pub const RQ_PSN: u32 = 1 << 12;
    pub const MAX_QP_RD_ATOMIC: u32 = 1 << 13;
    pub const ALT_PATH: u32 = 1 << 14;
    pub const MIN_RNR_TIMER: u32 = 1 << 15;
    pub const SQ_PSN: u32 = 1 << 16;
    pub const MAX_DEST_RD_ATOMIC: u32 = 1 << 17;
    pub const PATH_MIG_STATE: u32 = 1 << 18;
    pub const CAP: u32 = 1 << 19;
    pub const DEST_QPN: u32 = 1 << 20;
}

/// One cell of the table: `None` = invalid transition, else `(required, optional)`.
type Cell = Option<(u32, u32)>;

fn idx(t: QpType) -> usize {
    match t {
        QpType::Rc => 0,
        QpType::Uc => 1,
        QpType::Ud => 2,
    }
}

/// Required and optional attributes of `cur → next` for `qp_type`, or `None` when the
/// transition is not in the table.
pub fn transition(cur: QpState, next: QpState, qp_type: QpType) -> Cell {
    use QpState::*;
    use ib::*;
    let t = idx(qp_type);
    let pick = |rc: (u32, u32), uc: (u32, u32), ud: (u32, u32)| Some([rc, uc, ud][t]);
    match (cur, next) {
        (_, Reset) => Some((0, 0)),
        (Reset, Init) => pick(
            (PKEY_INDEX | PORT | ACCESS_FLAGS, 0),
            (PKEY_INDEX | PORT | ACCESS_FLAGS, 0),
            (PKEY_INDEX | PORT | QKEY, 0),
        ),
        (Reset, _) => None,
        (_, Error) => Some((0, 0)),
        (Init, Init) => pick(
            (0, PKEY_INDEX | PORT | ACCESS_FLAGS),
            (0, PKEY_INDEX | PORT | ACCESS_FLAGS),
            (0, PKEY_INDEX | PORT | QKEY),
        ),
        (Init, Rtr) => pick(
            (
                AV | PATH_MTU | DEST_QPN | RQ_PSN | MAX_DEST_RD_ATOMIC | MIN_RNR_TIMER,
                ALT_PATH | ACCESS_FLAGS | PKEY_INDEX,
            ),
            (
                AV | PATH_MTU | DEST_QPN | RQ_PSN,
                ALT_PATH | ACCESS_FLAGS | PKEY_INDEX,
            ),
            (0, PKEY_INDEX | QKEY),
        ),
        (Rtr, Rts) => pick(
            (
                SQ_PSN | TIMEOUT | RETRY_CNT | RNR_RETRY | MAX_QP_RD_ATOMIC,
                CUR_STATE | ALT_PATH | ACCESS_FLAGS | MIN_RNR_TIMER | PATH_MIG_STATE,
            ),
            (SQ_PSN, CUR_STATE | ALT_PATH | ACCESS_FLAGS | PATH_MIG_STATE),
            (SQ_PSN, CUR_STATE | QKEY),
        ),
        (Rts, Rts) => pick(
            (
                0,
                CUR_STATE | ACCESS_FLAGS | ALT_PATH | PATH_MIG_STATE | MIN_RNR_TIMER,
            ),
            (0, CUR_STATE | ACCESS_FLAGS | ALT_PATH | PATH_MIG_STATE),
            (0, CUR_STATE | QKEY),
        ),
        (Rts, Sqd) => Some((0, EN_SQD_ASYNC_NOTIFY)),
        (Sqd, Rts) => pick(
            (
                0,
                CUR_STATE | ALT_PATH | ACCESS_FLAGS | MIN_RNR_TIMER | PATH_MIG_STATE,
            ),
            (0, CUR_STATE | ALT_PATH | ACCESS_FLAGS | PATH_MIG_STATE),
            (0, CUR_STATE | QKEY),
        ),
        (Sqd, Sqd) => pick(
            (
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
            (
                0,
                AV | ALT_PATH | ACCESS_FLAGS | PKEY_INDEX | PATH_MIG_STATE,
            ),
            (0, PKEY_INDEX | QKEY),
        ),
        (SqError, Rts) => pick((0, 0), (0, CUR_STATE | ACCESS_FLAGS), (0, CUR_STATE | QKEY)),
        _ => None,
    }
}

/// `ib_modify_qp_is_ok`: whether `mask` (IB bits) takes a QP of `qp_type` from `cur` to `next`.
/// An `SQD → SQD` modify may carry a path MTU along with `AV`; the table lists no `PATH_MTU`
/// there, so it is accepted wherever `AV` is.
pub fn modify_is_ok(cur: QpState, next: QpState, qp_type: QpType, mask: u32) -> bool {
    if mask & ib::CUR_STATE != 0
        && !matches!(
            cur,
            QpState::Rtr | QpState::Rts | QpState::Sqd | QpState::SqError
        )
    {
        return false;
    }
    let Some((req, mut opt)) = transition(cur, next, qp_type) else {
        return false;
    };
    if (req | opt) & ib::AV != 0 {
        opt |= ib::PATH_MTU;
    }
    if mask & req != req {
        return false;
    }
    mask & !(req | opt | ib::STATE) == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use QpState::*;

    const ALL: [QpState; 7] = [Reset, Init, Rtr, Rts, Sqd, SqError, Error];

    #[test]
    fn valid_transitions_are_exactly_the_kernel_table() {
        let valid = [
            (Reset, Reset),
            (Reset, Init),
            (Init, Reset),
            (Init, Error),
            (Init, Init),
            (Init, Rtr),
            (Rtr, Reset),
            (Rtr, Error),
            (Rtr, Rts),
            (Rts, Reset),
            (Rts, Error),
            (Rts, Rts),
            (Rts, Sqd),
            (Sqd, Reset),
            (Sqd, Error),
            (Sqd, Rts),
            (Sqd, Sqd),
            (SqError, Reset),
            (SqError, Error),
            (SqError, Rts),
            (Error, Reset),
            (Error, Error),
        ];
        for t in [QpType::Rc, QpType::Uc, QpType::Ud] {
            for c in ALL {
                for n in ALL {
                    assert_eq!(
                        transition(c, n, t).is_some(),
                        valid.contains(&(c, n)),
                        "{t:?} {c:?}->{n:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn required_and_optional_masks() {
        use ib::*;
        let rc_init = PKEY_INDEX | PORT | ACCESS_FLAGS;
        assert!(modify_is_ok(Reset, Init, QpType::Rc, STATE | rc_init));
        assert!(!modify_is_ok(
            Reset,
            Init,
            QpType::Rc,
            STATE | PKEY_INDEX | PORT
        ));
        assert!(!modify_is_ok(
            Reset,
            Init,
            QpType::Rc,
            STATE | rc_init | QKEY
        ));
        assert!(modify_is_ok(
            Reset,
            Init,
            QpType::Ud,
            STATE | PKEY_INDEX | PORT | QKEY
        ));
        assert!(!modify_is_ok(Reset, Init, QpType::Ud, STATE | rc_init));
        let rtr = AV | PATH_MTU | DEST_QPN | RQ_PSN | MAX_DEST_RD_ATOMIC | MIN_RNR_TIMER;
        assert!(modify_is_ok(Init, Rtr, QpType::Rc, STATE | rtr));
        assert!(!modify_is_ok(
            Init,
            Rtr,
            QpType::Rc,
            STATE | (rtr & !PATH_MTU)
        ));
        assert!(!modify_is_ok(Init, Rtr, QpType::Uc, STATE | rtr));
        assert!(modify_is_ok(
            Init,
            Rtr,
            QpType::Uc,
            STATE | AV | PATH_MTU | DEST_QPN | RQ_PSN
        ));
        assert!(modify_is_ok(Init, Rtr, QpType::Ud, STATE));
        let rts = SQ_PSN | TIMEOUT | RETRY_CNT | RNR_RETRY | MAX_QP_RD_ATOMIC;
        assert!(modify_is_ok(Rtr, Rts, QpType::Rc, STATE | rts | CUR_STATE));
        assert!(!modify_is_ok(Rtr, Rts, QpType::Rc, STATE | SQ_PSN));
        assert!(modify_is_ok(Rtr, Rts, QpType::Ud, STATE | SQ_PSN));
        assert!(modify_is_ok(Rts, Rts, QpType::Rc, MIN_RNR_TIMER));
        assert!(!modify_is_ok(Rts, Rts, QpType::Uc, MIN_RNR_TIMER));
        // CUR_STATE only from RTR, RTS, SQD, SQE.
        assert!(!modify_is_ok(Init, Init, QpType::Rc, CUR_STATE));
        // Anything into ERR or RESET takes no attributes.
        assert!(modify_is_ok(Rts, Error, QpType::Rc, STATE));
        assert!(!modify_is_ok(Rts, Error, QpType::Rc, STATE | QKEY));
        assert!(!modify_is_ok(Reset, Error, QpType::Rc, STATE));
        assert!(modify_is_ok(SqError, Rts, QpType::Rc, STATE));
        assert!(!modify_is_ok(SqError, Rts, QpType::Rc, STATE | CUR_STATE));
        assert!(!modify_is_ok(Init, Rtr, QpType::Rc, STATE | rtr | CAP));
    }

    /// The cells of the transitions into RTS, whole: the kernel's `qp_state_table` for
    /// RTR → RTS, RTS → RTS and SQD → RTS (each bit of an optional set is one attribute a
    /// client may change on the way, such as the access flags on SQD → RTS).
    #[test]
    fn the_transitions_into_rts_take_the_kernels_attributes() {
        use ib::*;
        let uc = CUR_STATE | ALT_PATH | ACCESS_FLAGS | PATH_MIG_STATE;
        let rc = uc | MIN_RNR_TIMER;
        let ud = CUR_STATE | QKEY;
        let rc_rts = SQ_PSN | TIMEOUT | RETRY_CNT | RNR_RETRY | MAX_QP_RD_ATOMIC;
        let cells = [
            (Rtr, QpType::Rc, (rc_rts, rc)),
            (Rtr, QpType::Uc, (SQ_PSN, uc)),
            (Rtr, QpType::Ud, (SQ_PSN, ud)),
            (Rts, QpType::Rc, (0, rc)),
            (Rts, QpType::Uc, (0, uc)),
            (Rts, QpType::Ud, (0, ud)),
            (Sqd, QpType::Rc, (0, rc)),
            (Sqd, QpType::Uc, (0, uc)),
            (Sqd, QpType::Ud, (0, ud)),
        ];
        for (cur, t, cell) in cells {
            assert_eq!(transition(cur, Rts, t), Some(cell), "{cur:?} -> RTS, {t:?}");
        }
    }
}
