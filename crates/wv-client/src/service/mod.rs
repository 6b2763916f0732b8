//! The device service transport (Linux): `\\.\WinVerbs` as a device service (`wvd`) hosts it
//! for every process of the machine, reached over a Unix socket.
//!
//! A [`File`] is one connection, which the service makes one file handle on the driver: the
//! raw IOCTL interface ([`RawFile`](crate::raw::RawFile)) crosses the socket as frames ([`proto`]), overlapped
//! requests included (a request the driver pends is answered "pending" at once and completed
//! later), CancelIoEx is a frame, and dropping the file is CloseHandle — the service runs the
//! driver's cleanup, the requests still pending end, then it closes the connection.
//!
//! The data path does not cross the socket. The service shares memory with the connection (a
//! sealed memfd both map): the rings of every CQ, QP and SRQ created through the handle live
//! there, and a doorbell page. [`RawFile::shared_device`](crate::raw::RawFile::shared_device) hands that memory to the soft HCA's
//! user-mode provider, which posts, polls and arms there as on a device's rings, and rings a
//! doorbell by setting the QP's doorbell bits and waking the service's doorbell thread with a
//! futex only when it sleeps.
//!
//! [`launch`] finds the socket (`WVD_SOCKET`, else a directory of the user's) and can start the
//! service on first use.

pub mod launch;
mod mapped;
#[allow(
    unsafe_code,
    reason = "the transport's system calls: shared mappings, descriptor passing, futexes"
)]
pub mod os;
pub mod proto;

use std::collections::HashMap;
use std::io::{self, Read};
use std::net::Shutdown;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use wv_abi::NtStatus;
use zerocopy::{FromBytes, IntoBytes};

use crate::raw::IoStatus;
use proto::{
    Admin, AdminReply, CancelBody, CancelledBody, CompleteHead, ErrorHead, Header, Hello,
    IoctlHead, Kind, Welcome,
};

pub use launch::{connect_or_start, default_socket_path};
pub use mapped::SharedDevice;

/// How a request (or a control exchange) of the connection stands.
#[derive(Clone, Debug)]
enum State {
    /// Sent, not answered yet.
    Sent,
    /// The driver pended it.
    Pending,
    /// It ended; `inline` when the driver completed it without pending.
    Complete { st: IoStatus, inline: bool },
    /// A CancelIoEx's answer.
    Cancelled(bool),
    /// An admin answer.
    Admin(AdminReply),
    /// A sync's answer.
    Synced,
    /// The service refused the frame, or the connection ended before an answer.
    Failed { errno: i32, reason: String },
}

/// One exchange's answer, waited for.
#[derive(Debug)]
struct Slot {
    state: Mutex<State>,
    changed: Condvar,
}

