//! Property test: for any code, input and output length, `decode` never panics and returns
//! exactly what the OFW handler would before its first object lookup (oracle in tests/common).

mod common;

use common::{TABLE, expected, row_for, vendor_of};
use proptest::prelude::*;
use wv_abi::decode;

fn code_strategy() -> impl Strategy<Value = u32> {
    prop_oneof![
        // The whole range, sentinels and one past MAX included.
        3 => (0u32..=0x37).prop_map(|i| 0x003B_E000 + 4 * i),
        1 => any::<u32>(),
        // Neighbours of valid codes (other method/access bits).
        1 => (0usize..TABLE.len(), 1u32..4).prop_map(|(i, d)| TABLE[i].code ^ d),
    ]
}

/// Nudges random bytes so the EP_MODIFY option and the connect/accept DataLength paths are
/// exercised on both sides, not just with probability 2^-32.
fn tweak(input: &mut [u8], tweak: u8) {
    if tweak & 1 != 0 && input.len() >= 16 {
        input[12..16].copy_from_slice(&1u32.to_ne_bytes());
    }
    if tweak & 2 != 0 {
        let len = tweak >> 2; // 0..=63, straddles the 56 limit
        for at in [34, 66] {
            if let Some(b) = input.get_mut(at) {
                *b = len;
            }
        }
    }
}

/// Checks one case against the oracle.
fn check(code: u32, input: &[u8], output_len: usize) -> Result<(), TestCaseError> {
    let got = decode(code, input, output_len);
    let want = expected(code, input, output_len);
    match (&got, want) {
        (Ok(req), Ok(())) => {
            prop_assert_eq!(req.ioctl().code(), code);
            let row = row_for(code).unwrap();
            match (
                row.vendor_fixed,
                vendor_of(req).map(|v| (v.input_len, v.output_len)),
            ) {
                (Some(fixed), Some((vin, vout))) => {
                    prop_assert_eq!(vin, input.len() - fixed);
                    prop_assert_eq!(vout, output_len - fixed);
                }
                (None, None) => {}
                (a, b) => prop_assert!(false, "vendor mismatch {:?} {:?}", a, b),
            }
        }
        (Err(g), Err(w)) => prop_assert_eq!(*g, w),
        _ => prop_assert!(
            false,
            "code {:#010X} in {} out {}: got {:?}, want {:?}",
            code,
            input.len(),
            output_len,
            got,
            want
        ),
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(if cfg!(miri) { 8 } else { 20_000 }))]

    #[test]
    #[cfg_attr(miri, ignore)]
    fn decode_matches_ofw(
        code in code_strategy(),
        mut input in prop::collection::vec(any::<u8>(), 0..600),
        output_len in 0usize..1024,
        t in any::<u8>(),
    ) {
        tweak(&mut input, t);
        check(code, &input, output_len)?;
    }

    /// Lengths within a few bytes of each IOCTL's minimums, where off-by-one errors live.
    #[test]
    #[cfg_attr(miri, ignore)]
    fn decode_matches_ofw_near_minimums(
        row in 0usize..TABLE.len(),
        din in -3isize..=3,
        dout in -3isize..=3,
        fill in any::<u8>(),
        t in any::<u8>(),
    ) {
        let row = &TABLE[row];
        // EP_MODIFY's real threshold is the 80-byte route payload, so probe around both.
        let base_in = if t & 4 != 0 && row.code == 0x003B_E09C { 80 } else { row.min_in };
        let in_len = base_in.saturating_add_signed(din);
        let out_len = row.min_out.saturating_add_signed(dout);
        let mut input = vec![fill; in_len];
        tweak(&mut input, t);
        check(row.code, &input, out_len)?;
    }
}
