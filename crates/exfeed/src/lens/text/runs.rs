//! Runs of tokens separated by white space (a sparse range's units), found 64 bytes at a time.
//!
//! Token by token, each number's end is where the next one is looked for, so reading one waits
//! for the one before it. Here the token starts of a whole 64-byte block come from one mask of
//! its white space, so consecutive tokens are read independently of each other, and white
//! space costs nothing per byte. (For dense values, whose numbers cost more each, it measured
//! slower than reading one after the other: see docs/benchmarks.md.)

/// Reads the tokens (runs of bytes other than white space) of `b` from `pos` on, in order:
/// `read(s)` is called at each token start `s` (`pos` counts as one unless it is white space)
/// and returns `Ok(end)` when it took the token whole, `b[s..end]`, with white space at `end`,
/// or `Err(stop)` to stop there. Returns where it stopped: that `stop`, or, when fewer than 64
/// bytes are left to look at, the end of the last token taken (`pos` if none); the caller reads
/// on from there.
#[inline(always)]
pub(super) fn run(
    b: &[u8],
    pos: usize,
    mut read: impl FnMut(usize) -> Result<usize, usize>,
) -> usize {
    let mut at = pos;
    let mut base = pos;
    // Whether the byte before each block is white space (for the first, `pos` starts a token).
    let mut before = 1u64;
    while let Some(ws) = ws_mask(b, base) {
        let mut starts = !ws & ((ws << 1) | before);
        before = ws >> 63;
        while starts != 0 {
            let s = base + starts.trailing_zeros() as usize;
            starts &= starts - 1;
            match read(s) {
                Ok(end) => at = end,
                Err(stop) => return stop,
            }
        }
        base += 64;
    }
    at
}

/// The white-space bytes of `b[i..i + 64]`, bit `k` for byte `i + k`; `None` when fewer than
/// 64 bytes are left.
#[inline(always)]
fn ws_mask(b: &[u8], i: usize) -> Option<u64> {
    let block: &[u8; 64] = b.get(i..i.checked_add(64)?)?.try_into().ok()?;
    let mut mask = 0u64;
    for (k, word) in block.chunks_exact(8).enumerate() {
        let w = u64::from_le_bytes(word.try_into().unwrap_or_default());
        mask |= ws_bits(w) << (8 * k);
    }
    Some(mask)
}

/// The white-space bytes (` `, `\t`, `\n`, `\x0b`, `\x0c`, `\r`) of the 8 bytes in `w` (the
/// first lowest), one bit each in the low 8 bits.
#[inline(always)]
fn ws_bits(w: u64) -> u64 {
    const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let each = |b: u8| u64::from_le_bytes([b; 8]);
    // Per byte, in its high bit. Below 0x80 the low 7 bits are the byte, and adding at most
    // 0x7f to them carries into no other byte.
    let ascii = !w & HIGH;
    let low = w & LOW7;
    let nonzero = |x: u64| (x + LOW7) & HIGH;
    let space = !nonzero(low ^ each(b' ')) & ascii;
    // 9..=13: at least 9 and not at least 14.
    let at_least = |n: u8| (low + each(0x80 - n)) & HIGH;
    let controls = at_least(9) & !at_least(14) & ascii;
    // The high bits (bytes 0..8 at bits 7, 15, ..., 63) gathered into the top byte, in order:
    // bit 8k times 2^(56 - 7k) lands on bit 56 + k, and no two partial products meet.
    (((space | controls) >> 7).wrapping_mul(0x0102_0408_1020_4080)) >> 56
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every byte value at every place of a word, beside arbitrary neighbours.
    #[test]
    fn white_space_bits_are_those_of_the_parser() {
        let ws = |c: u8| b" \t\n\x0b\x0c\r".contains(&c);
        for c in 0..=255u8 {
            for k in 0..8 {
                for fill in [0u8, b' ', b'0', 0x80, 0xff, 0x0d, 0x0e, 0x08, 0x89] {
                    let mut bytes = [fill; 8];
                    bytes[k] = c;
                    let want = (0..8).fold(0, |m, j| m | (ws(bytes[j]) as u64) << j);
                    assert_eq!(ws_bits(u64::from_le_bytes(bytes)), want, "{c:#x} at {k}");
                }
            }
        }
    }

    /// Tokens as `split_ascii_whitespace`-like splitting finds them, across blocks, from any
    /// start, up to the last whole block.
    #[test]
    fn tokens_are_found_in_order_across_blocks() {
        let text: Vec<u8> = (0..400u32)
            .map(|i| match i % 11 {
                0 | 4 => b' ',
                7 => b"\n\t\r\x0b\x0c"[(i % 5) as usize],
                _ => b'a' + (i % 26) as u8,
            })
            .collect();
        for pos in 0..text.len() {
            let mut got = Vec::new();
            let stop = run(&text, pos, |s| {
                let end = s + text[s..]
                    .iter()
                    .position(|c| c.is_ascii_whitespace() || *c == 0x0b)
                    .unwrap_or(text.len() - s);
                got.push(s);
                if end < text.len() {
                    Ok(end)
                } else {
                    Err(end)
                }
            });
            // Token starts at or after pos, in blocks of 64 bytes from pos.
            let blocks_end = pos + (text.len() - pos) / 64 * 64;
            let want: Vec<usize> = (pos..blocks_end)
                .filter(|&i| !text[i].is_ascii_whitespace() && text[i] != 0x0b)
                .filter(|&i| i == pos || text[i - 1].is_ascii_whitespace() || text[i - 1] == 0x0b)
                .collect();
            assert_eq!(got, want, "from {pos}");
            // Where the last token read ends (the end of the text: it stopped there).
            let last_end = want.last().map_or(pos, |&s| {
                s + text[s..]
                    .iter()
                    .position(|c| c.is_ascii_whitespace() || *c == 0x0b)
                    .unwrap_or(text.len() - s)
            });
            assert_eq!(stop, last_end, "from {pos}");
        }
        // Stopping early stops there.
        let first_after_100 =
            (101..).find(|&i| text[i] == b'a' + (i % 26) as u8 && text[i - 1] < b'a');
        assert_eq!(
            run(&text, 0, |s| if s > 100 { Err(s) } else { Ok(s + 1) }),
            first_after_100.unwrap()
        );
    }
}
