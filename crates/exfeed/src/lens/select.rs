//! Lens's example selection modes: ORDERED, PERMUTED (a new permutation each pass), RANDOMIZED
//! (uniform, with replacement) and PROBABILISTIC (weighted by example frequency). The reader
//! draws them, seeded: [`SelectionMode::apply_to`] sets its options.

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

impl SelectionMode {
    /// Checks that `frequencies` allow this mode: for PROBABILISTIC, finite, non-negative and
    /// not all zero (the message names the first bad example). The drawing itself is the
    /// reader's (see [`SelectionMode::apply_to`]).
    ///
    /// ```
    /// use exfeed::lens::select::SelectionMode;
    /// assert!(SelectionMode::Probabilistic.check_frequencies(&[1.0, 0.0, 3.0]).is_ok());
    /// assert!(SelectionMode::Probabilistic.check_frequencies(&[0.0, 0.0]).is_err());
    /// assert!(SelectionMode::Ordered.check_frequencies(&[0.0, 0.0]).is_ok());
    /// ```
    pub fn check_frequencies(self, frequencies: &[f32]) -> Result<()> {
        if !self.uses_frequencies() {
            return Ok(());
        }
        for (i, &f) in frequencies.iter().enumerate() {
            if !f.is_finite() || f < 0.0 {
                return Err(Error::config(format!(
                    "example {i} has frequency {f}; PROBABILISTIC needs finite, non-negative ones"
                )));
            }
        }
        if !frequencies.is_empty() && frequencies.iter().all(|&f| f == 0.0) {
            return Err(Error::config(
                "every example has frequency 0; PROBABILISTIC cannot choose",
            ));
        }
        Ok(())
    }

    /// Whether the mode draws by the examples' frequencies (PROBABILISTIC).
    pub fn uses_frequencies(self) -> bool {
        self == SelectionMode::Probabilistic
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_parse_by_unambiguous_prefix() {
        assert_eq!(
            "rand".parse::<SelectionMode>().unwrap(),
            SelectionMode::Randomized
        );
        assert!("P".parse::<SelectionMode>().is_err());
    }

    #[test]
    fn probabilistic_needs_usable_frequencies() {
        let p = SelectionMode::Probabilistic;
        assert!(p.check_frequencies(&[1.0, 0.0, 3.0]).is_ok());
        assert!(p.check_frequencies(&[]).is_ok());
        for bad in [&[0.0, 0.0][..], &[f32::NAN], &[1.0, -1.0], &[f32::INFINITY]] {
            assert!(p.check_frequencies(bad).is_err(), "{bad:?}");
        }
    }
}
