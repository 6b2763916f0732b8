//! Writers for IOCTL outputs, in place in the METHOD_BUFFERED system buffer.
//!
//! The output buffer starts as a copy of the input, and many OFW handlers write only a few
//! fields (`Id`, `VerbInfo`, `Data`) and let the rest of the echoed input stand: DEVICE_OPEN
//! keeps the input `Data`, QP_QUERY keeps the input `Id`. These helpers therefore write exactly
//! the bytes they are asked to and nothing else. They never panic on short buffers; a too-short
//! output is `STATUS_BUFFER_TOO_SMALL` (the decoder has normally ruled that out already).

use core::mem::{offset_of, size_of};

use zerocopy::{Immutable, IntoBytes};

use crate::io::WV_IO_ID;
use crate::status::NtStatus;

/// Writes `value` at byte `offset` of `out`.
pub fn write_at<T: IntoBytes + Immutable>(
    out: &mut [u8],
    offset: usize,
    value: &T,
) -> Result<(), NtStatus> {
    let bytes = value.as_bytes();
    let end = offset
        .checked_add(bytes.len())
        .ok_or(NtStatus::BUFFER_TOO_SMALL)?;
    let dst = out.get_mut(offset..end).ok_or(NtStatus::BUFFER_TOO_SMALL)?;
    dst.copy_from_slice(bytes);
    Ok(())
}

/// Writes `value` at the start of `out`; returns the bytes written (an `Information` value).
pub fn write_prefix<T: IntoBytes + Immutable>(
    out: &mut [u8],
    value: &T,
) -> Result<usize, NtStatus> {
    write_at(out, 0, value)?;
    Ok(size_of::<T>())
}

/// Writes only `WV_IO_ID.Id` of the header at the start of `out` (e.g. the new object id).
pub fn write_id(out: &mut [u8], id: u64) -> Result<(), NtStatus> {
    write_at(out, offset_of!(WV_IO_ID, Id), &id)
}

/// Writes only `WV_IO_ID.VerbInfo` (the HCA's UMV status after a verbs call).
pub fn write_verb_info(out: &mut [u8], verb_info: u32) -> Result<(), NtStatus> {
    write_at(out, offset_of!(WV_IO_ID, VerbInfo), &verb_info)
}

/// Writes only `WV_IO_ID.Data` (CQ size, rkey, …).
pub fn write_data(out: &mut [u8], data: u32) -> Result<(), NtStatus> {
    write_at(out, offset_of!(WV_IO_ID, Data), &data)
}

/// Writes all three `WV_IO_ID` fields; returns 16. Use the single-field writers instead where
/// OFW leaves a field echoed from the input.
pub fn write_id_header(
    out: &mut [u8],
    id: u64,
    verb_info: u32,
    data: u32,
) -> Result<usize, NtStatus> {
    write_prefix(
        out,
        &WV_IO_ID {
            Id: id,
            VerbInfo: verb_info,
            Data: data,
        },
    )
}

/// GUID_QUERY output: `Count = total_count`, then as many GUIDs (NET64 as stored) as fit in
/// `(out.len() - 8) / 8` slots. Returns `Information = 8 + 8 * written`; the status is SUCCESS
/// even when truncated, and the caller retries with a larger buffer. An output shorter than the
/// count writes nothing and returns 0.
pub fn write_guid_list(
    out: &mut [u8],
    total_count: u64,
    guids: impl Iterator<Item = u64>,
) -> usize {
    let Some((count, slots)) = out.split_first_chunk_mut::<8>() else {
        return 0;
    };
    *count = total_count.to_ne_bytes();
    let mut written = 0;
    for (slot, guid) in slots.chunks_exact_mut(8).zip(guids) {
        slot.copy_from_slice(&guid.to_ne_bytes());
        written += 1;
    }
    8 + 8 * written
}

