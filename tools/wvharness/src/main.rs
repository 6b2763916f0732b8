//! wvharness: the WinVerbs test harness.
//!
//! With no command it runs the conformance suite, then a short benchmark summary, and prints a
//! verdict (exit status non-zero if any check failed). Each subcommand lives in its own module;
//! `abi` prints the user/kernel ABI reference so the Rust driver can be compared with the OFW
//! header (and with a running system) by people and scripts alike.

mod abi;
mod baseline;
mod bench;
mod check;
mod conn;
mod ctx_switches;
mod devinfo;
mod perftest;
mod pingpong;
mod progress;
mod qp_cycle;
mod rping;
mod summary;
mod target;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use perftest::{PerftestArgs, Test};

/// WinVerbs test harness: conformance checks and perftest-compatible benchmarks.
///
/// Without a command: run every conformance check, then a short benchmark summary, then print
/// a verdict (a few seconds in a release build).
#[derive(Parser)]
#[command(
    name = "wvharness",
    version,
    about,
    args_conflicts_with_subcommands = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// Options of the default run (no command).
    #[command(flatten)]
    summary: summary::SummaryArgs,
}

#[derive(Subcommand)]
enum Command {
    /// Print every IOCTL code, ABI struct layout and constant of the WinVerbs ABI.
    Abi(abi::AbiArgs),
    /// Run every benchmark beside the machine's limits measured in the same run (ratios,
    /// goals met or not; `--quick` for CI, `--json`, `--out DIR` for a report).
    Bench(bench::BenchArgs),
    /// Run the conformance suite: one PASS/FAIL line per scenario.
    Check(check::CheckArgs),
    /// List the RDMA devices, their limits and ports, like ibv_devinfo.
    Devinfo(devinfo::DevinfoArgs),
    /// Ping-pong like ibv_rc_pingpong / ibv_uc_pingpong / ibv_ud_pingpong.
    Pingpong(pingpong::PingpongArgs),
    /// Connection rate, like NetworkDirect's ndconn.
    Conn(conn::ConnArgs),
    /// RDMA ping over a connection, like librdmacm's rping.
    Rping(rping::RpingArgs),
    /// Send latency, like perftest's ib_send_lat.
    #[command(name = "send_lat")]
    SendLat(PerftestArgs),
    /// RDMA write latency, like perftest's ib_write_lat.
    #[command(name = "write_lat")]
    WriteLat(PerftestArgs),
    /// RDMA read latency, like perftest's ib_read_lat.
    #[command(name = "read_lat")]
    ReadLat(PerftestArgs),
    /// Send bandwidth, like perftest's ib_send_bw.
    #[command(name = "send_bw")]
    SendBw(PerftestArgs),
    /// RDMA write bandwidth, like perftest's ib_write_bw.
    #[command(name = "write_bw")]
    WriteBw(PerftestArgs),
    /// RDMA read bandwidth, like perftest's ib_read_bw.
    #[command(name = "read_bw")]
    ReadBw(PerftestArgs),
    /// Internal (the benchmark's copy between two processes): holds a buffer of LEN bytes,
    /// prints its address, exits when its standard input closes.
    #[cfg(target_os = "linux")]
    #[command(name = "copy-target", hide = true)]
    CopyTarget {
        /// Bytes.
        len: usize,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Some(Command::Abi(args)) => abi::run(&args).map(|()| ExitCode::SUCCESS),
        Some(Command::Bench(args)) => bench::run(&args),
        Some(Command::Check(args)) => check::run(&args),
        Some(Command::Devinfo(args)) => devinfo::run(&args),
        Some(Command::Pingpong(args)) => pingpong::run(&args),
        Some(Command::Rping(args)) => rping::run(&args),
        Some(Command::Conn(args)) => conn::run(&args),
        Some(Command::SendLat(args)) => perftest::run_test(Test::SendLat, &args),
        Some(Command::WriteLat(args)) => perftest::run_test(Test::WriteLat, &args),
        Some(Command::ReadLat(args)) => perftest::run_test(Test::ReadLat, &args),
        Some(Command::SendBw(args)) => perftest::run_test(Test::SendBw, &args),
        Some(Command::WriteBw(args)) => perftest::run_test(Test::WriteBw, &args),
        Some(Command::ReadBw(args)) => perftest::run_test(Test::ReadBw, &args),
        #[cfg(target_os = "linux")]
        Some(Command::CopyTarget { len }) => {
            bench::copy_target(len);
            Ok(ExitCode::SUCCESS)
        }
        None => summary::run(&cli.summary),
    };
    match result {
        Ok(code) => code,
        // A closed pipe (`wvharness abi | head`) is not worth a panic or an error message.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("wvharness: {e}");
            ExitCode::FAILURE
        }
    }
}
