//! The layout table of every declared C type and the list of every declared constant, computed
//! from the Rust definitions, for tools (`wvharness abi --lower`, `tools/lower-abi-check`) and
//! tests.
//!
//! The three anonymous C unions (`ib_send_wr_t`'s two and `iba_cm_event.data`) have no C name,
//! so they are not entries of their own: their members appear in the enclosing type's entry
//! under the names C code uses (`immediate_data`, `dgrm`, …, `data.req`, …).

use crate::base::*;
use crate::ci::*;
use crate::cm::*;
use crate::ib_types::*;
use crate::{ConstInfo, StructInfo};

/// Lists the types of the table once, giving both the table and a test that builds every
/// type's zero value (so Miri checks `zeroed()` for each of them).
macro_rules! lower_structs {
    ($($t:ty),* $(,)?) => {
        /// Every declared C struct and union with its layout: the two interface structs and their
        /// tables first, then the WDM/complib types, `ib_types.h`, `ib_ci.h`, `ib_cm_ifc.h`.
        pub const LOWER_STRUCTS: &[StructInfo] = &[$(<$t>::INFO),*];

        #[cfg(test)]
        fn zero_every_type() -> usize {
            let mut n = 0;
            $(
                let zero = <$t>::zeroed();
                let default = <$t as Default>::default();
                core::hint::black_box((&zero, &default));
                n += 1;
            )*
            n
        }
    };
}

lower_structs![
    RDMA_INTERFACE_VERBS,
    ci_interface_t,
    INFINIBAND_INTERFACE_CM,
    iba_cm_interface,
    // base
    GUID,
    LIST_ENTRY,
    INTERFACE,
    // ib_types.h / ib_al.h
    _ib_gid_unicast,
    _ib_gid_multicast,
    ib_gid_t,
    ib_path_rec_t,
    ib_mad_t,
    ib_grh_t,
    ib_event_rec_t,
    ib_port_cap_t,
    ib_port_attr_mod_t,
    ib_port_attr_t,
    ib_ca_attr_t,
    _av_conn,
    ib_av_attr_t,
    ib_srq_attr_t,
    ib_qp_create_t,
    ib_qp_create_ex_t,
    ib_qp_attr_t,
    _qp_init,
    _qp_rtr,
    _qp_rts,
    _qp_sqd,
    _qp_state,
    ib_qp_mod_t,
    ib_local_ds_t,
    ib_fast_reg_page_list_t,
    _send_ud,
    _send_rd,
    _send_raw_ether,
    _send_raw_ipv6,
    _send_dgrm,
    _send_remote_ops,
    _fast_reg,
    ib_send_wr_t,
    ib_recv_wr_t,
    ib_bind_wr_t,
    _wc_conn,
    _wc_ud,
    _wc_rd,
    _wc_raw_ipv6,
    _wc_raw_ether,
    _wc_recv,
    ib_wc_t,
    ib_mr_create_t,
    mlnx_fmr_create_t,
    ib_phys_range_t,
    ib_phys_create_t,
    ib_mr_attr_t,
    ib_ci_op_t,
    ib_apr_info_t,
    // ib_ci.h
    ci_umv_buf_t,
    ci_event_handler_t,
    ib_group_affinity_t,
    // ib_cm_ifc.h
    iba_cm_id,
    iba_cm_req,
    iba_cm_req_event,
    iba_cm_rep,
    iba_cm_rep_event,
    iba_cm_pdata,
    iba_cm_rej_event,
    iba_cm_mra_event,
    iba_cm_lap,
    iba_cm_apr,
    iba_cm_sidr_req,
    iba_cm_sidr_req_event,
    iba_cm_sidr_rep,
    iba_cm_event,
];

/// Joins constant lists into one array at compile time.
const fn concat<const N: usize>(parts: &[&[ConstInfo]]) -> [ConstInfo; N] {
    let mut out = [ConstInfo { name: "", value: 0 }; N];
    let (mut i, mut n) = (0, 0);
    while i < parts.len() {
        let mut j = 0;
        while j < parts[i].len() {
            out[n] = parts[i][j];
            n += 1;
            j += 1;
        }
        i += 1;
    }
    assert!(n == N, "constant count");
    out
}

const PARTS: &[&[ConstInfo]] = &[
    CI_CONSTANTS,
    CM_CONSTANTS,
    BASE_CONSTANTS,
    crate::ib_types::IB_TYPES_CONSTANTS,
];

const fn total(parts: &[&[ConstInfo]]) -> usize {
    let (mut i, mut n) = (0, 0);
    while i < parts.len() {
        n += parts[i].len();
        i += 1;
    }
    n
}

const ALL_CONSTANTS: [ConstInfo; total(PARTS)] = concat(PARTS);

/// Every declared constant that `ConstInfo` can hold (the GUIDs are not in it), by C name:
/// `ib_ci.h`/`verbs.h` (versions, `MAX_LIB_NAME`), `ib_cm_ifc.h` (version, event kinds),
/// `MODE`, then the `ib_types.h` enumeration values, flag bits and sizes.
pub const LOWER_CONSTANTS: &[ConstInfo] = &ALL_CONSTANTS;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_type_has_a_zero_value() {
        assert_eq!(zero_every_type(), LOWER_STRUCTS.len());
        let qp_mod = ib_qp_mod_t::zeroed();
        assert_eq!(qp_mod.req_state, 0);
        let verbs = RDMA_INTERFACE_VERBS::default();
        assert!(verbs.Verbs.query_ca.is_none() && verbs.post_event.is_none());
        assert!(verbs.Verbs.p_hca_obj.is_null());
    }

    #[test]
    fn names_are_unique() {
        for (i, a) in LOWER_STRUCTS.iter().enumerate() {
            assert!(
                LOWER_STRUCTS[i + 1..].iter().all(|b| b.name != a.name),
                "{}",
                a.name
            );
            for (j, f) in a.fields.iter().enumerate() {
                assert!(
                    a.fields[j + 1..].iter().all(|g| g.name != f.name),
                    "{}",
                    f.name
                );
            }
        }
        for (i, a) in LOWER_CONSTANTS.iter().enumerate() {
            assert!(
                LOWER_CONSTANTS[i + 1..].iter().all(|b| b.name != a.name),
                "{}",
                a.name
            );
        }
    }

    #[test]
    fn raw_identifiers_lose_their_prefix() {
        let ev = ib_event_rec_t::INFO;
        assert_eq!(ev.fields[1].name, "type");
        assert_eq!(iba_cm_event::INFO.fields[0].name, "type");
        assert_eq!(iba_cm_event::INFO.fields[2].name, "data.req");
    }
}
