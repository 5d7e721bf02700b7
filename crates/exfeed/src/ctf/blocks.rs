//! Dense values (pixel data: `0 0 255 17`; printed floats: `-0.123456 4.5`) read a 64-byte
//! block at a time.
//!
//! One value after the other, where each number ends decides where the next one starts, and its
//! length (`0` or `255`) or sign decides the branches taken: in such data a coin toss per value,
//! a mispredicted branch or more each. Here one pass over a block marks its digits, `-`s, `.`s
//! and separators (a bit per byte, 16 bytes per vector instruction), every number's start and
//! end come from those masks, and each short number (`-`? then at most 8 bytes of digits with
//! at most one `.`, a digit before it) is converted without a branch on its shape: its bytes
//! are read by one 8-byte load, the `.` taken out, the digits summed in place (SWAR), then
//! `number::fast` (or `number::short_f32`, the same value for at most 7 digits) makes the value
//! from the digits and the count of decimals, the operands of `number::parse_number`, so the
//! same bits. Anything else (an exponent, a `+`, a bad byte, a longer number) ends the block's
//! run where its number starts: the caller reads it one number at a time, as before, with its
//! errors found and placed as before.

use crate::batch::StreamData;
use crate::element::{Element, Precision};
use crate::number::{digits_value, fast, short_f32, without_dot};

/// Bytes a block covers; the loads of its last number's digits read up to 8 bytes past it.
const BLOCK: usize = 64;
const SPAN: usize = BLOCK + 8;

/// The bytes of a block by class, bit `k` for byte `k`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Classes {
    digit: u64,
    minus: u64,
    dot: u64,
    /// `0`s (digits too).
    zero: u64,
    /// Spaces and tabs: what separates numbers here (a CR, which CTF also allows, is taken as
    /// the end of the run: it comes at line ends).
    separator: u64,
}

/// Classifies the 64 bytes of `block`.
#[inline(always)]
fn classify(block: &[u8; BLOCK]) -> Classes {
    #[cfg(target_arch = "x86_64")]
    {
        classify_sse2(block)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        classify_scalar(block)
    }
}

/// [`classify`] a byte at a time (other architectures; and the reference in tests).
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
fn classify_scalar(block: &[u8; BLOCK]) -> Classes {
    let mut c = Classes::default();
    for (k, &b) in block.iter().enumerate() {
        let bit = 1u64 << k;
        match b {
            b'0' => {
                c.digit |= bit;
                c.zero |= bit;
            }
            b'1'..=b'9' => c.digit |= bit,
            b'-' => c.minus |= bit,
            b'.' => c.dot |= bit,
            b' ' | b'\t' => c.separator |= bit,
            _ => {}
        }
    }
    c
}

/// [`classify`] 16 bytes at a time (SSE2: every x86-64 CPU has it).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn classify_sse2(block: &[u8; BLOCK]) -> Classes {
    use std::arch::x86_64::*;
    let mut c = Classes::default();
    for (k, part) in block.chunks_exact(16).enumerate() {
        // SAFETY: an unaligned load of the 16 bytes of `part`, and SSE2 operations: SSE2 is
        // part of x86-64. (One block: before Rust 1.87 every intrinsic is unsafe.)
        unsafe {
            let x = _mm_loadu_si128(part.as_ptr().cast());
            let mask = |m: __m128i| (_mm_movemask_epi8(m) as u16 as u64) << (16 * k);
            let from_zero = _mm_sub_epi8(x, _mm_set1_epi8(b'0' as i8));
            // A digit is at most 9 above '0' (unsigned).
            let digit = _mm_cmpeq_epi8(_mm_min_epu8(from_zero, _mm_set1_epi8(9)), from_zero);
            let is = |b: u8| _mm_cmpeq_epi8(x, _mm_set1_epi8(b as i8));
            c.digit |= mask(digit);
            c.minus |= mask(is(b'-'));
            c.dot |= mask(is(b'.'));
            c.zero |= mask(is(b'0'));
            c.separator |= mask(_mm_or_si128(is(b' '), is(b'\t')));
        }
    }
    c
}

