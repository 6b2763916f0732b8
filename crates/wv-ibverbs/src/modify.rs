//! Linux's QP transition rules (the kernel's `ib_modify_qp_is_ok` over its `qp_state_table`),
//! checked in the library before QP_MODIFY: WinVerbs' QP_MODIFY has OFW's meaning (the modify
//! is built from the target state, and the mask only adds optional attributes), so without
//! this a Linux application's mistakes (a missing required attribute, an extra one, RESET →
//! ERR) would be accepted or refused differently than on Linux.

use crate::abi::*;

/// Attributes by transition and QP type: `(required, optional)` beyond `IBV_QP_STATE`, or
/// `None` for a transition the table does not allow.
pub fn rule(cur: u32, next: u32, qp_type: u32) -> Option<(u32, u32)> {
    let rc = qp_type == IBV_QPT_RC;
    let uc = qp_type == IBV_QPT_UC;
    let ud = qp_type == IBV_QPT_UD;
    if !(rc || uc || ud) {
        return None;
    }
    let none = Some((0, 0));
    match (cur, next) {
        (_, IBV_QPS_RESET) if cur <= IBV_QPS_ERR => none,
        (IBV_QPS_RESET, IBV_QPS_INIT) => Some(if ud {
            (IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY, 0)
        } else {
            (IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, 0)
        }),
        (
            IBV_QPS_INIT | IBV_QPS_RTR | IBV_QPS_RTS | IBV_QPS_SQD | IBV_QPS_SQE | IBV_QPS_ERR,
            IBV_QPS_ERR,
        ) => none,
        (IBV_QPS_INIT, IBV_QPS_INIT) => Some(if ud {
            (0, IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY)
        } else {
            (0, IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)
        }),
        (IBV_QPS_INIT, IBV_QPS_RTR) => Some(if ud {
            (0, IBV_QP_PKEY_INDEX | IBV_QP_QKEY)
        } else if uc {
            (
                IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN,
                IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX,
            )
        } else {
            (
                IBV_QP_AV
                    | IBV_QP_PATH_MTU
                    | IBV_QP_DEST_QPN
                    | IBV_QP_RQ_PSN
                    | IBV_QP_MAX_DEST_RD_ATOMIC
                    | IBV_QP_MIN_RNR_TIMER,
                IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX,
            )
        }),
        (IBV_QPS_RTR, IBV_QPS_RTS) => Some(if ud {
            (IBV_QP_SQ_PSN, IBV_QP_CUR_STATE | IBV_QP_QKEY)
        } else if uc {
            (
                IBV_QP_SQ_PSN,
                IBV_QP_CUR_STATE | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PATH_MIG_STATE,
            )
        } else {
            (
                IBV_QP_TIMEOUT
                    | IBV_QP_RETRY_CNT
                    | IBV_QP_RNR_RETRY
                    | IBV_QP_SQ_PSN
                    | IBV_QP_MAX_QP_RD_ATOMIC,
                IBV_QP_CUR_STATE
                    | IBV_QP_ALT_PATH
                    | IBV_QP_ACCESS_FLAGS
                    | IBV_QP_MIN_RNR_TIMER
                    | IBV_QP_PATH_MIG_STATE,
            )
        }),
        (IBV_QPS_RTS, IBV_QPS_RTS) | (IBV_QPS_SQD, IBV_QPS_RTS) => Some(if ud {
            (0, IBV_QP_CUR_STATE | IBV_QP_QKEY)
        } else if uc {
            (
                0,
                IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_ALT_PATH | IBV_QP_PATH_MIG_STATE,
            )
        } else {
            (
                0,
                IBV_QP_CUR_STATE
                    | IBV_QP_ACCESS_FLAGS
                    | IBV_QP_ALT_PATH
                    | IBV_QP_PATH_MIG_STATE
                    | IBV_QP_MIN_RNR_TIMER,
            )
        }),
        (IBV_QPS_RTS, IBV_QPS_SQD) => Some((0, IBV_QP_EN_SQD_ASYNC_NOTIFY)),
        (IBV_QPS_SQD, IBV_QPS_SQD) => Some(if ud {
            (0, IBV_QP_PKEY_INDEX | IBV_QP_QKEY)
        } else if uc {
            (
                0,
                IBV_QP_AV
                    | IBV_QP_ALT_PATH
                    | IBV_QP_ACCESS_FLAGS
                    | IBV_QP_PKEY_INDEX
                    | IBV_QP_PATH_MIG_STATE,
            )
        } else {
            (
                0,
                IBV_QP_PORT
                    | IBV_QP_AV
                    | IBV_QP_TIMEOUT
                    | IBV_QP_RETRY_CNT
                    | IBV_QP_RNR_RETRY
                    | IBV_QP_MAX_QP_RD_ATOMIC
                    | IBV_QP_MAX_DEST_RD_ATOMIC
                    | IBV_QP_ALT_PATH
                    | IBV_QP_ACCESS_FLAGS
                    | IBV_QP_PKEY_INDEX
                    | IBV_QP_MIN_RNR_TIMER
                    | IBV_QP_PATH_MIG_STATE,
            )
        }),
        (IBV_QPS_SQE, IBV_QPS_RTS) => Some(if rc {
            (0, 0)
        } else if uc {
            (0, IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS)
        } else {
            (0, IBV_QP_CUR_STATE | IBV_QP_QKEY)
        }),
        _ => None,
    }
}

