//! [`CiCm`]: the connection manager's interface as the filter holds it
//! (`IRP_MN_QUERY_INTERFACE`, `GUID_INFINIBAND_INTERFACE_CM`, answered by ibbus below the
//! filter). It validates the table, owns the one reference the query took and releases it when
//! dropped; the endpoint (connection) IOCTLs call the table through it.

use crate::cm::*;
use crate::import::CiError;

/// The connection manager below the filter, through its `iba_cm_interface` table.
pub struct CiCm {
    iface: INFINIBAND_INTERFACE_CM,
}

// SAFETY: the CM's functions may be called from any thread at the IRQL each documents, and its
// context pointers are the CM's own.
unsafe impl Send for CiCm {}
// SAFETY: as above; the table is never written after construction.
unsafe impl Sync for CiCm {}

impl core::fmt::Debug for CiCm {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("CiCm")
            .field("version", &self.iface.InterfaceHeader.Version)
            .finish()
    }
}

impl CiCm {
    /// Takes over a CM interface a query returned, with the reference it holds.
    ///
    /// # Errors
    /// A table too small, of another version, or without a function WinVerbs calls; the
    /// reference is released before returning.
    ///
    /// # Safety
    /// `iface` was filled in by the CM's provider answering `IRP_MN_QUERY_INTERFACE` for
    /// `GUID_INFINIBAND_INTERFACE_CM`: its functions follow the `iba_cm_interface` contract and
    /// it carries one reference until `InterfaceDereference`.
    pub unsafe fn new(iface: INFINIBAND_INTERFACE_CM) -> Result<Self, CiError> {
        let size = iface.InterfaceHeader.Size;
        let version = iface.InterfaceHeader.Version;
        let cm = CiCm { iface };
        if usize::from(size) < size_of::<INFINIBAND_INTERFACE_CM>() {
            return Err(CiError::Size(size));
        }
        if version != INFINIBAND_INTERFACE_CM_VERSION {
            return Err(CiError::Version(version));
        }
        let t = &cm.iface.CM;
        macro_rules! required {
            ($($f:ident),*) => {$( if t.$f.is_none() { return Err(CiError::Missing(stringify!($f))); } )*};
        }
        required!(
            create_id,
            destroy_id,
            listen,
            get_request_ex,
            send_req,
            send_rep,
            send_rtu,
            send_dreq,
            send_drep,
            send_rej,
            send_mra,
            get_qp_attr
        );
        Ok(cm)
    }

    /// The table.
    pub fn table(&self) -> &iba_cm_interface {
        &self.iface.CM
    }
}

impl Drop for CiCm {
    fn drop(&mut self) {
        let header = &self.iface.InterfaceHeader;
        if let Some(deref) = header.InterfaceDereference {
            // SAFETY: releases the one reference the query took, exactly once, at
            // PASSIVE_LEVEL (the filter device's cleanup).
            unsafe { deref(header.Context) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::ffi::c_void;
    use core::sync::atomic::{AtomicUsize, Ordering};

    static RELEASED: AtomicUsize = AtomicUsize::new(0);

    unsafe extern "system" fn release(_context: *mut c_void) {
        RELEASED.fetch_add(1, Ordering::SeqCst);
    }

    fn iface(version: u16) -> INFINIBAND_INTERFACE_CM {
        let mut i = INFINIBAND_INTERFACE_CM::zeroed();
        i.InterfaceHeader.Size = size_of::<INFINIBAND_INTERFACE_CM>() as u16;
        i.InterfaceHeader.Version = version;
        i.InterfaceHeader.InterfaceDereference = Some(release);
        i
    }

    #[test]
    fn refused_tables_release_their_reference() {
        let before = RELEASED.load(Ordering::SeqCst);
        // SAFETY: a table whose only routine is the counting dereference.
        let e = unsafe { CiCm::new(iface(0x0102)) }.unwrap_err();
        assert_eq!(e, CiError::Version(0x0102));
        // SAFETY: as above.
        let e = unsafe { CiCm::new(iface(INFINIBAND_INTERFACE_CM_VERSION)) }.unwrap_err();
        assert_eq!(e, CiError::Missing("create_id"));
        let mut small = iface(INFINIBAND_INTERFACE_CM_VERSION);
        small.InterfaceHeader.Size = 32;
        // SAFETY: as above.
        let e = unsafe { CiCm::new(small) }.unwrap_err();
        assert_eq!(e, CiError::Size(32));
        assert_eq!(RELEASED.load(Ordering::SeqCst) - before, 3);
    }
}
