//! Decimal numbers in text, shared by the CTF and Lens parsers: the digit loop, the exponent,
//! and the value, with a fused fast path.
//!
//! Digits are accumulated into a `u64` while the caller checks its format's grammar (CTF:
//! `[+-]?digits(.digits*)?([eE][+-]?digits)?`, see [`parse_number`]; Lens: `-?digits(.digits)?`
//! or `-?.digits`, with an optional exponent). When the decimal mantissa and exponent are small
//! enough the value is exact in one floating-point operation (Clinger's fast path, see
//! [`fast`]); otherwise the validated text goes to [`Element::parse_decimal`]. Either way the
//! value is the correctly rounded one, so both formats read the same text as the same value.

use crate::element::{Element, Precision};

pub(crate) const POW10_F64: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
    1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
];
const POW10_F32: [f32; 11] = [1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10];
/// 2^52: a double whose low mantissa bits, set to an integer below 2^52, make it 2^52 plus that
/// integer.
const TWO_POW_52: f64 = 4_503_599_627_370_496.0;
/// `10^-k` rounded to the nearest double (see [`fast`]).
pub(crate) const INV_POW10_F64: [f64; 11] = [
    1e0, 1e-1, 1e-2, 1e-3, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8, 1e-9, 1e-10,
];

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

/// Reads the decimal digits at `b[i..]` into `mantissa` (times ten plus each digit, wrapping:
/// past 19 digits the caller takes the slow path). Returns where they end. A run of fewer than
/// 8 digits with 8 bytes at hand is read at once (see [`short_digits`]).
#[inline(always)]
pub(crate) fn digits(b: &[u8], mut i: usize, mantissa: &mut u64) -> usize {
    if let Some((value, count)) = short_digits(b, i) {
        *mantissa = mantissa.wrapping_mul(POW10_U64[count]).wrapping_add(value);
        return i + count;
    }
    let n = b.len();
    while i < n {
        let d = b[i].wrapping_sub(b'0');
        if d > 9 {
            break;
        }
        *mantissa = mantissa.wrapping_mul(10).wrapping_add(d as u64);
        i += 1;
    }
    i
}

const POW10_U64: [u64; 8] = [1, 10, 100, 1000, 10_000, 100_000, 1_000_000, 10_000_000];

/// The digits at `b[i..]` when fewer than 8 of them come before a non-digit, read 8 bytes at a
/// time (SWAR): their value and how many there are. `None` when fewer than 8 bytes are left
/// or all 8 are digits.
#[inline(always)]
fn short_digits(b: &[u8], i: usize) -> Option<(u64, usize)> {
    let chunk: [u8; 8] = b.get(i..i.wrapping_add(8))?.try_into().ok()?;
    let w = u64::from_le_bytes(chunk);
    let bad = non_digits(w);
    if bad == 0 {
        return None;
    }
    let count = (bad.trailing_zeros() / 8) as usize;
    if count == 0 {
        return Some((0, 0));
    }
    Some((digits_value(w, count), count))
}

/// The bytes of `w` that are not ASCII digits: nonzero in each such byte and, up to the first
/// of them, zero in every other. (A byte is a digit when its high nibble is 3 and stays 3
/// once 6 is added; adding 6 carries out of a byte only from a non-digit, into the bytes
/// after it, so the first non-digit is found all the same.)
#[inline(always)]
fn non_digits(w: u64) -> u64 {
    const HIGH: u64 = 0xf0f0_f0f0_f0f0_f0f0;
    const ZEROS: u64 = 0x3030_3030_3030_3030;
    ((w & HIGH) ^ ZEROS) | ((w.wrapping_add(0x0606_0606_0606_0606) & HIGH) ^ ZEROS)
}

