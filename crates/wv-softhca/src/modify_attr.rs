//! What the device makes of an OFW-style QP modification (`ib_qp_mod_t`): the attribute set a
//! transition uses, in the IB core's terms (`ib_qp_attr` + `IB_QP_*` mask), decided per QP
//! type and current state the way OFW's HCA drivers decide it (mlx4's `to_qp_attr`).
//!
//! An OFW modification always names the target state and always carries that state's fixed
//! attributes; the `opts` bits of RTR and RTS add the optional ones. So a move to INIT never
//! depends on the caller's option bits (NetworkDirect sends `STATE | PORT_NUMBER |
//! PKEY_INDEX` and no access flags), and a move to ERROR needs nothing but the state.
//!
//! Where this departs from mlx4, on purpose:
//! * from RESET, mlx4 reports success and changes nothing for every target but INIT; here a
//!   move to RESET or ERROR is such a no-op (nothing can be outstanding in RESET), while RTR,
//!   RTS, SQD and SQE stay the invalid transitions the IB state table says they are;
//! * mlx4 adds RTS's required attributes whenever the QP is not in RTS already, which makes the
//!   IB core refuse SQD → RTS; here they are required on RTR → RTS only, as the table says;
//! * mlx4 always asks for the SQ-drained event on a move to SQD, which the table refuses for
//!   SQD → SQD; here it is asked for on RTS → SQD only.

use wv_hal::{AddressVector, Mtu, QpModify, QpModifyOptions, QpPath, QpState, QpType, VerbsError};

use crate::state_table::ib;

/// The IB core's view of one modification (`struct ib_qp_attr`, the fields the soft HCA uses).
/// Which fields count is said by the mask that comes with it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct IbQpAttr {
    /// `qp_state`.
    pub state: QpState,
    /// `qp_access_flags` (`WV_ACCESS_*` = `IB_AC_*` bits, unknown bits dropped).
    pub access: u32,
    /// `pkey_index`.
    pub pkey_index: u16,
    /// `port_num`.
    pub port: u8,
    /// `qkey`, host order.
    pub qkey: u32,
    /// `ah_attr`.
    pub av: AddressVector,
    /// `path_mtu`; `None` when the caller's MTU was not one of 256..4096.
    pub path_mtu: Option<Mtu>,
    /// `timeout` (local ACK timeout).
    pub timeout: u8,
    /// `retry_cnt`.
    pub retry_cnt: u8,
    /// `rnr_retry`.
    pub rnr_retry: u8,
    /// `rq_psn`.
    pub rq_psn: u32,
    /// `sq_psn`.
    pub sq_psn: u32,
    /// `dest_qp_num`.
    pub dest_qpn: u32,
    /// `max_rd_atomic` (initiator depth).
    pub max_rd_atomic: u32,
    /// `max_dest_rd_atomic` (responder resources).
    pub max_dest_rd_atomic: u32,
    /// `alt_ah_attr`.
    pub alt_av: AddressVector,
    /// `alt_timeout`.
    pub alt_timeout: u8,
    /// `min_rnr_timer`.
    pub min_rnr_timer: u8,
    /// `path_mig_state` (`ib_apm_state_t` value as given).
    pub path_mig_state: u8,
    /// `en_sqd_async_notify`.
    pub en_sqd_async_notify: bool,
}

impl IbQpAttr {
    fn new(state: QpState) -> Self {
        IbQpAttr {
            state,
            access: 0,
            pkey_index: 0,
            port: 0,
            qkey: 0,
            av: AddressVector::default(),
            path_mtu: None,
            timeout: 0,
            retry_cnt: 0,
            rnr_retry: 0,
            rq_psn: 0,
            sq_psn: 0,
            dest_qpn: 0,
            max_rd_atomic: 0,
            max_dest_rd_atomic: 0,
            alt_av: AddressVector::default(),
            alt_timeout: 0,
            min_rnr_timer: 0,
            path_mig_state: 0,
            en_sqd_async_notify: false,
        }
    }
}

