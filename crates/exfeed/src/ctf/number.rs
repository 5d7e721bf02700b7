//! CTF numbers: `[+-]?digits(.digits*)?([eE][+-]?digits)?`, with a fused fast path.
//!
//! Digits are accumulated into a `u64` while the grammar is checked. When the decimal mantissa
//! and exponent are small enough the value is exact in one floating-point operation (Clinger's
//! fast path); otherwise the validated text goes to [`Element::parse_decimal`].

use crate::element::{Element, Precision};

const POW10_F64: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
    1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
];
const POW10_F32: [f32; 11] = [1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10];

/// Why a number did not parse: the byte offset (within the slice) of the offending character,
/// or, for well-formed text, that its value is beyond the precision's range (it would be
/// infinite: CTF has no infinities).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BadNumber {
    pub at: usize,
    pub out_of_range: bool,
}

impl BadNumber {
    fn malformed(at: usize) -> Self {
        BadNumber {
            at,
            out_of_range: false,
        }
    }
}

#[inline]
fn is_delim(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n' | b'|')
}

/// Parses the number starting at `line[pos]`; it must end at a delimiter (space, tab, CR, LF,
/// `|`) or the end of `line`. Returns the value and the position after it.
#[inline(always)]
pub(crate) fn parse_number<T: Element>(line: &[u8], pos: usize) -> Result<(T, usize), BadNumber> {
    let start = pos;
    let mut i = pos;
    let n = line.len();
    // Branch-free sign: signs of real data are unpredictable.
    let first = line.get(i).copied().unwrap_or(0);
    let neg = first == b'-';
    i += (neg | (first == b'+')) as usize;
    let mut mantissa: u64 = 0;
    let int_start = i;
    while i < n {
        let d = line[i].wrapping_sub(b'0');
        if d > 9 {
            break;
        }
        mantissa = mantissa.wrapping_mul(10).wrapping_add(d as u64);
        i += 1;
    }
    if i == int_start {
        return Err(BadNumber::malformed(i));
    }
    // Digits seen, leading zeros included: more than 19 may not fit the u64 (slow path).
    let mut ndigits = i - int_start;
    let mut exp10: i64 = 0;
    if i < n && line[i] == b'.' {
        i += 1;
        let frac_start = i;
        while i < n {
            let d = line[i].wrapping_sub(b'0');
            if d > 9 {
                break;
            }
            mantissa = mantissa.wrapping_mul(10).wrapping_add(d as u64);
            i += 1;
        }
        ndigits += i - frac_start;
        exp10 -= (i - frac_start) as i64;
        // CNTK takes `20.` but not `1.e5`.
        if i == frac_start && i < n && (line[i] == b'e' || line[i] == b'E') {
            return Err(BadNumber::malformed(i));
        }
    }
    if i < n && (line[i] == b'e' || line[i] == b'E') {
        i += 1;
        let eneg = match line.get(i) {
            Some(b'-') => {
                i += 1;
                true
            }
            Some(b'+') => {
                i += 1;
                false
            }
            _ => false,
        };
        let e_start = i;
        let mut e: i64 = 0;
        while i < n && line[i].is_ascii_digit() {
            // Saturate: anything this large is out of range anyway.
            e = (e * 10 + (line[i] - b'0') as i64).min(1_000_000);
            i += 1;
        }
        if i == e_start {
            return Err(BadNumber::malformed(i));
        }
        exp10 += if eneg { -e } else { e };
    }
    if i < n && !is_delim(line[i]) {
        return Err(BadNumber::malformed(i));
    }
    if ndigits <= 19 {
        if let Some(v) = fast::<T>(mantissa, exp10, neg) {
            return Ok((v, i));
        }
    }
    match T::parse_decimal(&line[start..i]) {
        Some(v) if v.to_f64().is_infinite() => Err(BadNumber {
            at: start,
            out_of_range: true,
        }),
        Some(v) => Ok((v, i)),
        None => Err(BadNumber::malformed(start)),
    }
}