/// The most common shape of a short decimal, `digits` or `digits.digits*` in at most 7 bytes,
/// read from one 8-byte load at `b[i..]` (the byte after it, which must be some non-digit, is
/// within the 8): its digits' value, how many of them follow the `.`, and where it ends.
/// `None` for anything else (no digit before a `.`, a longer number, fewer than 8 bytes left):
/// the caller then reads it digit by digit, to the same value.
#[inline(always)]
pub(crate) fn short_decimal(b: &[u8], i: usize) -> Option<(u64, usize, usize)> {
    let chunk: [u8; 8] = b.get(i..i.wrapping_add(8))?.try_into().ok()?;
    let w = u64::from_le_bytes(chunk);
    let bad = non_digits(w);
    // Digits before the first non-digit (at most 7: `bad` is not 0 then).
    let int = (bad.trailing_zeros() / 8) as usize;
    if int == 0 || int == 8 {
        return None;
    }
    if (w >> (8 * int)) as u8 != b'.' {
        return Some((digits_value(w, int), 0, i + int));
    }
    // The first non-digit after the `.` (none in this load when the `.` is its last byte).
    if int == 7 {
        return None;
    }
    let after = bad & !low_bytes(int + 1);
    if after == 0 {
        return None;
    }
    let end = (after.trailing_zeros() / 8) as usize;
    Some((
        digits_value(without_dot(w, int), end - 1),
        end - 1 - int,
        i + end,
    ))
}

/// The low `n` (0 to 8) bytes of a word set.
#[inline(always)]
pub(crate) fn low_bytes(n: usize) -> u64 {
    // In two steps: a shift by 64 (`n` 8) is not one.
    let shift = 4 * n as u32;
    !((u64::MAX << shift) << shift)
}

/// `w` without its byte `dot` (0 to 8): the bytes before it kept, those after it moved down
/// onto it (a number's digits without its `.`).
#[inline(always)]
pub(crate) fn without_dot(w: u64, dot: usize) -> u64 {
    let before = low_bytes(dot);
    (w & before) | ((w >> 8) & !before)
}

/// The value of the first `count` (1 to 8) ASCII digits of `w` (the first in its lowest byte);
/// the bytes past them are ignored.
#[inline(always)]
pub(crate) fn digits_value(w: u64, count: usize) -> u64 {
    let v = digit_bytes(w, count);
    // Neighbouring bytes to pairs, quads, then the whole (first byte most significant).
    let v = (v.wrapping_mul(10) + (v >> 8)) & 0x00ff_00ff_00ff_00ff;
    let v = (v.wrapping_mul(100) + (v >> 16)) & 0x0000_ffff_0000_ffff;
    (v.wrapping_mul(10000) + (v >> 32)) & 0xffff_ffff
}

/// The first `count` (1 to 8) ASCII digits of `w` as the values of the top bytes of a word, the
/// first digit lowest, zeros below them: eight digits (leading zeros added) that
/// [`digits_value`] sums, or vector instructions several words at a time.
#[inline(always)]
pub(crate) fn digit_bytes(w: u64, count: usize) -> u64 {
    debug_assert!((1..=8).contains(&count));
    // Digit values; a byte past the digits may borrow from the one after it, never from them.
    let v = w.wrapping_sub(0x3030_3030_3030_3030);
    // The digits moved to the top bytes, the rest shifted out.
    v << ((64 - 8 * count as u32) & 63)
}

