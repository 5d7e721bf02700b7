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
//!
//! Where the CPU has AVX2 (and the bit instructions of its generation: `popcnt`, `tzcnt`), the
//! loop is compiled for it once more (`wide`): a block is classified 32 bytes per instruction,
//! and its numbers are converted four at a time: the scalar loop checks each one and places
//! its digits as one word, then vectors sum and scale four words at once, each lane by the same
//! operations as [`number`], so to the same bits (tests compare both builds of the loop).
//!
//! Most blocks are of one shape: printed floats (`-0.123456 4.567890`) have their `.` as many
//! bytes before their end, pixel data is integers; all of at most 7 digits. With AVX2 such a
//! block (checked on its masks at once: `wide::same_shape`) skips the per-number work on
//! shapes: each number's digits are loaded from the 9 bytes that end at its last one, four
//! numbers at a time, one shuffle takes out their `.`s, the bytes before each number are
//! masked off, and one scale makes the values; a `-` as the last of those bytes is a sign.
//! Lone `0`s of integers are skipped as before.

use crate::batch::StreamData;
use crate::element::{Element, Precision};
#[cfg(target_arch = "x86_64")]
use crate::number::digit_bytes;
use crate::number::{digits_value, fast, short_f32, without_dot};

/// Bytes a block covers; the loads of its last number's digits read up to 8 bytes past it.
const BLOCK: usize = 64;
const SPAN: usize = BLOCK + 8;
/// Bytes read before a block too (by loads of the 9 bytes that end at a number's last one).
const BEFORE: usize = 8;

/// A block's bytes with those around it: `BEFORE` bytes, then the `SPAN` from the block's start.
type Window = [u8; BEFORE + SPAN];

/// The bytes of `w` from its block's start.
#[inline(always)]
fn block_of(w: &Window) -> &[u8; SPAN] {
    w[BEFORE..].try_into().unwrap_or(&[0; SPAN])
}

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

/// The number `b[s..e]`, whose bytes the block's checks passed (an optional leading `-`
/// followed by a digit, then digits and `.`s, each `.` after a digit), in parts: its digits
/// (from the lowest byte; bytes past them to be ignored), how many, how many of them are
/// decimals, and whether it has a `-`. `None` when it has more than 8 bytes after its sign or
/// two `.`s. Without `DOTS` the block has no `.`: the number is an integer.
#[inline(always)]
fn parts<const DOTS: bool>(
    b: &[u8; SPAN],
    c: &Classes,
    s: usize,
    e: usize,
) -> Option<(u64, usize, usize, usize)> {
    let neg = (c.minus >> s) as usize & 1;
    let body = s + neg;
    let len = e - body;
    if len > 8 {
        return None;
    }
    let at = body & (BLOCK - 1);
    let w = u64::from_le_bytes(b[at..at + 8].try_into().unwrap_or_default());
    if !DOTS {
        return Some((w, len, 0, neg));
    }
    let dots = (c.dot >> at) & ((1 << len) - 1);
    if dots & dots.wrapping_sub(1) != 0 {
        return None;
    }
    // Where the `.` is (`len` when there is none), and the bytes after it moved down onto it.
    let dot = (dots | 1 << len).trailing_zeros() as usize;
    let count = len - (dot < len) as usize;
    Some((without_dot(w, dot), count, count - dot, neg))
}

/// The value of the number `b[s..e]` (see [`parts`]); `None` where [`parts`] has none or `fast`
/// cannot give the value exactly.
#[inline(always)]
fn number<T: Element, const DOTS: bool>(
    b: &[u8; SPAN],
    c: &Classes,
    s: usize,
    e: usize,
) -> Option<T> {
    let (digits, count, decimals, neg) = parts::<DOTS>(b, c, s, e)?;
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
    read_past(starts, lasts);
    (lasts.count_ones() as usize, None)
}

/// Where a block's numbers are, by [`numbers`].
struct Numbers {
    /// The first byte the block cannot take: not numeric or a separator, a `-` not at a
    /// number's start or not before a digit (what follows the last byte is not known: a number
    /// starting there is read from the next block), or a `.` not after a digit.
    bad: u64,
    /// The first byte of each number before `bad`'s first.
    starts: u64,
    /// The last byte of each of those followed by a separator (within the block).
    lasts: u64,
}

/// Where the numbers of a block classified as `c` are.
#[inline(always)]
fn numbers(c: &Classes) -> Numbers {
    let numeric = c.digit | c.minus | c.dot;
    let starts = numeric & !(numeric << 1);
    let bad = !(numeric | c.separator)
        | (c.minus & !(starts & (c.digit >> 1)) & !(1 << 63))
        | (c.dot & !(c.digit << 1));
    let before_bad = bad.wrapping_sub(1) & !bad;
    Numbers {
        bad,
        starts: starts & before_bad,
        lasts: numeric & before_bad & (c.separator >> 1),
    }
}

/// Takes out of `starts` the numbers read: those that start up to the last one's end.
#[inline(always)]
fn read_past(starts: &mut u64, lasts: u64) {
    if lasts != 0 {
        *starts &= (u64::MAX << (63 - lasts.leading_zeros())) << 1;
    }
}

