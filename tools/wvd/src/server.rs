//! The listening socket: where it lives and who may connect.
//!
//! The socket is created in a directory of the service's user (mode 0700, or 0711 when other
//! users are allowed, so they can reach the socket without listing the directory), beside a
//! lock file the service holds for its whole life: a second service for the same socket exits
//! at once, and a socket left by a service that died is replaced. The socket's mode is 0600
//! (0666 when other users are allowed). Each connection is identified by `SO_PEERCRED`: a user
//! other than the service's own is refused unless `--allow-uid` names it (or
//! `--allow-any-user`).

use std::fs::{self, File};
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use wv_client::service::{os, proto};

use crate::conn::{self, CONNECTIONS, Shared, WAITERS};

/// Who may connect, and when to stop.
#[derive(Clone, Debug)]
pub struct Policy {
    /// The socket's path.
    pub socket: PathBuf,
    /// Users besides the service's own that may connect.
    pub allow_uids: Vec<u32>,
    /// Any user may connect.
    pub allow_any: bool,
    /// Exit once no client has been connected for this long.
    pub idle_exit: Option<Duration>,
}

impl Policy {
    fn others_allowed(&self) -> bool {
        self.allow_any || !self.allow_uids.is_empty()
    }

    fn admits(&self, uid: u32, owner: u32) -> bool {
        uid == owner || self.allow_any || self.allow_uids.contains(&uid)
    }
}

/// The listening socket, bound and locked.
pub struct Listening {
    listener: UnixListener,
    _lock: File,
    policy: Policy,
}

/// Binds the socket, or explains why not. `Ok(None)`: another service holds the socket.
///
/// # Errors
/// A directory that is not the user's own, or the system's error.
pub fn listen(policy: Policy) -> io::Result<Option<Listening>> {
    let dir = policy
        .socket
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .to_path_buf();
    let mode = if policy.others_allowed() {
        0o711
    } else {
        0o700
    };
    if !dir.exists() {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(mode)
            .create(&dir)?;
    }
    let meta = fs::metadata(&dir)?;
    let me = os::euid();
    let default_dir = policy.socket == wv_client::service::default_socket_path();
    if default_dir && (meta.uid() != me || meta.mode() & 0o022 != 0) {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "{} is not a private directory of this user (owner {}, mode {:o})",
                dir.display(),
                meta.uid(),
                meta.mode() & 0o777
            ),
        ));
    }
    if default_dir && meta.mode() & 0o777 != mode {
        fs::set_permissions(&dir, fs::Permissions::from_mode(mode))?;
    }
    let lock_path = PathBuf::from(format!("{}.lock", policy.socket.display()));
    let lock = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)?;
    if lock.try_lock().is_err() {
        return Ok(None);
    }
    // Ours now: whatever socket is there was left by a service that died.
    remove_if_there(&policy.socket)?;
    let sock_mode = fs::Permissions::from_mode(if policy.others_allowed() {
        0o666
    } else {
        0o600
    });
    // Bound, listening and given its mode under a name of its own, then renamed into place: a
    // client that finds the socket can connect at once. (`UnixListener::bind` creates the file
    // a moment before it listens, and a connect in that moment is refused.) A path too long
    // for the extra suffix is bound where it is, as before.
    let fresh = PathBuf::from(format!("{}.new", policy.socket.display()));
    remove_if_there(&fresh)?;
    let listener = match UnixListener::bind(&fresh) {
        Ok(listener) => {
            fs::set_permissions(&fresh, sock_mode)?;
            fs::rename(&fresh, &policy.socket)?;
            listener
        }
        Err(e) if e.kind() == io::ErrorKind::InvalidInput => {
            let listener = UnixListener::bind(&policy.socket)?;
            fs::set_permissions(&policy.socket, sock_mode)?;
            listener
        }
        Err(e) => return Err(e),
    };
    Ok(Some(Listening {
        listener,
        _lock: lock,
        policy,
    }))
}