/// The value of the number `b[s..e]`, whose bytes the block's checks passed (an optional
/// leading `-` followed by a digit, then digits and `.`s, each `.` after a digit); `None` when
/// it has more than 8 bytes after its sign, two `.`s, or a value `fast` cannot give exactly.
/// Without `DOTS` the block has no `.`: the number is an integer.
#[inline(always)]
fn number<T: Element, const DOTS: bool>(
    b: &[u8; SPAN],
    c: &Classes,
    s: usize,
    e: usize,
) -> Option<T> {
    let neg = (c.minus >> s) as usize & 1;
    let body = s + neg;
    let len = e - body;
    if len > 8 {
        return None;
    }
    let at = body & (BLOCK - 1);
    let w = u64::from_le_bytes(b[at..at + 8].try_into().unwrap_or_default());
    let (digits, count, decimals) = if DOTS {
        let dots = (c.dot >> at) & ((1 << len) - 1);
        if dots & dots.wrapping_sub(1) != 0 {
            return None;
        }
        // Where the `.` is (`len` when there is none), and the bytes after it moved down onto
        // it.
        let dot = (dots | 1 << len).trailing_zeros() as usize;
        let count = len - (dot < len) as usize;
        (without_dot(w, dot), count, count - dot)
    } else {
        (w, len, 0)
    };
    let m = digits_value(digits, count);
    if matches!(T::PRECISION, Precision::Float) && !DOTS {
        // An integer: exact as an `f32` up to 2^24 (`fast`'s bound), converted directly.
        if m > 1 << 24 {
            return None;
        }
        let v = m as u32 as f32;
        return Some(T::from_f32(f32::from_bits(
            v.to_bits() | (neg as u32) << 31,
        )));
    }
    if matches!(T::PRECISION, Precision::Float) && count <= 7 {
        // Below 2^24, at most 7 decimals: `fast`'s value, without its checks.
        return Some(T::from_f32(short_f32(m, decimals, neg != 0)));
    }
    fast::<T>(m, -(decimals as i64), neg != 0)
}

/// Converts the numbers of a block that end within it (`starts`, `lasts`: their first and last
/// bytes, in order) into `got`: how many, and the start of the first one it could not take.
#[inline(always)]
fn block_numbers<T: Element>(
    b: &[u8; SPAN],
    c: &Classes,
    starts: &mut u64,
    mut lasts: u64,
    got: &mut [T; BLOCK / 2],
) -> (usize, Option<usize>) {
    let mut n = 0;
    while lasts != 0 {
        let s = starts.trailing_zeros() as usize;
        let e = lasts.trailing_zeros() as usize + 1;
        let Some(v) = number::<T, true>(b, c, s, e) else {
            return (n, Some(s));
        };
        got[n & (BLOCK / 2 - 1)] = v;
        n += 1;
        *starts &= *starts - 1;
        lasts &= lasts - 1;
    }
    (n, None)
}

/// [`block_numbers`] for a block of integers, where most numbers may be a lone `0` (pixel
/// data): those are the zeros `got` starts with, and only the others are converted, each put in
/// its place by how many numbers end before it.
#[inline(always)]
fn block_integers<T: Element>(
    b: &[u8; SPAN],
    c: &Classes,
    starts: &mut u64,
    lasts: u64,
    got: &mut [T; BLOCK / 2],
) -> (usize, Option<usize>) {
    *got = [T::default(); BLOCK / 2];
    let zeros = *starts & lasts & c.zero;
    let mut other_starts = *starts & !zeros;
    let mut other_lasts = lasts & !zeros;
    while other_lasts != 0 {
        let s = other_starts.trailing_zeros() as usize;
        let e = other_lasts.trailing_zeros() as usize + 1;
        let place = (lasts & ((1 << s) - 1)).count_ones() as usize;
        let Some(v) = number::<T, false>(b, c, s, e) else {
            return (place, Some(s));
        };
        got[place & (BLOCK / 2 - 1)] = v;
        other_starts &= other_starts - 1;
        other_lasts &= other_lasts - 1;
    }
    // The numbers read are those that start up to the last one's end.
    if lasts != 0 {
        *starts &= (u64::MAX << (63 - lasts.leading_zeros())) << 1;
    }
    (lasts.count_ones() as usize, None)
}

