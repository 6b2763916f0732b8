//! The operating system calls the service transport and the service make: frames with file
//! descriptors over a Unix socket, the peer's credentials, sealed memfds and their shared
//! mappings, futexes on shared memory. The transport's only `unsafe` code, each block one call
//! with its argument.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::sync::atomic::AtomicU32;
use std::time::Duration;

use wv_softhca::dma::{BlockOwner, SharedBlock};

/// The last OS error as an `io::Error` when `r` is negative.
fn check(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// Sends all of `bytes` on `sock`, with `fds` as `SCM_RIGHTS` on the first piece; never raises
/// SIGPIPE (a peer that has gone is an `EPIPE` error).
///
/// # Errors
/// The socket's error.
pub fn send(sock: &UnixStream, bytes: &[u8], fds: &[RawFd]) -> io::Result<()> {
    let mut sent = 0usize;
    let mut fds = fds;
    while sent < bytes.len() || !fds.is_empty() {
        let rest = &bytes[sent..];
        let mut iov = libc::iovec {
            iov_base: rest.as_ptr().cast_mut().cast(),
            iov_len: rest.len(),
        };
        // Room for up to four descriptors' control message.
        let mut control = [0u64; 8];
        // SAFETY: an all-zero msghdr is its documented empty value.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        if !fds.is_empty() {
            let n = fds.len().min(4);
            let data = (n * size_of::<RawFd>()) as u32;
            // SAFETY: CMSG_SPACE is arithmetic on its argument.
            let space = unsafe { libc::CMSG_SPACE(data) } as usize;
            msg.msg_control = control.as_mut_ptr().cast();
            msg.msg_controllen = space;
            // SAFETY: `msg` points at `control`, which has room for `space` bytes (≤ 64).
            let cmsg = unsafe { libc::CMSG_FIRSTHDR(&msg) };
            if cmsg.is_null() {
                return Err(io::Error::from(io::ErrorKind::InvalidInput));
            }
            let header = libc::cmsghdr {
                cmsg_len: {
                    // SAFETY: CMSG_LEN is arithmetic on its argument.
                    unsafe { libc::CMSG_LEN(data) as usize }
                },
                cmsg_level: libc::SOL_SOCKET,
                cmsg_type: libc::SCM_RIGHTS,
            };
            // SAFETY: `cmsg` is the first header inside `control` (checked non-null above),
            // valid for a `cmsghdr` write; unaligned-safe since `control` is u64-aligned.
            unsafe { cmsg.write(header) };
            // SAFETY: CMSG_DATA of a header inside `control` points `space - len` bytes of
            // room, enough for `n` descriptors.
            let dst = unsafe { libc::CMSG_DATA(cmsg) }.cast::<RawFd>();
            for (i, fd) in fds[..n].iter().enumerate() {
                let at = dst.wrapping_add(i);
                // SAFETY: within the `n` descriptors' room computed above.
                unsafe { at.write_unaligned(*fd) };
            }
            fds = &fds[n..];
        }
        // SAFETY: `msg` names `iov` (valid for `rest.len()` bytes of `bytes`) and `control`,
        // both alive across the call.
        let n = unsafe { libc::sendmsg(sock.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        sent += n as usize;
    }
    Ok(())
}

/// Receives up to `buf.len()` bytes and at most one descriptor passed with them.
///
/// # Errors
/// The socket's error.
pub fn recv_with_fd(sock: &UnixStream, buf: &mut [u8]) -> io::Result<(usize, Option<OwnedFd>)> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let mut control = [0u64; 8];
    // SAFETY: an all-zero msghdr is its documented empty value.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = size_of_val(&control);
    let n = loop {
        // SAFETY: `msg` names `iov` (valid for writes of `buf.len()` bytes) and `control`,
        // alive across the call; CMSG_CLOEXEC marks received descriptors close-on-exec.
        let n = unsafe { libc::recvmsg(sock.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
        if n >= 0 {
            break n as usize;
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    };
    let mut fd = None;
    // SAFETY: `msg` was filled by recvmsg; its control buffer is `control`.
    let mut cmsg = unsafe { libc::CMSG_FIRSTHDR(&msg) };
    while !cmsg.is_null() {
        // SAFETY: a header the kernel wrote inside `control`; read unaligned-safely.
        let h = unsafe { cmsg.read_unaligned() };
        if h.cmsg_level == libc::SOL_SOCKET && h.cmsg_type == libc::SCM_RIGHTS {
            // SAFETY: CMSG_DATA of that header.
            let data = unsafe { libc::CMSG_DATA(cmsg) }.cast::<RawFd>();
            // SAFETY: CMSG_LEN is arithmetic on its argument.
            let base = unsafe { libc::CMSG_LEN(0) } as usize;
            let count = h.cmsg_len.saturating_sub(base) / size_of::<RawFd>();
            for i in 0..count {
                let at = data.wrapping_add(i);
                // SAFETY: within the descriptors the header says it carries.
                let raw = unsafe { at.read_unaligned() };
                // SAFETY: the kernel installed `raw` in this process for us; we own it now.
                let owned = unsafe { OwnedFd::from_raw_fd(raw) };
                if fd.is_none() {
                    fd = Some(owned);
                }
                // Any further descriptor is closed by dropping it.
            }
        }
        // SAFETY: the next header after `cmsg` within `msg`'s control buffer, or null.
        cmsg = unsafe { libc::CMSG_NXTHDR(&msg, cmsg) };
    }
    Ok((n, fd))
}

/// The peer's credentials, as the kernel recorded them when it connected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerCred {
    /// Process id.
    pub pid: i32,
    /// User id.
    pub uid: u32,
    /// Group id.
    pub gid: u32,
}

/// `SO_PEERCRED` of a connected Unix socket.
///
/// # Errors
/// The socket's error.
pub fn peer_cred(sock: &UnixStream) -> io::Result<PeerCred> {
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `cred` and `len` are valid for writes of the sizes passed.
    check(unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&raw mut cred).cast(),
            &mut len,
        )
    })?;
    Ok(PeerCred {
        pid: cred.pid,
        uid: cred.uid,
        gid: cred.gid,
    })
}

