//! `wvharness abi`: the ABI reference as a readable table or as JSON.
//!
//! Everything printed comes from `wv-abi`'s computed tables (`Ioctl::ALL`, `STRUCTS`,
//! `CONSTANTS`), so the output shows what the Rust code actually compiles to. With `--lower` it
//! prints `wv-ci`'s tables of OFW's lower interfaces instead (`LOWER_STRUCTS`,
//! `LOWER_CONSTANTS`), in the same JSON schema for structs and constants;
//! `tools/lower-abi-check` compares that JSON with a C compiler's view of WinOFED's headers.

use std::io::{self, Write};

use clap::Args;
use serde::Serialize;
use wv_abi::consts::CONSTANTS;
use wv_abi::io::STRUCTS;
use wv_abi::ioctl::{Completion, Ioctl};
use wv_abi::meta::{ConstInfo, StructInfo};
use wv_abi::status::ALL_KNOWN;
use wv_ci::layout::{LOWER_CONSTANTS, LOWER_STRUCTS};

/// Options of `wvharness abi`.
#[derive(Args)]
pub struct AbiArgs {
    /// Print JSON (`{"ioctls":[…],"structs":[…],"constants":[…]}`) instead of tables.
    #[arg(long)]
    json: bool,
    /// Print the lower interfaces (`RDMA_INTERFACE_VERBS`, `INFINIBAND_INTERFACE_CM` and the
    /// types they pass) instead; with `--json`, `{"structs":[…],"constants":[…]}`.
    #[arg(long)]
    lower: bool,
}

#[derive(Serialize)]
struct AbiJson {
    ioctls: Vec<IoctlJson>,
    structs: Vec<StructJson>,
    constants: Vec<ConstJson>,
}

#[derive(Serialize)]
struct LowerJson {
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

fn structs_json(structs: &[StructInfo]) -> Vec<StructJson> {
    structs
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
        .collect()
}

fn constants_json(constants: &[ConstInfo]) -> Vec<ConstJson> {
    constants
        .iter()
        .map(|c| ConstJson {
            name: c.name,
            value: c.value,
        })
        .collect()
}

fn lower_json() -> LowerJson {
    LowerJson {
        structs: structs_json(LOWER_STRUCTS),
        constants: constants_json(LOWER_CONSTANTS),
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
        structs: structs_json(STRUCTS),
        constants: constants_json(CONSTANTS),
    }
}

fn write_structs(out: &mut impl Write, title: &str, structs: &[StructInfo]) -> io::Result<()> {
    writeln!(out, "{title} ({})", structs.len())?;
    for s in structs {
        writeln!(out, "{}  size {}  align {}", s.name, s.size, s.align)?;
        for f in s.fields {
            writeln!(out, "  {:>4}  {:>3}  {}", f.offset, f.size, f.name)?;
        }
    }
    Ok(())
}

fn write_constants(
    out: &mut impl Write,
    title: &str,
    constants: &[ConstInfo],
    width: usize,
) -> io::Result<()> {
    writeln!(out, "{title} ({})", constants.len())?;
    for c in constants {
        writeln!(out, "{:<width$} 0x{:X}", c.name, c.value)?;
    }
    Ok(())
}

fn write_lower_tables(out: &mut impl Write) -> io::Result<()> {
    write_structs(out, "Lower-interface structures", LOWER_STRUCTS)?;
    writeln!(out)?;
    write_constants(out, "Lower-interface constants", LOWER_CONSTANTS, 44)
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

    writeln!(out)?;
    write_structs(out, "Structures", STRUCTS)?;
    writeln!(out)?;
    write_constants(out, "Constants", CONSTANTS, 36)?;

    writeln!(out, "\nNTSTATUS values ({})", ALL_KNOWN.len())?;
    for s in ALL_KNOWN {
        writeln!(out, "0x{:08X}  {}", s.0, s.name().unwrap_or("?"))?;
    }
    Ok(())
}

/// Runs `wvharness abi`.
pub fn run(args: &AbiArgs) -> io::Result<()> {
    let mut out = io::stdout().lock();
    match (args.lower, args.json) {
        (false, true) => {
            serde_json::to_writer(&mut out, &to_json())?;
            writeln!(out)?;
        }
        (true, true) => {
            serde_json::to_writer(&mut out, &lower_json())?;
            writeln!(out)?;
        }
        (false, false) => write_tables(&mut out)?,
        (true, false) => write_lower_tables(&mut out)?,
    }
    out.flush()
}
