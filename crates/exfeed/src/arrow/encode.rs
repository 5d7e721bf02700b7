//! [`BatchBuilder`]: sequences ([`SequenceBatch`]es) gathered into Arrow record batches of the
//! [schema](crate::arrow::schema).
//!
//! The builder appends each batch's columns to growing buffers (one copy) and hands them to
//! Arrow without another: a finished record batch owns the builder's buffers.

use crate::arrow::schema::{sample_type, schema, sparse_fields};
use crate::arrow::Value;
use crate::{Error, Result, SequenceBatch, Storage, StreamData, StreamSpec};
use arrow_array::{
    Array, ArrayRef, FixedSizeListArray, ListArray, PrimitiveArray, RecordBatch, StructArray,
    UInt32Array, UInt64Array,
};
use arrow_buffer::{OffsetBuffer, ScalarBuffer};
use arrow_schema::{DataType, Field, SchemaRef};
use std::sync::Arc;

/// Arrow's 32-bit offsets of one growing list column.
#[derive(Default)]
struct Offsets(Vec<i32>);

impl Offsets {
    fn new() -> Self {
        Offsets(vec![0])
    }

    /// Appends `ends` (cumulative, starting after 0) shifted by the current end.
    fn extend(&mut self, ends: &[usize], stream: &str) -> Result<()> {
        let base = *self.0.last().expect("never empty") as usize;
        let last = base + ends.last().copied().unwrap_or(0);
        if last > i32::MAX as usize {
            return Err(Error::config(format!(
                "stream '{stream}': a record batch would hold more than {} samples or values; \
                 use a smaller chunk size",
                i32::MAX
            )));
        }
        self.0.extend(ends.iter().map(|&e| (base + e) as i32));
        Ok(())
    }

    fn take(&mut self) -> OffsetBuffer<i32> {
        let v = std::mem::replace(&mut self.0, vec![0]);
        // The offsets start at 0 and never decrease (they are cumulative counts).
        OffsetBuffer::new(ScalarBuffer::from(v))
    }
}

/// One stream's column being built.
struct Column<T> {
    spec: StreamSpec,
    sample: DataType,
    /// Per sequence: where its samples begin.
    sequences: Offsets,
    values: Vec<T>,
    /// Sparse: the indices, and per sample where its entries begin.
    indices: Vec<u32>,
    samples: Offsets,
}

impl<T: Value> Column<T> {
    fn append(&mut self, s: &StreamData<T>) -> Result<()> {
        let name = &self.spec.name;
        let (first, last) = (
            s.seq_offsets()[0],
            *s.seq_offsets().last().expect("never empty"),
        );
        let rel: Vec<usize> = s.seq_offsets()[1..].iter().map(|o| o - first).collect();
        self.sequences.extend(&rel, name)?;
        match self.spec.storage {
            Storage::Dense => {
                let dim = self.spec.dim;
                self.values
                    .extend_from_slice(&s.values()[first * dim..last * dim]);
            }
            Storage::Sparse => {
                let offsets = &s.sample_offsets()[first..=last];
                let (from, to) = (offsets[0], offsets[offsets.len() - 1]);
                let rel: Vec<usize> = offsets[1..].iter().map(|o| o - from).collect();
                self.samples.extend(&rel, name)?;
                self.indices.extend_from_slice(&s.indices()[from..to]);
                self.values.extend_from_slice(&s.values()[from..to]);
            }
        }
        Ok(())
    }

    fn bytes(&self) -> usize {
        self.values.len() * std::mem::size_of::<T>()
            + self.indices.len() * 4
            + (self.sequences.0.len() + self.samples.0.len() - 2) * 4
    }

    fn finish(&mut self) -> Result<ArrayRef> {
        let values = PrimitiveArray::<T::Arrow>::new(
            ScalarBuffer::from(std::mem::take(&mut self.values)),
            None,
        );
        let item = |t: DataType| Arc::new(Field::new("item", t, false));
        let samples: ArrayRef = match self.spec.storage {
            Storage::Dense => Arc::new(
                FixedSizeListArray::try_new(
                    item(T::data_type()),
                    self.spec.dim as i32,
                    Arc::new(values),
                    None,
                )
                .map_err(arrow_error)?,
            ),
            Storage::Sparse => {
                let offsets = self.samples.take();
                let indices =
                    UInt32Array::new(ScalarBuffer::from(std::mem::take(&mut self.indices)), None);
                let list = |t: DataType, a: ArrayRef| {
                    ListArray::try_new(item(t), offsets.clone(), a, None).map_err(arrow_error)
                };
                let columns: Vec<ArrayRef> = vec![
                    Arc::new(list(DataType::UInt32, Arc::new(indices))?),
                    Arc::new(list(T::data_type(), Arc::new(values))?),
                ];
                Arc::new(
                    StructArray::try_new(sparse_fields(T::PRECISION), columns, None)
                        .map_err(arrow_error)?,
                )
            }
        };
        Ok(Arc::new(
            ListArray::try_new(
                item(self.sample.clone()),
                self.sequences.take(),
                samples,
                None,
            )
            .map_err(arrow_error)?,
        ))
    }
}

