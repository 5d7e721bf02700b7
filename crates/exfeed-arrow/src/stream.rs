//! [`SequenceStream`]: sequences from any exfeed source as a stream of Arrow record batches (a
//! [`RecordBatchReader`], which [`arrow_array::ffi_stream`] exports through the Arrow C stream
//! interface: Python's `exfeed.to_arrow` and `exfeed.ray`).

use crate::encode::BatchBuilder;
use crate::Value;
use arrow_array::{RecordBatch, RecordBatchReader};
use arrow_schema::{ArrowError, SchemaRef};
use exfeed::reader::ChunkSource;
use exfeed::{DiagnosticSink, Result, SequenceBatch, Sequences};
use std::ops::Range;
use std::sync::Arc;

type Fill<T> = Box<dyn FnMut(&mut SequenceBatch<T>) -> Result<bool> + Send>;

/// Record batches of the [schema](crate::schema), each about `chunk_size` bytes of data (or
/// one per chunk of a [`ChunkSource`]), made as they are pulled: memory holds one.
pub struct SequenceStream<T: Value> {
    fill: Fill<T>,
    builder: BatchBuilder<T>,
    batch: SequenceBatch<T>,
    /// The first sequence of `batch` not yet appended to the builder.
    next: usize,
    /// Bytes of data per record batch; `None`: one record batch per filled batch (chunk).
    chunk_size: Option<usize>,
    done: bool,
}

impl<T: Value> SequenceStream<T> {
    /// The sequences of an opened input, in file order, in record batches of about
    /// `chunk_size` bytes of data. Tolerated problems (`maxErrors`) go to `sink`.
    pub fn from_sequences(
        mut sequences: Sequences<T>,
        chunk_size: u64,
        mut sink: Box<dyn DiagnosticSink + Send>,
    ) -> Result<Self> {
        let specs = sequences.streams().to_vec();
        let fill: Fill<T> = Box::new(move |b| sequences.next_batch(b, sink.as_mut()));
        Self::new(
            &specs,
            fill,
            Some(chunk_size.clamp(1, usize::MAX as u64) as usize),
        )
    }

    /// Chunks `chunks` of `source`, one record batch per chunk, in order.
    pub fn from_chunks(source: Arc<dyn ChunkSource<T>>, chunks: Range<usize>) -> Result<Self> {
        let specs = source.streams().to_vec();
        let mut next = chunks.start;
        let fill: Fill<T> = Box::new(move |b| {
            if next >= chunks.end {
                return Ok(false);
            }
            b.clear();
            source.read_chunk(next, b)?;
            next += 1;
            Ok(true)
        });
        Self::new(&specs, fill, None)
    }

    fn new(specs: &[exfeed::StreamSpec], fill: Fill<T>, chunk_size: Option<usize>) -> Result<Self> {
        Ok(SequenceStream {
            fill,
            builder: BatchBuilder::new(specs)?,
            batch: SequenceBatch::new(specs),
            next: 0,
            chunk_size,
            done: false,
        })
    }

    fn next_record_batch(&mut self) -> Result<Option<RecordBatch>> {
        let size = self.chunk_size.unwrap_or(usize::MAX);
        loop {
            if self.next >= self.batch.len() {
                if self.done || (self.chunk_size.is_none() && !self.builder.is_empty()) {
                    break;
                }
                self.next = 0;
                if !(self.fill)(&mut self.batch)? {
                    self.done = true;
                    self.batch.clear();
                }
                continue;
            }
            self.next = self.builder.fill_from(&self.batch, self.next, size)?;
            if self.builder.bytes() >= size {
                break;
            }
        }
        if self.builder.is_empty() {
            return Ok(None);
        }
        self.builder.finish().map(Some)
    }
}

impl<T: Value> Iterator for SequenceStream<T> {
    type Item = std::result::Result<RecordBatch, ArrowError>;

    fn next(&mut self) -> Option<Self::Item> {
        match self.next_record_batch() {
            Ok(rb) => rb.map(Ok),
            Err(e) => {
                // The error ends the stream.
                self.done = true;
                Some(Err(ArrowError::ExternalError(Box::new(e))))
            }
        }
    }
}

impl<T: Value> RecordBatchReader for SequenceStream<T> {
    fn schema(&self) -> SchemaRef {
        self.builder.schema().clone()
    }
}
