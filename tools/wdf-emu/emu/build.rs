//! Writes the trap entries of the emulated KMDF 1.31 function table: one distinct function per
//! index (458 of them), so that a call through an entry the emulation does not implement can
//! say which index it was. `src/table.rs` includes the file and overwrites the entries of the
//! implemented DDIs.

use std::{env, fmt::Write as _, fs, path::PathBuf};

/// Entries in KMDF 1.31's function table (`WdfFunctionTableNumEntries`).
const ENTRIES: usize = 458;

fn main() {
    let out = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let mut text = String::new();
    for (abi, name) in [("C", "C_TRAPS"), ("Win64", "WIN64_TRAPS")] {
        writeln!(
            text,
            "/// The trap of every index for the {abi} calling convention.\n\
             pub(crate) const {name}: [WDFFUNC; {ENTRIES}] = ["
        )
        .unwrap();
        for index in 0..ENTRIES {
            if abi == "C" {
                writeln!(text, "    Some(trap_c::<{index}>),").unwrap();
            } else {
                writeln!(text, "    erase_win64(trap_win64::<{index}>),").unwrap();
            }
        }
        writeln!(text, "];").unwrap();
    }
    fs::write(out.join("traps.rs"), text).expect("write traps.rs");
    println!("cargo::rerun-if-changed=build.rs");
}
