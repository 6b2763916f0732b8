//! One client connection: one file handle on the hosted driver.
//!
//! The connection's thread reads frames and issues the IOCTLs itself, attached to the client
//! (`wv_softhca::dma::process::attach`), as the Windows driver runs the IOCTLs that pin memory
//! in the calling process's context: registrations pin that process's memory, and rings go
//! into the memory shared with it. A request the driver pends is answered "pending" at once
//! and waited for on a thread of its own, which sends its completion. A doorbell thread runs
//! the client's QPs when it rings.
//!
//! The connection ending (the client closed its handle, exited or was killed) is CloseHandle:
//! the client is marked gone (no transfer touches its memory again: its pid may be reused),
//! the handle is closed (the driver's cleanup destroys its objects; peers' QPs see what a
//! peer that vanished from the fabric looks like), the requests that were pending end and are
//! answered if the client still listens, the doorbell thread stops, and its reservations go.

use std::collections::HashMap;
use std::io::{self, Read};
use std::net::Shutdown;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use wv_abi::NtStatus;
use wv_client::service::os::{self, PeerCred};
use wv_client::service::proto::{
    self, Admin, AdminReply, CancelBody, CancelledBody, CompleteHead, Header, Hello, IoctlHead,
    Kind, Welcome,
};
use wv_softhca::PortLease;
use wv_softhca::dma::SharedMemory;
use wv_softhca::dma::process::{self, Client};
use zerocopy::{FromBytes, IntoBytes};

use crate::arena::{self, Arena};
use crate::host::{Host, HostIo};

/// Requests pending per connection, at most (each has a waiting thread).
const MAX_PENDING: usize = 1024;

/// Connections being served.
pub static CONNECTIONS: AtomicU64 = AtomicU64::new(0);
/// Threads waiting for pending requests, over every connection.
pub static WAITERS: AtomicU64 = AtomicU64::new(0);

/// What every connection shares: the host, the policy, the server's state.
pub struct Shared {
    /// The hosted machine.
    pub host: Host,
    /// Bytes of each connection's shared memory.
    pub shared_bytes: u64,
    /// How long the doorbell thread polls before it sleeps.
    pub spin: Duration,
    /// The service's own user: the machine's owner.
    pub owner_uid: u32,
    /// Set by an unload: the server stops.
    pub stopping: AtomicBool,
    /// Every live connection's pending requests, for [`flush_everywhere`].
    pub live: Mutex<Vec<std::sync::Weak<Requests>>>,
}

/// A connection's pending requests and where their answers go.
pub struct Requests {
    pending: Mutex<HashMap<u64, Arc<Parked>>>,
    out: Sender,
}

impl Requests {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Arc<Parked>>> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sends the completions of the pending requests that have ended, before the answer
    /// about to go: on Windows, requests a call completes (a cancel, a destroy, a removal)
    /// have their status when the call returns, so the client must see them first.
    fn flush_ended(&self) {
        let ended: Vec<(u64, Arc<Parked>)> = self
            .map()
            .iter()
            .filter(|(_, p)| p.io.is_complete())
            .map(|(t, p)| (*t, Arc::clone(p)))
            .collect();
        for (tag, p) in ended {
            if let Some(st) = p.io.try_result() {
                p.answer(tag, &st, &self.out);
            }
        }
    }
}

/// [`Requests::flush_ended`] on every connection: an admin action (a port event, a removal)
/// ends requests of other clients, which must be sent before the action's answer is.
fn flush_everywhere(shared: &Shared) {
    let live: Vec<Arc<Requests>> = {
        let mut l = shared.live.lock().unwrap_or_else(|e| e.into_inner());
        l.retain(|w| w.strong_count() > 0);
        l.iter().filter_map(std::sync::Weak::upgrade).collect()
    };
    for r in live {
        r.flush_ended();
    }
}

/// Sends frames on the connection (the connection thread and the waiters share it).
#[derive(Clone)]
struct Sender {
    sock: Arc<UnixStream>,
    lock: Arc<Mutex<()>>,
}

impl Sender {
    fn send(&self, bytes: &[u8]) {
        let _g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        // A client that has gone cannot be answered; its connection's end is handled by the
        // reading side.
        let _ = os::send(&self.sock, bytes, &[]);
    }

    fn error(&self, tag: u64, errno: i32, reason: &str) {
        self.send(&proto::error_frame(tag, errno, reason));
    }

    fn complete(&self, tag: u64, inline: bool, st: &wv_client::raw::IoStatus) {
        let head = CompleteHead {
            status: st.status,
            reserved: 0,
            information: st.information as u64,
        };
        let flags = if inline { proto::COMPLETE_INLINE } else { 0 };
        self.send(&proto::frame(
            Kind::Complete,
            flags,
            tag,
            &[head.as_bytes(), &st.output],
        ));
    }
}