/// The exponent after an `e`/`E`: `[+-]?digits` at `b[i..]`, its value (saturated: anything
/// this large is out of range anyway) and where it ends; `Err(where digits were expected)`
/// when there are none.
#[inline(always)]
pub(crate) fn exponent(b: &[u8], mut i: usize) -> Result<(i64, usize), usize> {
    let neg = match b.get(i) {
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
    let start = i;
    let mut e: i64 = 0;
    while let Some(d) = b.get(i).filter(|c| c.is_ascii_digit()) {
        e = (e * 10 + (d - b'0') as i64).min(1_000_000);
        i += 1;
    }
    if i == start {
        return Err(i);
    }
    Ok((if neg { -e } else { e }, i))
}

/// The value of a number whose grammar the caller has checked: `text` is all of it, `ndigits`
/// digits (leading zeros included) made `mantissa`, and `exp10` is its decimal exponent (the
/// exponent part less the fraction digits). Correctly rounded; `None` only if `text` is not a
/// number after all.
#[inline(always)]
pub(crate) fn value<T: Element>(
    text: &[u8],
    mantissa: u64,
    ndigits: usize,
    exp10: i64,
    neg: bool,
) -> Option<T> {
    if ndigits <= 19 {
        if let Some(v) = fast::<T>(mantissa, exp10, neg) {
            return Some(v);
        }
    }
    T::parse_decimal(text)
}

/// Parses the CTF number starting at `line[pos]`; it must end at a delimiter (space, tab, CR,
/// LF, `|`) or the end of `line`. Returns the value and the position after it.
#[inline(always)]
pub(crate) fn parse_number<T: Element>(line: &[u8], pos: usize) -> Result<(T, usize), BadNumber> {
    let start = pos;
    let n = line.len();
    // Branch-free sign: signs of real data are unpredictable.
    let first = line.get(pos).copied().unwrap_or(0);
    let neg = first == b'-';
    let int_start = pos + (neg | (first == b'+')) as usize;
    let mut mantissa: u64 = 0;
    let mut i = digits(line, int_start, &mut mantissa);
    if i == int_start {
        return Err(BadNumber::malformed(i));
    }
    // Digits seen, leading zeros included: more than 19 may not fit the u64 (slow path).
    let mut ndigits = i - int_start;
    let mut exp10: i64 = 0;
    if i < n && line[i] == b'.' {
        let frac_start = i + 1;
        i = digits(line, frac_start, &mut mantissa);
        ndigits += i - frac_start;
        exp10 -= (i - frac_start) as i64;
        // CNTK takes `20.` but not `1.e5`.
        if i == frac_start && i < n && (line[i] == b'e' || line[i] == b'E') {
            return Err(BadNumber::malformed(i));
        }
    }
    if i < n && (line[i] == b'e' || line[i] == b'E') {
        let (e, end) = exponent(line, i + 1).map_err(BadNumber::malformed)?;
        exp10 += e;
        i = end;
    }
    if i < n && !is_delim(line[i]) {
        return Err(BadNumber::malformed(i));
    }
    match value::<T>(&line[start..i], mantissa, ndigits, exp10, neg) {
        Some(v) if v.to_f64().is_infinite() => Err(BadNumber {
            at: start,
            out_of_range: true,
        }),
        Some(v) => Ok((v, i)),
        None => Err(BadNumber::malformed(start)),
    }
}

/// Clinger's fast path: `m * 10^e` (negated with `neg`) when that is exact in one operation on
/// the precision's type: `m` has at most the type's mantissa bits and `10^|e|` is exact.
///
/// For `f32` a division is replaced by a multiplication in `f64` by `10^-k` rounded (`k` in
/// 1..=10), then rounding to `f32`: `m / 10^k` (with `m <= 2^24`) is never an `f32` rounding
/// midpoint and lies at least `2^-25 / 5^k >= 2^-48.3` (relative) from every midpoint, while
/// the product errs by less than `2^-51.9`, so it rounds to the same `f32` as the exact
/// quotient, that is, as the division did (a test compares both over every such `m` and `k`).
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
            let v = if e < 0 {
                // `m` as a double by its bits (exact below 2^52), not by the conversion
                // instruction: that one also depends on its target register's previous value,
                // which chained each number's conversion to the one before (2x slower).
                let m = f64::from_bits(TWO_POW_52.to_bits() | m) - TWO_POW_52;
                (m * INV_POW10_F64[(-e) as usize]) as f32
            } else {
                m as f32 * POW10_F32[e as usize]
            };
            // The sign by its bit (`v` is not negative): no branch.
            Some(T::from_f32(f32::from_bits(
                v.to_bits() | (neg as u32) << 31,
            )))
        }
    }
}

/// `10^-k` rounded to the nearest double, `k` in 0..=10: what [`fast`] and [`short_f32`] multiply
/// by (for readers that do the same in vectors).
pub(crate) fn inv_pow10(k: usize) -> f64 {
    INV_POW10_F64[k]
}

