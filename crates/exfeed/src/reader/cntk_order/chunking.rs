//! CNTK's chunks of a CTF file (`Index::AddSequence` in CNTK's `ReaderLib/Index.cpp`).

/// How CNTK's CTF indexer groups sequences into chunks: `spans` are the sequences' byte
/// offsets and sizes in file order (a sequence runs from the start of its first line to the
/// start of the next sequence, the last one to the end of the file); the result is the number
/// of sequences of each chunk, in order.
///
/// A chunk's size is the bytes from its first sequence's start to its last one's end. A new
/// chunk starts when the current one is empty or when its size plus the next sequence's size
/// would pass `chunk_size`, which is first lowered to `file_size` when larger (CNTK's
/// `Index::Reserve`). A sequence is never split: one larger than `chunk_size` is a chunk alone.
///
/// ```
/// use exfeed::reader::cntk_order::cntk_ctf_chunks;
/// // Sequences of 10, 10, 5 and 30 bytes, chunks of at most 25 bytes.
/// let spans = [(0, 10), (10, 10), (20, 5), (25, 30)];
/// assert_eq!(cntk_ctf_chunks(spans, 25, 55), [3, 1]);
/// ```
pub fn cntk_ctf_chunks(
    spans: impl IntoIterator<Item = (u64, u64)>,
    chunk_size: u64,
    file_size: u64,
) -> Vec<usize> {
    let max = chunk_size.min(file_size);
    let mut counts = Vec::new();
    let (mut start, mut end) = (0u64, 0u64);
    for (offset, size) in spans {
        let current = end - start;
        if current == 0 || current.saturating_add(size) > max {
            counts.push(0);
            start = offset;
        }
        *counts.last_mut().expect("a chunk was opened") += 1;
        end = offset + size;
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;

    fn contiguous(sizes: &[u64]) -> Vec<(u64, u64)> {
        let mut offset = 0;
        sizes
            .iter()
            .map(|&s| {
                offset += s;
                (offset - s, s)
            })
            .collect()
    }

    #[test]
    fn a_chunk_closes_when_the_next_sequence_would_pass_the_size() {
        let spans = contiguous(&[10, 10, 10, 10, 10]);
        assert_eq!(cntk_ctf_chunks(spans.clone(), 30, 50), [3, 2]);
        assert_eq!(cntk_ctf_chunks(spans.clone(), 29, 50), [2, 2, 1]);
        assert_eq!(cntk_ctf_chunks(spans, 31, 50), [3, 2]);
    }

    #[test]
    fn a_sequence_larger_than_the_chunk_size_is_a_chunk_alone() {
        let spans = contiguous(&[5, 100, 5, 5]);
        assert_eq!(cntk_ctf_chunks(spans, 20, 115), [1, 1, 2]);
    }

    #[test]
    fn the_chunk_size_is_lowered_to_the_file_size() {
        // With 32 MiB chunks a 50-byte file is one chunk; the lowering matters only when the
        // sequences' sizes add up to more than the file (never for a real index), so this
        // checks that it does not split anything.
        let spans = contiguous(&[10, 20, 20]);
        assert_eq!(cntk_ctf_chunks(spans, 32 << 20, 50), [3]);
        // Lowered to 40 bytes, the same spans make two chunks.
        assert_eq!(
            cntk_ctf_chunks(contiguous(&[10, 20, 20]), 32 << 20, 40),
            [2, 1]
        );
    }

    #[test]
    fn a_gap_before_a_sequence_counts_only_once_the_sequence_is_in_the_chunk() {
        // Sequence 1 starts 15 bytes after sequence 0 ends (a skipped sequence between them):
        // the test adds only sequence 1's own size to the chunk's 10 bytes, and the gap then
        // counts in the chunk's size for the sequence after it.
        let spans = [(0, 10), (25, 10), (35, 10)];
        assert_eq!(cntk_ctf_chunks(spans, 20, 45), [2, 1]);
        assert_eq!(cntk_ctf_chunks(spans, 45, 45), [3]);
    }

    #[test]
    fn no_sequences_no_chunks() {
        assert!(cntk_ctf_chunks([], 10, 0).is_empty());
    }
}