impl Slot {
    fn new() -> Arc<Slot> {
        Arc::new(Slot {
            state: Mutex::new(State::Sent),
            changed: Condvar::new(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Every update is a single assignment: a poisoned lock still holds a whole state.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn set(&self, s: State) {
        *self.lock() = s;
        self.changed.notify_all();
    }

    /// Waits while `busy` says the state is not the one wanted, at most `timeout`.
    fn wait_while(
        &self,
        timeout: Option<Duration>,
        busy: impl Fn(&State) -> bool,
    ) -> MutexGuard<'_, State> {
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut g = self.lock();
        while busy(&g) {
            match deadline {
                None => g = self.changed.wait(g).unwrap_or_else(|e| e.into_inner()),
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        break;
                    }
                    g = self
                        .changed
                        .wait_timeout(g, d - now)
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                }
            }
        }
        g
    }
}

/// The connection shared by a [`File`], its requests and its reader thread.
#[derive(Debug)]
struct Conn {
    sock: UnixStream,
    /// Serialises writers, so frames never interleave.
    write: Mutex<()>,
    next_tag: AtomicU64,
    slots: Mutex<HashMap<u64, Arc<Slot>>>,
    /// The service is gone (the connection ended).
    gone: AtomicBool,
    welcome: Welcome,
    shared: Option<Arc<SharedDevice>>,
}

impl Conn {
    fn slots(&self) -> MutexGuard<'_, HashMap<u64, Arc<Slot>>> {
        self.slots.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sends a frame expecting an answer with a new tag; returns the tag and its slot.
    fn send(&self, kind: Kind, parts: &[&[u8]]) -> (u64, Arc<Slot>) {
        let tag = self.next_tag.fetch_add(1, Ordering::Relaxed);
        let slot = Slot::new();
        self.slots().insert(tag, Arc::clone(&slot));
        let bytes = proto::frame(kind, 0, tag, parts);
        let sent = {
            let _w = self.write.lock().unwrap_or_else(|e| e.into_inner());
            os::send(&self.sock, &bytes, &[])
        };
        if let Err(e) = sent {
            self.slots().remove(&tag);
            slot.set(State::Failed {
                errno: e.raw_os_error().unwrap_or(libc::EPIPE),
                reason: format!("the device service is not reachable: {e}"),
            });
        } else if self.gone.load(Ordering::Acquire) {
            // The reader may have failed the slots before this one was inserted.
            self.fail_all();
        }
        (tag, slot)
    }

    /// The connection ended: every exchange still waiting fails.
    fn fail_all(&self) {
        self.gone.store(true, Ordering::Release);
        let slots: Vec<_> = self.slots().drain().map(|(_, s)| s).collect();
        for s in slots {
            s.set(State::Failed {
                errno: libc::ENOTCONN,
                reason: "the device service closed the connection".into(),
            });
        }
    }