/// Reads the dense values of `line` from `i` (a separator or the start of a number) on, block
/// by block, while they are plain numbers separated by spaces or tabs, onto `stream` (those
/// while `count` is below `dim`), counting them in `count`. Returns where it stopped: the
/// start of a number it did not read, or a byte that is neither a number's nor a separator
/// (`|`, a CR), or the last number of the line; the caller reads on from there one number at a
/// time.
#[inline(always)]
pub(super) fn dense_blocks<T: Element>(
    line: &[u8],
    mut i: usize,
    dim: usize,
    count: &mut usize,
    stream: &mut StreamData<T>,
) -> usize {
    // A 64-byte block holds at most 32 numbers (each followed by a separator).
    let mut got = [T::default(); BLOCK / 2];
    let mut tail;
    loop {
        let b: &[u8; SPAN] = match line.get(i..i + SPAN) {
            Some(b) => b.try_into().unwrap_or(&[0; SPAN]),
            None => {
                // The line's last bytes, a newline after them (where the block stops).
                let rest = line.get(i..).unwrap_or_default();
                if rest.is_empty() {
                    return i;
                }
                tail = [b'\n'; SPAN];
                tail[..rest.len()].copy_from_slice(rest);
                &tail
            }
        };
        let c = classify(b[..BLOCK].try_into().unwrap_or(&[0; BLOCK]));
        let numeric = c.digit | c.minus | c.dot;
        let starts = numeric & !(numeric << 1);
        // The first byte the block cannot take: not numeric or a separator, a `-` not at a
        // number's start or not before a digit (what follows the last byte is not known: a
        // number starting there is read from the next block), or a `.` not after a digit.
        let bad = !(numeric | c.separator)
            | (c.minus & !(starts & (c.digit >> 1)) & !(1 << 63))
            | (c.dot & !(c.digit << 1));
        let before_bad = bad.wrapping_sub(1) & !bad;
        let numeric = numeric & before_bad;
        let mut starts = starts & before_bad;
        // The last byte of each number followed by a separator (within the block).
        let lasts = numeric & (c.separator >> 1);
        // (Integers alone, as pixel data, skip the work of finding a `.`.)
        let (n, stop) = if c.dot == 0 {
            block_integers::<T>(b, &c, &mut starts, lasts, &mut got)
        } else {
            block_numbers::<T>(b, &c, &mut starts, lasts, &mut got)
        };
        stream.push_dense_block(&got, dim.saturating_sub(*count).min(n));
        *count += n;
        if let Some(s) = stop {
            return i + s;
        }
        if starts != 0 {
            // A number running past the block, or into a byte it cannot take.
            let at = i + starts.trailing_zeros() as usize;
            // (One of 64 bytes or more is read on by the caller.)
            if bad != 0 || at == i {
                return at;
            }
            i = at;
        } else if bad != 0 {
            return i + bad.trailing_zeros() as usize;
        } else {
            i += BLOCK;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_by_vector_are_those_byte_by_byte() {
        let mut block = [0u8; BLOCK];
        for first in (0..=255u8).step_by(7) {
            for (k, b) in block.iter_mut().enumerate() {
                *b = first.wrapping_add((k * 37) as u8);
            }
            block[3] = b'-';
            block[20] = b'\t';
            assert_eq!(classify(&block), classify_scalar(&block), "{first}");
        }
    }

    /// Runs of plain integers are read whole, up to a number of another shape, a `|`, a CR,
    /// or the line's last number.
    #[test]
    fn runs_are_read_up_to_what_the_block_cannot_take() {
        use crate::stream::Storage;
        let read = |line: &[u8], dim: usize| {
            let mut stream = StreamData::<f32>::new(Storage::Dense, dim);
            let mut count = 0;
            let to = dense_blocks(line, 0, dim, &mut count, &mut stream);
            (to, count, stream.values().to_vec())
        };
        let mut line = b" 0 255 -0 007 12345678 -1 20 -9.123456 0.5 20.".repeat(5);
        let plain = line.len();
        line.extend_from_slice(b" 1e5 |y 1:1".repeat(8).as_slice());
        let (to, count, values) = read(&line, 100);
        let want = [
            0.0, 255.0, -0.0, 7.0, 12345678.0, -1.0, 20.0, -9.123456, 0.5, 20.0,
        ]
        .repeat(5);
        assert_eq!(count, 50);
        assert_eq!(to, plain + 1, "stopped at the exponent");
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&values), bits(&want));
        // Values beyond `dim` are counted, not kept.
        let (_, count, values) = read(&line, 10);
        assert_eq!((count, values.len()), (50, 10));
        // A `|`, a CR, a number of more than 8 digits, an exponent, two `.`s: the run stops
        // there.
        for stop in [
            &b"|y 1:1"[..],
            b"\r",
            b"123456789",
            b"1.5e3",
            b"1.2.3",
            b"1..2",
            b".5",
            b"-.5",
            b"+1",
            b"-",
            b"1-2",
        ] {
            let mut line = b" 12".repeat(30);
            let at = line.len() + 1;
            line.push(b' ');
            line.extend_from_slice(stop);
            line.extend_from_slice(&b" 12".repeat(30));
            let (to, count, _) = read(&line, 100);
            assert_eq!((to, count), (at, 30), "{}", String::from_utf8_lossy(stop));
        }
        // Pixel data: the lone `0`s are placed among the other integers, up to a stop.
        let pixels = [0, 0, 255, 0, 7, 0, 0, 0, 12, 0, 100, 0];
        let mut line: Vec<u8> = (0..9)
            .flat_map(|_| pixels.iter().flat_map(|p| format!(" {p}").into_bytes()))
            .collect();
        let plain = line.len();
        line.extend_from_slice(b" -0 0 123456789 0 0\t|y 1:1");
        let (to, count, values) = read(&line, 200);
        let mut want: Vec<f32> = pixels.repeat(9).iter().map(|&p| p as f32).collect();
        want.extend([-0.0, 0.0]);
        assert_eq!((to, count), (plain + 6, 110));
        assert_eq!(bits(&values), bits(&want));
        // Short lines, and the last bytes of longer ones, are read too (the number at the
        // line's end is left to the caller: what follows it is not known here).
        for len in [1, 2, 35, 36, 37, 100] {
            let line = b" 1".repeat(len);
            assert_eq!(read(&line, 100).0, 2 * len - 1, "{len}");
            assert_eq!(read(&line, 100).1, len - 1, "{len}");
        }
    }

    /// Decimals and integers, with and without a sign, at each place of a block: the value of
    /// `parse_number`, bit for bit; longer numbers and two `.`s are left to it.
    #[test]
    fn numbers_are_those_of_parse_number() {
        use crate::number::parse_number;
        for text in [
            "0",
            "-0",
            "7",
            "255",
            "007",
            "12345678",
            "-99999999",
            "16777217",
            "0.5",
            "-0.0",
            "-9.123456",
            "1.234567",
            "1234567.",
            "20.",
            "0.000001",
            "9.9999999",
            "1.2.3",
            "123456789",
            "-1.2345678",
        ] {
            for s in 0..BLOCK - text.len() {
                let mut b = [b' '; SPAN];
                b[s..s + text.len()].copy_from_slice(text.as_bytes());
                let c = classify(b[..BLOCK].try_into().unwrap());
                let e = s + text.len();
                let bits = |v: Option<f64>| v.map(f64::to_bits);
                let want = parse_number::<f64>(text.as_bytes(), 0).ok().map(|v| v.0);
                let long = text.trim_start_matches('-').len() > 8 || text.matches('.').count() > 1;
                let want = want.filter(|_| !long);
                assert_eq!(
                    bits(number::<f64, true>(&b, &c, s, e)),
                    bits(want),
                    "{text}"
                );
                let want32 = parse_number::<f32>(text.as_bytes(), 0).ok().map(|v| v.0);
                let got32 = number::<f32, true>(&b, &c, s, e);
                if got32.is_some() || !long && want32.is_some_and(|v| v.abs() < 16777216.0) {
                    assert_eq!(got32.map(f32::to_bits), want32.map(f32::to_bits), "{text}");
                }
                if !text.contains('.') {
                    let plain = number::<f64, false>(&b, &c, s, e);
                    assert_eq!(bits(plain), bits(want), "{text}");
                    let plain32 = number::<f32, false>(&b, &c, s, e);
                    let exact = text.parse::<i64>().is_ok_and(|v| v.abs() <= 1 << 24);
                    if plain32.is_some() || exact {
                        assert_eq!(
                            plain32.map(f32::to_bits),
                            want32.map(f32::to_bits),
                            "{text}"
                        );
                    }
                }
            }
        }
    }
}