/// What sequence `q` of `batch` adds to [`BatchBuilder::bytes`]: its key, and per stream its
/// values, its sparse indices, its entry in the sequence offsets and (sparse) its samples'.
fn sequence_bytes<T: Value>(batch: &SequenceBatch<T>, q: usize) -> usize {
    8 + batch
        .streams()
        .iter()
        .map(|s| {
            let entries = s.sequence_nnz(q);
            4 + match s.storage() {
                Storage::Dense => entries * std::mem::size_of::<T>(),
                Storage::Sparse => {
                    entries * (std::mem::size_of::<T>() + 4) + 4 * s.sequence_samples(q).len()
                }
            }
        })
        .sum::<usize>()
}

/// A Parquet error as exfeed's.
pub(crate) fn parquet_error(e: parquet::errors::ParquetError) -> Error {
    Error::config(format!("Parquet: {e}"))
}

pub(crate) fn arrow_error(e: arrow_schema::ArrowError) -> Error {
    Error::config(format!("Arrow: {e}"))
}

/// Gathers sequences into record batches of the [schema](crate::arrow::schema).
pub struct BatchBuilder<T: Value> {
    schema: SchemaRef,
    keys: Vec<u64>,
    columns: Vec<Column<T>>,
}

impl<T: Value> BatchBuilder<T> {
    /// A builder for sequences of `streams`.
    pub fn new(streams: &[StreamSpec]) -> Result<Self> {
        let columns = streams
            .iter()
            .map(|spec| {
                Ok(Column {
                    spec: spec.clone(),
                    sample: sample_type(spec, T::PRECISION)?,
                    sequences: Offsets::new(),
                    values: Vec::new(),
                    indices: Vec::new(),
                    samples: Offsets::new(),
                })
            })
            .collect::<Result<_>>()?;
        Ok(BatchBuilder {
            schema: schema(streams, T::PRECISION)?,
            keys: Vec::new(),
            columns,
        })
    }

    /// The schema of the record batches.
    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// Appends every sequence of `batch` (whose streams are the builder's).
    pub fn append(&mut self, batch: &SequenceBatch<T>) -> Result<()> {
        for (column, s) in self.columns.iter_mut().zip(batch.streams()) {
            column.append(s)?;
        }
        self.keys.extend_from_slice(batch.keys());
        Ok(())
    }

    /// Appends the run of sequences of `batch` from `start` that brings the data held to
    /// `chunk_size` bytes (at least one sequence, at most the rest of the batch); returns where
    /// the run ends. The run ends after the first sequence that brings [`BatchBuilder::bytes`]
    /// to `chunk_size`, so record batches end at the same sequences however the sequences come
    /// in batches.
    pub fn fill_from(
        &mut self,
        batch: &SequenceBatch<T>,
        start: usize,
        chunk_size: usize,
    ) -> Result<usize> {
        let room = chunk_size.saturating_sub(self.bytes());
        let mut end = batch.len();
        let mut bytes = 0;
        for q in start..batch.len() {
            bytes += sequence_bytes::<T>(batch, q);
            if bytes >= room {
                end = q + 1;
                break;
            }
        }
        if start == 0 && end == batch.len() {
            self.append(batch)?;
        } else {
            let mut part = batch.empty_like();
            part.push_sequences_from(batch, start..end);
            self.append(&part)?;
        }
        Ok(end)
    }

    /// Sequences appended since the last [`BatchBuilder::finish`].
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether no sequence was appended since the last [`BatchBuilder::finish`].
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Bytes of data held (values, indices, keys and offsets): what a chunk size bounds.
    pub fn bytes(&self) -> usize {
        self.keys.len() * 8 + self.columns.iter().map(Column::bytes).sum::<usize>()
    }

    /// The sequences appended since the last call, as one record batch; the builder starts
    /// empty again.
    pub fn finish(&mut self) -> Result<RecordBatch> {
        let mut arrays: Vec<ArrayRef> = vec![Arc::new(UInt64Array::new(
            ScalarBuffer::from(std::mem::take(&mut self.keys)),
            None,
        ))];
        for column in &mut self.columns {
            arrays.push(column.finish()?);
        }
        debug_assert!(arrays.iter().all(|a| a.null_count() == 0));
        RecordBatch::try_new(self.schema.clone(), arrays).map_err(arrow_error)
    }
}