    /// Delivers one answer frame.
    fn deliver(&self, h: &Header, payload: Vec<u8>) {
        let Some(kind) = Kind::from_u16(h.kind) else {
            return;
        };
        let slot = if kind == Kind::Pending {
            self.slots().get(&h.tag).cloned()
        } else {
            self.slots().remove(&h.tag)
        };
        let Some(slot) = slot else {
            return;
        };
        let state = match kind {
            Kind::Pending => State::Pending,
            Kind::Complete => match CompleteHead::read_from_prefix(&payload) {
                Ok((c, rest)) => State::Complete {
                    st: IoStatus {
                        status: c.status,
                        information: usize::try_from(c.information).unwrap_or(usize::MAX),
                        output: rest.to_vec(),
                    },
                    inline: h.flags & proto::COMPLETE_INLINE != 0,
                },
                Err(_) => malformed(),
            },
            Kind::Cancelled => match CancelledBody::read_from_prefix(&payload) {
                Ok((c, _)) => State::Cancelled(c.found != 0),
                Err(_) => malformed(),
            },
            Kind::Synced => State::Synced,
            Kind::AdminReply => match AdminReply::decode(&payload) {
                Some(r) => State::Admin(r),
                None => malformed(),
            },
            Kind::Error => match ErrorHead::read_from_prefix(&payload) {
                Ok((e, rest)) => State::Failed {
                    errno: e.errno as i32,
                    reason: String::from_utf8_lossy(rest).into_owned(),
                },
                Err(_) => malformed(),
            },
            _ => malformed(),
        };
        slot.set(state);
    }
}

fn malformed() -> State {
    State::Failed {
        errno: libc::EPROTO,
        reason: "a malformed answer from the device service".into(),
    }
}

/// Reads frames until the connection ends.
fn reader(conn: Arc<Conn>, mut sock: UnixStream) {
    let mut head = [0u8; proto::HEADER_BYTES];
    loop {
        if sock.read_exact(&mut head).is_err() {
            break;
        }
        let Ok((h, _)) = Header::read_from_prefix(&head) else {
            break;
        };
        if h.len > proto::MAX_FRAME {
            break;
        }
        let mut payload = vec![0u8; h.len as usize];
        if sock.read_exact(&mut payload).is_err() {
            break;
        }
        conn.deliver(&h, payload);
    }
    conn.fail_all();
}

/// A handle on `\\.\WinVerbs` through the device service: one connection.
#[derive(Debug)]
pub struct File {
    conn: Arc<Conn>,
}

impl File {
    /// Connects to the service listening on `path` and opens a handle (the handshake).
    ///
    /// # Errors
    /// The socket's error; `PermissionDenied` when the service refuses this user;
    /// `InvalidData` for a service that does not speak this protocol.
    pub fn connect(path: &Path) -> io::Result<File> {
        let sock = UnixStream::connect(path)?;
        let hello = Hello {
            magic: proto::HELLO_MAGIC,
            version: proto::VERSION,
        };
        // A service that refuses this user may close its side first: its answer is read
        // even when the hello could not be sent.
        let sent = os::send(
            &sock,
            &proto::frame(Kind::Hello, 0, 0, &[hello.as_bytes()]),
            &[],
        );
        // The answer: one frame, with the shared memory's descriptor.
        let mut buf = vec![0u8; proto::HEADER_BYTES + 4096];
        let mut got = 0usize;
        let mut fd = None;
        let (h, payload) = loop {
            let (n, f) = match os::recv_with_fd(&sock, &mut buf[got..]) {
                Ok(r) => r,
                Err(e) => return Err(sent.err().unwrap_or(e)),
            };
            if n == 0 {
                return Err(sent.err().unwrap_or(io::ErrorKind::UnexpectedEof.into()));
            }
            if fd.is_none() {
                fd = f;
            }
            got += n;
            if let Ok((h, rest)) = Header::read_from_prefix(&buf[..got]) {
                let need = h.len as usize;
                if need > buf.len() - proto::HEADER_BYTES {
                    return Err(io::ErrorKind::InvalidData.into());
                }
                if rest.len() >= need {
                    break (h, rest[..need].to_vec());
                }
            }
        };
        match Kind::from_u16(h.kind) {
            Some(Kind::Hello) => {}
            Some(Kind::Error) => {
                let (e, reason) = match ErrorHead::read_from_prefix(&payload) {
                    Ok((e, r)) => (e.errno as i32, String::from_utf8_lossy(r).into_owned()),
                    Err(_) => (libc::EPROTO, String::new()),
                };
                let kind = if e == libc::EACCES {
                    io::ErrorKind::PermissionDenied
                } else {
                    io::ErrorKind::Other
                };
                return Err(io::Error::new(
                    kind,
                    format!("the device service refused the connection: {reason}"),
                ));
            }
            _ => return Err(io::ErrorKind::InvalidData.into()),
        }
        let (welcome, _) =
            Welcome::read_from_prefix(&payload).map_err(|_| io::ErrorKind::InvalidData)?;
        if welcome.version != proto::VERSION {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "the device service speaks protocol {}, this library {}",
                    welcome.version,
                    proto::VERSION
                ),
            ));
        }
        let shared = match fd {
            Some(fd) => Some(SharedDevice::map(&fd, &welcome)?),
            None => None,
        };
        let read_half = sock.try_clone()?;
        let conn = Arc::new(Conn {
            sock,
            write: Mutex::new(()),
            next_tag: AtomicU64::new(1),
            slots: Mutex::new(HashMap::new()),
            gone: AtomicBool::new(false),
            welcome,
            shared,
        });
        let for_reader = Arc::clone(&conn);
        std::thread::Builder::new()
            .name("wv-service".into())
            .stack_size(256 * 1024)
            .spawn(move || reader(for_reader, read_half))?;
        Ok(File { conn })
    }

    /// The service's process id.
    pub fn service_pid(&self) -> u32 {
        self.conn.welcome.service_pid
    }

    /// The connection's socket descriptor (for diagnostics and tests).
    pub fn raw_fd(&self) -> i32 {
        self.conn.sock.as_raw_fd()
    }

    /// Sends an admin action or address question and waits for the answer.
    ///
    /// # Errors
    /// `PermissionDenied` for an action only the machine's owner may take; the connection's
    /// error; `InvalidData` for an answer of the wrong shape.
    pub fn admin(&self, a: &Admin) -> io::Result<AdminReply> {
        let (_, slot) = self.conn.send(Kind::Admin, &[&a.encode()]);
        let g = slot.wait_while(None, |s| matches!(s, State::Sent | State::Pending));
        match &*g {
            State::Admin(r) => Ok(r.clone()),
            State::Failed { errno, reason } => Err(if *errno == libc::EPERM {
                io::Error::new(io::ErrorKind::PermissionDenied, reason.clone())
            } else {
                io::Error::other(reason.clone())
            }),
            _ => Err(io::ErrorKind::InvalidData.into()),
        }
    }

    /// DeviceIoControl with an OVERLAPPED (see [`RawFile::device_io_control`](crate::raw::RawFile::device_io_control)).
    pub fn device_io_control(&self, code: u32, input: &[u8], output_len: usize) -> Io {
        let max = proto::MAX_IOCTL_BYTES as usize;
        if input.len() > max || output_len > max {
            // Beyond what the service takes: as a system buffer that cannot be allocated.
            return Io::ended(&self.conn, NtStatus::INSUFFICIENT_RESOURCES);
        }
        let head = IoctlHead {
            code,
            output_len: output_len as u32,
        };
        let (tag, slot) = self.conn.send(Kind::Ioctl, &[head.as_bytes(), input]);
        let pending = {
            let g = slot.wait_while(None, |s| matches!(s, State::Sent));
            match &*g {
                State::Pending => true,
                State::Complete { inline, .. } => !inline,
                _ => false,
            }
        };
        Io {
            conn: Arc::clone(&self.conn),
            tag,
            slot,
            pending,
        }
    }

    /// CancelIoEx of one request of this handle.
    pub fn cancel_io_ex(&self, io: &Io) -> bool {
        if !Arc::ptr_eq(&io.conn, &self.conn) || io.is_complete() {
            return false;
        }
        let body = CancelBody { target: io.tag };
        let (_, slot) = self.conn.send(Kind::Cancel, &[body.as_bytes()]);
        let g = slot.wait_while(None, |s| matches!(s, State::Sent | State::Pending));
        matches!(&*g, State::Cancelled(true))
    }
}