/// What the device does with a modification.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Translated {
    /// Nothing: success, the QP stays where it is (a RESET QP asked for RESET or ERROR).
    Skip,
    /// Apply these attributes (`IB_QP_*` mask, values).
    Apply(u32, IbQpAttr),
}

/// `IB_AC_*` bits the device knows; mlx4's `to_qp_acl` maps these and drops the rest, so a
/// caller's stray bits (ND leaves `AccessFlags` uninitialised) never fail a transition.
const KNOWN_ACCESS: u32 = 0x1F;

fn access(bits: u32) -> u32 {
    bits & KNOWN_ACCESS
}

/// Loads an alternate path from `path` (`to_av` of `alternate_av`).
fn alternate(attr: &mut IbQpAttr, mask: &mut u32, path: &QpPath) {
    *mask |= ib::ALT_PATH;
    attr.alt_av = path.av;
    attr.alt_timeout = path.local_ack_timeout;
}

/// The options a connected QP's RTR and RTS share: new access rights (`access_bits`) and an
/// alternate path.
fn connected_options(
    attr: &mut IbQpAttr,
    mask: &mut u32,
    opts: QpModifyOptions,
    access_bits: u32,
    alternate_path: &QpPath,
) {
    if opts.has(QpModifyOptions::ACCESS_CTRL) {
        *mask |= ib::ACCESS_FLAGS;
        attr.access = access(access_bits);
    }
    if opts.has(QpModifyOptions::ALTERNATE_AV) {
        alternate(attr, mask, alternate_path);
    }
}