#[inline(always)]
pub(crate) fn fast<T: Element>(m: u64, e: i64, neg: bool) -> Option<T> {
    match T::PRECISION {
        Precision::Double => {
            if m > (1u64 << 53) || !(-22..=22).contains(&e) {
                return None;
            }
            let mut v = m as f64;
            if e == 0 {
                return Some(T::from_f64(if neg { -v } else { v }));
            }
            if e < 0 {
                v /= POW10_F64[(-e) as usize];
            } else {
                v *= POW10_F64[e as usize];
            }
            Some(T::from_f64(if neg { -v } else { v }))
        }
        Precision::Float => {
            if m > (1u64 << 24) || !(-10..=10).contains(&e) {
                return None;
            }
            let mut v = m as f32;
            if e == 0 {
                return Some(T::from_f32(if neg { -v } else { v }));
            }
            if e < 0 {
                v /= POW10_F32[(-e) as usize];
            } else {
                v *= POW10_F32[e as usize];
            }
            Some(T::from_f32(if neg { -v } else { v }))
        }
    }
}

/// Fast path for the most common decimal shape, `-?D+.DDDDDD` followed by a space, once the
/// caller has read the sign and the integer digits (`int`, at most 7 of them) and `line[dot]` is
/// where they stopped. The `.`, the six decimals and the space are checked and converted 8 bytes
/// at a time (SWAR). Returns `None` for anything else (including a number at the very end of the
/// line) so the caller falls back to [`parse_number`], which accepts a superset of this shape and
/// gives the same value.
#[inline(always)]
pub(crate) fn six_decimals<T: Element>(line: &[u8], dot: usize, int: u64, neg: bool) -> Option<T> {
    let chunk: [u8; 8] = line.get(dot..dot.wrapping_add(8))?.try_into().ok()?;
    let w = u64::from_le_bytes(chunk);
    const DOT_SPACE: u64 = (b'.' as u64) | ((b' ' as u64) << 56);
    const ENDS: u64 = 0xff | (0xff << 56);
    if w & ENDS != DOT_SPACE {
        return None;
    }
    // The six digit bytes, as "00dddddd" in memory order (first digit most significant).
    let digits = ((w >> 8) & 0x0000_ffff_ffff_ffff) << 16 | 0x3030;
    // Every byte in 0x30..=0x39: high nibble 3, and adding 6 does not carry out of the nibble.
    if (digits & 0xf0f0_f0f0_f0f0_f0f0) != 0x3030_3030_3030_3030
        || ((digits.wrapping_add(0x0606_0606_0606_0606)) & 0xf0f0_f0f0_f0f0_f0f0)
            != 0x3030_3030_3030_3030
    {
        return None;
    }
    fast::<T>(int * 1_000_000 + eight_digits(digits), -6, neg)
}

#[cfg(test)]
fn parse_six_decimals<T: Element>(line: &[u8], pos: usize) -> Option<(T, usize)> {
    let neg = *line.get(pos)? == b'-';
    let mut i = pos + neg as usize;
    let mut int = 0u64;
    while i < line.len() && line[i].is_ascii_digit() && i - pos < 7 {
        int = int * 10 + (line[i] - b'0') as u64;
        i += 1;
    }
    if i == pos + neg as usize {
        return None;
    }
    six_decimals(line, i, int, neg).map(|v| (v, i + 7))
}

