//! Runs of dense values written alike (`0.123 0.456 0.789 ...`: one sign, as many digits before
//! and after the `.`, one space between), read four at a time with vector instructions.
//!
//! One number after the other, a dense value costs about 16 ns, most of it the work of finding
//! its digits and where it ends (docs/benchmarks.md). Values written by one format string mostly
//! share one shape, so after a number is read the usual way, the numbers after it are checked
//! against its shape, four at once (two 16-byte loads, each holding one or two whole numbers
//! and the space after each), and converted together: a byte shuffle gathers their digits,
//! multiply-adds make the integers, one multiplication in `f64` by the rounded `10^-f` and a
//! rounding to `f32` give the values. Those are the operations of `number::short_f32` and
//! `number::fast` for numbers of at most 7 digits, so the values are the same bits. Where the
//! shape stops (another shape, a sign, a line end, a bad number) the caller reads on one number
//! at a time, so errors are found and placed as before.

use crate::number;

/// Numbers of at most this many digits (so below 2^24: see `number::fast`).
const MAX_DIGITS: usize = 7;

/// The shape of a number: `-`?, `int` digits, and `.` with `frac` digits (`dot`) or not.
#[derive(Clone, Copy)]
struct Shape {
    neg: bool,
    int: usize,
    dot: bool,
    frac: usize,
}

impl Shape {
    /// Its bytes, with the space after it.
    const fn period(&self) -> usize {
        self.neg as usize + self.int + self.dot as usize + self.frac + 1
    }

    const fn index(&self) -> usize {
        (((self.neg as usize) * 2 + self.dot as usize) * 8 + self.int) * 8 + self.frac
    }
}

/// What one 16-byte lane holding `per_lane` numbers of a shape must look like, and how its
/// digits are gathered. A byte `x` fits where `x - base <= limit` (unsigned): a digit where
/// `base` is `'0'` and `limit` 9, the exact byte where `limit` is 0, anything past the numbers
/// (limit 255).
#[derive(Clone, Copy)]
struct Layout {
    /// 0 for no layout (a shape not read here).
    per_lane: usize,
    base: [u8; 16],
    limit: [u8; 16],
    /// The digits of the lane's first (second) number right-aligned in bytes 0..8 (8..16),
    /// most significant first; 0x80 (zero) before them.
    gather: [u8; 16],
}

const NO_LAYOUT: Layout = Layout {
    per_lane: 0,
    base: [0; 16],
    limit: [0; 16],
    gather: [0; 16],
};

const fn layout(s: Shape) -> Layout {
    let p = s.period();
    let digits = s.int + s.frac;
    if s.int == 0 || digits > MAX_DIGITS || (!s.dot && s.frac > 0) || p > 16 {
        return NO_LAYOUT;
    }
    let per_lane = if 2 * p <= 16 { 2 } else { 1 };
    let mut l = Layout {
        per_lane,
        base: [0; 16],
        limit: [255; 16],
        gather: [0x80; 16],
    };
    let mut k = 0;
    while k < per_lane {
        let at = k * p;
        let mut i = 0;
        let mut digit = 0;
        while i < p {
            let (base, limit) = if i == p - 1 {
                (b' ', 0)
            } else if s.neg && i == 0 {
                (b'-', 0)
            } else if s.dot && i == s.neg as usize + s.int {
                (b'.', 0)
            } else {
                l.gather[8 * k + 8 - digits + digit] = (at + i) as u8;
                digit += 1;
                (b'0', 9)
            };
            l.base[at + i] = base;
            l.limit[at + i] = limit;
            i += 1;
        }
        k += 1;
    }
    l
}

/// Every shape's layout, by [`Shape::index`].
static LAYOUTS: [Layout; 256] = {
    let mut t = [NO_LAYOUT; 256];
    let mut i = 0;
    while i < 256 {
        let s = Shape {
            neg: i & 128 != 0,
            dot: i & 64 != 0,
            int: (i >> 3) & 7,
            frac: i & 7,
        };
        t[s.index()] = layout(s);
        i += 1;
    }
    t
};