/// The attribute set `m` means for a QP of `qp_type` in state `cur`.
///
/// # Errors
/// `Unsupported` when RTR/RTS options ask to resize the work queues (OFW's HCA drivers
/// cannot), `InvalidState` for a move out of RESET to anything but INIT, RESET or ERROR.
pub(crate) fn to_ib_attr(
    qp_type: QpType,
    cur: QpState,
    m: &QpModify,
) -> Result<Translated, VerbsError> {
    let next = m.target();
    if cur == QpState::Reset {
        match next {
            QpState::Reset | QpState::Error => return Ok(Translated::Skip),
            QpState::Init => {}
            _ => return Err(VerbsError::InvalidState),
        }
    }
    let mut mask = ib::STATE;
    let mut attr = IbQpAttr::new(next);
    match m {
        QpModify::Reset | QpModify::Error | QpModify::SqError => {}
        QpModify::Init(init) => {
            mask |= ib::PORT | ib::PKEY_INDEX;
            match qp_type {
                QpType::Rc | QpType::Uc => {
                    mask |= ib::ACCESS_FLAGS;
                    attr.access = access(init.access);
                }
                QpType::Ud => {
                    mask |= ib::QKEY;
                    attr.qkey = init.qkey;
                }
            }
            attr.port = init.port;
            attr.pkey_index = init.pkey_index;
        }
        QpModify::Rtr(rtr) => {
            let opts = rtr.opts;
            if opts.0 & (QpModifyOptions::SQ_DEPTH | QpModifyOptions::RQ_DEPTH) != 0 {
                return Err(VerbsError::Unsupported);
            }
            match qp_type {
                QpType::Rc | QpType::Uc => {
                    mask |= ib::DEST_QPN | ib::RQ_PSN | ib::AV | ib::PATH_MTU;
                    attr.dest_qpn = rtr.dest_qpn;
                    attr.rq_psn = rtr.rq_psn;
                    attr.av = rtr.primary.av;
                    attr.path_mtu = rtr.primary.path_mtu;
                    if qp_type == QpType::Rc {
                        mask |= ib::MAX_DEST_RD_ATOMIC | ib::MIN_RNR_TIMER;
                        attr.max_dest_rd_atomic = u32::from(rtr.responder_resources);
                        attr.min_rnr_timer = rtr.rnr_nak_timeout;
                    }
                    connected_options(&mut attr, &mut mask, opts, rtr.access, &rtr.alternate);
                    if opts.has(QpModifyOptions::PKEY) {
                        mask |= ib::PKEY_INDEX;
                        attr.pkey_index = rtr.pkey_index;
                    }
                }
                QpType::Ud => {
                    if opts.has(QpModifyOptions::PKEY) {
                        mask |= ib::PKEY_INDEX;
                        attr.pkey_index = rtr.pkey_index;
                    }
                    if opts.has(QpModifyOptions::QKEY) {
                        mask |= ib::QKEY;
                        attr.qkey = rtr.qkey;
                    }
                }
            }
        }
        QpModify::Rts(rts) => {
            let opts = rts.opts;
            if opts.0 & (QpModifyOptions::SQ_DEPTH | QpModifyOptions::RQ_DEPTH) != 0 {
                return Err(VerbsError::Unsupported);
            }
            let entering = cur == QpState::Rtr;
            if entering {
                mask |= ib::SQ_PSN;
            }
            attr.sq_psn = rts.sq_psn;
            match qp_type {
                QpType::Rc | QpType::Uc => {
                    if qp_type == QpType::Rc {
                        if entering {
                            mask |=
                                ib::MAX_QP_RD_ATOMIC | ib::TIMEOUT | ib::RETRY_CNT | ib::RNR_RETRY;
                        }
                        attr.max_rd_atomic = u32::from(rts.initiator_depth);
                        attr.timeout = rts.local_ack_timeout;
                        attr.retry_cnt = rts.retry_cnt;
                        attr.rnr_retry = rts.rnr_retry_cnt;
                        if opts.has(QpModifyOptions::RNR_NAK_TIMEOUT) {
                            mask |= ib::MIN_RNR_TIMER;
                            attr.min_rnr_timer = rts.rnr_nak_timeout;
                        }
                    }
                    if opts.has(QpModifyOptions::RESP_RES) {
                        mask |= ib::MAX_DEST_RD_ATOMIC;
                        attr.max_dest_rd_atomic = u32::from(rts.responder_resources);
                    }
                    if opts.has(QpModifyOptions::APM_STATE) {
                        mask |= ib::PATH_MIG_STATE;
                        attr.path_mig_state = rts.apm_state;
                    }
                    connected_options(&mut attr, &mut mask, opts, rts.access, &rts.alternate);
                }
                QpType::Ud => {
                    if opts.has(QpModifyOptions::QKEY) {
                        mask |= ib::QKEY;
                        attr.qkey = rts.qkey;
                    }
                }
            }
        }
        QpModify::Sqd { notify } => {
            // The drain event is asked for when the drain starts; SQD → SQD (a change of
            // attributes while drained) has no such option in the table.
            if cur == QpState::Rts {
                mask |= ib::EN_SQD_ASYNC_NOTIFY;
            }
            attr.en_sqd_async_notify = *notify;
        }
    }
    Ok(Translated::Apply(mask, attr))
}

#[cfg(test)]
mod tests {
    use super::*;
    use wv_hal::{QpInit, QpRtr, QpRts};

    fn rts(opts: u32) -> QpModify {
        QpModify::Rts(QpRts {
            sq_psn: 0x10,
            retry_cnt: 7,
            rnr_retry_cnt: 7,
            local_ack_timeout: 14,
            initiator_depth: 1,
            opts: QpModifyOptions(opts),
            rnr_nak_timeout: 12,
            qkey: 0x11,
            responder_resources: 1,
            ..QpRts::default()
        })
    }

    fn apply(t: Result<Translated, VerbsError>) -> (u32, IbQpAttr) {
        match t {
            Ok(Translated::Apply(mask, attr)) => (mask, attr),
            other => panic!("expected attributes, got {other:?}"),
        }
    }

