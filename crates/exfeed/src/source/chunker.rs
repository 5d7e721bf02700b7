//! Grouping whole sequences into chunks of about `chunkSizeInBytes`, as CNTK's indexers do.
//!
//! Sequences are added in file order; a new chunk starts when the next sequence would make the
//! current one exceed the chunk size; a sequence is never split, so a sequence larger than the
//! chunk size is a chunk of its own.

use crate::reader::ChunkInfo;

/// Where one sequence lies in its file and how many samples it has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SequenceSpan {
    /// Byte offset of the sequence's first byte.
    pub offset: u64,
    /// Its length in bytes.
    pub bytes: u64,
    /// Its number of samples (the definesMBSize stream's, else the longest stream's).
    pub samples: u64,
}

/// A run of whole consecutive sequences.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ChunkExtent {
    /// Index of the chunk's first sequence.
    pub first_sequence: usize,
    /// Number of sequences.
    pub sequences: usize,
    /// Byte offset of the first sequence.
    pub offset: u64,
    /// Bytes from the first sequence's start to the last one's end.
    pub bytes: u64,
    /// Total samples of its sequences.
    pub samples: u64,
}

impl ChunkExtent {
    /// What the reader engine needs to know of the chunk.
    pub fn info(&self) -> ChunkInfo {
        ChunkInfo {
            sequences: self.sequences,
            samples: self.samples,
            bytes: self.bytes,
        }
    }
}

/// Builds chunks incrementally while an indexer scans a file.
#[derive(Debug, Clone)]
pub struct Chunker {
    chunk_size: u64,
    chunks: Vec<ChunkExtent>,
    current: Option<ChunkExtent>,
    next_sequence: usize,
}

impl Chunker {
    /// A chunker for chunks of about `chunk_size` bytes (0 is taken as 1: one sequence a chunk).
    pub fn new(chunk_size: u64) -> Self {
        Chunker {
            chunk_size: chunk_size.max(1),
            chunks: Vec::new(),
            current: None,
            next_sequence: 0,
        }
    }

    /// Adds the next sequence in file order.
    pub fn push(&mut self, seq: SequenceSpan) {
        let index = self.next_sequence;
        self.next_sequence += 1;
        if let Some(cur) = &mut self.current {
            let end = seq.offset.saturating_add(seq.bytes);
            let grown = end.saturating_sub(cur.offset).max(cur.bytes);
            if grown <= self.chunk_size {
                cur.sequences += 1;
                cur.bytes = grown;
                cur.samples = cur.samples.saturating_add(seq.samples);
                return;
            }
            self.chunks.push(*cur);
        }
        self.current = Some(ChunkExtent {
            first_sequence: index,
            sequences: 1,
            offset: seq.offset,
            bytes: seq.bytes,
            samples: seq.samples,
        });
    }

    /// The chunks, the last one closed.
    pub fn finish(mut self) -> Vec<ChunkExtent> {
        if let Some(cur) = self.current.take() {
            self.chunks.push(cur);
        }
        self.chunks
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Groups sequences (in file order) into chunks of about `chunk_size` bytes.
    fn group_into_chunks(
        sequences: impl IntoIterator<Item = SequenceSpan>,
        chunk_size: u64,
    ) -> Vec<ChunkExtent> {
        let mut c = Chunker::new(chunk_size);
        for s in sequences {
            c.push(s);
        }
        c.finish()
    }

    fn seqs(lens: &[u64]) -> Vec<SequenceSpan> {
        let mut off = 0;
        lens.iter()
            .map(|&l| {
                let s = SequenceSpan {
                    offset: off,
                    bytes: l,
                    samples: l / 10,
                };
                off += l;
                s
            })
            .collect()
    }

    #[test]
    fn whole_sequences_up_to_the_size() {
        let c = group_into_chunks(seqs(&[40, 60, 10, 100, 250, 5, 5]), 100);
        let got: Vec<(usize, usize, u64, u64)> = c
            .iter()
            .map(|c| (c.first_sequence, c.sequences, c.offset, c.bytes))
            .collect();
        // 40+60 fits exactly; 10 then 100 would exceed; 250 alone (never split); 5+5.
        assert_eq!(
            got,
            vec![
                (0, 2, 0, 100),
                (2, 1, 100, 10),
                (3, 1, 110, 100),
                (4, 1, 210, 250),
                (5, 2, 460, 10)
            ]
        );
        assert_eq!(c[0].samples, 10);
        assert_eq!(
            c[0].info(),
            ChunkInfo {
                sequences: 2,
                samples: 10,
                bytes: 100
            }
        );
        // Every sequence in exactly one chunk, in order.
        let total: usize = c.iter().map(|c| c.sequences).sum();
        assert_eq!(total, 7);
    }

    #[test]
    fn empty_and_tiny_sizes() {
        assert!(group_into_chunks(Vec::new(), 10).is_empty());
        let c = group_into_chunks(seqs(&[3, 3, 3]), 0);
        assert_eq!(c.len(), 3);
    }
}
