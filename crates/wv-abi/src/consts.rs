//! Constants, flags and enumeration values of `wv_ioctl.h` (plus the few values the kernel
//! handlers take from elsewhere, each marked with its source), and the `WV_IO_QP_ATTR_*` →
//! `IB_MOD_QP_*` mapping QP_MODIFY applies.

use crate::meta::ConstInfo;

/// Declares groups of constants; each constant gets its group's documentation, and all of them
/// land in [`CONSTANTS`] so the harness can print the full set.
macro_rules! wv_consts {
    (@one [$(#[$meta:meta])*] $name:ident : $ty:ty = $value:expr) => {
        $(#[$meta])*
        pub const $name: $ty = $value;
    };
    (@group $metas:tt $( $name:ident : $ty:ty = $value:expr; )*) => {
        $( wv_consts!(@one $metas $name : $ty = $value); )*
    };
    ($( $(#[$gmeta:meta])* group { $( $name:ident : $ty:ty = $value:expr; )* } )*) => {
        $( wv_consts!(@group [$(#[$gmeta])*] $( $name : $ty = $value; )*); )*

        /// Every constant of this module with its value, in declaration order.
        pub const CONSTANTS: &[ConstInfo] = &[$($(
            ConstInfo { name: stringify!($name), value: $name as u64 },
        )*)*];
    };
}

wv_consts! {
    /// Size of the UVP library name buffer; user mode asks LIBRARY_QUERY for
    /// `WV_MAX_LIB_NAME - strlen(".dll")` bytes.
    group { WV_MAX_LIB_NAME: usize = 32; }

    /// Device/port capability flag (`CapabilityFlags`, `PortCabilityFlags`). 0x8 is reserved.
    group {
        WV_IO_RESIZE_MAX_WR: u32 = 0x0000_0001;
        WV_IO_BAD_PKEY_COUNTER: u32 = 0x0000_0002;
        WV_IO_BAD_QKEY_COUNTER: u32 = 0x0000_0004;
        WV_IO_PATH_MIGRATION: u32 = 0x0000_0010;
        WV_IO_CHANGE_PHYSICAL_PORT: u32 = 0x0000_0020;
        WV_IO_AH_PORT_CHECKING: u32 = 0x0000_0040;
        WV_IO_QP_STATE_MODIFIER: u32 = 0x0000_0080;
        WV_IO_SHUTDOWN_PORT: u32 = 0x0000_0100;
        WV_IO_INIT_TYPE: u32 = 0x0000_0200;
        WV_IO_PORT_ACTIVE_EVENT: u32 = 0x0000_0400;
        WV_IO_SYSTEM_IMAGE_GUID: u32 = 0x0000_0800;
        WV_IO_RC_RNR_NAK_GENERATION: u32 = 0x0000_1000;
        WV_IO_SRQ_RESIZE: u32 = 0x0000_2000;
        WV_IO_BATCH_NOTIFY_CQ: u32 = 0x0000_4000;
    }

    /// `WV_IO_DEVICE_ATTRIBUTES.DeviceType` value (OFW always reports InfiniBand).
    group {
        WV_DEVICE_UNKNOWN: u32 = 0;
        WV_DEVICE_INFINIBAND: u32 = 1;
        WV_DEVICE_IWARP: u32 = 2;
    }

    /// `WV_IO_DEVICE_ATTRIBUTES.AtomicCapability` value.
    group {
        WV_IO_ATOMIC_NONE: u32 = 0;
        WV_IO_ATOMIC_HCA: u32 = 1;
        WV_IO_ATOMIC_NODE: u32 = 2;
    }

    /// `WV_IO_PORT_ATTRIBUTES.State` value (IB link state).
    group {
        WV_IO_PORT_NOP: u32 = 0;
        WV_IO_PORT_DOWN: u32 = 1;
        WV_IO_PORT_INIT: u32 = 2;
        WV_IO_PORT_ARMED: u32 = 3;
        WV_IO_PORT_ACTIVE: u32 = 4;
        WV_IO_PORT_ACTIVEDEFER: u32 = 5;
    }

    /// DEVICE_NOTIFY output flag; flags accumulate per port until the next notify.
    group {
        WV_IO_EVENT_ERROR: u32 = 0x0000_0001;
        WV_IO_EVENT_STATE: u32 = 0x0000_0002;
        WV_IO_EVENT_ADDRESS: u32 = 0x0000_0004;
        WV_IO_EVENT_LINK_ADDRESS: u32 = 0x0000_0008;
        WV_IO_EVENT_PARTITION: u32 = 0x0000_0010;
        WV_IO_EVENT_MANAGEMENT: u32 = 0x0000_0020;
    }

    /// CQ_NOTIFY type in `WV_IO_ID.Data`: ERROR parks on the error queue, anything else on the
    /// completion queue. Renumbered in April 2009; older binaries differ.
    group {
        WV_CQ_ERROR: u32 = 0;
        WV_CQ_NEXT_COMPLETION: u32 = 1;
        WV_CQ_SOLICITED: u32 = 2;
    }

    /// `QpFlags` bit of `WV_IO_QP_CREATE` / `WV_IO_QP_ATTRIBUTES`.
    group {
        WV_IO_QP_SIGNAL_SENDS: u32 = 0x0000_0001;
        WV_IO_QP_MEMORY_MANAGEMENT: u32 = 0x0000_0002;
    }

    /// `WV_IO_QP_ATTRIBUTES` `CurrentQpState` / `QpState` value.
    group {
        WV_IO_QP_STATE_RESET: u8 = 0;
        WV_IO_QP_STATE_INIT: u8 = 1;
        WV_IO_QP_STATE_RTR: u8 = 2;
        WV_IO_QP_STATE_RTS: u8 = 3;
        WV_IO_QP_STATE_SQD: u8 = 4;
        WV_IO_QP_STATE_SQERROR: u8 = 5;
        WV_IO_QP_STATE_ERROR: u8 = 6;
    }

    /// `WV_IO_QP_ATTRIBUTES.Options` bit: which attributes QP_MODIFY should apply.
    group {
        WV_IO_QP_ATTR_CAPABILITIES: u32 = 0x0000_0001;
        WV_IO_QP_ATTR_INITIATOR_DEPTH: u32 = 0x0000_0002;
        WV_IO_QP_ATTR_RESPONDER_RESOURCES: u32 = 0x0000_0004;
        WV_IO_QP_ATTR_CURRENT_STATE: u32 = 0x0000_0008;
        WV_IO_QP_ATTR_STATE: u32 = 0x0000_0010;
        WV_IO_QP_ATTR_PATH_MIG_STATE: u32 = 0x0000_0020;
        WV_IO_QP_ATTR_DESTINATION_QPN: u32 = 0x0000_0040;
        WV_IO_QP_ATTR_QKEY: u32 = 0x0000_0080;
        WV_IO_QP_ATTR_SEND_PSN: u32 = 0x0000_0100;
        WV_IO_QP_ATTR_RECEIVE_PSN: u32 = 0x0000_0200;
        WV_IO_QP_ATTR_FLAGS: u32 = 0x0000_0400;
        WV_IO_QP_ATTR_ACCESS_FLAGS: u32 = 0x0000_0800;
        WV_IO_QP_ATTR_AV: u32 = 0x0000_1000;
        WV_IO_QP_ATTR_ALTERNATE_AV: u32 = 0x0000_2000;
        WV_IO_QP_ATTR_PORT_NUMBER: u32 = 0x0000_4000;
        WV_IO_QP_ATTR_PKEY_INDEX: u32 = 0x0000_8000;
        WV_IO_QP_ATTR_ACK_TIMEOUT: u32 = 0x0001_0000;
        WV_IO_QP_ATTR_RNR_NAK_TIMEOUT: u32 = 0x0002_0000;
        WV_IO_QP_ATTR_ERROR_RETRY_COUNT: u32 = 0x0004_0000;
        WV_IO_QP_ATTR_RNR_RETRY_COUNT: u32 = 0x0008_0000;
    }

    /// EP_MODIFY option in `WV_IO_ID.Data`; ROUTE (an `ib_path_rec_t` follows) is the only one.
    group { WV_IO_EP_OPTION_ROUTE: u32 = 0x0000_0001; }

    /// EP_CREATE endpoint type (= `RDMA_PS_TCP` / `RDMA_PS_UDP`); it forms the high half of the
    /// IB service id. Not validated by the kernel.
    group {
        WV_IO_EP_TYPE_CONNECT: u64 = 0x0106;
        WV_IO_EP_TYPE_DATAGRAM: u64 = 0x0111;
    }

    /// Socket address family the kernel recognises in `WV_IO_SOCKADDR_DATA`. Defined in
    /// `kernel/wv_ep.c`, not in the header.
    group {
        WV_AF_INET: u16 = 2;
        WV_AF_INET6: u16 = 23;
    }

    /// MEMORY_REGISTER `AccessFlags` bit (equal to `IB_AC_*`, passed to the HCA raw). These names
    /// live in the public `winverbs.h`, not in `wv_ioctl.h`. REMOTE_WRITE is 0xA because a
    /// remotely writable region must also be locally writable.
    group {
        WV_ACCESS_REMOTE_READ: u32 = 0x0000_0001;
        WV_ACCESS_REMOTE_WRITE: u32 = 0x0000_000A;
        WV_ACCESS_REMOTE_ATOMIC: u32 = 0x0000_0004;
        WV_ACCESS_LOCAL_WRITE: u32 = 0x0000_0008;
        WV_ACCESS_MW_BIND: u32 = 0x0000_0010;
    }

    /// `ib_qp_opts_t` bit of `ib_qp_mod_t` (`inc/iba/ib_types.h`): the verbs-side modify mask
    /// that [`wv_qp_attr_to_ib_mod_qp`] produces for RTR/RTS transitions.
    group {
        IB_MOD_QP_ALTERNATE_AV: u32 = 0x0000_0001;
        IB_MOD_QP_PKEY: u32 = 0x0000_0002;
        IB_MOD_QP_APM_STATE: u32 = 0x0000_0004;
        IB_MOD_QP_PRIMARY_AV: u32 = 0x0000_0008;
        IB_MOD_QP_RNR_NAK_TIMEOUT: u32 = 0x0000_0010;
        IB_MOD_QP_RESP_RES: u32 = 0x0000_0020;
        IB_MOD_QP_INIT_DEPTH: u32 = 0x0000_0040;
        IB_MOD_QP_PRIMARY_PORT: u32 = 0x0000_0080;
        IB_MOD_QP_ACCESS_CTRL: u32 = 0x0000_0100;
        IB_MOD_QP_QKEY: u32 = 0x0000_0200;
        IB_MOD_QP_SQ_DEPTH: u32 = 0x0000_0400;
        IB_MOD_QP_RQ_DEPTH: u32 = 0x0000_0800;
        IB_MOD_QP_CURRENT_STATE: u32 = 0x0000_1000;
        IB_MOD_QP_RETRY_CNT: u32 = 0x0000_2000;
        IB_MOD_QP_LOCAL_ACK_TIMEOUT: u32 = 0x0000_4000;
        IB_MOD_QP_RNR_RETRY_CNT: u32 = 0x0000_8000;
    }
}

/// The `Options` of an RC QP's RESET → INIT as `ibv_rc_pingpong` modifies it (the attributes
/// `ibv_modify_qp` requires for the step; not a `wv_ioctl.h` name).
pub const RC_INIT_OPTIONS: u32 = WV_IO_QP_ATTR_STATE
    | WV_IO_QP_ATTR_PKEY_INDEX
    | WV_IO_QP_ATTR_PORT_NUMBER
    | WV_IO_QP_ATTR_ACCESS_FLAGS;
/// The `Options` of an RC QP's INIT → RTR as `ibv_rc_pingpong` modifies it (the path MTU
/// travels with the address vector).
pub const RC_RTR_OPTIONS: u32 = WV_IO_QP_ATTR_STATE
    | WV_IO_QP_ATTR_AV
    | WV_IO_QP_ATTR_DESTINATION_QPN
    | WV_IO_QP_ATTR_RECEIVE_PSN
    | WV_IO_QP_ATTR_RESPONDER_RESOURCES
    | WV_IO_QP_ATTR_RNR_NAK_TIMEOUT;
/// The `Options` of an RC QP's RTR → RTS as `ibv_rc_pingpong` modifies it.
pub const RC_RTS_OPTIONS: u32 = WV_IO_QP_ATTR_STATE
    | WV_IO_QP_ATTR_SEND_PSN
    | WV_IO_QP_ATTR_ACK_TIMEOUT
    | WV_IO_QP_ATTR_ERROR_RETRY_COUNT
    | WV_IO_QP_ATTR_RNR_RETRY_COUNT
    | WV_IO_QP_ATTR_INITIATOR_DEPTH;

/// `WvVerbsConvertOptions`: maps a `WV_IO_QP_ATTR_*` mask to the `IB_MOD_QP_*` options of an
/// RTR/RTS modify. STATE, DESTINATION_QPN, SEND_PSN, RECEIVE_PSN and FLAGS have no option bit
/// (the verbs apply them unconditionally for the target state), and unknown bits are dropped.
pub const fn wv_qp_attr_to_ib_mod_qp(mask: u32) -> u32 {
    const MAP: [(u32, u32); 15] = [
        (
            WV_IO_QP_ATTR_CAPABILITIES,
            IB_MOD_QP_SQ_DEPTH | IB_MOD_QP_RQ_DEPTH,
        ),
        (WV_IO_QP_ATTR_INITIATOR_DEPTH, IB_MOD_QP_INIT_DEPTH),
        (WV_IO_QP_ATTR_RESPONDER_RESOURCES, IB_MOD_QP_RESP_RES),
        (WV_IO_QP_ATTR_CURRENT_STATE, IB_MOD_QP_CURRENT_STATE),
        (WV_IO_QP_ATTR_PATH_MIG_STATE, IB_MOD_QP_APM_STATE),
        (WV_IO_QP_ATTR_QKEY, IB_MOD_QP_QKEY),
        (WV_IO_QP_ATTR_ACCESS_FLAGS, IB_MOD_QP_ACCESS_CTRL),
        (WV_IO_QP_ATTR_AV, IB_MOD_QP_PRIMARY_AV),
        (WV_IO_QP_ATTR_ALTERNATE_AV, IB_MOD_QP_ALTERNATE_AV),
        (WV_IO_QP_ATTR_PORT_NUMBER, IB_MOD_QP_PRIMARY_PORT),
        (WV_IO_QP_ATTR_PKEY_INDEX, IB_MOD_QP_PKEY),
        (WV_IO_QP_ATTR_ACK_TIMEOUT, IB_MOD_QP_LOCAL_ACK_TIMEOUT),
        (WV_IO_QP_ATTR_RNR_NAK_TIMEOUT, IB_MOD_QP_RNR_NAK_TIMEOUT),
        (WV_IO_QP_ATTR_ERROR_RETRY_COUNT, IB_MOD_QP_RETRY_CNT),
        (WV_IO_QP_ATTR_RNR_RETRY_COUNT, IB_MOD_QP_RNR_RETRY_CNT),
    ];
    let mut out = 0;
    let mut i = 0;
    while i < MAP.len() {
        if mask & MAP[i].0 != 0 {
            out |= MAP[i].1;
        }
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qp_attr_mapping() {
        assert_eq!(wv_qp_attr_to_ib_mod_qp(0), 0);
        assert_eq!(wv_qp_attr_to_ib_mod_qp(WV_IO_QP_ATTR_CAPABILITIES), 0xC00);
        assert_eq!(wv_qp_attr_to_ib_mod_qp(WV_IO_QP_ATTR_AV), 0x8);
        assert_eq!(wv_qp_attr_to_ib_mod_qp(WV_IO_QP_ATTR_ALTERNATE_AV), 0x1);
        // Unmapped attributes contribute nothing.
        let unmapped = WV_IO_QP_ATTR_STATE
            | WV_IO_QP_ATTR_DESTINATION_QPN
            | WV_IO_QP_ATTR_SEND_PSN
            | WV_IO_QP_ATTR_RECEIVE_PSN
            | WV_IO_QP_ATTR_FLAGS;
        assert_eq!(wv_qp_attr_to_ib_mod_qp(unmapped), 0);
        // All mapped bits together give every IB_MOD_QP option bit 0x1..=0x8000.
        assert_eq!(wv_qp_attr_to_ib_mod_qp(0x000F_FFFF), 0xFFFF);
    }

    #[test]
    fn constant_names_unique() {
        for (i, a) in CONSTANTS.iter().enumerate() {
            assert!(
                CONSTANTS[i + 1..].iter().all(|b| b.name != a.name),
                "{}",
                a.name
            );
        }
        assert!(
            CONSTANTS
                .iter()
                .any(|c| c.name == "WV_CQ_ERROR" && c.value == 0)
        );
    }
}