/// Value of 8 ASCII digits packed little-endian (first digit in the lowest byte).
#[inline(always)]
fn eight_digits(w: u64) -> u64 {
    let v = w - 0x3030_3030_3030_3030;
    // Pairs, then quads, then the whole: each step combines neighbouring lanes.
    let v = (v.wrapping_mul(10) + (v >> 8)) & 0x00ff_00ff_00ff_00ff;
    let v = (v.wrapping_mul(100) + (v >> 16)) & 0x0000_ffff_0000_ffff;
    (v.wrapping_mul(10000) + (v >> 32)) & 0xffff_ffff
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn p64(s: &str) -> Option<f64> {
        parse_number::<f64>(s.as_bytes(), 0).ok().map(|(v, end)| {
            assert_eq!(end, s.len());
            v
        })
    }

    #[test]
    fn grammar() {
        for ok in [
            "0", "1", "-1", "+1", "20.", "02.0", "1.5e3", "1E-3", "1.25e+2", "-0",
        ] {
            assert!(p64(ok).is_some(), "{ok}");
        }
        for bad in [
            ".5", "1.e5", "inf", "nan", "2,0", "2.0f", "2::2", "-", "1e", "1e+", "", "2#0",
        ] {
            assert!(p64(bad).is_none(), "{bad}");
        }
        assert_eq!(p64("20."), Some(20.0));
        assert_eq!(p64("-2.5e-1"), Some(-0.25));
        assert!(p64("-0").unwrap().is_sign_negative());
        assert_eq!(parse_number::<f32>(b"1.5 |", 0), Ok((1.5f32, 3)));
    }

    #[test]
    fn six_decimal_fast_path() {
        assert_eq!(eight_digits(u64::from_le_bytes(*b"12345678")), 12345678);
        assert_eq!(eight_digits(u64::from_le_bytes(*b"00000009")), 9);
        assert_eq!(
            parse_six_decimals::<f32>(b"-3.250000 1", 0),
            Some((-3.25f32, 9))
        );
        assert_eq!(
            parse_six_decimals::<f64>(b"x 12.500000 ", 2),
            Some((12.5f64, 11))
        );
        for no in [
            "3.250000",
            "3.25000 ",
            "3.2500001 ",
            "3.25:000 ",
            "3.25/000 ",
            "+1.000000 ",
            "1.000000|",
            "1,000000 ",
            "-.000000 ",
            "1.00000a ",
        ] {
            assert_eq!(parse_six_decimals::<f64>(no.as_bytes(), 0), None, "{no}");
        }
    }

    proptest! {
        #[test]
        fn six_decimal_fast_path_agrees(int in 0u32..20000, frac in 0u32..1000000, neg: bool) {
            let text = format!("{}{int}.{frac:06} ", if neg { "-" } else { "" });
            let b = text.as_bytes();
            if let Some((v, end)) = parse_six_decimals::<f32>(b, 0) {
                prop_assert_eq!((v.to_bits(), end), (text.trim().parse::<f32>().unwrap().to_bits(), b.len() - 1));
            }
            if let Some((v, end)) = parse_six_decimals::<f64>(b, 0) {
                prop_assert_eq!((v.to_bits(), end), (text.trim().parse::<f64>().unwrap().to_bits(), b.len() - 1));
            }
            prop_assert!(parse_six_decimals::<f64>(b, 0).is_some());
        }

        #[test]
        fn matches_correctly_rounded(m in 0u64..u64::MAX, frac in 0usize..25, e in -60i32..60, neg: bool) {
            let digits = m.to_string();
            let cut = digits.len().saturating_sub(frac).max(1);
            let text = format!("{}{}{}{}e{}", if neg { "-" } else { "" }, &digits[..cut],
                if cut < digits.len() { "." } else { "" }, &digits[cut..], e);
            let want64: f64 = text.parse().unwrap();
            let want32: f32 = text.parse().unwrap();
            prop_assert_eq!(parse_number::<f64>(text.as_bytes(), 0).unwrap().0.to_bits(), want64.to_bits());
            // Beyond f32's range: an error (CTF has no infinity), not inf.
            match parse_number::<f32>(text.as_bytes(), 0) {
                Ok((v, _)) => prop_assert_eq!(v.to_bits(), want32.to_bits()),
                Err(bad) => prop_assert!(bad.out_of_range && want32.is_infinite(), "{text}"),
            }
        }

        #[test]
        fn six_decimals(int in 0u32..100000, frac in 0u32..1000000) {
            let text = format!("{int}.{frac:06}");
            prop_assert_eq!(parse_number::<f32>(text.as_bytes(), 0).unwrap().0, text.parse::<f32>().unwrap());
            prop_assert_eq!(parse_number::<f64>(text.as_bytes(), 0).unwrap().0, text.parse::<f64>().unwrap());
        }
    }
}