/// How a block is classified and its numbers converted: [`OneAtATime`], or four at a time with
/// AVX2 (`wide::ByFour`).
trait BlockReader {
    fn classify(&self, block: &[u8; BLOCK]) -> Classes;

    /// [`block_numbers`]'s work (`DOTS`), or [`block_integers`]'s, to its results.
    fn numbers<T: Element, const DOTS: bool>(
        &mut self,
        w: &Window,
        c: &Classes,
        starts: &mut u64,
        lasts: u64,
        got: &mut [T; BLOCK / 2],
    ) -> (usize, Option<usize>);
}

/// The portable [`BlockReader`].
struct OneAtATime;

impl BlockReader for OneAtATime {
    #[inline(always)]
    fn classify(&self, block: &[u8; BLOCK]) -> Classes {
        classify(block)
    }

    #[inline(always)]
    fn numbers<T: Element, const DOTS: bool>(
        &mut self,
        w: &Window,
        c: &Classes,
        starts: &mut u64,
        lasts: u64,
        got: &mut [T; BLOCK / 2],
    ) -> (usize, Option<usize>) {
        if DOTS {
            block_numbers(block_of(w), c, starts, lasts, got)
        } else {
            block_integers(block_of(w), c, starts, lasts, got)
        }
    }
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
    i: usize,
    dim: usize,
    count: &mut usize,
    stream: &mut StreamData<T>,
) -> usize {
    #[cfg(target_arch = "x86_64")]
    if wide::available() {
        // SAFETY: the CPU has the instructions `wide::dense_blocks` is compiled for.
        return unsafe { wide::dense_blocks(line, i, dim, count, stream) };
    }
    read_blocks(line, i, dim, count, stream, &mut OneAtATime)
}

