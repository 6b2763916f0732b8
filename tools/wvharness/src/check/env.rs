//! What a scenario runs against: [`Env`], one fresh "machine" per scenario.
//!
//! * [`InprocEnv`]: a new in-process [`Stack`] (2 soft HCAs, threaded host platform) for every
//!   scenario, so ids, port flags and removed devices never leak from one scenario into the
//!   next, and so the host verifier's findings can be attributed to the scenario that caused
//!   them. It has the admin actions (port state, removal, hot add).
//! * `WindowsEnv` (Windows builds): handles on the installed `\\.\WinVerbs`; no admin actions,
//!   so scenarios that need them SKIP.
//!
//! Transport and device selection come from the shared `crate::target` options.

use wv_client::inproc::{LinkLayer, LowerEdge, Stack, StackConfig};
use wv_client::raw::RawFile;

use super::raw;
use crate::target::{DeviceSpec, TargetArgs, TargetError, Transport, resolve_device};

/// The validated `--transport` / `--device` choice of a check run. Cheap to clone: each
/// scenario builds its own environment from it.
#[derive(Clone, Debug)]
pub struct CheckTarget {
    transport: Transport,
    device: Option<DeviceSpec>,
    lower: LowerEdge,
    link_layer: LinkLayer,
}

impl CheckTarget {
    /// Validates the shared target options: the Windows transport exists only in Windows builds,
    /// and `--device` must name a device the target has (checked on a throw-away stack for
    /// `inproc`).
    ///
    /// # Errors
    /// A message for the user, naming what exists.
    pub fn new(args: &TargetArgs) -> Result<CheckTarget, TargetError> {
        let target = CheckTarget {
            transport: args.transport,
            device: args.device,
            lower: args.lower.edge(),
            link_layer: args.link_layer.layer(),
        };
        match args.transport {
            Transport::Inproc => {
                if let Some(spec) = args.device {
                    let stack = Stack::new(InprocEnv::config(&target));
                    let found = resolve_device(&stack.device_guids(), Some(spec)).map(|_| ());
                    let _ = stack.unload();
                    found?;
                }
            }
            #[cfg(windows)]
            Transport::Windows => {}
            #[cfg(not(windows))]
            Transport::Windows => {
                return Err(TargetError(
                    "the windows transport (\\\\.\\WinVerbs) exists only in Windows builds of \
                     wvharness; on this system use --transport inproc (the default)"
                        .into(),
                ));
            }
        }
        Ok(target)
    }

    /// The transport.
    pub fn transport(&self) -> Transport {
        self.transport
    }

    /// How the in-process driver reached the soft HCAs, in words (`None` on Windows, where the
    /// real controller's table is used).
    pub fn lower_edge_text(&self) -> Option<&'static str> {
        (self.transport == Transport::Inproc).then_some(match (self.lower, self.link_layer) {
            (LowerEdge::CTable, LinkLayer::Ethernet) => {
                "driver → soft HCAs through their C verbs tables"
            }
            (LowerEdge::Direct, LinkLayer::Ethernet) => "driver → soft HCAs by direct calls",
            (LowerEdge::CTable, LinkLayer::InfiniBand) => {
                "driver → soft HCAs with InfiniBand ports through their C verbs tables"
            }
            (LowerEdge::Direct, LinkLayer::InfiniBand) => {
                "driver → soft HCAs with InfiniBand ports by direct calls"
            }
        })
    }

    /// Whether runs on this target have a host verifier whose findings are reported.
    pub fn has_verifier(&self) -> bool {
        self.transport == Transport::Inproc
    }
}

