//! Where the device service listens, and starting it on first use.

use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::File;

/// The socket the service listens on unless told otherwise: `$WVD_SOCKET`, else
/// `$XDG_RUNTIME_DIR/wvd/socket` when `XDG_RUNTIME_DIR` is set, else `/tmp/wvd-<uid>/socket`.
/// The directory is the user's own (mode 0700, created by the service).
pub fn default_socket_path() -> PathBuf {
    if let Some(p) = std::env::var_os("WVD_SOCKET").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    if let Some(d) = std::env::var_os("XDG_RUNTIME_DIR").filter(|p| !p.is_empty()) {
        return Path::new(&d).join("wvd").join("socket");
    }
    PathBuf::from(format!("/tmp/wvd-{}", super::os::euid())).join("socket")
}

/// Whether nothing listens at `path` (no socket, or one nobody accepts on).
fn nobody_listens(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused
    )
}

/// Connects to the service at `path`, starting it first if nothing listens there.
///
/// The program started is `$WV_WVD` if set, else the first of `candidates` that exists, else
/// `wvd` from `PATH`. It runs as `wvd --socket <path> --background --idle-exit 30`: it detaches
/// (its own session, no zombie left to this process), returns once it listens, and exits on
/// its own 30 seconds after its last client went. Two processes starting it at once are fine:
/// the service takes a lock beside the socket, and the second one exits at once while both
/// clients connect to the first.
///
/// # Errors
/// The connection's error when the service cannot be started or reached, naming the program.
pub fn connect_or_start(path: &Path, candidates: &[PathBuf]) -> io::Result<File> {
    match File::connect(path) {
        Ok(f) => return Ok(f),
        Err(e) if !nobody_listens(&e) => return Err(e),
        Err(_) => {}
    }
    let program = std::env::var_os("WV_WVD")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .or_else(|| candidates.iter().find(|c| c.is_file()).cloned())
        .unwrap_or_else(|| PathBuf::from("wvd"));
    let status = Command::new(&program)
        .arg("--socket")
        .arg(path)
        .args(["--background", "--idle-exit", "30"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .status()
        .map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot start the device service {}: {e}", program.display()),
            )
        })?;
    if !status.success() {
        return Err(io::Error::other(format!(
            "the device service {} did not start ({status})",
            program.display()
        )));
    }
    File::connect(path)
}