/// [`fast`] for `f32` on a short decimal (see [`short_decimal`]: at most 7 digits, so
/// `m < 2^24`, and `fraction <= 6`): `m / 10^fraction`, negated with `neg`. The same value,
/// without the range checks (for `fraction` 0 the product by 1 is `m`, exact as `m as f32`).
#[inline(always)]
pub(crate) fn short_f32(m: u64, fraction: usize, neg: bool) -> f32 {
    debug_assert!(m < 1 << 24 && fraction <= 7);
    let m = f64::from_bits(TWO_POW_52.to_bits() | (m & ((1 << 24) - 1))) - TWO_POW_52;
    let v = (m * INV_POW10_F64[fraction & 7]) as f32;
    f32::from_bits(v.to_bits() | (neg as u32) << 31)
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
    fast::<T>(int * 1_000_000 + digits_value(digits, 8), -6, neg)
}

/// Vector forms of the digit sums (x86-64 with AVX2).
#[cfg(target_arch = "x86_64")]
pub(crate) mod wide {
    use std::arch::x86_64::*;

    /// The values of eight-digit numbers, two per 128-bit lane of `y`, each as eight bytes of
    /// digit values, the first digit lowest (as [`super::digit_bytes`] places them): a lane's
    /// numbers `[a, b]` become the 32-bit integers `[a, b, a, b]`.
    #[target_feature(enable = "avx2")]
    #[inline]
    pub(crate) fn eight_digit_sums(y: __m256i) -> __m256i {
        // Digits to pairs (x 10), fours (x 100), then each number's eight (x 10^4).
        let pairs = _mm256_maddubs_epi16(y, _mm256_set1_epi16(0x010a));
        let fours = _mm256_madd_epi16(pairs, _mm256_set1_epi32(0x0001_0064));
        let fours = _mm256_packs_epi32(fours, fours);
        _mm256_madd_epi16(fours, _mm256_set1_epi32(0x0001_2710))
    }
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

/// Xorshift64: the tests' reproducible stream of varied inputs (any seed but 0).
#[cfg(test)]
pub(crate) struct XorShift(pub u64);

#[cfg(test)]
impl XorShift {
    /// The next state.
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// The next state, below `n`.
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n
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

    #[test]
    fn short_digit_runs_read_at_once_as_one_at_a_time() {
        let text = b"0123456789 1 12 123 1234 12345 123456 1234567 12345678 123456789 7|x 0000001 ";
        for i in 0..text.len() {
            let mut slow = 0u64;
            let mut j = i;
            while j < text.len() && text[j].is_ascii_digit() {
                slow = slow * 10 + (text[j] - b'0') as u64;
                j += 1;
            }
            for start in [0u64, 42] {
                let mut m = start;
                let end = digits(text, i, &mut m);
                let want = start * 10u64.pow((j - i) as u32) + slow;
                assert_eq!((m, end), (want, j), "at {i}");
            }
        }
        // Bytes around the digits, with and without carries out of a byte.
        for b in 0..=255u8 {
            let chunk = [b'1', b'2', b, b'3', 0xff, 0xfa, b'/', b':'];
            let want = if b.is_ascii_digit() { 4 } else { 2 };
            assert_eq!(short_digits(&chunk, 0).map(|(_, n)| n), Some(want), "{b}");
        }
    }

    #[test]
    fn digit_values() {
        let w = u64::from_le_bytes(*b"12345678");
        for len in 1..=8 {
            let want = b"12345678"[..len]
                .iter()
                .fold(0u64, |m, d| m * 10 + (d - b'0') as u64);
            assert_eq!(digits_value(w, len), want, "{len}");
        }
        assert_eq!(digits_value(u64::from_le_bytes(*b"00000009"), 8), 9);
        // Bytes past the digits, below '0' or not, are not read.
        assert_eq!(digits_value(u64::from_le_bytes(*b"05 .\n|x0"), 2), 5);
        assert_eq!(
            digits_value(u64::from_le_bytes(*b"1\x00\xff\xff 9\x2f\x3a"), 1),
            1
        );
        assert_eq!(
            without_dot(u64::from_le_bytes(*b"12.345 x"), 2).to_le_bytes(),
            *b"12345 x\0"
        );
        assert_eq!(low_bytes(0), 0);
        assert_eq!(low_bytes(8), u64::MAX);
    }

