//! Scatter/gather lists resolved against a side's regions, and the copies through them.

use arrayvec::ArrayVec;

use crate::device::Device;
use crate::dma::DmaRange;
use crate::mr::Want;
use crate::mr_cache::{MrCache, MrRef};
use crate::qp::{MAX_SGE, Qp};
use crate::wr::Sge;

/// A resolved piece of a scatter/gather list: its region as the side's cache lends it (or
/// owned, for a segment kept across packets).
#[derive(Debug)]
pub(crate) struct Seg<'a> {
    pub(super) mr: MrRef<'a>,
    pub(super) off: u64,
    pub(super) len: u64,
}

impl Seg<'_> {
    /// The same piece, owning its region (to keep it in a context between packets).
    pub(super) fn into_owned(self) -> Seg<'static> {
        Seg {
            mr: self.mr.into_owned(),
            off: self.off,
            len: self.len,
        }
    }
}

/// A resolved scatter/gather list (no allocation: at most [`MAX_SGE`] pieces). Making one
/// writes nothing but its length and dropping one visits only the pieces it holds: a request
/// has one or two SGEs, and the data path builds a list for every request.
#[derive(Debug)]
pub(crate) struct SegList<'a> {
    segs: ArrayVec<Seg<'a>, MAX_SGE>,
    pub(super) total: u64,
}

impl<'a> SegList<'a> {
    pub(super) const fn new() -> Self {
        SegList {
            segs: ArrayVec::new_const(),
            total: 0,
        }
    }
    fn push(&mut self, mr: MrRef<'a>, off: u64, len: u64) {
        if len == 0 || self.segs.is_full() {
            return;
        }
        self.segs.push(Seg { mr, off, len });
        self.total += len;
    }
    fn iter(&self) -> impl Iterator<Item = &Seg<'a>> {
        self.segs.iter()
    }
    /// The same list, owning its regions (to keep it in a context between packets).
    pub(super) fn into_owned(self) -> SegList<'static> {
        let mut owned = SegList::new();
        for seg in self.segs {
            let seg = seg.into_owned();
            owned.push(seg.mr, seg.off, seg.len);
        }
        owned
    }
}

/// Resolves SGEs against `dev`'s regions (through the side's cache `mrs`) for protection
/// domain `pd` into `list` (built in place: the list is large, and the data path moves nothing
/// it can avoid).
pub(super) fn resolve_into<'a>(
    list: &mut SegList<'a>,
    dev: &Device,
    mrs: &'a MrCache,
    pd: u32,
    sges: impl Iterator<Item = Sge>,
    want: Want,
) -> Result<(), ()> {
    for sge in sges {
        if sge.length == 0 {
            continue;
        }
        let mr = mrs.get(dev, sge.lkey).ok_or(())?;
        let off = mr.check(sge.lkey, pd, sge.addr, u64::from(sge.length), want)?;
        list.push(mr, off, u64::from(sge.length));
    }
    Ok(())
}

/// The buffers of a receive WQE of `qp` (its SGEs `sges`), resolved for the device to write.
pub(super) fn resolve_recv<'a>(
    dst: &mut SegList<'a>,
    dev: &Device,
    mrs: &'a MrCache,
    qp: &Qp,
    sges: impl Iterator<Item = Sge>,
) -> Result<(), ()> {
    resolve_into(dst, dev, mrs, qp.pd, sges, Want::LocalWrite)
}

/// Where a message's bytes come from.
pub(super) enum Src<'a> {
    Bytes(&'a [u8]),
    Segs(&'a SegList<'a>),
}

impl Src<'_> {
    pub(super) fn len(&self) -> u64 {
        match self {
            Src::Bytes(bytes) => bytes.len() as u64,
            Src::Segs(list) => list.total,
        }
    }
}

/// A write cursor over destination segments.
pub(super) struct Cursor<'s, 'a> {
    segs: &'s [Seg<'a>],
    /// The segment it writes to, and the offset in it.
    seg: usize,
    off: u64,
}

