//! What a fault inside or because of the image says before the process ends: a handler for
//! SIGSEGV, SIGBUS, SIGILL and SIGFPE that writes one line — the signal, the address accessed,
//! the instruction, and where both are relative to the mapped image (`winverbs.sys+0x…`, the
//! image's RVA, which the linker's map names), with a hint when the address is one of the image
//! at its link-time base (a pointer that missed its relocation) — then hands the signal back to
//! the handler before it (Rust's stack-overflow report, or the default action), so the process
//! still dies of the signal and its parent sees that.
//!
//! The handler only reads atomics and formats into a stack buffer before `write(2)`: nothing
//! that is not async-signal-safe.

use std::mem::MaybeUninit;
use std::sync::Once;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use crate::LoadedImage;

static BASE: AtomicUsize = AtomicUsize::new(0);
static SIZE: AtomicUsize = AtomicUsize::new(0);
static PREFERRED: AtomicU64 = AtomicU64::new(0);
const SIGNALS: [libc::c_int; 4] = [libc::SIGSEGV, libc::SIGBUS, libc::SIGILL, libc::SIGFPE];
static INSTALL: Once = Once::new();
/// The actions in place before ours, one per signal of [`SIGNALS`]; written once in `install`
/// before the handler can run, read only by it.
static mut PREVIOUS: [MaybeUninit<libc::sigaction>; 4] = [const { MaybeUninit::zeroed() }; 4];

/// Makes the handler name `image` (the last image mapped) and installs it once.
pub(crate) fn register(image: &LoadedImage) {
    PREFERRED.store(image.preferred_base(), Ordering::SeqCst);
    SIZE.store(image.size(), Ordering::SeqCst);
    BASE.store(image.base(), Ordering::SeqCst);
    INSTALL.call_once(install);
}

/// Forgets the image mapped at `base`.
pub(crate) fn unregister(base: usize) {
    let _ = BASE.compare_exchange(base, 0, Ordering::SeqCst, Ordering::SeqCst);
}

fn install() {
    for (i, &signal) in SIGNALS.iter().enumerate() {
        // SAFETY: all-zero is a valid `sigaction` (no handler, empty mask), filled in below.
        let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
        action.sa_sigaction = on_fault as *const () as usize;
        action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
        // SAFETY: `PREVIOUS[i]` is written here only, before the handler is installed for
        // this signal; the handler reads it after.
        let previous = unsafe { (&raw mut PREVIOUS[i]).cast::<libc::sigaction>() };
        // SAFETY: a valid action and a writable slot for the old one.
        unsafe { libc::sigaction(signal, &action, previous) };
    }
}

/// A fixed buffer that text and hex numbers are appended to without allocating.
struct Line {
    bytes: [u8; 512],
    len: usize,
}

impl Line {
    fn text(&mut self, s: &str) {
        for &b in s.as_bytes() {
            if self.len < self.bytes.len() {
                self.bytes[self.len] = b;
                self.len += 1;
            }
        }
    }

    fn hex(&mut self, mut value: u64) {
        let mut digits = [0u8; 16];
        let mut n = 0;
        loop {
            digits[n] = b"0123456789abcdef"[(value & 0xF) as usize];
            n += 1;
            value >>= 4;
            if value == 0 {
                break;
            }
        }
        self.text("0x");
        for i in (0..n).rev() {
            let d = [digits[i]];
            self.text(std::str::from_utf8(&d).unwrap_or("?"));
        }
    }

    /// Where `address` is relative to the image.
    fn place(&mut self, address: u64, base: u64, size: u64, preferred: u64) {
        self.hex(address);
        if base != 0 && address >= base && address < base + size {
            self.text(" (winverbs.sys+");
            self.hex(address - base);
            self.text(")");
        } else if preferred != 0 && address >= preferred && address < preferred + size {
            self.text(" (the image's address ");
            self.hex(address - preferred);
            self.text(" at its link-time base ");
            self.hex(preferred);
            self.text(", not where it is mapped: a pointer that missed its relocation)");
        } else {
            self.text(" (outside the image)");
        }
    }
}

extern "C" fn on_fault(
    signal: libc::c_int,
    info: *mut libc::siginfo_t,
    context: *mut libc::c_void,
) {
    let base = BASE.load(Ordering::SeqCst) as u64;
    let size = SIZE.load(Ordering::SeqCst) as u64;
    let preferred = PREFERRED.load(Ordering::SeqCst);
    let mut line = Line {
        bytes: [0; 512],
        len: 0,
    };
    line.text("sys-loader: ");
    line.text(match signal {
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGBUS => "SIGBUS",
        libc::SIGILL => "SIGILL",
        _ => "SIGFPE",
    });
    // SAFETY: the kernel's siginfo for this signal.
    let address = unsafe { info.as_ref() }.map_or(0, |i| {
        // SAFETY: the faulting address field of a fault signal's siginfo.
        unsafe { i.si_addr() as u64 }
    });
    line.text(" accessing ");
    line.place(address, base, size, preferred);
    // SAFETY: the kernel's context for this signal (an x86-64 `ucontext_t`).
    let rip = unsafe { context.cast::<libc::ucontext_t>().as_ref() }
        .map_or(0, |c| c.uc_mcontext.gregs[libc::REG_RIP as usize] as u64);
    line.text(" at instruction ");
    line.place(rip, base, size, preferred);
    line.text("\n");
    // SAFETY: writing our own buffer to stderr (async-signal-safe).
    unsafe { libc::write(2, line.bytes.as_ptr().cast(), line.len) };
    let index = SIGNALS.iter().position(|&s| s == signal).unwrap_or(0);
    // SAFETY: `PREVIOUS[index]` was written in `install` before this handler was; the previous
    // action is restored, and returning re-executes the faulting instruction under it.
    let previous = unsafe { (&raw const PREVIOUS[index]).cast::<libc::sigaction>() };
    // SAFETY: a valid action read from the slot above.
    unsafe { libc::sigaction(signal, previous, std::ptr::null_mut()) };
}