    #[test]
    fn init_carries_its_fixed_set_whatever_the_options() {
        let m = QpModify::Init(QpInit {
            port: 1,
            qkey: 0x1234,
            pkey_index: 0,
            access: 0xCC,
        });
        let (mask, attr) = apply(to_ib_attr(QpType::Rc, QpState::Reset, &m));
        assert_eq!(
            mask,
            ib::STATE | ib::PORT | ib::PKEY_INDEX | ib::ACCESS_FLAGS
        );
        assert_eq!(attr.access, 0x0C, "unknown access bits are dropped");
        let (mask, attr) = apply(to_ib_attr(QpType::Ud, QpState::Reset, &m));
        assert_eq!(mask, ib::STATE | ib::PORT | ib::PKEY_INDEX | ib::QKEY);
        assert_eq!(attr.qkey, 0x1234);
    }

    #[test]
    fn rtr_and_rts_required_sets_by_type() {
        let rtr = QpModify::Rtr(QpRtr {
            dest_qpn: 5,
            rq_psn: 9,
            responder_resources: 2,
            ..QpRtr::default()
        });
        let (mask, _) = apply(to_ib_attr(QpType::Rc, QpState::Init, &rtr));
        assert_eq!(
            mask,
            ib::STATE
                | ib::DEST_QPN
                | ib::RQ_PSN
                | ib::AV
                | ib::PATH_MTU
                | ib::MAX_DEST_RD_ATOMIC
                | ib::MIN_RNR_TIMER
        );
        let (mask, _) = apply(to_ib_attr(QpType::Uc, QpState::Init, &rtr));
        assert_eq!(
            mask,
            ib::STATE | ib::DEST_QPN | ib::RQ_PSN | ib::AV | ib::PATH_MTU
        );
        let (mask, _) = apply(to_ib_attr(QpType::Ud, QpState::Init, &rtr));
        assert_eq!(mask, ib::STATE);

        let (mask, _) = apply(to_ib_attr(QpType::Rc, QpState::Rtr, &rts(0)));
        assert_eq!(
            mask,
            ib::STATE
                | ib::SQ_PSN
                | ib::MAX_QP_RD_ATOMIC
                | ib::TIMEOUT
                | ib::RETRY_CNT
                | ib::RNR_RETRY
        );
        let (mask, _) = apply(to_ib_attr(
            QpType::Ud,
            QpState::Rtr,
            &rts(QpModifyOptions::QKEY),
        ));
        assert_eq!(mask, ib::STATE | ib::SQ_PSN | ib::QKEY);
        // RTS → RTS and SQD → RTS carry only what the options ask for.
        let (mask, _) = apply(to_ib_attr(
            QpType::Rc,
            QpState::Rts,
            &rts(QpModifyOptions::RNR_NAK_TIMEOUT),
        ));
        assert_eq!(mask, ib::STATE | ib::MIN_RNR_TIMER);
        let (mask, _) = apply(to_ib_attr(QpType::Rc, QpState::Sqd, &rts(0)));
        assert_eq!(mask, ib::STATE);
    }

    #[test]
    fn resizing_in_rtr_or_rts_is_unsupported() {
        assert_eq!(
            to_ib_attr(QpType::Rc, QpState::Rtr, &rts(QpModifyOptions::SQ_DEPTH)),
            Err(VerbsError::Unsupported)
        );
    }

    #[test]
    fn out_of_reset() {
        assert_eq!(
            to_ib_attr(QpType::Rc, QpState::Reset, &QpModify::Error),
            Ok(Translated::Skip)
        );
        assert_eq!(
            to_ib_attr(QpType::Rc, QpState::Reset, &QpModify::Reset),
            Ok(Translated::Skip)
        );
        assert_eq!(
            to_ib_attr(QpType::Rc, QpState::Reset, &rts(0)),
            Err(VerbsError::InvalidState)
        );
        let (mask, _) = apply(to_ib_attr(QpType::Rc, QpState::Rts, &QpModify::Error));
        assert_eq!(mask, ib::STATE);
        let (mask, attr) = apply(to_ib_attr(
            QpType::Rc,
            QpState::Rts,
            &QpModify::Sqd { notify: true },
        ));
        assert_eq!(mask, ib::STATE | ib::EN_SQD_ASYNC_NOTIFY);
        assert!(attr.en_sqd_async_notify);
    }
}
