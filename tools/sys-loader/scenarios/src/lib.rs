//! The scenarios library of the linked image: the same API as tools/wdf-emu's (`boot`, `Rig`,
//! `winverbs_entry`, the same `rig.rs`), but the driver is `winverbs.sys` — mapped once per
//! process by `sys_loader` (`$WINVERBS_SYS`, or what `tools/kmdf-link/build` wrote), its data
//! reset before each load, entered through `FxDriverEntry` with the Windows x64 convention.
//! The glue's scenario tests and the conformance runner compile against this unchanged.

use std::sync::{Arc, OnceLock};

use sys_loader::{LoadedImage, image_path};

#[path = "../../../wdf-emu/scenarios/src/rig.rs"]
mod rig;
pub use rig::{Rig, boot};

/// What the scenarios run: the linked image.
pub const DRIVER: &str = "winverbs.sys (the linked image, Windows x64 convention)";
/// The runner's name in summary lines.
pub const RUNNER: &str = "sys-loader";

/// The image, mapped on first use; a load that fails ends the test with its message.
pub fn image() -> &'static Arc<LoadedImage> {
    static IMAGE: OnceLock<Result<Arc<LoadedImage>, String>> = OnceLock::new();
    match IMAGE.get_or_init(|| LoadedImage::load(&image_path()).map_err(|e| e.to_string())) {
        Ok(image) => image,
        Err(e) => panic!("sys-loader: {e}"),
    }
}

/// `FxDriverEntry` of the image as the machine calls it.
pub fn winverbs_entry() -> wdf_emu::DriverEntry {
    image().entry()
}
