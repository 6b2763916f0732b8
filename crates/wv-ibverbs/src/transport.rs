//! The library's handle type off Windows: the in-process stack's or the device service's,
//! chosen at bring-up (`runtime`).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use wv_client::raw::{IoStatus, RawFile, RawIo};

/// A handle on `\\.\WinVerbs`: in this process, or through the device service.
#[derive(Debug)]
pub enum File {
    /// The in-process stack.
    Inproc(wv_inproc::File),
    /// The device service `wvd`.
    Service(wv_client::service::File),
}

/// A request on a [`File`].
#[derive(Debug)]
pub enum Io {
    /// In process.
    Inproc(wv_inproc::Io),
    /// Through the service.
    Service(wv_client::service::Io),
}

impl RawFile for File {
    type Io = Io;

    fn device_io_control(&self, code: u32, input: &[u8], output_len: usize) -> Io {
        match self {
            File::Inproc(f) => Io::Inproc(f.device_io_control(code, input, output_len)),
            File::Service(f) => Io::Service(f.device_io_control(code, input, output_len)),
        }
    }

    fn cancel_io_ex(&self, io: &Io) -> bool {
        match (self, io) {
            (File::Inproc(f), Io::Inproc(i)) => f.cancel_io_ex(i),
            (File::Service(f), Io::Service(i)) => f.cancel_io_ex(i),
            _ => false,
        }
    }

    fn shared_device(&self) -> Option<Arc<dyn wv_softhca::uvp::MappedDevice>> {
        match self {
            File::Inproc(f) => f.shared_device(),
            File::Service(f) => f.shared_device(),
        }
    }
}

impl RawIo for Io {
    fn pending(&self) -> bool {
        match self {
            Io::Inproc(i) => i.pending(),
            Io::Service(i) => i.pending(),
        }
    }

    fn wait(self) -> IoStatus {
        match self {
            Io::Inproc(i) => i.wait(),
            Io::Service(i) => i.wait(),
        }
    }

    fn wait_timeout(&self, timeout: Duration) -> Option<IoStatus> {
        match self {
            Io::Inproc(i) => i.wait_timeout(timeout),
            Io::Service(i) => i.wait_timeout(timeout),
        }
    }

    fn is_complete(&self) -> bool {
        match self {
            Io::Inproc(i) => i.is_complete(),
            Io::Service(i) => i.is_complete(),
        }
    }
}

/// The directory this library was loaded from (where `tools/ibverbs/build` puts `wvd` too).
pub fn library_dir() -> Option<PathBuf> {
    // SAFETY: an all-zero Dl_info is a valid value for dladdr to fill.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    let here = library_dir as *const () as *const libc::c_void;
    // SAFETY: `here` is an address inside this library; dladdr only writes `info`.
    if unsafe { libc::dladdr(here, &mut info) } == 0 || info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: dladdr set `dli_fname` to a NUL-terminated path that lives as long as the
    // library stays loaded (for the rest of the process).
    let name = unsafe { std::ffi::CStr::from_ptr(info.dli_fname) };
    let path = PathBuf::from(
        <std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(name.to_bytes()),
    );
    path.parent().map(|p| p.to_path_buf())
}
