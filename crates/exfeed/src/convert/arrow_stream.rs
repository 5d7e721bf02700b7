//! [`SequenceStream`]: sequences from any exfeed source as a stream of Arrow record batches (a
//! [`RecordBatchReader`], which [`arrow_array::ffi_stream`] exports through the Arrow C stream
//! interface: Python's `exfeed.to_arrow` and `exfeed.ray`).

use crate::arrow::BatchBuilder;
use crate::arrow::Value;
use crate::convert::columnar::{ctf_pieces, parses_in_pieces};
use crate::convert::PIECE_BYTES;
use crate::reader::ChunkSource;
use crate::{DataSet, DiagnosticSink, Result, SequenceBatch, Sequences};
use arrow_array::{RecordBatch, RecordBatchReader};
use arrow_schema::{ArrowError, SchemaRef};
use std::ops::Range;
use std::sync::Arc;
use std::thread::JoinHandle;

type Fill<T> = Box<dyn FnMut(&mut SequenceBatch<T>) -> Result<bool> + Send>;

/// Parsed pieces (about 1 MiB of text each) the parsing thread of
/// [`SequenceStream::from_data`] may hold ready beyond those its workers are parsing.
const PIECES_AHEAD: usize = 4;

/// Record batches of the [schema](crate::arrow::schema), each about `chunk_size` bytes of data (or
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
    /// An error met with sequences gathered: returned after their record batch.
    pending: Option<crate::Error>,
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

    /// Every sequence of an opened input, in file order, in record batches of about
    /// `chunk_size` bytes of data: the record batches of [`SequenceStream::from_sequences`].
    /// CTF text in a plain file is parsed on every core, on a thread of its own that stays a
    /// few pieces ahead (see [`crate::convert::parse_ctf_pieces`]); dropping the stream stops
    /// it and waits for it. Tolerated problems (`maxErrors`) go to `sink`.
    pub fn from_data(
        data: DataSet,
        chunk_size: u64,
        sink: Box<dyn DiagnosticSink + Send>,
    ) -> Result<Self> {
        Self::from_data_in_pieces(data, chunk_size, sink, PIECE_BYTES)
    }

    pub(crate) fn from_data_in_pieces(
        data: DataSet,
        chunk_size: u64,
        sink: Box<dyn DiagnosticSink + Send>,
        piece_bytes: usize,
    ) -> Result<Self> {
        if !parses_in_pieces(&data) {
            return Self::from_sequences(data.sequences()?, chunk_size, sink);
        }
        let specs = data.options().inputs.clone();
        let mut pieces = Pieces::start(data, sink, piece_bytes);
        let fill: Fill<T> = Box::new(move |b| pieces.next(b));
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

    fn new(specs: &[crate::StreamSpec], fill: Fill<T>, chunk_size: Option<usize>) -> Result<Self> {
        Ok(SequenceStream {
            fill,
            builder: BatchBuilder::new(specs)?,
            batch: SequenceBatch::new(specs),
            next: 0,
            chunk_size,
            done: false,
            pending: None,
        })
    }

    fn next_record_batch(&mut self) -> Result<Option<RecordBatch>> {
        if let Some(e) = self.pending.take() {
            return Err(e);
        }
        let size = self.chunk_size.unwrap_or(usize::MAX);
        loop {
            if self.next >= self.batch.len() {
                if self.done || (self.chunk_size.is_none() && !self.builder.is_empty()) {
                    break;
                }
                self.next = 0;
                match (self.fill)(&mut self.batch) {
                    Ok(true) => {}
                    Ok(false) => {
                        self.done = true;
                        self.batch.clear();
                    }
                    // The sequences gathered before the error come first.
                    Err(e) if !self.builder.is_empty() => {
                        self.pending = Some(e);
                        self.done = true;
                        self.batch.clear();
                        break;
                    }
                    Err(e) => return Err(e),
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

/// The CTF pieces of [`SequenceStream::from_data`], parsed in order on a thread of their own
/// (a few ahead), which is joined when this is dropped: it reads the file's memory mapping,
/// which must not outlive the stream (a file rewritten in place while mapped is a SIGBUS).
struct Pieces<T> {
    /// Parsed pieces; an error ends them. `None` once the thread is joined.
    rx: Option<crossbeam_channel::Receiver<Result<SequenceBatch<T>>>>,
    parser: Option<JoinHandle<()>>,
}

impl<T: Value> Pieces<T> {
    fn start(data: DataSet, mut sink: Box<dyn DiagnosticSink + Send>, piece_bytes: usize) -> Self {
        let (tx, rx) = crossbeam_channel::bounded::<Result<SequenceBatch<T>>>(PIECES_AHEAD);
        let parser = std::thread::spawn(move || {
            let sent = |piece, _: &mut Vec<_>| {
                tx.send(Ok(piece))
                    .map_err(|_| crate::Error::config("the record batch stream was dropped"))
            };
            if let Err(e) = ctf_pieces::<T>(data, sink.as_mut(), piece_bytes, sent) {
                let _ = tx.send(Err(e));
            }
        });
        Pieces {
            rx: Some(rx),
            parser: Some(parser),
        }
    }

    /// The next piece into `b`; `false` after the last.
    fn next(&mut self, b: &mut SequenceBatch<T>) -> Result<bool> {
        match self.rx.as_ref().map(|rx| rx.recv()) {
            Some(Ok(piece)) => {
                *b = piece?;
                Ok(true)
            }
            // The thread has ended: a panic there is not taken for the end of the file.
            Some(Err(_)) => match self.join() {
                Err(panic) => std::panic::resume_unwind(panic),
                Ok(()) => Ok(false),
            },
            None => Ok(false),
        }
    }
}

impl<T> Pieces<T> {
    /// Drops the receiver, so that the thread's next (or blocked) send fails and it returns,
    /// then waits for it.
    fn join(&mut self) -> std::thread::Result<()> {
        self.rx = None;
        self.parser.take().map_or(Ok(()), JoinHandle::join)
    }
}

impl<T> Drop for Pieces<T> {
    fn drop(&mut self) {
        // A panic there is not raised again while dropping.
        let _ = self.join();
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
                self.batch.clear();
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
