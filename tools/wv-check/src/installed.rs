//! The installed driver as an [`Env`] (Windows builds): handles on the real `\\.\WinVerbs`.
//! It has no admin side (nobody here can pull a controller out or reach IBAT) and no host
//! verifier (Driver Verifier reports on the machine itself), so the scenarios that need either
//! SKIP, and the run has no verifier line.

use std::any::Any;

use crate::device::DeviceSpec;
use crate::env::Env;

/// How the installed driver is driven.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct InstalledConfig {
    /// The device single-device scenarios use (default: the first).
    pub device: Option<DeviceSpec>,
}

/// The installed driver.
pub struct WindowsEnv {
    device: Option<DeviceSpec>,
}

impl Env for WindowsEnv {
    type Config = InstalledConfig;
    type File = wv_client::windows::File;

    fn create(config: &InstalledConfig) -> Result<Self, String> {
        Ok(WindowsEnv {
            device: config.device,
        })
    }

    fn verifier(_: &InstalledConfig) -> Option<String> {
        None
    }

    fn open(&self) -> Result<Self::File, String> {
        wv_client::windows::File::open().map_err(|e| {
            format!(
                "cannot open \\\\.\\WinVerbs ({e}): is the WinVerbs driver installed and an RDMA \
                 controller started?"
            )
        })
    }

    fn device_spec(&self) -> Option<DeviceSpec> {
        self.device
    }

    fn buffer(&self, len: usize) -> (u64, Box<dyn Any>) {
        // Any committed memory of the process can be registered with a real controller.
        let v = vec![0u8; len];
        (v.as_ptr() as u64, Box::new(v))
    }

    fn finish(self) -> Vec<String> {
        Vec::new()
    }
}
