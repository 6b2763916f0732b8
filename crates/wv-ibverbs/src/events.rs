//! Event queues behind a pollable file descriptor: the completion channels' and the contexts'
//! async events. The descriptor is an `eventfd` in semaphore mode, one count per queued event,
//! so `poll`/`select`/`epoll` on it work, a blocking read waits for the next event, and
//! `O_NONBLOCK` set by the application (`fcntl`) makes the read answer `EAGAIN`, as rdma-core's
//! uverbs descriptors do.

use std::collections::VecDeque;
use std::sync::Mutex;

/// A queue of events of type `T`, signalled through [`EventQueue::fd`].
pub struct EventQueue<T> {
    items: Mutex<VecDeque<T>>,
    fd: i32,
}

impl<T> EventQueue<T> {
    /// A new empty queue with its descriptor.
    ///
    /// # Errors
    /// The errno of `eventfd`.
    pub fn new() -> Result<Self, i32> {
        let fd = sys::new_fd()?;
        Ok(EventQueue {
            items: Mutex::new(VecDeque::new()),
            fd,
        })
    }

    /// The descriptor applications poll.
    pub fn fd(&self) -> i32 {
        self.fd
    }

    /// Queues an event and signals the descriptor.
    pub fn push(&self, item: T) {
        self.items
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push_back(item);
        sys::signal(self.fd);
    }

    /// Takes the next event: waits on the descriptor (blocking unless it is `O_NONBLOCK`).
    ///
    /// # Errors
    /// The errno of the read (`EAGAIN` on a non-blocking descriptor with nothing queued).
    pub fn pop(&self) -> Result<T, i32> {
        loop {
            sys::wait(self.fd)?;
            if let Some(item) = self
                .items
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .pop_front()
            {
                return Ok(item);
            }
        }
    }

    /// Drops queued events for which `keep` is false, taking their counts off the descriptor.
    pub fn retain(&self, mut keep: impl FnMut(&T) -> bool) {
        let mut items = self.items.lock().unwrap_or_else(|e| e.into_inner());
        let before = items.len();
        items.retain(|i| keep(i));
        for _ in items.len()..before {
            let _ = sys::try_take(self.fd);
        }
    }
}

impl<T> Drop for EventQueue<T> {
    fn drop(&mut self) {
        sys::close(self.fd);
    }
}

#[cfg(unix)]
mod sys {
    pub fn new_fd() -> Result<i32, i32> {
        // SAFETY: eventfd takes no pointers.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_SEMAPHORE) };
        if fd < 0 {
            Err(crate::errno::get())
        } else {
            Ok(fd)
        }
    }

    pub fn signal(fd: i32) {
        let one: u64 = 1;
        // SAFETY: writes the 8 bytes of `one`, a live local.
        let _ = unsafe { libc::write(fd, (&raw const one).cast(), 8) };
    }

    pub fn wait(fd: i32) -> Result<(), i32> {
        let mut v: u64 = 0;
        loop {
            // SAFETY: reads 8 bytes into `v`, a live local.
            let n = unsafe { libc::read(fd, (&raw mut v).cast(), 8) };
            if n == 8 {
                return Ok(());
            }
            let e = crate::errno::get();
            if e != libc::EINTR {
                return Err(e);
            }
        }
    }

    pub fn try_take(fd: i32) -> Result<(), i32> {
        let mut p = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: polls the one pollfd above.
        let ready = unsafe { libc::poll(&mut p, 1, 0) };
        if ready == 1 {
            wait(fd)
        } else {
            Err(libc::EAGAIN)
        }
    }

    pub fn close(fd: i32) {
        // SAFETY: the descriptor is the queue's own.
        unsafe { libc::close(fd) };
    }
}

#[cfg(not(unix))]
mod sys {
    //! Windows builds have no eventfd: the descriptor is -1 and reads never block (the
    //! Windows transport's completion port would take this role; not built yet).
    pub fn new_fd() -> Result<i32, i32> {
        Ok(-1)
    }
    pub fn signal(_fd: i32) {}
    pub fn wait(_fd: i32) -> Result<(), i32> {
        Ok(())
    }
    pub fn try_take(_fd: i32) -> Result<(), i32> {
        Ok(())
    }
    pub fn close(_fd: i32) {}
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn events_come_out_in_order_and_a_nonblocking_empty_queue_says_eagain() {
        let q = EventQueue::new().unwrap();
        q.push(1);
        q.push(2);
        assert_eq!(q.pop(), Ok(1));
        assert_eq!(q.pop(), Ok(2));
        // SAFETY: fcntl on the queue's own descriptor.
        let fl = unsafe { libc::fcntl(q.fd(), libc::F_GETFL) };
        // SAFETY: as above.
        unsafe { libc::fcntl(q.fd(), libc::F_SETFL, fl | libc::O_NONBLOCK) };
        assert_eq!(q.pop(), Err(libc::EAGAIN));
        q.push(3);
        q.retain(|&x| x != 3);
        assert_eq!(q.pop(), Err(libc::EAGAIN));
    }
}