/// Whether this machine has the instructions (a flag the standard library caches).
pub(super) fn available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// After the number `b[start..end]`, just read and followed by one space: reads the numbers of
/// its shape that follow, four at a time, into `out`, and returns where it stopped (the start
/// of the first number not read; `end` if none was, or where the CPU has not the instructions).
#[inline]
pub(super) fn run(b: &[u8], start: usize, end: usize, out: &mut Vec<f32>) -> usize {
    // First, cheaply, whether the next four numbers are as long: if not (numbers written as
    // short as they can be, `0 0.5 0.25`), no group of them is.
    let period = end - start + 1;
    if b.get(end + period) != Some(&b' ') || b.get(end + 4 * period) != Some(&b' ') {
        return end;
    }
    if !available() {
        return end;
    }
    let token = &b[start..end];
    let neg = token.first() == Some(&b'-');
    let dot = token.iter().position(|&c| c == b'.');
    let len = token.len() - neg as usize;
    let (int, frac) = match dot {
        Some(d) => (d - neg as usize, token.len() - d - 1),
        None => (len, 0),
    };
    if int > 7 || frac > 7 {
        return end;
    }
    let shape = Shape {
        neg,
        int,
        dot: dot.is_some(),
        frac,
    };
    let l = &LAYOUTS[shape.index()];
    let scale = number::inv_pow10(frac);
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: the CPU has AVX2 (`available`, above).
        let to = match l.per_lane {
            2 => unsafe { x86::groups::<2>(b, end + 1, period, l, neg, scale, out) },
            1 => unsafe { x86::groups::<1>(b, end + 1, period, l, neg, scale, out) },
            _ => end,
        };
        // No group read: `end`, which the caller counts as a miss.
        if to > end + 1 {
            to
        } else {
            end
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (l, scale, out);
        end
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::Layout;
    use crate::number::wide::eight_digit_sums;
    use std::arch::x86_64::*;

    /// 16 bytes of `b` at `i` (which has them).
    #[inline(always)]
    fn load(b: &[u8], i: usize) -> __m128i {
        let bytes: &[u8; 16] = b[i..i + 16].try_into().expect("16 bytes");
        // SAFETY: an unaligned load of 16 readable bytes.
        unsafe { _mm_loadu_si128(bytes.as_ptr().cast()) }
    }

    /// From `t` on, groups of `2 * K` numbers of `period` bytes each (the space after each
    /// included) laid out as `l` says, while they are; returns where the first group that is
    /// not starts (`t` if the first is not).
    ///
    /// # Safety
    /// The CPU must have AVX2.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn groups<const K: usize>(
        b: &[u8],
        mut t: usize,
        period: usize,
        l: &Layout,
        neg: bool,
        scale: f64,
        out: &mut Vec<f32>,
    ) -> usize {
        // SAFETY: the intrinsics need AVX2 at most (the caller's word); the one store writes
        // the 16 bytes of `got`. (One block: before Rust 1.87 every intrinsic is unsafe.)
        unsafe {
            let base = _mm256_broadcastsi128_si256(load(&l.base, 0));
            let limit = _mm256_broadcastsi128_si256(load(&l.limit, 0));
            let gather = _mm256_broadcastsi128_si256(load(&l.gather, 0));
            // The numbers of each lane (1 or 2 at the bottom of its 128 bits) side by side.
            let order = if K == 2 {
                _mm256_setr_epi32(0, 1, 4, 5, 0, 0, 0, 0)
            } else {
                _mm256_setr_epi32(0, 4, 0, 0, 0, 0, 0, 0)
            };
            let scale = _mm256_set1_pd(scale);
            let sign = _mm_set1_epi32(if neg { i32::MIN } else { 0 });
            let lane = K * period;
            while t + lane + 16 <= b.len() {
                let x = _mm256_set_m128i(load(b, t + lane), load(b, t));
                let y = _mm256_sub_epi8(x, base);
                let fits = _mm256_cmpeq_epi8(_mm256_max_epu8(y, limit), limit);
                if _mm256_movemask_epi8(fits) != -1 {
                    break;
                }
                let eights = eight_digit_sums(_mm256_shuffle_epi8(y, gather));
                let ints = _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(eights, order));
                let values = _mm256_cvtpd_ps(_mm256_mul_pd(_mm256_cvtepi32_pd(ints), scale));
                let values = _mm_or_si128(_mm_castps_si128(values), sign);
                let mut got = [0f32; 4];
                _mm_storeu_si128(got.as_mut_ptr().cast(), values);
                out.extend_from_slice(&got[..2 * K]);
                t += 2 * lane;
            }
            t
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Where the instructions are there, runs are read four at a time, up to the first number
    /// of another shape (here the fifth after the first, and the ninth).
    #[test]
    fn runs_are_read_up_to_another_shape() {
        if !available() {
            return;
        }
        let text =
            b"0.125 0.250 0.375 0.500 9.999 0.625 0.750 0.875 1.000 -0.125 2.5 1 2 3 4 5 6 7 8 9";
        let mut v = vec![0.125];
        let to = run(text, 0, 5, &mut v);
        assert_eq!(to, 6 * 9, "{v:?}");
        assert_eq!(v, [0.125, 0.25, 0.375, 0.5, 9.999, 0.625, 0.75, 0.875, 1.0]);
        // Negative numbers, integers.
        let text = b"-1.5 -2.5 -0.0 -3.5 -4.5 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19";
        let mut v = vec![-1.5];
        assert_eq!(run(text, 0, 4, &mut v), 5 * 5);
        assert_eq!(v, [-1.5, -2.5, -0.0, -3.5, -4.5]);
        assert!(v[2].is_sign_negative());
        let mut v = vec![0.0];
        assert_eq!(run(text, 25, 26, &mut v), 25 + 2 * 9, "{v:?}");
        assert_eq!(v, [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]);
    }

    /// Numbers as long as the first but of another shape (signs alternating in 7-byte slots,
    /// `% .3f`): nothing read, and `end` says so (the caller counts it as a miss).
    #[test]
    fn nothing_read_is_end() {
        let text = b"-0.250  0.125 -0.375  0.500 -0.625  0.750 -0.875  1.000 ";
        let mut v = vec![-0.25];
        assert_eq!(run(text, 0, 6, &mut v), 6);
        assert_eq!(v, [-0.25]);
    }

    #[test]
    fn layouts_place_each_byte() {
        // `-0.12 `: two to a lane.
        let l = &LAYOUTS[Shape {
            neg: true,
            int: 1,
            dot: true,
            frac: 2,
        }
        .index()];
        assert_eq!(l.per_lane, 2);
        assert_eq!(&l.base[..12], b"-0.00 -0.00 ");
        assert_eq!(&l.limit[..13], &[0, 9, 0, 9, 9, 0, 0, 9, 0, 9, 9, 0, 255]);
        let z = 0x80;
        assert_eq!(l.gather, [z, z, z, z, z, 1, 3, 4, z, z, z, z, z, 7, 9, 10]);
        // 8 digits, or none before the `.`: no layout.
        for (int, frac) in [(4, 4), (0, 3)] {
            let s = Shape {
                neg: false,
                int,
                dot: true,
                frac,
            };
            assert_eq!(LAYOUTS[s.index()].per_lane, 0, "{int} {frac}");
        }
    }
}