/// Reads one frame: `Ok(None)` at the end of the stream, `Err` for one that cannot be
/// followed (its error has been sent).
fn read_frame(sock: &mut UnixStream, out: &Sender) -> io::Result<Option<(Header, Vec<u8>)>> {
    let mut head = [0u8; proto::HEADER_BYTES];
    match sock.read_exact(&mut head) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let (h, _) = Header::read_from_prefix(&head).map_err(|_| io::ErrorKind::InvalidData)?;
    if h.len > proto::MAX_FRAME {
        out.error(h.tag, E2BIG, "frame larger than the service takes");
        return Err(io::ErrorKind::InvalidData.into());
    }
    let mut payload = vec![0u8; h.len as usize];
    match sock.read_exact(&mut payload) {
        Ok(()) => Ok(Some((h, payload))),
        // A truncated frame at the end of the stream: the client went mid-frame.
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Ok(None),
        Err(e) => Err(e),
    }
}

use libc::{E2BIG, EBUSY, EPERM, EPROTO};

/// Serves one accepted connection until it ends.
pub fn serve(mut sock: UnixStream, cred: PeerCred, shared: &Arc<Shared>) {
    CONNECTIONS.fetch_add(1, Ordering::Relaxed);
    let out = Sender {
        sock: Arc::new(match sock.try_clone() {
            Ok(s) => s,
            Err(_) => {
                CONNECTIONS.fetch_sub(1, Ordering::Relaxed);
                return;
            }
        }),
        lock: Arc::new(Mutex::new(())),
    };
    if let Err(e) = session(&mut sock, cred, shared, &out) {
        eprintln!("wvd: connection of pid {}: {e}", cred.pid);
    }
    let _ = sock.shutdown(Shutdown::Both);
    CONNECTIONS.fetch_sub(1, Ordering::Relaxed);
}

/// The handshake, then the frames until the end.
fn session(
    sock: &mut UnixStream,
    cred: PeerCred,
    shared: &Arc<Shared>,
    out: &Sender,
) -> io::Result<()> {
    // A client has a few seconds to say hello; after that, it may stay silent for ever.
    sock.set_read_timeout(Some(Duration::from_secs(5)))?;
    let Some((h, payload)) = read_frame(sock, out)? else {
        return Ok(());
    };
    sock.set_read_timeout(None)?;
    let hello = match (Kind::from_u16(h.kind), Hello::read_from_prefix(&payload)) {
        (Some(Kind::Hello), Ok((hello, _))) if hello.magic == proto::HELLO_MAGIC => hello,
        _ => {
            out.error(h.tag, EPROTO, "expected a hello");
            return Ok(());
        }
    };
    if hello.version != proto::VERSION {
        out.error(
            h.tag,
            EPROTO,
            &format!(
                "protocol version {} not spoken (this service speaks {})",
                hello.version,
                proto::VERSION
            ),
        );
        return Ok(());
    }
    if shared.stopping.load(Ordering::Acquire) {
        out.error(h.tag, EBUSY, "the service is stopping");
        return Ok(());
    }
    let arena = Arena::new(shared.shared_bytes)?;
    let welcome = Welcome {
        version: proto::VERSION,
        service_pid: std::process::id(),
        shared_bytes: arena.bytes(),
        doorbell: 0,
    };
    os::send(
        sock,
        &proto::frame(Kind::Hello, 0, h.tag, &[welcome.as_bytes()]),
        &[arena.fd()],
    )?;
    // The client, as the kernel identified it: never a pid it sent.
    let client = Client::new(cred.pid, Some(Arc::clone(&arena) as Arc<dyn SharedMemory>));
    let _attached = process::attach(&client);
    let file = match shared.host.open() {
        Ok(f) => f,
        Err(st) => {
            out.error(0, EBUSY, &format!("the driver refused the handle: {st}"));
            return Ok(());
        }
    };
    let stop = Arc::new(AtomicBool::new(false));
    let bell = spawn_doorbell(&arena, &stop, shared.spin)?;
    let requests = Arc::new(Requests {
        pending: Mutex::new(HashMap::new()),
        out: out.clone(),
    });
    shared
        .live
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(Arc::downgrade(&requests));
    let mut conn = Connection {
        arena: Arc::clone(&arena),
        file: Some(file),
        requests,
        waiters: Vec::new(),
        leases: HashMap::new(),
        next_lease: 1,
        out: out.clone(),
        cred,
        shared: Arc::clone(shared),
    };
    let ended = conn.frames(sock);
    // CloseHandle.
    client.set_gone();
    conn.close();
    stop.store(true, Ordering::Release);
    arena::seq(&arena).fetch_add(1, Ordering::SeqCst);
    os::futex_wake(arena::seq(&arena), 1);
    let _ = bell.join();
    ended
}

