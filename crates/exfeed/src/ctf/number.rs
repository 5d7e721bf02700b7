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

/// Why a number did not parse: the byte offset (within the slice) of the offending character.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BadNumber {
    pub at: usize,
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
        return Err(BadNumber { at: i });
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
            return Err(BadNumber { at: i });
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
            return Err(BadNumber { at: i });
        }
        exp10 += if eneg { -e } else { e };
    }
    if i < n && !is_delim(line[i]) {
        return Err(BadNumber { at: i });
    }
    if ndigits <= 19 {
        if let Some(v) = fast::<T>(mantissa, exp10, neg) {
            return Ok((v, i));
        }
    }
    match T::parse_decimal(&line[start..i]) {
        Some(v) => Ok((v, i)),
        None => Err(BadNumber { at: start }),
    }
}

#[inline(always)]
fn fast<T: Element>(m: u64, e: i64, neg: bool) -> Option<T> {
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

    proptest! {
        #[test]
        fn matches_correctly_rounded(m in 0u64..u64::MAX, frac in 0usize..25, e in -60i32..60, neg: bool) {
            let digits = m.to_string();
            let cut = digits.len().saturating_sub(frac).max(1);
            let text = format!("{}{}{}{}e{}", if neg { "-" } else { "" }, &digits[..cut],
                if cut < digits.len() { "." } else { "" }, &digits[cut..], e);
            let want64: f64 = text.parse().unwrap();
            let want32: f32 = text.parse().unwrap();
            prop_assert_eq!(parse_number::<f64>(text.as_bytes(), 0).unwrap().0.to_bits(), want64.to_bits());
            prop_assert_eq!(parse_number::<f32>(text.as_bytes(), 0).unwrap().0.to_bits(), want32.to_bits());
        }

        #[test]
        fn six_decimals(int in 0u32..100000, frac in 0u32..1000000) {
            let text = format!("{int}.{frac:06}");
            prop_assert_eq!(parse_number::<f32>(text.as_bytes(), 0).unwrap().0, text.parse::<f32>().unwrap());
            prop_assert_eq!(parse_number::<f64>(text.as_bytes(), 0).unwrap().0, text.parse::<f64>().unwrap());
        }
    }
}