    #[test]
    fn short_decimals_read_at_once_as_digit_by_digit() {
        let text =
            b"0.123 12.5 7 1234567 123.4567 0.00001 20. 1.2.3 .5 12345678 9.1e3 3.14159|x 42";
        for i in 0..text.len() {
            let Some((m, frac, end)) = short_decimal(text, i) else {
                continue;
            };
            // Digit by digit: the digits, a '.' and more digits.
            let (mut want, mut j, mut after_dot) = (0u64, i, None);
            while j < text.len()
                && (text[j].is_ascii_digit() || (text[j] == b'.' && after_dot.is_none()))
            {
                if text[j] == b'.' {
                    after_dot = Some(j + 1);
                } else {
                    want = want * 10 + (text[j] - b'0') as u64;
                }
                j += 1;
            }
            assert_eq!(
                (m, frac, end),
                (want, after_dot.map_or(0, |a| j - a), j),
                "at {i}"
            );
            assert!(end - i <= 7);
        }
        assert_eq!(short_decimal(b"0.123 4.5", 0), Some((123, 3, 5)));
        assert_eq!(short_decimal(b"12345678 ", 0), None);
        assert_eq!(short_decimal(b"1234567. ", 0), None);
        assert_eq!(short_decimal(b".5      ", 0), None);
        assert_eq!(short_decimal(b"0.5", 0), None);
    }

    #[test]
    fn six_decimal_fast_path() {
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

    #[test]
    fn short_f32_is_fast() {
        let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
        for i in 0..200_000u64 {
            let x = rng.next();
            // Every size of mantissa, the largest ones included.
            let m = [x % 10_000_000, 9_999_999 - i % 10, i, x % 1000][(i % 4) as usize];
            let (fraction, neg) = ((x >> 40) as usize % 7, x >> 63 == 1);
            let want = fast::<f32>(m, -(fraction as i64), neg).unwrap();
            assert_eq!(
                short_f32(m, fraction, neg).to_bits(),
                want.to_bits(),
                "{m}e-{fraction}"
            );
        }
    }

    /// The `f32` fast path's multiplication by a rounded `10^-k` in `f64` gives what the
    /// division `m as f32 / 10^k` gave (the correctly rounded quotient), for every `m` up to
    /// 2^24 and `k` in 1..=10 (`m` sampled with a stride here; `--ignored` runs all 168
    /// million, in a release build).
    fn f32_reciprocal_equals_division(stride: usize) {
        for (k, &pow) in POW10_F32.iter().enumerate().skip(1) {
            for m in (0..=1u64 << 24)
                .step_by(stride)
                .chain([(1 << 24) - 1, 1 << 24])
            {
                let want = m as f32 / pow;
                let got = fast::<f32>(m, -(k as i64), false).unwrap();
                assert_eq!(got.to_bits(), want.to_bits(), "{m}e-{k}");
            }
        }
    }

    #[test]
    fn f32_reciprocal_equals_division_sampled() {
        f32_reciprocal_equals_division(997);
    }

    #[test]
    #[ignore = "168 million cases: run in release (cargo test --release -- --ignored)"]
    fn f32_reciprocal_equals_division_everywhere() {
        f32_reciprocal_equals_division(1);
    }

    proptest! {
        #[test]
        fn f32_fast_path_is_correctly_rounded(m in 0u64..=(1 << 24), k in 1usize..=10, neg: bool) {
            let digits = format!("{m:0>width$}", width = k + 1);
            let (int, frac) = digits.split_at(digits.len() - k);
            let text = format!("{}{int}.{frac}", if neg { "-" } else { "" });
            let want: f32 = text.parse().unwrap();
            prop_assert_eq!(fast::<f32>(m, -(k as i64), neg).unwrap().to_bits(), want.to_bits(), "{}", text);
            prop_assert_eq!(parse_number::<f32>(text.as_bytes(), 0).unwrap().0.to_bits(), want.to_bits());
        }

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