impl<'s, 'a> Cursor<'s, 'a> {
    /// A cursor at byte `pos` of `dst`.
    pub(super) fn at(dst: &'s SegList<'a>, pos: u64) -> Self {
        Self::over(&dst.segs, pos)
    }
    /// A cursor at byte `pos` of the segments `segs`.
    pub(super) fn over(segs: &'s [Seg<'a>], pos: u64) -> Self {
        let mut cursor = Cursor {
            segs,
            seg: 0,
            off: 0,
        };
        if pos == 0 {
            // A message's first burst: no walk (an empty first segment is stepped over by the
            // copies, as the walk below would have).
            return cursor;
        }
        let mut left = pos;
        for seg in segs {
            if left < seg.len {
                break;
            }
            left -= seg.len;
            cursor.seg += 1;
        }
        cursor.off = left;
        cursor
    }
    /// Copies `len` bytes, either from `bytes` or from `range` at its offset.
    #[inline]
    pub(super) fn put(
        &mut self,
        bytes: Option<&[u8]>,
        range: Option<(&DmaRange, u64)>,
        len: u64,
    ) -> Result<(), ()> {
        let mut done = 0u64;
        while done < len {
            let seg = self.segs.get(self.seg).ok_or(())?;
            let room = seg.len - self.off;
            if room == 0 {
                self.seg += 1;
                self.off = 0;
                continue;
            }
            let n = room.min(len - done);
            let at = seg.off + self.off;
            match (bytes, range) {
                (Some(bytes), _) => seg
                    .mr
                    .range
                    .write(at, &bytes[done as usize..(done + n) as usize]),
                (None, Some((src, src_off))) => {
                    DmaRange::copy(src, src_off + done, &seg.mr.range, at, n as usize)
                }
                (None, None) => return Err(()),
            }
            .map_err(|_| ())?;
            self.off += n;
            done += n;
        }
        Ok(())
    }
    /// Copies bytes `[from, from + len)` of `src`.
    #[inline]
    pub(super) fn put_src(&mut self, src: &Src<'_>, from: u64, len: u64) -> Result<(), ()> {
        match self.put_whole(src, from, len) {
            Some(done) => done,
            None => self.put_walk(src, from, len),
        }
    }
    /// [`Cursor::put_src`] of bytes that one source piece holds into one destination segment
    /// with room for them all (a small message, one SGE each side): one copy, none of the
    /// walk. `None` for anything else, which the walk copies; where both apply they copy the
    /// same bytes and fail alike.
    #[inline]
    fn put_whole(&mut self, src: &Src<'_>, from: u64, len: u64) -> Option<Result<(), ()>> {
        let [seg] = self.segs else {
            return None;
        };
        // `seg == 0` keeps `off` inside the segment (`over` moves past a segment it ends at).
        if self.seg != 0 || len == 0 || len > seg.len - self.off {
            return None;
        }
        let at = seg.off + self.off;
        let to = &seg.mr.range;
        let done = match src {
            Src::Bytes(bytes) => {
                let bytes = bytes.get(from as usize..(from + len) as usize)?;
                to.write(at, bytes)
            }
            Src::Segs(list) => {
                let [piece] = list.segs.as_slice() else {
                    return None;
                };
                if from >= piece.len || len > piece.len - from {
                    return None;
                }
                DmaRange::copy(&piece.mr.range, piece.off + from, to, at, len as usize)
            }
        };
        if done.is_err() {
            return Some(Err(()));
        }
        self.off += len;
        Some(Ok(()))
    }
    /// [`Cursor::put_src`] segment by segment, on both sides.
    #[inline(never)]
    fn put_walk(&mut self, src: &Src<'_>, from: u64, len: u64) -> Result<(), ()> {
        match src {
            Src::Bytes(bytes) => {
                let bytes = bytes.get(from as usize..(from + len) as usize).ok_or(())?;
                self.put(Some(bytes), None, len)
            }
            Src::Segs(list) => {
                let (mut skip, mut left) = (from, len);
                for seg in list.iter() {
                    if left == 0 {
                        break;
                    }
                    if skip >= seg.len {
                        skip -= seg.len;
                        continue;
                    }
                    let n = (seg.len - skip).min(left);
                    self.put(None, Some((&seg.mr.range, seg.off + skip)), n)?;
                    skip = 0;
                    left -= n;
                }
                if left == 0 { Ok(()) } else { Err(()) }
            }
        }
    }
}
