//! `wvharness abi`: the ABI reference as a readable table or as JSON.
//!
//! Everything printed comes from `wv-abi`'s computed tables (`Ioctl::ALL`, `STRUCTS`,
//! `CONSTANTS`), so the output shows what the Rust code actually compiles to.

use std::io::{self, Write};

use clap::Args;
use serde::Serialize;
use wv_abi::consts::CONSTANTS;
use wv_abi::io::STRUCTS;
use wv_abi::ioctl::{Completion, Ioctl};
use wv_abi::status::ALL_KNOWN;

/// Options of `wvharness abi`.
#[derive(Args)]
pub struct AbiArgs {
    /// Print JSON (`{"ioctls":[…],"structs":[…],"constants":[…]}`) instead of tables.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct AbiJson {
    ioctls: Vec<IoctlJson>,
    structs: Vec<StructJson>,
    constants: Vec<ConstJson>,
}

#[derive(Serialize)]
struct IoctlJson {
    name: &'static str,
    code: String,
    index: u32,
    function: String,
    completion: &'static str,
}

#[derive(Serialize)]
struct StructJson {
    name: &'static str,
    size: usize,
    align: usize,
    fields: Vec<FieldJson>,
}

#[derive(Serialize)]
struct FieldJson {
    name: &'static str,
    offset: usize,
    size: usize,
}

#[derive(Serialize)]
struct ConstJson {
    name: &'static str,
    value: u64,
}

fn completion_name(c: Completion) -> &'static str {
    match c {
        Completion::Inline => "inline",
        Completion::Pends => "pends",
        Completion::Either => "either",
    }
}

fn to_json() -> AbiJson {
    AbiJson {
        ioctls: Ioctl::ALL
            .iter()
            .map(|i| IoctlJson {
                name: i.name(),
                code: format!("0x{:08X}", i.code()),
                index: i.index(),
                function: format!("0x{:03X}", i.function()),
                completion: completion_name(i.completion()),
            })
            .collect(),
        structs: STRUCTS
            .iter()
            .map(|s| StructJson {
                name: s.name,
                size: s.size,
                align: s.align,
                fields: s
                    .fields
                    .iter()
                    .map(|f| FieldJson {
                        name: f.name,
                        offset: f.offset,
                        size: f.size,
                    })
                    .collect(),
            })
            .collect(),
        constants: CONSTANTS
            .iter()
            .map(|c| ConstJson {
                name: c.name,
                value: c.value,
            })
            .collect(),
    }
}

fn write_tables(out: &mut impl Write) -> io::Result<()> {
    writeln!(out, "IOCTLs ({})", Ioctl::ALL.len())?;
    writeln!(
        out,
        "{:<32} {:>5} {:>8} {:>12}  completion",
        "name", "index", "function", "code"
    )?;
    for i in Ioctl::ALL {
        writeln!(
            out,
            "{:<32} {:>5} {:>8} {:>12}  {}",
            i.name(),
            i.index(),
            format!("0x{:03X}", i.function()),
            format!("0x{:08X}", i.code()),
            completion_name(i.completion())
        )?;
    }

    writeln!(out, "\nStructures ({})", STRUCTS.len())?;
    for s in STRUCTS {
        writeln!(out, "{}  size {}  align {}", s.name, s.size, s.align)?;
        for f in s.fields {
            writeln!(out, "  {:>4}  {:>3}  {}", f.offset, f.size, f.name)?;
        }
    }

    writeln!(out, "\nConstants ({})", CONSTANTS.len())?;
    for c in CONSTANTS {
        writeln!(out, "{:<36} 0x{:X}", c.name, c.value)?;
    }

    writeln!(out, "\nNTSTATUS values ({})", ALL_KNOWN.len())?;
    for s in ALL_KNOWN {
        writeln!(out, "0x{:08X}  {}", s.0, s.name().unwrap_or("?"))?;
    }
    Ok(())
}

/// Runs `wvharness abi`.
pub fn run(args: &AbiArgs) -> io::Result<()> {
    let mut out = io::stdout().lock();
    if args.json {
        serde_json::to_writer(&mut out, &to_json())?;
        writeln!(out)?;
    } else {
        write_tables(&mut out)?;
    }
    out.flush()
}