/// The doorbell thread: runs the client's rung QPs, polls a while after work, then sleeps on
/// the doorbell page's futex word until the client rings again.
fn spawn_doorbell(
    arena: &Arc<Arena>,
    stop: &Arc<AtomicBool>,
    spin: Duration,
) -> io::Result<JoinHandle<()>> {
    let (arena, stop) = (Arc::clone(arena), Arc::clone(stop));
    std::thread::Builder::new()
        .name("wvd-doorbell".into())
        .stack_size(512 * 1024)
        .spawn(move || {
            let (seq, sleeping) = (arena::seq(&arena), arena::sleeping(&arena));
            let mut last_work = Instant::now();
            while !stop.load(Ordering::Acquire) {
                let s = seq.load(Ordering::Acquire);
                if arena.run_doorbells() {
                    last_work = Instant::now();
                }
                // Poll for the next ring a while (a client in a request/response loop rings
                // again soon), giving the processor away between looks.
                while seq.load(Ordering::Acquire) == s && last_work.elapsed() < spin {
                    std::thread::yield_now();
                }
                if seq.load(Ordering::Acquire) != s {
                    continue;
                }
                sleeping.store(1, Ordering::SeqCst);
                if seq.load(Ordering::SeqCst) == s && !stop.load(Ordering::Acquire) {
                    os::futex_wait(seq, s, Some(Duration::from_millis(500)));
                }
                sleeping.store(0, Ordering::SeqCst);
            }
        })
}

/// Waits for a pending request to end.
fn wait(io: &HostIo) -> wv_client::raw::IoStatus {
    loop {
        if let Some(st) = io.wait_timeout(Duration::from_secs(60)) {
            return st;
        }
    }
}

/// A connection's handle and what hangs on it.
struct Connection {
    /// Its shared memory (the doorbells its QPs ring).
    arena: Arc<Arena>,
    file: Option<crate::host::HostFile>,
    /// Pending requests by tag, shared with their waiting threads.
    requests: Arc<Requests>,
    waiters: Vec<JoinHandle<()>>,
    leases: HashMap<u64, PortLease>,
    next_lease: u64,
    out: Sender,
    cred: PeerCred,
    shared: Arc<Shared>,
}

/// A request the driver pended, and whether its completion was sent.
struct Parked {
    io: HostIo,
    /// Held while the completion is sent: whoever finds it already taken waits until the frame
    /// is on the socket, so an answer sent after a flush never overtakes the completion.
    answered: Mutex<bool>,
}

impl Parked {
    /// Sends the completion, once, whoever gets here first (its waiter, or the connection
    /// thread flushing what ended before an inline answer). Returns only once it has been
    /// sent, by this caller or the other.
    fn answer(&self, tag: u64, st: &wv_client::raw::IoStatus, out: &Sender) {
        let mut answered = self.answered.lock().unwrap_or_else(|e| e.into_inner());
        if !*answered {
            out.complete(tag, false, st);
            *answered = true;
        }
    }
}