impl Drop for File {
    fn drop(&mut self) {
        // CloseHandle: the service cleans the handle up when its reading side ends; the
        // connection stays open for the completions of what was pending, then the service
        // closes it and the reader thread goes.
        let _ = self.conn.sock.shutdown(Shutdown::Write);
    }
}

/// One request through the service (an OVERLAPPED). It outlives its [`File`].
#[derive(Debug)]
pub struct Io {
    conn: Arc<Conn>,
    tag: u64,
    slot: Arc<Slot>,
    pending: bool,
}

/// Whether a state is the request's end.
fn ended(s: &State) -> bool {
    matches!(s, State::Complete { .. } | State::Failed { .. })
}

/// The status a request ends with.
fn status_of(s: &State) -> Option<IoStatus> {
    match s {
        State::Complete { st, .. } => Some(st.clone()),
        // The service went away under the request (or refused the frame): the device is
        // gone for this handle, as after a surprise removal.
        State::Failed { errno, .. } => Some(IoStatus {
            status: if *errno == libc::EPROTO {
                NtStatus::INVALID_PARAMETER.0
            } else {
                NtStatus::DEVICE_REMOVED.0
            },
            information: 0,
            output: Vec::new(),
        }),
        _ => None,
    }
}

impl Io {
    fn ended(conn: &Arc<Conn>, status: NtStatus) -> Io {
        let slot = Slot::new();
        slot.set(State::Complete {
            st: IoStatus {
                status: status.0,
                information: 0,
                output: Vec::new(),
            },
            inline: true,
        });
        Io {
            conn: Arc::clone(conn),
            tag: 0,
            slot,
            pending: false,
        }
    }

