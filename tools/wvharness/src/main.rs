//! wvharness: the WinVerbs test harness.
//!
//! Each subcommand lives in its own module; `abi` prints the user/kernel ABI reference so the
//! Rust driver can be compared with the OFW header (and with a running system) by people and
//! scripts alike.

mod abi;

use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

/// WinVerbs test harness: ABI reference, conformance checks and benchmarks.
#[derive(Parser)]
#[command(name = "wvharness", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Print every IOCTL code, ABI struct layout and constant of the WinVerbs ABI.
    Abi(abi::AbiArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Some(Command::Abi(args)) => abi::run(&args),
        None => Cli::command().print_help(),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // A closed pipe (`wvharness abi | head`) is not worth a panic or an error message.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("wvharness: {e}");
            ExitCode::FAILURE
        }
    }
}
