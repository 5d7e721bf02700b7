//! Element types of sample values: `f32` (precision `float`) and `f64` (precision `double`).
//!
//! Code that holds values is generic over [`Element`]; the precision chosen at run time picks
//! the instantiation once, at the top (see [`Precision`]).

use std::fmt;
use std::str::FromStr;

/// The floating-point precision of values, CNTK's `precision` parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Precision {
    /// 32-bit `float` (the default).
    #[default]
    Float,
    /// 64-bit `double`.
    Double,
}

impl Precision {
    /// The CNTK spelling: `float` or `double`.
    pub fn as_str(self) -> &'static str {
        match self {
            Precision::Float => "float",
            Precision::Double => "double",
        }
    }

    /// Size of one element in bytes.
    pub fn size(self) -> usize {
        match self {
            Precision::Float => 4,
            Precision::Double => 8,
        }
    }
}

impl fmt::Display for Precision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Precision {
    type Err = crate::Error;
    fn from_str(s: &str) -> Result<Self, crate::Error> {
        match s {
            "float" => Ok(Precision::Float),
            "double" => Ok(Precision::Double),
            other => Err(crate::Error::config(format!(
                "precision must be 'float' or 'double', found '{other}'"
            ))),
        }
    }
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for f64 {}
}

/// A sample value type: `f32` or `f64`.
pub trait Element:
    sealed::Sealed
    + Copy
    + Default
    + PartialEq
    + PartialOrd
    + fmt::Debug
    + fmt::Display
    + Send
    + Sync
    + 'static
{
    /// The precision this type stands for.
    const PRECISION: Precision;
    /// Size in bytes.
    const SIZE: usize;

    /// Parses a decimal number correctly rounded to this precision. The caller has already
    /// checked the text against its format's number grammar.
    fn parse_decimal(text: &[u8]) -> Option<Self>;
    /// Exact conversion from `f32` (also for `f32` itself).
    fn from_f32(v: f32) -> Self;
    /// Conversion from `f64` (rounds for `f32`).
    fn from_f64(v: f64) -> Self;
    /// Widening conversion to `f64` (exact).
    fn to_f64(self) -> f64;
    /// Appends the shortest decimal text that reads back to the same value (`1`, not `1.0`;
    /// `NaN`, `inf` and `-inf` for the non-finite values).
    fn write_shortest(self, out: &mut Vec<u8>);
    /// Appends the little-endian bytes.
    fn write_le(self, out: &mut Vec<u8>);
    /// Reads from little-endian bytes; `bytes` is exactly [`Element::SIZE`] long.
    fn read_le(bytes: &[u8]) -> Self;
    /// Is this value NaN?
    fn is_nan(self) -> bool;
}

fn trim_point_zero(out: &mut Vec<u8>, start: usize) {
    // ryu writes integers as "1.0" and large/small numbers as "1e20"/"1.5e-7"; drop ".0" only.
    if out.len() >= start + 2 && out.ends_with(b".0") {
        out.truncate(out.len() - 2);
    }
}

macro_rules! impl_element {
    ($t:ty, $prec:expr) => {
        impl Element for $t {
            const PRECISION: Precision = $prec;
            const SIZE: usize = std::mem::size_of::<$t>();

            #[inline]
            fn parse_decimal(text: &[u8]) -> Option<Self> {
                fast_float2::parse::<$t, _>(text).ok()
            }
            #[inline]
            fn from_f32(v: f32) -> Self {
                v as $t
            }
            #[inline]
            fn from_f64(v: f64) -> Self {
                v as $t
            }
            #[inline]
            fn to_f64(self) -> f64 {
                self as f64
            }
            fn write_shortest(self, out: &mut Vec<u8>) {
                if self.is_nan() {
                    out.extend_from_slice(b"NaN");
                } else if self.is_infinite() {
                    out.extend_from_slice(if self > 0.0 { b"inf" } else { b"-inf" });
                } else {
                    let start = out.len();
                    let mut buf = ryu::Buffer::new();
                    out.extend_from_slice(buf.format_finite(self).as_bytes());
                    trim_point_zero(out, start);
                }
            }
            #[inline]
            fn write_le(self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
            #[inline]
            fn read_le(bytes: &[u8]) -> Self {
                <$t>::from_le_bytes(bytes.try_into().expect("read_le takes exactly SIZE bytes"))
            }
            #[inline]
            fn is_nan(self) -> bool {
                <$t>::is_nan(self)
            }
        }
    };
}

impl_element!(f32, Precision::Float);
impl_element!(f64, Precision::Double);

#[cfg(test)]
mod tests {
    use super::*;

    fn shortest<T: Element>(v: T) -> String {
        let mut out = Vec::new();
        v.write_shortest(&mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn shortest_forms() {
        assert_eq!(shortest(1.0f32), "1");
        assert_eq!(shortest(0.1f32), "0.1");
        assert_eq!(shortest(0.1f64), "0.1");
        assert_eq!(shortest(-2.5f64), "-2.5");
        assert_eq!(shortest(1e20f64), "1e20");
        assert_eq!(shortest(0.0f32), "0");
        assert_eq!(shortest(f64::NAN), "NaN");
    }

    #[test]
    fn float_parse_is_correctly_rounded_not_double_rounded() {
        // 1.00000005960464477550 lies just above the midpoint between two f32 values; rounding
        // through f64 first lands on the midpoint and then rounds to even (down), which is wrong.
        let text = b"1.000000059604644775390625001";
        assert_eq!(f32::parse_decimal(text), Some(1.000_000_1_f32));
        assert_eq!(f64::parse_decimal(b"0.1"), Some(0.1));
    }

    #[test]
    fn little_endian_round_trip() {
        let mut out = Vec::new();
        1.5f64.write_le(&mut out);
        assert_eq!(out, 1.5f64.to_le_bytes());
        assert_eq!(f64::read_le(&out), 1.5);
    }
}