/// The effective user id of this process.
pub fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// A new memfd of `bytes` bytes (zero-filled, sparse) sealed so that it can neither shrink nor
/// grow: a client it is given to cannot truncate it under the service's mapping (which would
/// make the service's accesses fault).
///
/// # Errors
/// The system's error.
pub fn sealed_memfd(name: &str, bytes: u64) -> io::Result<OwnedFd> {
    let name = std::ffi::CString::new(name).map_err(|_| io::ErrorKind::InvalidInput)?;
    // SAFETY: `name` is a NUL-terminated string alive across the call.
    let fd = check(unsafe {
        libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING)
    })?;
    // SAFETY: memfd_create returned a new descriptor this process owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let len = libc::off_t::try_from(bytes).map_err(|_| io::ErrorKind::InvalidInput)?;
    // SAFETY: plain call on the descriptor just made.
    check(unsafe { libc::ftruncate(fd.as_raw_fd(), len) })?;
    let seals = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL;
    // SAFETY: plain call on the descriptor just made.
    check(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_ADD_SEALS, seals) })?;
    Ok(fd)
}

/// Whether `fd` is sealed against shrinking (what a mapping of it must rely on).
pub fn cannot_shrink(fd: &OwnedFd) -> bool {
    // SAFETY: plain call on a descriptor we own.
    let seals = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GET_SEALS) };
    seals >= 0 && seals & libc::F_SEAL_SHRINK != 0
}

