//! [`CbfSource`]: a CBF file as a [`ChunkSource`]; its chunks are the file's own chunks (from its
//! offset table), decoded on demand.

use crate::batch::SequenceBatch;
use crate::cbf::CbfFile;
use crate::element::Element;
use crate::error::Result;
use crate::io::{InputBytes, InputPath};
use crate::reader::{ChunkInfo, ChunkSource};
use crate::stream::StreamSpec;

/// A CBF file as a [`ChunkSource`]. Sequence keys are the file's global sequence indices.
pub struct CbfSource {
    file: CbfFile<InputBytes>,
    specs: Vec<StreamSpec>,
    infos: Vec<ChunkInfo>,
    name: String,
}

impl CbfSource {
    /// Opens `input` (as [`open_cbf`](crate::io::open_cbf) does: a plain file read a chunk at a
    /// time, decompressed into a temporary file when compressed; read into memory with
    /// `keep_in_memory`) and exposes the streams `select` names (see [`CbfFile::select`]; empty:
    /// every stream of the file).
    ///
    /// Distributed workers each open the file and read only their own chunks; together they
    /// read every sequence once a sweep:
    ///
    /// ```
    /// use exfeed::cbf::{CbfWriter, CbfWriterOptions};
    /// use exfeed::io::InputPath;
    /// use exfeed::reader::{Reader, ReaderOptions};
    /// use exfeed::source::CbfSource;
    /// use exfeed::{SequenceBatch, Storage, StreamSpec};
    /// use std::sync::Arc;
    ///
    /// // 100 sequences of one sample, in chunks of about 64 bytes (8 sequences each).
    /// let specs = [StreamSpec::new("x", Storage::Dense, 1)];
    /// let mut batch = SequenceBatch::<f32>::new(&specs);
    /// for k in 0..100 {
    ///     batch.stream_mut(0).push_dense_sample(&[k as f32]);
    ///     batch.finish_sequence(k);
    /// }
    /// let options = CbfWriterOptions { chunk_size: 64, ..CbfWriterOptions::default() };
    /// let mut writer = CbfWriter::new(Vec::new(), &specs, options)?;
    /// writer.write_batch(&batch)?;
    /// let path = std::env::temp_dir().join(format!("exfeed-cbf-source-{}.cbf", std::process::id()));
    /// std::fs::write(&path, writer.finish()?)?;
    ///
    /// let mut seen = Vec::new();
    /// for rank in 0..2 {
    ///     let source = Arc::new(CbfSource::open(&InputPath::new(&path), &[], false)?);
    ///     let options = ReaderOptions { num_workers: 2, worker_rank: rank, ..ReaderOptions::default() };
    ///     let mut reader = Reader::<f32>::new(source, options)?;
    ///     let mut mb = reader.new_minibatch();
    ///     let mut mine = Vec::new();
    ///     while reader.next_minibatch(16, &mut mb)? {
    ///         mine.extend(mb.sequences.iter().map(|s| s.key));
    ///     }
    ///     assert!(!mine.is_empty() && mine.len() < 100);
    ///     seen.extend(mine);
    /// }
    /// seen.sort();
    /// assert_eq!(seen, (0..100).collect::<Vec<u64>>());
    /// # std::fs::remove_file(&path)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn open(input: &InputPath, select: &[StreamSpec], keep_in_memory: bool) -> Result<Self> {
        let name = input.display_name();
        let mut file = if keep_in_memory {
            let bytes = crate::io::read_into_memory(input)?;
            CbfFile::open(bytes).map_err(|e| e.in_file(name.clone()))?
        } else {
            crate::io::open_cbf(input)?
        };
        if !select.is_empty() {
            file.select(select).map_err(|e| e.in_file(name.clone()))?;
        }
        Ok(CbfSource::from_file(file, name))
    }

    /// A source over `file`, opened already (its streams selected, if need be); errors name it
    /// `name`.
    pub fn from_file(file: CbfFile<InputBytes>, name: String) -> Self {
        let infos = file
            .chunks()
            .iter()
            .map(|c| ChunkInfo {
                sequences: c.sequences as usize,
                samples: c.samples as u64,
                bytes: c.len,
            })
            .collect();
        CbfSource {
            specs: file.stream_specs(),
            file,
            infos,
            name,
        }
    }

    /// The underlying file.
    pub fn file(&self) -> &CbfFile<InputBytes> {
        &self.file
    }
}

impl<T: Element> ChunkSource<T> for CbfSource {
    fn streams(&self) -> &[StreamSpec] {
        &self.specs
    }

    fn chunks(&self) -> &[ChunkInfo] {
        &self.infos
    }

    fn read_chunk(&self, chunk: usize, out: &mut SequenceBatch<T>) -> Result<()> {
        self.file
            .read_chunk(chunk, out)
            .map_err(|e| e.in_file(self.name.clone()))
    }

    fn fetch_ahead(&self, chunk: usize) -> Option<crate::fetch_ahead::FetchTicket> {
        self.file.fetch_ahead(chunk)
    }

    fn cntk_chunks(&self) -> Option<Result<Vec<Vec<u32>>>> {
        let in_file = |e: crate::Error| e.in_file(self.name.clone());
        Some(
            (0..self.file.num_chunks())
                .map(|i| self.file.sequence_samples(i).map_err(in_file))
                .collect(),
        )
    }

    fn chunk_keys(&self, chunk: usize) -> Option<Vec<u64>> {
        let c = self.file.chunks().get(chunk)?;
        Some((c.first_key..c.first_key.checked_add(c.sequences as u64)?).collect())
    }
}