/// [`dense_blocks`] by `reader`.
#[inline(always)]
fn read_blocks<T: Element>(
    line: &[u8],
    mut i: usize,
    dim: usize,
    count: &mut usize,
    stream: &mut StreamData<T>,
    reader: &mut impl BlockReader,
) -> usize {
    let mut copy;
    loop {
        let window = i
            .checked_sub(BEFORE)
            .and_then(|from| line.get(from..i + SPAN));
        let w: &Window = match window {
            Some(w) => w.try_into().unwrap_or(&[0; BEFORE + SPAN]),
            None => {
                // The line's first or last bytes, newlines around them (where the block stops).
                let rest = line.get(i..).unwrap_or_default();
                if rest.is_empty() {
                    return i;
                }
                copy = [b'\n'; BEFORE + SPAN];
                let before = line.get(i.saturating_sub(BEFORE)..i).unwrap_or_default();
                copy[BEFORE - before.len()..BEFORE].copy_from_slice(before);
                let rest = &rest[..rest.len().min(SPAN)];
                copy[BEFORE..BEFORE + rest.len()].copy_from_slice(rest);
                &copy
            }
        };
        let b = block_of(w);
        let c = reader.classify(b[..BLOCK].try_into().unwrap_or(&[0; BLOCK]));
        let Numbers {
            bad,
            mut starts,
            lasts,
        } = numbers(&c);
        // A 64-byte block holds at most 32 numbers (each followed by a separator): their values
        // are written in place past the stream's (zeros at first), those within `dim` kept.
        // (Integers alone, as pixel data, skip the work of finding a `.`.)
        let got = stream.dense_block::<{ BLOCK / 2 }>();
        let (n, stop) = if c.dot == 0 {
            reader.numbers::<T, false>(w, &c, &mut starts, lasts, got)
        } else {
            reader.numbers::<T, true>(w, &c, &mut starts, lasts, got)
        };
        stream.keep_dense_block::<{ BLOCK / 2 }>(dim.saturating_sub(*count).min(n));
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

/// The loop compiled for AVX2 (see the module's documentation).
#[cfg(target_arch = "x86_64")]
mod wide {
    use super::*;
    use crate::number::wide::eight_digit_sums;
    use crate::number::{INV_POW10_F64, POW10_F64};
    use std::any::Any;
    use std::arch::x86_64::*;

    /// Whether this machine has the instructions (flags the standard library caches).
    #[inline]
    pub(super) fn available() -> bool {
        is_x86_feature_detected!("avx2")
            && is_x86_feature_detected!("bmi1")
            && is_x86_feature_detected!("popcnt")
            && is_x86_feature_detected!("lzcnt")
    }

    /// [`super::dense_blocks`] with AVX2, `popcnt` and `tzcnt`/`lzcnt`.
    #[target_feature(enable = "avx2,bmi1,popcnt,lzcnt")]
    pub(super) fn dense_blocks<T: Element>(
        line: &[u8],
        i: usize,
        dim: usize,
        count: &mut usize,
        stream: &mut StreamData<T>,
    ) -> usize {
        let mut reader = ByFour {
            pending: Pending::default(),
        };
        read_blocks(line, i, dim, count, stream, &mut reader)
    }

    /// The [`BlockReader`] of [`dense_blocks`]: made there alone, so its methods run where the
    /// CPU has AVX2.
    struct ByFour {
        pending: Pending,
    }

    /// The numbers of a block placed for conversion: each one's digits (see [`digit_bytes`]),
    /// its scale (the rounded `10^-k` an `f32`'s digits are multiplied by, or the `10^k` an
    /// `f64`'s are divided by, for `k` decimals: loaded one by one here rather than gathered
    /// four at a time) and its sign (as an `f32`'s bit; shifted for an `f64`); for integers,
    /// their places among the block's numbers (three slots past the last number's too: see
    /// [`ByFour::integers`]).
    struct Pending {
        digits: [u64; BLOCK / 2],
        scales: [f64; BLOCK / 2],
        signs: [u32; BLOCK / 2],
        places: [u32; BLOCK / 2 + 3],
    }

    impl Default for Pending {
        fn default() -> Self {
            Pending {
                digits: [0; BLOCK / 2],
                scales: [1.0; BLOCK / 2],
                signs: [0; BLOCK / 2],
                places: [0; BLOCK / 2 + 3],
            }
        }
    }

    impl BlockReader for ByFour {
        #[inline(always)]
        fn classify(&self, block: &[u8; BLOCK]) -> Classes {
            // SAFETY: `ByFour` runs where the CPU has AVX2 (see its documentation).
            unsafe { classify(block) }
        }

        #[inline(always)]
        fn numbers<T: Element, const DOTS: bool>(
            &mut self,
            w: &Window,
            c: &Classes,
            starts: &mut u64,
            lasts: u64,
            got: &mut [T; BLOCK / 2],
        ) -> (usize, Option<usize>) {
            match same_shape::<DOTS>(w, c, *starts, lasts) {
                Some(decimals) => alike::<T, DOTS>(w, c, starts, lasts, decimals, got),
                None if DOTS => self.decimals(block_of(w), c, starts, lasts, got),
                None => self.integers(block_of(w), c, starts, lasts, got),
            }
        }
    }

    impl ByFour {
        /// Lone `0`s as in [`block_integers`]; the other numbers placed, then converted four
        /// at a time, each written to its place.
        #[inline(always)]
        fn integers<T: Element>(
            &mut self,
            b: &[u8; SPAN],
            c: &Classes,
            starts: &mut u64,
            lasts: u64,
            got: &mut [T; BLOCK / 2],
        ) -> (usize, Option<usize>) {
            let p = &mut self.pending;
            let zeros = *starts & lasts & c.zero;
            let (mut unread, mut unended) = (*starts & !zeros, lasts & !zeros);
            let mut n = 0;
            let mut stop = None;
            while unended != 0 {
                let s = unread.trailing_zeros() as usize;
                let e = unended.trailing_zeros() as usize + 1;
                let place = (lasts & ((1 << s) - 1)).count_ones();
                let Some((digits, count, _, neg)) = parts::<false>(b, c, s, e) else {
                    stop = Some((place as usize, s));
                    break;
                };
                let slot = n & (BLOCK / 2 - 1);
                p.digits[slot] = digit_bytes(digits, count);
                p.signs[slot] = (neg as u32) << 31;
                p.places[slot] = place;
                n += 1;
                unread &= unread - 1;
                unended &= unended - 1;
            }
            if n > 0 {
                // The slots past the last number, in its group of four, take the place of the
                // group's first number: their values are written there first, then its own.
                let first = (n - 1) & !3;
                let place = p.places[first];
                p.places[n..n + 3].fill(place);
                let mut converted = n;
                for at in (0..n).step_by(4) {
                    // SAFETY: as in `classify`.
                    converted = converted.min(at + unsafe { convert_integers(p, at, got) });
                }
                if converted < n {
                    // An `f32` past 2^24: read one at a time from its start.
                    let left = (0..converted).fold(*starts & !zeros, |left, _| left & (left - 1));
                    return (
                        p.places[converted] as usize,
                        Some(left.trailing_zeros() as usize),
                    );
                }
            }
            if let Some((place, s)) = stop {
                return (place, Some(s));
            }
            read_past(starts, lasts);
            (lasts.count_ones() as usize, None)
        }

        /// [`block_numbers`]: the numbers placed, then converted four at a time.
        #[inline(always)]
        fn decimals<T: Element>(
            &mut self,
            b: &[u8; SPAN],
            c: &Classes,
            starts: &mut u64,
            lasts: u64,
            got: &mut [T; BLOCK / 2],
        ) -> (usize, Option<usize>) {
            let p = &mut self.pending;
            let (mut unread, mut unended) = (*starts, lasts);
            let mut n = 0;
            let mut stop = None;
            while unended != 0 {
                let s = unread.trailing_zeros() as usize;
                let e = unended.trailing_zeros() as usize + 1;
                let Some((digits, count, decimals, neg)) = parts::<true>(b, c, s, e) else {
                    stop = Some(s);
                    break;
                };
                let slot = n & (BLOCK / 2 - 1);
                p.digits[slot] = digit_bytes(digits, count);
                // (At most 7: a `.` follows a digit.)
                p.scales[slot] = match T::PRECISION {
                    Precision::Float => INV_POW10_F64[decimals & 7],
                    Precision::Double => POW10_F64[decimals & 7],
                };
                p.signs[slot] = (neg as u32) << 31;
                n += 1;
                unread &= unread - 1;
                unended &= unended - 1;
            }
            let mut converted = n;
            for at in (0..n).step_by(4) {
                // SAFETY: as in `classify`.
                converted = converted.min(at + unsafe { convert(p, at, got) });
            }
            if converted < n {
                // An `f32` past 2^24 (`fast`'s bound): read one at a time from its start.
                let left = (0..converted).fold(*starts, |left, _| left & (left - 1));
                return (converted, Some(left.trailing_zeros() as usize));
            }
            if stop.is_none() {
                read_past(starts, lasts);
            }
            (n, stop)
        }
    }

    /// The decimals every number that ends in the block has, when they all have the same shape:
    /// with `DOTS`, one `.` followed by `d` digits (1 to 6); without, integers (`d` 0); at most
    /// 7 digits; and the block starts at a separator or at a number whose first byte follows a
    /// non-digit (as `read_blocks` reads). Then the 9 bytes that end at a number's last one
    /// hold all its digits and its `.`, at the same place in each, and no other number's digit
    /// after a non-digit.
    #[inline(always)]
    pub(super) fn same_shape<const DOTS: bool>(
        w: &Window,
        c: &Classes,
        starts: u64,
        lasts: u64,
    ) -> Option<usize> {
        if lasts == 0 || starts & 1 != 0 && w[BEFORE - 1].is_ascii_digit() {
            return None;
        }
        // The bytes up to the last number's end; eight of a number's bytes in a row there.
        let ended = u64::MAX >> lasts.leading_zeros();
        let body = (c.digit | c.dot) & ended;
        let two = body & body >> 1;
        let four = two & two >> 2;
        let eight = four & four >> 4;
        if !DOTS {
            // Integers (the block has no `.`): none of 8 digits.
            return (eight == 0).then_some(0);
        }
        let dots = c.dot & ended;
        // The first number's decimals; then each `.` must be as many bytes before its
        // number's end, with digits alone after it up to the separator: where a carry added
        // past a `.` runs through the digits after it to stop.
        let d = lasts.trailing_zeros().wrapping_sub(dots.trailing_zeros());
        let after_dots = c.digit.wrapping_add(dots << 1) & !c.digit;
        ((1..=6).contains(&d)
            && dots == lasts >> d
            && after_dots == lasts << 1
            // None of 8 digits and a `.`.
            && eight & body >> 8 == 0)
            .then_some(d as usize)
    }

    /// [`block_numbers`] (`DOTS`) or [`block_integers`] for a block of numbers of one shape
    /// (see [`same_shape`]): `decimals` for every number, each read from the 9 bytes that end
    /// at its last one, four at a time with one shuffle that takes out their `.`s and one
    /// scale; no work on a number's shape (its start, length or `.`) one by one.
    #[inline(always)]
    fn alike<T: Element, const DOTS: bool>(
        w: &Window,
        c: &Classes,
        starts: &mut u64,
        lasts: u64,
        decimals: usize,
        got: &mut [T; BLOCK / 2],
    ) -> (usize, Option<usize>) {
        let scale = match T::PRECISION {
            Precision::Float => INV_POW10_F64[decimals & 7],
            Precision::Double => POW10_F64[decimals & 7],
        };
        // SAFETY: as in `classify`.
        let scale = unsafe { _mm256_set1_pd(scale) };
        // Of integers, lone `0`s are the zeros `got` starts with (as in `block_integers`).
        let mut left = if DOTS {
            lasts
        } else {
            lasts & !(*starts & c.zero)
        };
        for at in (0..left.count_ones() as usize).step_by(4) {
            let mut four = [0; 4];
            for k in 0..4 {
                // Past the last number, the group's first once more (its value to its place).
                four[k] = match left {
                    0 => four[0],
                    _ => left.trailing_zeros() as usize,
                };
                left &= left.wrapping_sub(1);
            }
            // SAFETY: as in `classify`.
            let (m, signs) = unsafe { window_sums(w, four, decimals) };
            // (At most 7 digits: no `f32` past 2^24.)
            if DOTS {
                let out = (&mut got[at..at + 4]).try_into().expect("4 values");
                // SAFETY: as in `classify`.
                unsafe { scaled(m, scale, signs, out) };
            } else {
                let mut values = [T::default(); 4];
                // SAFETY: as in `classify`.
                unsafe { scaled(m, scale, signs, &mut values) };
                // Each integer to its place among the block's numbers.
                for (&last, value) in four.iter().zip(values) {
                    got[(lasts & ((1 << last) - 1)).count_ones() as usize & (BLOCK / 2 - 1)] =
                        value;
                }
            }
        }
        read_past(starts, lasts);
        (lasts.count_ones() as usize, None)
    }

    /// For each count of decimals `d` (1 to 7), the shuffle that takes the 8 bytes other than
    /// the `.` out of the 9 that end at a number's last one (bytes 0 to 8 of a load, the `.` at
    /// `8 - d`; for integers, `d` 0, the first byte is dropped), first byte lowest, into the
    /// low 8 bytes (the high 8 zero).
    const SHUFFLES: [[u8; 16]; 8] = {
        let mut all = [[0x80; 16]; 8];
        let mut d = 0;
        while d < 8 {
            let mut k = 0;
            while k < 8 {
                all[d][k] = if k < 8 - d && d > 0 { k } else { k + 1 } as u8;
                k += 1;
            }
            d += 1;
        }
        all
    };

    /// The values of the digits of the 4 numbers whose last bytes are at `lasts` in the block of
    /// `w`, each with `decimals` after its `.` (see [`same_shape`]): what
    /// `number::digits_value` gives each.
    #[target_feature(enable = "avx2")]
    #[inline]
    fn window_sums(w: &Window, lasts: [usize; 4], decimals: usize) -> (__m128i, __m128i) {
        let shuffle: &[u8; 16] = &SHUFFLES[decimals & 7];
        // SAFETY: an unaligned load of 16 bytes.
        let shuffle = unsafe { _mm_loadu_si128(shuffle.as_ptr().cast()) };
        let low = _mm256_broadcastsi128_si256(shuffle);
        // The first and second numbers' digits to the low 64 bits of each 128, the third and
        // fourth's to the high.
        let x = _mm256_or_si256(
            _mm256_shuffle_epi8(two_windows(w, lasts[0], lasts[1]), low),
            _mm256_shuffle_epi8(
                two_windows(w, lasts[2], lasts[3]),
                _mm256_shuffle_epi32::<0x4e>(low),
            ),
        );
        let v = _mm256_sub_epi8(x, _mm256_set1_epi8(b'0' as i8));
        let digit = _mm256_cmpeq_epi8(_mm256_min_epu8(v, _mm256_set1_epi8(9)), v);
        // The bytes before a number (its sign, a separator, another number): from the last
        // non-digit below its digits down.
        let mut before = _mm256_andnot_si256(digit, _mm256_set1_epi8(-1));
        before = _mm256_or_si256(before, _mm256_srli_epi64::<8>(before));
        before = _mm256_or_si256(before, _mm256_srli_epi64::<16>(before));
        before = _mm256_or_si256(before, _mm256_srli_epi64::<32>(before));
        let digits = _mm256_andnot_si256(before, v);
        // The 128-bit halves' `[a, c, a, c]` and `[b, d, b, d]` to `[a, b, c, d]`.
        let order = _mm256_setr_epi32(0, 4, 1, 5, 0, 0, 0, 0);
        let sums = _mm256_permutevar8x32_epi32(eight_digit_sums(digits), order);
        // A number's sign: its last non-digit byte (at most 7 digits: in the window) a `-`.
        let last_before = _mm256_andnot_si256(_mm256_srli_epi64::<8>(before), before);
        let minus = _mm256_cmpeq_epi8(v, _mm256_set1_epi8(b'-'.wrapping_sub(b'0') as i8));
        let positive =
            _mm256_cmpeq_epi64(_mm256_and_si256(minus, last_before), _mm256_setzero_si256());
        // The 64-bit lanes `[a, c, b, d]`'s high halves (the sign bit of an `f32`'s) in order.
        let order = _mm256_setr_epi32(1, 5, 3, 7, 0, 0, 0, 0);
        let signs = _mm256_andnot_si256(
            _mm256_permutevar8x32_epi32(positive, order),
            _mm256_set1_epi32(i32::MIN),
        );
        (_mm256_castsi256_si128(sums), _mm256_castsi256_si128(signs))
    }

    /// The 16 bytes from 8 before the byte `a` of the block of `w`, and those from 8 before
    /// `b`, in a vector's 128-bit halves.
    #[target_feature(enable = "avx2")]
    #[inline]
    fn two_windows(w: &Window, a: usize, b: usize) -> __m256i {
        let load = |at: usize| -> __m128i {
            let at = BEFORE + (at & (BLOCK - 1)) - 8;
            let bytes: &[u8; 16] = w[at..at + 16].try_into().expect("16 bytes");
            // SAFETY: an unaligned load of 16 bytes.
            unsafe { _mm_loadu_si128(bytes.as_ptr().cast()) }
        };
        _mm256_inserti128_si256::<1>(_mm256_castsi128_si256(load(a)), load(b))
    }

    /// [`super::classify`] 32 bytes at a time.
    #[target_feature(enable = "avx2")]
    #[inline]
    fn classify(block: &[u8; BLOCK]) -> Classes {
        let mut c = Classes::default();
        for (k, part) in block.chunks_exact(32).enumerate() {
            // SAFETY: an unaligned load of the 32 bytes of `part`.
            let x = unsafe { _mm256_loadu_si256(part.as_ptr().cast()) };
            let from_zero = _mm256_sub_epi8(x, _mm256_set1_epi8(b'0' as i8));
            // A digit is at most 9 above '0' (unsigned).
            let nine = _mm256_set1_epi8(9);
            let digit = _mm256_cmpeq_epi8(_mm256_min_epu8(from_zero, nine), from_zero);
            let shift = 32 * k as u32;
            c.digit |= bits(digit) << shift;
            c.minus |= bits(is(x, b'-')) << shift;
            c.dot |= bits(is(x, b'.')) << shift;
            c.zero |= bits(is(x, b'0')) << shift;
            c.separator |= bits(_mm256_or_si256(is(x, b' '), is(x, b'\t'))) << shift;
        }
        c
    }

    /// The bytes of `x` equal to `byte`.
    #[target_feature(enable = "avx2")]
    #[inline]
    fn is(x: __m256i, byte: u8) -> __m256i {
        _mm256_cmpeq_epi8(x, _mm256_set1_epi8(byte as i8))
    }

    /// A bit per byte of a comparison's result.
    #[target_feature(enable = "avx2")]
    #[inline]
    fn bits(m: __m256i) -> u64 {
        _mm256_movemask_epi8(m) as u32 as u64
    }

    /// The values of the 4 numbers of `p` from `at` on into `got[at..at + 4]`: what [`number`]
    /// gives each. Returns which of them is the first `f32` past 2^24 (left to `number::fast`,
    /// which takes none), 32 (past any block's numbers) if none is.
    #[target_feature(enable = "avx2")]
    #[inline]
    fn convert<T: Element>(p: &Pending, at: usize, got: &mut [T; BLOCK / 2]) -> usize {
        let scales: &[f64; 4] = p.scales[at..at + 4].try_into().expect("4 scales");
        // SAFETY: an unaligned load of 4 values.
        let scale = unsafe { _mm256_loadu_pd(scales.as_ptr()) };
        let out = (&mut got[at..at + 4]).try_into().expect("4 values");
        scaled(sums(p, at), scale, load128(&p.signs, at), out)
    }

    /// The 4 integers `m`, each scaled (see [`Pending`]) and given its sign (an `f32`'s bit), into
    /// `out`; which is the first `f32` past 2^24, 32 if none is (see [`convert`]).
    #[target_feature(enable = "avx2")]
    #[inline]
    fn scaled<T: Element>(m: __m128i, scale: __m256d, signs: __m128i, out: &mut [T; 4]) -> usize {
        let out: &mut dyn Any = out;
        if let Some(out) = out.downcast_mut::<[f32; 4]>() {
            let v = _mm256_cvtpd_ps(_mm256_mul_pd(_mm256_cvtepi32_pd(m), scale));
            let v = _mm_or_si128(_mm_castps_si128(v), signs);
            store128(out, 0, v);
            return past_f32(m);
        } else if let Some(out) = out.downcast_mut::<[f64; 4]>() {
            let v = _mm256_div_pd(_mm256_cvtepi32_pd(m), scale);
            let signs = _mm256_slli_epi64::<32>(_mm256_cvtepu32_epi64(signs));
            let v = _mm256_or_si256(_mm256_castpd_si256(v), signs);
            // SAFETY: an unaligned store of 4 values.
            unsafe { _mm256_storeu_si256(out.as_mut_ptr().cast(), v) };
        }
        BLOCK / 2
    }

    /// The integers of the 4 numbers of `p` from `at` on into their places in `got` (what
    /// [`number`] gives each, without `.`s). Returns which is the first `f32` past 2^24, 32 if
    /// none is.
    #[target_feature(enable = "avx2")]
    #[inline]
    fn convert_integers<T: Element>(p: &Pending, at: usize, got: &mut [T; BLOCK / 2]) -> usize {
        let got: &mut dyn Any = got;
        let m = sums(p, at);
        let signs = load128(&p.signs, at);
        let places: &[u32; 4] = p.places[at..at + 4].try_into().expect("4 places");
        if let Some(got) = got.downcast_mut::<[f32; BLOCK / 2]>() {
            let v = _mm_or_si128(_mm_castps_si128(_mm_cvtepi32_ps(m)), signs);
            let mut four = [0f32; 4];
            store128(&mut four, 0, v);
            // The last first: past the last number its slots' places are the first's.
            for k in (0..4).rev() {
                got[places[k] as usize & (BLOCK / 2 - 1)] = four[k];
            }
            return past_f32(m);
        } else if let Some(got) = got.downcast_mut::<[f64; BLOCK / 2]>() {
            let signs = _mm256_slli_epi64::<32>(_mm256_cvtepu32_epi64(signs));
            let v = _mm256_or_si256(_mm256_castpd_si256(_mm256_cvtepi32_pd(m)), signs);
            let mut four = [0f64; 4];
            // SAFETY: an unaligned store of 4 values.
            unsafe { _mm256_storeu_si256(four.as_mut_ptr().cast(), v) };
            for k in (0..4).rev() {
                got[places[k] as usize & (BLOCK / 2 - 1)] = four[k];
            }
        }
        BLOCK / 2
    }

    /// Which of four integers is the first past 2^24, 32 if none is: beyond it an `f32` is
    /// left to `number::fast`, which takes none.
    #[target_feature(enable = "avx2")]
    #[inline]
    fn past_f32(m: __m128i) -> usize {
        let past = _mm_cmpgt_epi32(m, _mm_set1_epi32(1 << 24));
        let past = _mm_movemask_ps(_mm_castsi128_ps(past)) as u64;
        (past | 1 << (BLOCK / 2)).trailing_zeros() as usize
    }

    /// The values of the 4 numbers of `p` from `at` on (their digits summed as
    /// `number::digits_value` does one).
    #[target_feature(enable = "avx2")]
    #[inline]
    fn sums(p: &Pending, at: usize) -> __m128i {
        let words: &[u64; 4] = p.digits[at..at + 4].try_into().expect("4 words");
        // SAFETY: an unaligned load of 4 words.
        let y = unsafe { _mm256_loadu_si256(words.as_ptr().cast()) };
        // The lanes' `[a, b, a, b]` to `[a, b, c, d]`.
        let order = _mm256_setr_epi32(0, 1, 4, 5, 0, 0, 0, 0);
        _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(eight_digit_sums(y), order))
    }

    #[target_feature(enable = "avx2")]
    #[inline]
    fn load128(v: &[u32; BLOCK / 2], at: usize) -> __m128i {
        let four: &[u32; 4] = v[at..at + 4].try_into().expect("4 values");
        // SAFETY: an unaligned load of 4 values.
        unsafe { _mm_loadu_si128(four.as_ptr().cast()) }
    }

    #[target_feature(enable = "avx2")]
    #[inline]
    fn store128(got: &mut [f32], at: usize, v: __m128i) {
        let four: &mut [f32; 4] = (&mut got[at..at + 4]).try_into().expect("4 values");
        // SAFETY: an unaligned store of 4 values.
        unsafe { _mm_storeu_si128(four.as_mut_ptr().cast(), v) }
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

    /// Reads `line` by each reader there is, which must agree (the values' bits, the count, where
    /// it stopped); the portable reader's results.
    fn read_both<T: Element>(line: &[u8], dim: usize) -> (usize, usize, Vec<T>) {
        use crate::stream::Storage;
        let mut stream = StreamData::<T>::new(Storage::Dense, dim);
        let mut count = 0;
        let to = read_blocks(line, 0, dim, &mut count, &mut stream, &mut OneAtATime);
        let portable = (to, count, stream.values().to_vec());
        let mut stream = StreamData::<T>::new(Storage::Dense, dim);
        let mut count = 0;
        if let Some(to) = read_wide(line, dim, &mut count, &mut stream) {
            let bits = |v: &[T]| v.iter().map(|x| x.to_f64().to_bits()).collect::<Vec<_>>();
            assert_eq!(
                (to, count, bits(stream.values())),
                (portable.0, portable.1, bits(&portable.2)),
                "{}",
                String::from_utf8_lossy(line)
            );
        }
        portable
    }

    /// The AVX2 reader's results, where the CPU has the instructions.
    #[cfg(target_arch = "x86_64")]
    fn read_wide<T: Element>(
        line: &[u8],
        dim: usize,
        count: &mut usize,
        stream: &mut StreamData<T>,
    ) -> Option<usize> {
        // SAFETY: the CPU has the instructions (checked first).
        wide::available().then(|| unsafe { wide::dense_blocks(line, 0, dim, count, stream) })
    }

    #[cfg(not(target_arch = "x86_64"))]
    fn read_wide<T: Element>(
        _: &[u8],
        _: usize,
        _: &mut usize,
        _: &mut StreamData<T>,
    ) -> Option<usize> {
        None
    }

    /// The AVX2 reader against the portable one on lines of numbers of every shape the blocks
    /// take or stop at, f32 and f64 (on a CPU without AVX2 there is one reader: nothing to
    /// compare, and the test says so).
    #[test]
    fn four_at_a_time_is_one_at_a_time() {
        use crate::stream::Storage;
        let mut stream = StreamData::<f32>::new(Storage::Dense, 1);
        if read_wide(b" 1 2", 1, &mut 0, &mut stream).is_none() {
            eprintln!("no AVX2 here: the portable reader alone");
            return;
        }
        let mut rng = crate::number::XorShift(0x9e37_79b9_7f4a_7c15);
        let mut next = |n: u64| rng.below(n);
        for _ in 0..3000 {
            let mut line = Vec::new();
            // Mostly one shape per line (as data is), with others mixed in.
            let main_shape = next(11);
            // The decimals of this line's numbers of one shape; whether it has signs.
            let alike = 1 + next(6);
            let signs = next(4) != 0;
            for _ in 0..next(90) {
                let shape = if next(10) < 8 { main_shape } else { next(14) };
                let digits = |n: u64, next: &mut dyn FnMut(u64) -> u64| {
                    (0..n).map(|_| b'0' + next(10) as u8).collect::<Vec<u8>>()
                };
                if signs && next(3) == 0 {
                    line.push(b'-');
                }
                let token: Vec<u8> = match shape {
                    0 => b"0".to_vec(),
                    1 | 2 => digits(1 + next(8), &mut next),
                    3..=5 => {
                        let int = 1 + next(3);
                        let mut t = digits(int, &mut next);
                        t.push(b'.');
                        t.extend(digits(next(9 - int), &mut next));
                        t
                    }
                    6 => {
                        let mut t = digits(1 + next(2), &mut next);
                        t.push(b'.');
                        t.extend(digits(6, &mut next));
                        t
                    }
                    7 | 8 => {
                        // Up to 8 digits: 7 at most are read by the block.
                        let mut t = digits(1 + next(8 - alike), &mut next);
                        t.push(b'.');
                        t.extend(digits(alike, &mut next));
                        t
                    }
                    9 => digits(9 + next(3), &mut next),
                    10 => b"1.5e3".to_vec(),
                    11 => b"1.2.3".to_vec(),
                    12 => b"16777217.".to_vec(),
                    _ => b"|y".to_vec(),
                };
                line.extend(token);
                line.push(if next(20) == 0 { b'\t' } else { b' ' });
            }
            read_both::<f32>(&line, 100);
            read_both::<f64>(&line, 100);
        }
        // Blocks of 32 one-byte numbers (each group of four full, the last one too), one of
        // them not `0`.
        for at in 0..32 {
            let mut line = b"0 ".repeat(40);
            line[2 * at] = b'7';
            let (_, count, values) = read_both::<f32>(&line, 100);
            assert_eq!((count, values[at]), (40, 7.0), "{at}");
            read_both::<f64>(&line, 100);
        }
        // Values at the edge of `f32`'s exact integers, in every slot of a group of four.
        for at in 0..5 {
            let mut line = b" 1.5".repeat(at);
            line.extend_from_slice(b" 16777216 16777217 99999999 1.5 2.5 3.5 ");
            let (to, count, _) = read_both::<f32>(&line, 100);
            assert_eq!((to, count), (4 * at + 10, at + 1));
            read_both::<f64>(&line, 100);
            // A block of integers, lone `0`s among them.
            let mut line = b" 7 0".repeat(at);
            line.extend_from_slice(b" 16777216 -0 16777217 0 99999999 1 2 3 ");
            let (to, count, _) = read_both::<f32>(&line, 100);
            assert_eq!((to, count), (4 * at + 13, 2 * at + 2));
            read_both::<f64>(&line, 100);
        }
    }

    /// Blocks whose numbers all have one shape (integers, or each count of decimals; with and
    /// without a sign, 1 to 7 digits) are found as such and read as one at a time; blocks with
    /// anything else among their numbers are not.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn blocks_of_one_shape_are_found() {
        /// The shape `wide::same_shape` finds in a block of `text` after the byte `before`.
        fn shape<const DOTS: bool>(before: u8, text: &str) -> Option<usize> {
            let mut w = [b'\n'; BEFORE + SPAN];
            w[BEFORE - 1] = before;
            w[BEFORE..BEFORE + text.len()].copy_from_slice(text.as_bytes());
            let c = classify_scalar(block_of(&w)[..BLOCK].try_into().unwrap());
            let n = numbers(&c);
            wide::same_shape::<DOTS>(&w, &c, n.starts, n.lasts)
        }
        /// `text`'s numbers as both readers read them (`read_both` compares) and as
        /// `parse_number` does, bit for bit.
        fn read_as_parse_number(text: &str) {
            let want: Vec<f64> = text
                .split_whitespace()
                .map(|t| crate::number::parse_number(t.as_bytes(), 0).unwrap().0)
                .collect();
            let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            let (_, count, got) = read_both::<f64>(text.as_bytes(), 100);
            assert_eq!((count, bits(&got)), (want.len(), bits(&want)), "{text}");
            assert_eq!(read_both::<f32>(text.as_bytes(), 100).1, want.len());
        }
        for d in 1..=6 {
            for int in 1..=7 - d {
                let number = |sign: &str| format!("{sign}{}.{}", "9".repeat(int), "1".repeat(d));
                let mut text = format!("{} {}\t{}", number(""), number("-"), number("-"));
                while text.len() + int + d + 3 < BLOCK {
                    text = format!("{text} {}", number(["", "-"][text.len() % 2]));
                }
                text.push(' ');
                assert_eq!(shape::<true>(b' ', &text), Some(d), "{text}");
                read_as_parse_number(&text);
                // A digit before the block (one of its numbers would start there).
                assert_eq!(shape::<true>(b'5', &text), None, "{text}");
            }
        }
        let pixels = "0 0 255 0 7 -0 0 -12 1234567 0 00 99 0 1 ";
        assert_eq!(shape::<false>(b' ', pixels), Some(0));
        read_as_parse_number(pixels);
        assert_eq!(shape::<false>(b'1', pixels), None);
        assert_eq!(shape::<false>(b' ', "0 12345678 0 "), None);
        for other in [
            "0.5 0.25 ",
            "0.5 7 0.5 ",
            "1.5 1234567.8 1.5 ",
            "12.345678 ",
            "1.5 1.2.3 1.5 ",
            "20. 1.5 ",
            "1.5 2. ",
            "1.5 -2 ",
            "7 8 ",
        ] {
            assert_eq!(shape::<true>(b' ', other), None, "{other}");
        }
    }

    /// Runs of plain integers are read whole, up to a number of another shape, a `|`, a CR,
    /// or the line's last number.
    #[test]
    fn runs_are_read_up_to_what_the_block_cannot_take() {
        let read = read_both::<f32>;
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
