//! Build script of the emulation mirror of the driver package: sets `cfg(wdf_emu)`, under which
//! `driver/lib.rs` compiles the KMDF glue for the Linux host (without the panic handler and the
//! global allocator, which only a Windows kernel image has). Nothing else differs from a
//! Windows build of the same sources; the WDF and kernel routines the glue calls come from the
//! emulated KMDF (`wdf-emu`) when a test executable links them.

fn main() {
    println!("cargo::rustc-check-cfg=cfg(wdf_emu)");
    println!("cargo::rustc-cfg=wdf_emu");
}