    /// Whether the driver pended the request.
    pub fn pending(&self) -> bool {
        self.pending
    }

    /// Waits for the request to end.
    pub fn wait(self) -> IoStatus {
        let g = self.slot.wait_while(None, |s| !ended(s));
        status_of(&g).unwrap_or_else(|| unreachable!("waited until the request ended"))
    }

    /// Waits at most `timeout`; `None` while the request is still pending. A zero timeout
    /// polls: a completion that ended before the call is seen.
    pub fn wait_timeout(&self, timeout: Duration) -> Option<IoStatus> {
        if timeout.is_zero() && !self.is_complete() {
            return None;
        }
        let g = self.slot.wait_while(Some(timeout), |s| !ended(s));
        status_of(&g)
    }

    /// Whether the request has ended (`HasOverlappedIoCompleted`): a completion the service
    /// sent before the call is seen, even if the connection's reader has not delivered it yet
    /// (a sync round trip orders them).
    pub fn is_complete(&self) -> bool {
        if ended(&self.slot.lock()) {
            return true;
        }
        if !self.conn.gone.load(Ordering::Acquire) {
            let (_, slot) = self.conn.send(Kind::Sync, &[]);
            drop(slot.wait_while(None, |s| matches!(s, State::Sent)));
        }
        ended(&self.slot.lock())
    }
}

crate::raw_by_inherent!(File, Io, {
    fn shared_device(&self) -> Option<Arc<dyn wv_softhca::uvp::MappedDevice>> {
        self.conn
            .shared
            .clone()
            .map(|d| d as Arc<dyn wv_softhca::uvp::MappedDevice>)
    }
});

/// The machine behind a service connection as the verbs layer's address service (IBAT's
/// role): locate, resolve and reserve through admin questions.
impl crate::verbs::AddressService for File {
    fn locate(&self, ip: std::net::IpAddr) -> Option<crate::verbs::DeviceAddress> {
        match self.admin(&Admin::Locate(ip)).ok()? {
            AdminReply::Located { guid, pkey, port } => Some(crate::verbs::DeviceAddress {
                device_guid: guid,
                pkey,
                port,
            }),
            _ => None,
        }
    }

    fn resolve_path(
        &self,
        src: std::net::IpAddr,
        dst: std::net::IpAddr,
    ) -> Option<wv_abi::IB_PATH_REC> {
        match self.admin(&Admin::ResolvePath(src, dst)).ok()? {
            AdminReply::Path(b) => wv_abi::IB_PATH_REC::read_from_prefix(&b)
                .ok()
                .map(|(p, _)| p),
            _ => None,
        }
    }

    fn reserve_port(
        &self,
        ip: std::net::IpAddr,
        port: u16,
    ) -> Result<crate::verbs::PortReservation, crate::verbs::PortError> {
        use crate::verbs::{PortError, PortReservation};
        match self.admin(&Admin::ReservePort(ip, port)) {
            Ok(AdminReply::Lease { id, port }) => Ok(PortReservation::new(
                port,
                Box::new(Lease {
                    conn: Arc::clone(&self.conn),
                    id,
                }),
            )),
            Ok(AdminReply::Refused(r)) if r == "in use" => Err(PortError::InUse),
            Ok(AdminReply::Refused(r)) if r == "exhausted" => Err(PortError::Exhausted),
            _ => Err(PortError::Unknown),
        }
    }
}

/// A port reservation held in the service; released when dropped (and when the connection
/// ends).
struct Lease {
    conn: Arc<Conn>,
    id: u64,
}

impl Drop for Lease {
    fn drop(&mut self) {
        if !self.conn.gone.load(Ordering::Acquire) {
            // Fire and forget: the answer arrives on the reader thread and nobody waits.
            let (tag, _) = self
                .conn
                .send(Kind::Admin, &[&Admin::ReleasePort(self.id).encode()]);
            let _ = tag;
        }
    }
}