/// `ib_modify_qp_is_ok`: whether a modify from `cur` with `mask` is valid for `qp_type`
/// (`next` is the target: `attr.qp_state` with `IBV_QP_STATE`, else `cur`).
pub fn is_ok(cur: u32, next: u32, qp_type: u32, mask: u32) -> bool {
    if cur > IBV_QPS_ERR || next > IBV_QPS_ERR {
        return false;
    }
    if mask & IBV_QP_CUR_STATE != 0
        && !matches!(cur, IBV_QPS_RTR | IBV_QPS_RTS | IBV_QPS_SQD | IBV_QPS_SQE)
    {
        return false;
    }
    let Some((req, opt)) = rule(cur, next, qp_type) else {
        return false;
    };
    mask & req == req && mask & !(req | opt | IBV_QP_STATE) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    const INIT_RC: u32 = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;

    #[test]
    fn reset_goes_only_to_reset_and_init() {
        assert!(is_ok(IBV_QPS_RESET, IBV_QPS_INIT, IBV_QPT_RC, INIT_RC));
        assert!(is_ok(
            IBV_QPS_RESET,
            IBV_QPS_RESET,
            IBV_QPT_RC,
            IBV_QP_STATE
        ));
        assert!(!is_ok(IBV_QPS_RESET, IBV_QPS_ERR, IBV_QPT_RC, IBV_QP_STATE));
        assert!(!is_ok(IBV_QPS_RESET, IBV_QPS_RTR, IBV_QPT_RC, IBV_QP_STATE));
    }

    #[test]
    fn required_and_extra_attributes() {
        // Missing ACCESS_FLAGS.
        assert!(!is_ok(
            IBV_QPS_RESET,
            IBV_QPS_INIT,
            IBV_QPT_RC,
            INIT_RC & !IBV_QP_ACCESS_FLAGS
        ));
        // UD takes a Q_Key, not access flags.
        assert!(!is_ok(IBV_QPS_RESET, IBV_QPS_INIT, IBV_QPT_UD, INIT_RC));
        // An extra attribute (SQ_PSN at INIT).
        assert!(!is_ok(
            IBV_QPS_RESET,
            IBV_QPS_INIT,
            IBV_QPT_RC,
            INIT_RC | IBV_QP_SQ_PSN
        ));
        // UD RTR needs nothing, RTS needs the send PSN.
        assert!(is_ok(IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPT_UD, IBV_QP_STATE));
        assert!(!is_ok(IBV_QPS_RTR, IBV_QPS_RTS, IBV_QPT_UD, IBV_QP_STATE));
        assert!(is_ok(
            IBV_QPS_RTR,
            IBV_QPS_RTS,
            IBV_QPT_UD,
            IBV_QP_STATE | IBV_QP_SQ_PSN
        ));
        // A self-transition without IBV_QP_STATE.
        assert!(is_ok(
            IBV_QPS_RTS,
            IBV_QPS_RTS,
            IBV_QPT_RC,
            IBV_QP_MIN_RNR_TIMER
        ));
        assert!(!is_ok(
            IBV_QPS_RTR,
            IBV_QPS_RTR,
            IBV_QPT_RC,
            IBV_QP_MIN_RNR_TIMER
        ));
        // CUR_STATE only from RTR, RTS, SQD, SQE.
        assert!(!is_ok(
            IBV_QPS_INIT,
            IBV_QPS_INIT,
            IBV_QPT_RC,
            IBV_QP_CUR_STATE
        ));
        // Raw packet QPs are not in the table here.
        assert!(!is_ok(
            IBV_QPS_RESET,
            IBV_QPS_INIT,
            IBV_QPT_RAW_PACKET,
            IBV_QP_STATE | IBV_QP_PORT
        ));
    }
}