/// One scenario's machine.
pub trait Env: Sized + 'static {
    /// An open handle.
    type File: RawFile + Send + Sync + 'static;
    /// Builds the environment for one scenario.
    ///
    /// # Errors
    /// Why the target cannot be reached.
    fn create(target: &CheckTarget) -> Result<Self, String>;
    /// CreateFile on the driver.
    ///
    /// # Errors
    /// Why the driver refused.
    fn open(&self) -> Result<Self::File, String>;
    /// The `--device` choice.
    fn device_spec(&self) -> Option<DeviceSpec>;
    /// The in-process stack, for the admin actions a controller's owner has (port state,
    /// removal, hot add) and its device list; `None` on a real system.
    fn stack(&self) -> Option<&Stack> {
        None
    }
    /// CloseHandle racing an IOCTL the I/O manager has already referenced the file for: the
    /// IOCTL reaches the driver after cleanup. `None` when the transport cannot stage that
    /// (a real system cannot order it deterministically).
    fn close_racing_ioctl(
        &self,
        file: Self::File,
        code: u32,
        input: &[u8],
        output_len: usize,
    ) -> Option<wv_client::raw::IoStatus> {
        let _ = (file, code, input, output_len);
        None
    }
    /// Memory the device may register (MEMORY_REGISTER probes the caller's pages): its address
    /// and the owner that keeps it alive.
    fn buffer(&self, len: usize) -> (u64, Box<dyn std::any::Any>);
    /// Tears the environment down and returns the host verifier's violations (none on a real
    /// system, which has no such verifier).
    fn finish(self) -> Vec<String>;

    /// The GUID of the device the scenario should use (`--device`, or the first).
    ///
    /// # Errors
    /// No device, or the chosen one is missing.
    fn guid(&self, f: &Self::File) -> Result<u64, String> {
        let guids = raw::guids(f)?;
        let i = resolve_device(&guids, self.device_spec()).map_err(|e| e.0)?;
        Ok(guids[i])
    }

    /// The GUID of another device than [`Env::guid`] when there is one (else the same).
    ///
    /// # Errors
    /// As [`Env::guid`].
    fn other_guid(&self, f: &Self::File) -> Result<u64, String> {
        let guids = raw::guids(f)?;
        let i = resolve_device(&guids, self.device_spec()).map_err(|e| e.0)?;
        Ok(guids[(i + 1) % guids.len()])
    }

    /// The index of the chosen device in the stack (for admin actions).
    ///
    /// # Errors
    /// No stack or the device is not in it.
    fn stack_index(&self, guid: u64) -> Result<usize, String> {
        let stack = self.stack().ok_or("no admin access on this transport")?;
        (0..stack.device_count())
            .find(|&i| stack.device_guid(i) == Some(guid))
            .ok_or_else(|| format!("device {guid:#x} is not one of the stack's"))
    }
}

/// A fresh in-process stack.
pub struct InprocEnv {
    stack: Stack,
    device: Option<DeviceSpec>,
}

impl InprocEnv {
    /// The stack every scenario gets: two soft HCAs with two ports each (the second port lets
    /// the port-event scenario order events deterministically), QP modify asynchronous, a
    /// threaded platform (real waits, as on Windows).
    pub fn config(target: &CheckTarget) -> StackConfig {
        StackConfig {
            devices: 2,
            ports_per_device: 2,
            lower: target.lower,
            link_layer: target.link_layer,
            ..StackConfig::default()
        }
    }
}

impl Env for InprocEnv {
    type File = wv_client::inproc::File;

    fn create(target: &CheckTarget) -> Result<Self, String> {
        Ok(InprocEnv {
            stack: Stack::new(Self::config(target)),
            device: target.device,
        })
    }

    fn open(&self) -> Result<Self::File, String> {
        self.stack
            .open()
            .map_err(|s| format!("CreateFile on the in-process driver: {s}"))
    }

    fn device_spec(&self) -> Option<DeviceSpec> {
        self.device
    }

    fn stack(&self) -> Option<&Stack> {
        Some(&self.stack)
    }

    fn close_racing_ioctl(
        &self,
        file: Self::File,
        code: u32,
        input: &[u8],
        output_len: usize,
    ) -> Option<wv_client::raw::IoStatus> {
        Some(file.close_racing_ioctl(code, input, output_len).wait())
    }

    fn buffer(&self, len: usize) -> (u64, Box<dyn std::any::Any>) {
        // The in-process soft HCAs accept registrations of the process-wide pool only, as a
        // kernel's probe accepts only mapped pages.
        let b = wv_client::inproc::process_memory().alloc(len);
        (b.addr(), Box::new(b))
    }

    fn finish(self) -> Vec<String> {
        self.stack.unload()
    }
}

/// The installed driver.
#[cfg(windows)]
pub struct WindowsEnv {
    device: Option<DeviceSpec>,
}

#[cfg(windows)]
impl Env for WindowsEnv {
    type File = wv_client::windows::File;

    fn create(target: &CheckTarget) -> Result<Self, String> {
        Ok(WindowsEnv {
            device: target.device,
        })
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

    fn buffer(&self, len: usize) -> (u64, Box<dyn std::any::Any>) {
        // Any committed memory of the process can be registered with a real controller.
        let v = vec![0u8; len];
        (v.as_ptr() as u64, Box::new(v))
    }

    fn finish(self) -> Vec<String> {
        Vec::new()
    }
}