/// Removes `path` unless there is nothing there.
fn remove_if_there(path: &Path) -> io::Result<()> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// What the service holds, for `Admin::Stats`: connections, the threads they use, the shared
/// memory handed out, and the hosted machine's objects (the asking connection's own handle
/// included).
pub fn stats(shared: &Shared) -> Vec<(String, u64)> {
    let mut c = vec![
        (
            "connections".to_string(),
            CONNECTIONS.load(Ordering::Relaxed),
        ),
        (
            "pending waiters".to_string(),
            WAITERS.load(Ordering::Relaxed),
        ),
        (
            "shared memories".to_string(),
            crate::arena::ARENAS.load(Ordering::Relaxed),
        ),
        (
            "shared blocks".to_string(),
            crate::arena::BLOCKS_IN_USE.load(Ordering::Relaxed),
        ),
    ];
    c.extend(shared.host.counts());
    c
}

/// Waits until the calling connection is the only one left, at most `limit`.
pub fn wait_for_other_connections(limit: Duration) {
    let start = Instant::now();
    while CONNECTIONS.load(Ordering::Acquire) > 1 && start.elapsed() < limit {
        std::thread::sleep(Duration::from_millis(10));
    }
}

impl Listening {
    /// Serves connections until an unload or the idle time ends the process (the watcher
    /// removes the socket, unloads the driver — its findings on stderr — and exits).
    pub fn serve(self, shared: Arc<Shared>, ready: impl FnOnce()) -> io::Result<()> {
        let socket = self.policy.socket.clone();
        // The watcher ends the accept loop: after an unload once the last connection has
        // gone, or after the idle time. It connects to wake the blocked accept.
        {
            let (shared, socket, idle) =
                (Arc::clone(&shared), socket.clone(), self.policy.idle_exit);
            std::thread::Builder::new()
                .name("wvd-watch".into())
                .spawn(move || watch(&shared, &socket, idle))?;
        }
        ready();
        let owner = shared.owner_uid;
        for stream in self.listener.incoming() {
            if shared.stopping.load(Ordering::Acquire) {
                // Stopping: the watcher ends the process; no new client meanwhile.
                continue;
            }
            let Ok(stream) = stream else { continue };
            let cred = match os::peer_cred(&stream) {
                Ok(c) => c,
                Err(_) => continue,
            };
            if !self.policy.admits(cred.uid, owner) {
                // On a thread of its own: a refused client that never speaks must not hold the
                // accept loop up.
                let _ = std::thread::Builder::new()
                    .name("wvd-refuse".into())
                    .stack_size(64 * 1024)
                    .spawn(move || refuse(stream, cred.uid));
                continue;
            }
            let shared = Arc::clone(&shared);
            let spawned = std::thread::Builder::new()
                .name(format!("wvd-pid{}", cred.pid))
                .stack_size(1024 * 1024)
                .spawn(move || conn::serve(stream, cred, &shared));
            if let Err(e) = spawned {
                eprintln!("wvd: no thread for a connection: {e}");
            }
        }
        Ok(())
    }
}

/// Answers a user the policy does not admit: its hello is read (briefly) so that the answer
/// reaches it instead of a reset connection, then the error, then the end.
fn refuse(mut stream: UnixStream, uid: u32) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    let mut hello = [0u8; proto::HEADER_BYTES + 8];
    let _ = std::io::Read::read(&mut stream, &mut hello);
    let _ = os::send(
        &stream,
        &proto::error_frame(
            0,
            libc::EACCES,
            &format!("user {uid} may not use this service (see wvd --allow-uid)"),
        ),
        &[],
    );
}

fn watch(shared: &Shared, socket: &Path, idle: Option<Duration>) {
    let mut idle_since = Instant::now();
    let mut stopping_since: Option<Instant> = None;
    loop {
        std::thread::sleep(Duration::from_millis(100));
        let live = CONNECTIONS.load(Ordering::Acquire);
        if live > 0 {
            idle_since = Instant::now();
        }
        let stop = if shared.stopping.load(Ordering::Acquire) {
            // After an unload: once its answer went and the client left (5 s at most).
            let since = *stopping_since.get_or_insert_with(Instant::now);
            live == 0 || since.elapsed() > Duration::from_secs(5)
        } else if idle.is_some_and(|t| live == 0 && idle_since.elapsed() >= t) {
            shared.stopping.store(true, Ordering::Release);
            true
        } else {
            false
        };
        if stop {
            // The end is here, not in the accept loop, which stays blocked (waking it by
            // connecting needs the socket's path, which may be gone with its directory).
            let _ = fs::remove_file(socket);
            for line in shared.host.unload() {
                eprintln!("wvd: at exit: {line}");
            }
            std::process::exit(0);
        }
    }
}
