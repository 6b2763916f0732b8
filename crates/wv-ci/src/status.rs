//! `ib_api_status_t` ↔ [`VerbsError`]: the distinctions the driver core acts on.

use wv_hal::VerbsError;

use crate::ib_types::*;

/// The error a verbs status stands for, or `None` for `IB_SUCCESS`.
pub fn from_ib(status: ib_api_status_t) -> Option<VerbsError> {
    Some(match status {
        IB_SUCCESS => return None,
        IB_INSUFFICIENT_MEMORY => VerbsError::InsufficientMemory,
        IB_INSUFFICIENT_RESOURCES => VerbsError::InsufficientResources,
        IB_INVALID_SETTING | IB_INVALID_MAX_WRS | IB_INVALID_MAX_SGE | IB_INVALID_CQ_SIZE
        | IB_INVALID_SRQ_SIZE => VerbsError::InvalidSetting,
        IB_INVALID_STATE | IB_INVALID_QP_STATE | IB_INVALID_APM_STATE | IB_INVALID_PORT_STATE => {
            VerbsError::InvalidState
        }
        IB_INVALID_PERMISSION => VerbsError::InvalidPermission,
        IB_RESOURCE_BUSY => VerbsError::ResourceBusy,
        IB_UNSUPPORTED => VerbsError::Unsupported,
        IB_INVALID_CA_HANDLE => VerbsError::DeviceRemoved,
        IB_INVALID_PARAMETER
        | IB_INVALID_PKEY
        | IB_INVALID_LKEY
        | IB_INVALID_RKEY
        | IB_INVALID_SERVICE_TYPE
        | IB_INVALID_GID
        | IB_INVALID_LID
        | IB_INVALID_GUID
        | IB_INVALID_GUID_MASK
        | IB_INVALID_AV_HANDLE
        | IB_INVALID_CQ_HANDLE
        | IB_INVALID_QP_HANDLE
        | IB_INVALID_SRQ_HANDLE
        | IB_INVALID_PD_HANDLE
        | IB_INVALID_MR_HANDLE
        | IB_INVALID_FMR_HANDLE
        | IB_INVALID_MW_HANDLE
        | IB_INVALID_MCAST_HANDLE
        | IB_INVALID_CALLBACK
        | IB_INVALID_AL_HANDLE
        | IB_INVALID_HANDLE
        | IB_INVALID_WR_TYPE
        | IB_INVALID_PORT
        | IB_INVALID_INDEX => VerbsError::InvalidParameter,
        _ => VerbsError::Other,
    })
}

/// The status a verbs provider answers for `error`.
pub fn to_ib(error: VerbsError) -> ib_api_status_t {
    match error {
        VerbsError::InsufficientMemory => IB_INSUFFICIENT_MEMORY,
        VerbsError::InsufficientResources => IB_INSUFFICIENT_RESOURCES,
        VerbsError::InvalidParameter => IB_INVALID_PARAMETER,
        VerbsError::InvalidSetting => IB_INVALID_SETTING,
        VerbsError::InvalidState => IB_INVALID_STATE,
        VerbsError::InvalidPermission => IB_INVALID_PERMISSION,
        VerbsError::ResourceBusy => IB_RESOURCE_BUSY,
        VerbsError::Unsupported => IB_UNSUPPORTED,
        VerbsError::DeviceRemoved => IB_INVALID_CA_HANDLE,
        VerbsError::Other => IB_ERROR,
    }
}

/// A verbs result as a status.
pub fn result_to_ib(result: Result<(), VerbsError>) -> ib_api_status_t {
    match result {
        Ok(()) => IB_SUCCESS,
        Err(e) => to_ib(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_error_survives_a_round_trip() {
        for e in [
            VerbsError::InsufficientMemory,
            VerbsError::InsufficientResources,
            VerbsError::InvalidParameter,
            VerbsError::InvalidSetting,
            VerbsError::InvalidState,
            VerbsError::InvalidPermission,
            VerbsError::ResourceBusy,
            VerbsError::Unsupported,
            VerbsError::DeviceRemoved,
            VerbsError::Other,
        ] {
            assert_eq!(from_ib(to_ib(e)), Some(e));
        }
        assert_eq!(from_ib(IB_SUCCESS), None);
        assert_eq!(
            from_ib(IB_INVALID_MAX_WRS),
            Some(VerbsError::InvalidSetting)
        );
        assert_eq!(
            from_ib(IB_INVALID_QP_HANDLE),
            Some(VerbsError::InvalidParameter)
        );
        assert_eq!(from_ib(IB_NOT_DONE), Some(VerbsError::Other));
        assert_eq!(from_ib(0xFFFF), Some(VerbsError::Other));
    }
}
