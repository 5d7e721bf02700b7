//! The reader's pseudo-random generator: SplitMix64, fully specified here so that a seed gives
//! the same order on every run, machine and version of exfeed (no dependency can change it).
//!
//! SplitMix64 (Steele, Lea, Flood 2014): the state advances by the golden-ratio increment
//! `0x9E3779B97F4A7C15` and each output is the state passed through the mixing function
//! `z ^= z >> 30; z *= 0xBF58476D1CE4E5B9; z ^= z >> 27; z *= 0x94D049BB133111EB; z ^= z >> 31`.
//! Bounded integers use Lemire's multiply-and-reject method, so they are exactly uniform.

/// A SplitMix64 generator.
#[derive(Debug, Clone)]
pub struct SplitMix64 {
    state: u64,
}

const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl SplitMix64 {
    /// A generator starting from `seed` (the reader starts from [`SplitMix64::for_stream`]).
    #[cfg(test)]
    pub fn new(seed: u64) -> Self {
        SplitMix64 { state: seed }
    }

    /// An independent generator for sub-stream `stream` of `seed` (the chunk permutation of a
    /// sweep is stream 0, the shuffle of its window `k` is stream `k + 1`).
    pub fn for_stream(seed: u64, stream: u64) -> Self {
        SplitMix64 {
            state: mix(seed ^ mix(stream.wrapping_add(GOLDEN))),
        }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(GOLDEN);
        mix(self.state)
    }

    /// A uniform integer in `[0, n)`; `n` must be positive.
    pub fn below(&mut self, n: u64) -> u64 {
        debug_assert!(n > 0);
        // Lemire: the high half of x * n is uniform once the low half is outside the biased zone.
        let threshold = n.wrapping_neg() % n;
        loop {
            let m = (self.next_u64() as u128) * (n as u128);
            if (m as u64) >= threshold {
                return (m >> 64) as u64;
            }
        }
    }

    /// A uniform float in `[0, 1)`: the top 53 bits of [`SplitMix64::next_u64`] times 2^-53.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Fisher-Yates shuffle: for i from the end down to 1, swap item i with item `below(i + 1)`.
    pub fn shuffle<X>(&mut self, items: &mut [X]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            items.swap(i, j);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_values() {
        // The published SplitMix64 outputs for seed 1234567.
        let mut r = SplitMix64::new(1234567);
        assert_eq!(r.next_u64(), 6457827717110365317);
        assert_eq!(r.next_u64(), 3203168211198807973);
    }

    #[test]
    fn below_stays_in_range_and_covers_it() {
        let mut r = SplitMix64::new(7);
        let mut seen = [0u32; 7];
        for _ in 0..7000 {
            seen[r.below(7) as usize] += 1;
        }
        assert!(seen.iter().all(|&c| c > 0));
        assert_eq!(SplitMix64::new(3).below(1), 0);
    }

    #[test]
    fn shuffle_is_a_permutation() {
        let mut v: Vec<u32> = (0..100).collect();
        SplitMix64::for_stream(5, 2).shuffle(&mut v);
        assert_ne!(v, (0..100).collect::<Vec<_>>());
        v.sort_unstable();
        assert_eq!(v, (0..100).collect::<Vec<_>>());
    }
}