/// Gives the pages of `[offset, offset + len)` of `fd` back (they read as zero afterwards).
///
/// # Errors
/// The system's error.
pub fn punch_hole(fd: &OwnedFd, offset: u64, len: u64) -> io::Result<()> {
    let (off, len) = (
        libc::off_t::try_from(offset).map_err(|_| io::ErrorKind::InvalidInput)?,
        libc::off_t::try_from(len).map_err(|_| io::ErrorKind::InvalidInput)?,
    );
    // SAFETY: plain call on a descriptor we own.
    check(unsafe {
        libc::fallocate(
            fd.as_raw_fd(),
            libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
            off,
            len,
        )
    })?;
    Ok(())
}

/// A shared read-write mapping of a whole file that cannot shrink.
///
/// # Invariants
/// `base` is the start of a live mapping of `len` bytes, `MAP_SHARED`, readable and writable,
/// unmapped only by `Drop`; the file it maps was sealed against shrinking when it was mapped.
#[derive(Debug)]
pub struct Mapping {
    base: *mut u8,
    len: usize,
}

// SAFETY: the mapping is process memory reached only through atomic views (`block`); any
// thread may use them and unmap it (once, in Drop).
unsafe impl Send for Mapping {}
// SAFETY: see `Send`.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Maps all `len` bytes of `fd`, which must be sealed against shrinking.
    ///
    /// # Errors
    /// `InvalidInput` for a file that could shrink under the mapping; the system's error.
    pub fn new(fd: &OwnedFd, len: usize) -> io::Result<Mapping> {
        if !cannot_shrink(fd) || len == 0 {
            return Err(io::ErrorKind::InvalidInput.into());
        }
        // SAFETY: a new shared mapping chosen by the kernel; no existing memory is affected.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        // INVARIANT: a live shared mapping of `len` bytes of a file that cannot shrink.
        Ok(Mapping {
            base: p.cast(),
            len,
        })
    }

    /// Bytes mapped.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing is mapped (never: a mapping has at least one byte).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The `len` bytes at `offset` as a shared block whose device address is `offset`, kept
    /// alive by `keep` (which holds this mapping); `None` outside the mapping or misaligned.
    pub fn block(
        self: &Arc<Self>,
        offset: u64,
        len: u64,
        keep: Arc<dyn BlockOwner>,
    ) -> Option<SharedBlock> {
        let end = offset.checked_add(len)?;
        if end > self.len as u64 || !offset.is_multiple_of(64) || !len.is_multiple_of(8) {
            return None;
        }
        let base = self.base.wrapping_add(offset as usize);
        // SAFETY: `[base, base + len)` lies inside the live mapping (checked above), which is
        // shared, readable and writable, 64-byte aligned at `offset` (the mapping is page
        // aligned), and stays mapped while `keep` — which holds this mapping's `Arc` — lives;
        // the file cannot shrink (type invariant). Within this process the service and the
        // transport reach it only through the block's views, one kind per block.
        Some(unsafe { SharedBlock::new(base, len as usize, offset, keep) })
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: the type invariant: a live mapping, unmapped once, here; every block of it
        // held an `Arc` of it, so none is left.
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}

/// `FUTEX_WAIT` (shared, not private: the word is in memory shared between processes) while
/// `word` holds `expected`, at most `timeout`. Returns on a wake, a timeout, a signal, or at
/// once if the word differs.
pub fn futex_wait(word: &AtomicU32, expected: u32, timeout: Option<Duration>) {
    let ts = timeout.map(|t| libc::timespec {
        tv_sec: t.as_secs().min(i64::MAX as u64) as libc::time_t,
        tv_nsec: t.subsec_nanos() as libc::c_long,
    });
    let ts_ptr = ts.as_ref().map_or(std::ptr::null(), std::ptr::from_ref);
    // SAFETY: the futex word is a live, aligned 32-bit atomic; the timeout, if any, lives
    // across the call. The kernel only reads both.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT,
            expected,
            ts_ptr,
        )
    };
}

/// `FUTEX_WAKE` (shared) of up to `n` waiters on `word`.
pub fn futex_wake(word: &AtomicU32, n: i32) {
    // SAFETY: the futex word is a live, aligned 32-bit atomic; the kernel does not access it
    // for a wake beyond hashing its address.
    unsafe { libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE, n) };
}
