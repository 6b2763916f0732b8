//! sys-loader: runs a linked `winverbs.sys` — the exact bytes `tools/kmdf-link` produces — in
//! a Linux process on the emulated KMDF of `tools/wdf-emu`, with the Windows x64 calling
//! convention on every call between the image and the host.
//!
//! * [`pe`]: reading the image and checking everything the loader trusts, before mapping;
//! * [`image`]: [`LoadedImage`], the mapping (sections, relocations, import binding,
//!   protections) and the machine's entry point into `FxDriverEntry`;
//! * [`imports`]: what an image may import: the emulated kernel routines and framework loader,
//!   each through its `extern "win64"` entry point;
//! * [`wdfldr`]: `WdfVersionBind` / `WdfVersionUnbind`, answered with the emulated KMDF 1.31
//!   (its Windows-convention function table and the driver's globals);
//! * [`crt`]: the ntoskrnl.exe exports only an image imports (`memcpy`…, `KeBugCheckEx`);
//! * [`crash`]: one clear line about a fault before the process ends.
//!
//! The emulated framework calls every callback of the driver with the driver's convention
//! (`wdf_emu::Convention::Win64`, carried by the [`wdf_emu::DriverEntry`] this loader makes),
//! and the soft HCAs below hand the image their C tables in it.
#![allow(unsafe_code)]

pub mod crash;
pub mod crt;
pub mod image;
pub mod imports;
pub mod pe;
pub mod wdfldr;

pub use image::{LoadError, LoadedImage};

use std::path::PathBuf;

/// The image the runners load: `$WINVERBS_SYS`, or what `tools/kmdf-link/build` writes.
pub fn image_path() -> PathBuf {
    std::env::var_os("WINVERBS_SYS").map_or_else(
        || {
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../../kmdf-link/target/winverbs/winverbs.sys")
        },
        PathBuf::from,
    )
}