/// LIBRARY_QUERY output: copies `name` (up to its first NUL) plus a terminating NUL and returns
/// `(SUCCESS, len + 1)`. If it does not fit, OFW stores the needed length in the first byte and
/// returns `(BUFFER_TOO_SMALL, 1)`; with an error status none of it reaches user mode, but the
/// values are kept for fidelity.
pub fn write_library_name(out: &mut [u8], name: &[u8]) -> (NtStatus, usize) {
    let name = match name.iter().position(|&b| b == 0) {
        Some(nul) => &name[..nul],
        None => name,
    };
    let needed = name.len() + 1;
    if let Some(dst) = out.get_mut(..needed) {
        let (text, nul) = dst.split_at_mut(name.len());
        text.copy_from_slice(name);
        nul.fill(0);
        (NtStatus::SUCCESS, needed)
    } else if let Some(first) = out.first_mut() {
        // The C code stores the length in a `char`; truncation is what it does.
        *first = needed as u8;
        (NtStatus::BUFFER_TOO_SMALL, 1)
    } else {
        (NtStatus::BUFFER_TOO_SMALL, 0)
    }
}

/// GID/PKEY table output: copies as many whole `items` as fit and returns the status and
/// `Information`; `MORE_ENTRIES` (a success code) when the table was truncated.
pub fn write_array<T: IntoBytes + Immutable>(out: &mut [u8], items: &[T]) -> (NtStatus, usize) {
    let size = size_of::<T>();
    // Zero-sized items take no room, so all of them fit.
    let fit = out.len().checked_div(size).unwrap_or(items.len());
    let copied = fit.min(items.len());
    let bytes = copied * size;
    out[..bytes].copy_from_slice(items[..copied].as_bytes());
    let status = if copied < items.len() {
        NtStatus::MORE_ENTRIES
    } else {
        NtStatus::SUCCESS
    };
    (status, bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::WV_IO_GID;

    #[test]
    fn id_fields_leave_the_rest_standing() {
        let mut out = [0xAAu8; 24];
        write_id(&mut out, 7).unwrap();
        write_verb_info(&mut out, 0x1122_3344).unwrap();
        assert_eq!(&out[..8], &7u64.to_ne_bytes());
        assert_eq!(&out[8..12], &0x1122_3344u32.to_ne_bytes());
        assert_eq!(&out[12..], &[0xAA; 12]);
        assert_eq!(
            write_data(&mut out[..15], 1),
            Err(NtStatus::BUFFER_TOO_SMALL)
        );
        assert_eq!(write_id_header(&mut out, 1, 2, 3), Ok(16));
        assert_eq!(&out[12..16], &3u32.to_ne_bytes());
        assert_eq!(&out[16..], &[0xAA; 8]);
    }

    #[test]
    fn guid_list_truncates_but_counts_all() {
        let mut out = [0u8; 20];
        let info = write_guid_list(&mut out, 3, [10u64, 20, 30].into_iter());
        assert_eq!(info, 16);
        assert_eq!(&out[..8], &3u64.to_ne_bytes());
        assert_eq!(&out[8..16], &10u64.to_ne_bytes());
        assert_eq!(&out[16..], &[0; 4]);
        assert_eq!(write_guid_list(&mut [0u8; 7], 1, core::iter::empty()), 0);
    }

    #[test]
    fn library_name() {
        let mut out = [0xFFu8; 28];
        assert_eq!(
            write_library_name(&mut out, b"mlx4u"),
            (NtStatus::SUCCESS, 6)
        );
        assert_eq!(&out[..6], b"mlx4u\0");
        assert_eq!(out[6], 0xFF);
        let mut small = [0u8; 3];
        assert_eq!(
            write_library_name(&mut small, b"mlx4u"),
            (NtStatus::BUFFER_TOO_SMALL, 1)
        );
        assert_eq!(small[0], 6);
        assert_eq!(
            write_library_name(&mut [], b"x"),
            (NtStatus::BUFFER_TOO_SMALL, 0)
        );
    }

    #[test]
    fn arrays() {
        let gids = [WV_IO_GID { Raw: [1; 16] }, WV_IO_GID { Raw: [2; 16] }];
        let mut out = [0u8; 40];
        assert_eq!(write_array(&mut out, &gids), (NtStatus::SUCCESS, 32));
        assert_eq!(
            write_array(&mut out[..31], &gids),
            (NtStatus::MORE_ENTRIES, 16)
        );
        let pkeys: [u16; 3] = [0xFFFF, 0x8001, 0x7FFF];
        assert_eq!(
            write_array(&mut out[..5], &pkeys),
            (NtStatus::MORE_ENTRIES, 4)
        );
    }
}
