//! `std::mt19937_64`, the 64-bit Mersenne Twister of C++11 (`[rand.predef]`): the generator
//! CNTK's randomizers draw from. Its parameters and seeding are fixed by the C++ standard, so
//! every conforming library gives the same numbers for the same seed.

const N: usize = 312;
const M: usize = 156;
const MATRIX_A: u64 = 0xB502_6F5A_A966_19E9;
const UPPER_MASK: u64 = 0xFFFF_FFFF_8000_0000;
const LOWER_MASK: u64 = 0x7FFF_FFFF;
const INIT_MULTIPLIER: u64 = 6_364_136_223_846_793_005;

/// The `std::mt19937_64` engine.
#[derive(Clone)]
pub struct Mt19937_64 {
    state: [u64; N],
    next: usize,
}

impl std::fmt::Debug for Mt19937_64 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mt19937_64")
            .field("next", &self.next)
            .finish_non_exhaustive()
    }
}

impl Mt19937_64 {
    /// The engine as `std::mt19937_64(seed)` or after `seed(seed)` leaves it.
    pub fn new(seed: u64) -> Self {
        let mut state = [0u64; N];
        state[0] = seed;
        for i in 1..N {
            let prev = state[i - 1];
            state[i] = INIT_MULTIPLIER
                .wrapping_mul(prev ^ (prev >> 62))
                .wrapping_add(i as u64);
        }
        Mt19937_64 { state, next: N }
    }

    fn twist(&mut self) {
        for i in 0..N {
            let x = (self.state[i] & UPPER_MASK) | (self.state[(i + 1) % N] & LOWER_MASK);
            let mut x_a = x >> 1;
            if x & 1 != 0 {
                x_a ^= MATRIX_A;
            }
            self.state[i] = self.state[(i + M) % N] ^ x_a;
        }
        self.next = 0;
    }

    /// The next output, as `operator()` returns it.
    pub fn next_u64(&mut self) -> u64 {
        if self.next >= N {
            self.twist();
        }
        let mut y = self.state[self.next];
        self.next += 1;
        y ^= (y >> 29) & 0x5555_5555_5555_5555;
        y ^= (y << 17) & 0x71D6_7FFF_EDA6_0000;
        y ^= (y << 37) & 0xFFF7_EEE0_0000_0000;
        y ^ (y >> 43)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_10000th_output_for_the_default_seed_is_the_one_the_standard_requires() {
        // [rand.predef]: "the 10000th consecutive invocation of a default-constructed object
        // of type mt19937_64 shall produce the value 9981545732273789042".
        let mut rng = Mt19937_64::new(5489);
        let mut last = 0;
        for _ in 0..10_000 {
            last = rng.next_u64();
        }
        assert_eq!(last, 9_981_545_732_273_789_042);
    }

    #[test]
    fn the_first_outputs_for_the_default_seed_are_the_reference_ones() {
        // The first outputs of the reference implementation (mt19937-64.c) with seed 5489.
        let mut rng = Mt19937_64::new(5489);
        assert_eq!(rng.next_u64(), 14_514_284_786_278_117_030);
        assert_eq!(rng.next_u64(), 4_620_546_740_167_642_908);
    }
}
