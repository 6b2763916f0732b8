//! [`Buffer`]: memory a device can register.

use core::fmt;

use wv_softhca::DmaBuffer;

use crate::verbs::Sge;

/// A byte range outside the buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutOfBounds {
    /// First byte asked for.
    pub offset: usize,
    /// Bytes asked for.
    pub len: usize,
    /// The buffer's length.
    pub buffer_len: usize,
}

impl fmt::Display for OutOfBounds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "bytes {}..{}+{} are outside a buffer of {} bytes",
            self.offset, self.offset, self.len, self.buffer_len
        )
    }
}

impl std::error::Error for OutOfBounds {}

/// Zeroed, 8-byte-aligned memory at a fixed address that a device can register
/// ([`crate::verbs::Pd::reg_mr`]). Cloning shares the memory.
///
/// The device reads and writes it by DMA (RDMA writes from a peer land in it while the program
/// runs), so it never hands out `&[u8]` / `&mut [u8]` views: a Rust reference promises that
/// nobody else writes the bytes while it lives, which DMA would break. Access goes through
/// copies instead ([`Buffer::read`], [`Buffer::write`], [`Buffer::to_vec`], [`Buffer::byte`]),
/// which are safe to repeat while polling for a byte an RDMA write will change.
#[derive(Clone)]
pub struct Buffer {
    pub(crate) dma: DmaBuffer,
}

impl fmt::Debug for Buffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Buffer")
            .field("addr", &format_args!("{:#x}", self.addr()))
            .field("len", &self.len())
            .finish()
    }
}

impl Buffer {
    /// The address of the first byte (what MEMORY_REGISTER and SGEs name).
    pub fn addr(&self) -> u64 {
        self.dma.addr()
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.dma.len()
    }

    /// Whether the buffer has no bytes.
    pub fn is_empty(&self) -> bool {
        self.dma.is_empty()
    }

    fn oob(&self, offset: usize, len: usize) -> OutOfBounds {
        OutOfBounds {
            offset,
            len,
            buffer_len: self.len(),
        }
    }

    /// Copies `data` to `offset`.
    ///
    /// # Errors
    /// When the bytes do not fit.
    pub fn write(&self, offset: usize, data: &[u8]) -> Result<(), OutOfBounds> {
        self.dma
            .write(offset, data)
            .map_err(|_| self.oob(offset, data.len()))
    }

    /// Copies `out.len()` bytes at `offset` into `out`.
    ///
    /// # Errors
    /// When the bytes are not all inside the buffer.
    pub fn read(&self, offset: usize, out: &mut [u8]) -> Result<(), OutOfBounds> {
        self.dma
            .read(offset, out)
            .map_err(|_| self.oob(offset, out.len()))
    }

    /// The byte at `offset` (read afresh on every call: poll it for an RDMA write), or `None`
    /// outside the buffer.
    pub fn byte(&self, offset: usize) -> Option<u8> {
        let mut b = [0u8];
        self.read(offset, &mut b).ok().map(|()| b[0])
    }

    /// Sets every byte to `value`.
    pub fn fill(&self, value: u8) {
        // Chunked so a large buffer does not need a second buffer of its size.
        let chunk = [value; 4096];
        let mut off = 0;
        while off < self.len() {
            let n = chunk.len().min(self.len() - off);
            let _ = self.write(off, &chunk[..n]);
            off += n;
        }
    }

    /// A copy of the whole buffer.
    pub fn to_vec(&self) -> Vec<u8> {
        self.dma.to_vec()
    }

    /// An SGE over `len` bytes at `offset` with `lkey` (no bounds check: the device checks
    /// SGEs against the region, as hardware does).
    pub fn sge(&self, offset: usize, len: u32, lkey: u32) -> Sge {
        Sge {
            addr: self.addr().wrapping_add(offset as u64),
            length: len,
            lkey,
        }
    }
}
