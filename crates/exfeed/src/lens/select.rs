//! Example selection as in Lens: ORDERED, PERMUTED (a new permutation each pass), RANDOMIZED
//! (uniform, with replacement) and PROBABILISTIC (weighted by example frequency), seeded.

use crate::error::{Error, Result};
use std::str::FromStr;

/// How the next example is chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SelectionMode {
    /// File order, cyclically.
    Ordered,
    /// Every example once per pass, in a new random order each pass.
    Permuted,
    /// Uniformly at random, with replacement.
    Randomized,
    /// At random with probability proportional to the example's frequency.
    Probabilistic,
}

impl FromStr for SelectionMode {
    type Err = Error;
    /// Case-insensitive; like Lens, any unambiguous prefix (`RAND`, `perm`) is accepted.
    fn from_str(s: &str) -> Result<Self> {
        let u = s.to_ascii_uppercase();
        let all = [
            ("ORDERED", SelectionMode::Ordered),
            ("PERMUTED", SelectionMode::Permuted),
            ("RANDOMIZED", SelectionMode::Randomized),
            ("PROBABILISTIC", SelectionMode::Probabilistic),
        ];
        let hits: Vec<_> = all
            .iter()
            .filter(|(n, _)| !u.is_empty() && n.starts_with(&u))
            .collect();
        match hits.as_slice() {
            [(_, m)] => Ok(*m),
            _ => Err(Error::config(format!(
                "example selection mode '{s}': expected ORDERED, PERMUTED, RANDOMIZED or PROBABILISTIC"
            ))),
        }
    }
}

/// A small, fast, seedable generator (SplitMix64): reproducible across platforms.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator for `seed`.
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`), without modulo bias.
    pub fn below(&mut self, n: usize) -> usize {
        let n = n as u64;
        let zone = u64::MAX - u64::MAX % n;
        loop {
            let v = self.next_u64();
            if v < zone {
                return (v % n) as usize;
            }
        }
    }

    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Chooses example indices, endlessly, in one of Lens's modes.
#[derive(Debug, Clone)]
pub struct Selector {
    mode: SelectionMode,
    n: usize,
    order: Vec<usize>,
    pos: usize,
    cumulative: Vec<f64>,
    rng: Rng,
}

impl Selector {
    /// A selector over examples with these frequencies (only PROBABILISTIC uses them; they
    /// must then be finite, non-negative and not all zero).
    pub fn new(mode: SelectionMode, frequencies: &[f32], seed: u64) -> Result<Self> {
        let n = frequencies.len();
        let mut cumulative = Vec::new();
        if mode == SelectionMode::Probabilistic {
            let mut sum = 0.0f64;
            for (i, &f) in frequencies.iter().enumerate() {
                if !f.is_finite() || f < 0.0 {
                    return Err(Error::config(format!(
                        "example {i} has frequency {f}; PROBABILISTIC needs finite, non-negative ones"
                    )));
                }
                sum += f as f64;
                cumulative.push(sum);
            }
            if n > 0 && sum <= 0.0 {
                return Err(Error::config(
                    "every example has frequency 0; PROBABILISTIC cannot choose",
                ));
            }
        }
        let mut s = Selector {
            mode,
            n,
            order: (0..n).collect(),
            pos: 0,
            cumulative,
            rng: Rng::new(seed),
        };
        if mode == SelectionMode::Permuted {
            s.shuffle();
        }
        Ok(s)
    }

    fn shuffle(&mut self) {
        for i in (1..self.order.len()).rev() {
            let j = self.rng.below(i + 1);
            self.order.swap(i, j);
        }
    }

    /// The mode.
    pub fn mode(&self) -> SelectionMode {
        self.mode
    }

    /// Whether the next call starts a new pass (ORDERED and PERMUTED).
    pub fn at_pass_start(&self) -> bool {
        self.pos == 0
    }
}

impl Iterator for Selector {
    type Item = usize;

    /// The next example index; `None` only when there are no examples.
    fn next(&mut self) -> Option<usize> {
        if self.n == 0 {
            return None;
        }
        Some(match self.mode {
            SelectionMode::Ordered | SelectionMode::Permuted => {
                let i = self.order[self.pos];
                self.pos += 1;
                if self.pos == self.n {
                    self.pos = 0;
                    if self.mode == SelectionMode::Permuted {
                        self.shuffle();
                    }
                }
                i
            }
            SelectionMode::Randomized => self.rng.below(self.n),
            SelectionMode::Probabilistic => {
                let total = *self.cumulative.last().unwrap_or(&0.0);
                let x = self.rng.unit() * total;
                // The first example whose cumulative frequency exceeds x (never one of
                // frequency 0).
                let i = self.cumulative.partition_point(|&c| c <= x);
                i.min(self.n - 1)
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes() {
        assert_eq!(
            "rand".parse::<SelectionMode>().unwrap(),
            SelectionMode::Randomized
        );
        assert!("P".parse::<SelectionMode>().is_err());
        let o: Vec<_> = Selector::new(SelectionMode::Ordered, &[1.0; 3], 0)
            .unwrap()
            .take(7)
            .collect();
        assert_eq!(o, [0, 1, 2, 0, 1, 2, 0]);
        let p: Vec<_> = Selector::new(SelectionMode::Permuted, &[1.0; 50], 7)
            .unwrap()
            .take(100)
            .collect();
        let (mut a, mut b) = (p[..50].to_vec(), p[50..].to_vec());
        assert_ne!(a, b, "a new permutation each pass");
        a.sort_unstable();
        b.sort_unstable();
        assert_eq!(a, (0..50).collect::<Vec<_>>());
        assert_eq!(a, b);
        let same: Vec<_> = Selector::new(SelectionMode::Permuted, &[1.0; 50], 7)
            .unwrap()
            .take(100)
            .collect();
        assert_eq!(p, same, "seeded");
        let mut counts = [0usize; 3];
        for i in Selector::new(SelectionMode::Probabilistic, &[1.0, 0.0, 3.0], 1)
            .unwrap()
            .take(40000)
        {
            counts[i] += 1;
        }
        assert_eq!(counts[1], 0);
        let ratio = counts[2] as f64 / counts[0] as f64;
        assert!((2.7..3.3).contains(&ratio), "{counts:?}");
        let r: Vec<_> = Selector::new(SelectionMode::Randomized, &[1.0; 4], 3)
            .unwrap()
            .take(1000)
            .collect();
        assert!((0..4).all(|k| r.iter().filter(|&&i| i == k).count() > 150));
        assert!(Selector::new(SelectionMode::Probabilistic, &[0.0, 0.0], 0).is_err());
        assert!(Selector::new(SelectionMode::Probabilistic, &[f32::NAN], 0).is_err());
        assert_eq!(
            Selector::new(SelectionMode::Randomized, &[], 0)
                .unwrap()
                .next(),
            None
        );
    }
}