impl Connection {
    fn pending(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Arc<Parked>>> {
        self.requests.map()
    }

    fn flush_ended(&self) {
        self.requests.flush_ended();
    }

    /// Serves frames until the stream ends.
    fn frames(&mut self, sock: &mut UnixStream) -> io::Result<()> {
        loop {
            let Some((h, payload)) = read_frame(sock, &self.out)? else {
                return Ok(());
            };
            self.waiters.retain(|w| !w.is_finished());
            match Kind::from_u16(h.kind) {
                Some(Kind::Ioctl) => self.ioctl(h.tag, &payload),
                Some(Kind::Cancel) => self.cancel(h.tag, &payload),
                Some(Kind::Admin) => self.admin(h.tag, &payload),
                Some(Kind::Sync) => {
                    self.flush_ended();
                    self.out.send(&proto::frame(Kind::Synced, 0, h.tag, &[]));
                }
                _ => self.out.error(
                    h.tag,
                    EPROTO,
                    &format!("unexpected frame kind {:#x}", h.kind),
                ),
            }
        }
    }

    fn ioctl(&mut self, tag: u64, payload: &[u8]) {
        let Ok((head, input)) = IoctlHead::read_from_prefix(payload) else {
            self.out
                .error(tag, EPROTO, "IOCTL frame shorter than its head");
            return;
        };
        if head.output_len > proto::MAX_IOCTL_BYTES || input.len() > proto::MAX_IOCTL_BYTES as usize
        {
            self.out
                .error(tag, EPROTO, "IOCTL buffers larger than the service takes");
            return;
        }
        if self.pending().contains_key(&tag) {
            self.out
                .error(tag, EPROTO, "a request with this tag is pending");
            return;
        }
        let Some(file) = &self.file else {
            return;
        };
        if self.pending().len() >= MAX_PENDING {
            let st = wv_client::raw::IoStatus {
                status: NtStatus::INSUFFICIENT_RESOURCES.0,
                information: 0,
                output: Vec::new(),
            };
            self.out.complete(tag, true, &st);
            return;
        }
        // Work the client posted before this request is run before it, as in process (where a
        // post runs the device in the poster's thread): a CQ_RESIZE after sends sees their
        // completions, a QP_MODIFY follows the requests posted before it.
        self.arena.run_doorbells();
        let io = file.device_io_control(head.code, input, head.output_len as usize);
        if !io.pending() {
            let st = io.wait();
            self.flush_ended();
            self.out.complete(tag, true, &st);
            return;
        }
        self.out.send(&proto::frame(Kind::Pending, 0, tag, &[]));
        let parked = Arc::new(Parked {
            io,
            answered: Mutex::new(false),
        });
        self.pending().insert(tag, Arc::clone(&parked));
        let requests = Arc::clone(&self.requests);
        WAITERS.fetch_add(1, Ordering::Relaxed);
        let waiter = std::thread::Builder::new()
            .name("wvd-pending".into())
            .stack_size(64 * 1024)
            .spawn(move || {
                let st = wait(&parked.io);
                // Answered before it leaves the map: a flush on the connection thread (before
                // the answer of the call that ended this request) still finds it, and waits
                // for this frame if it is being sent.
                parked.answer(tag, &st, &requests.out);
                requests.map().remove(&tag);
                WAITERS.fetch_sub(1, Ordering::Relaxed);
            });
        match waiter {
            Ok(w) => self.waiters.push(w),
            Err(_) => {
                // No thread for it: it is waited for here, holding the connection up, rather
                // than left unanswered.
                WAITERS.fetch_sub(1, Ordering::Relaxed);
                if let Some(p) = self.pending().remove(&tag) {
                    let st = wait(&p.io);
                    p.answer(tag, &st, &self.out);
                }
            }
        }
    }

    fn cancel(&mut self, tag: u64, payload: &[u8]) {
        let Ok((body, _)) = CancelBody::read_from_prefix(payload) else {
            self.out.error(tag, EPROTO, "cancel frame too short");
            return;
        };
        let parked = self.pending().get(&body.target).cloned();
        let found = match (&self.file, parked) {
            (Some(f), Some(p)) => f.cancel_io_ex(&p.io),
            _ => false,
        };
        self.flush_ended();
        let reply = CancelledBody {
            found: u32::from(found),
            reserved: 0,
        };
        self.out
            .send(&proto::frame(Kind::Cancelled, 0, tag, &[reply.as_bytes()]));
    }

    fn admin(&mut self, tag: u64, payload: &[u8]) {
        let Some(a) = Admin::decode(payload) else {
            self.out.error(tag, EPROTO, "malformed admin request");
            return;
        };
        if a.owner_only() && self.cred.uid != self.shared.owner_uid {
            self.out.error(
                tag,
                EPERM,
                "only the service's own user may change the machine",
            );
            return;
        }
        let reply = match a {
            Admin::ReservePort(ip, port) => match self.shared.host.reserve_port(ip, port) {
                Ok(lease) => {
                    let id = self.next_lease;
                    self.next_lease += 1;
                    let port = lease.port();
                    self.leases.insert(id, lease);
                    AdminReply::Lease { id, port }
                }
                Err(r) => r,
            },
            Admin::ReleasePort(id) => match self.leases.remove(&id) {
                Some(_) => AdminReply::Ok,
                None => AdminReply::None,
            },
            Admin::Stats => AdminReply::Counts(crate::server::stats(&self.shared)),
            Admin::Unload => {
                // Every other handle first (an unload with handles open reports them).
                self.close();
                crate::server::wait_for_other_connections(Duration::from_secs(10));
                self.shared.stopping.store(true, Ordering::Release);
                AdminReply::Lines(self.shared.host.unload())
            }
            other => self.shared.host.admin(&other),
        };
        // What the action ended (a port event's notifies, a removal's requests, on any
        // connection) first.
        flush_everywhere(&self.shared);
        self.out
            .send(&proto::frame(Kind::AdminReply, 0, tag, &[&reply.encode()]));
    }

    /// CloseHandle, then the requests that were pending end (their waiters answer them).
    fn close(&mut self) {
        drop(self.file.take());
        for w in self.waiters.drain(..) {
            let _ = w.join();
        }
        self.leases.clear();
    }
}
