//! Apache Arrow and Parquet (the `arrow` feature): the sequences of any input as Arrow record
//! batches ([`BatchBuilder`]), written to Parquet and Arrow IPC files ([`SequenceWriter`],
//! [`write_batches`]) and read back ([`ColumnarFile`], [`ArrowSequences`]). [`crate::open`]
//! reads these files like any other format (a row group or record batch is a chunk), and
//! [`crate::convert::convert`] writes them.
//! [`crate::convert::arrow_stream::SequenceStream`] is a `RecordBatchReader` for the Arrow C stream interface
//! (Python's `exfeed.to_arrow`).
//!
//! The schema (one row per sequence: `key`, then a list column per stream) is described in
//! [`schema`]. Without the feature the library does not depend on Arrow.
//!
//! ```
//! use exfeed::{SequenceBatch, Storage, StreamSpec};
//! use exfeed::arrow::{ArrowSequences, SequenceWriter, WriteOptions};
//! use exfeed::format::FileFormat;
//!
//! let specs = vec![
//!     StreamSpec::new("x", Storage::Dense, 2),
//!     StreamSpec::new("y", Storage::Sparse, 10),
//! ];
//! let mut batch = SequenceBatch::<f32>::new(&specs);
//! batch.stream_mut(0).push_dense_sample(&[1.0, 2.0]);
//! batch.stream_mut(0).push_dense_sample(&[3.0, 4.0]);
//! batch.stream_mut(1).push_sparse_sample(&[7], &[0.5]);
//! batch.finish_sequence(42);
//!
//! let path = std::env::temp_dir().join(format!("exfeed-arrow-doc-{}.parquet", std::process::id()));
//! let options = WriteOptions::new(FileFormat::Parquet, 32 << 20);
//! let mut writer = SequenceWriter::<_, f32>::new(std::fs::File::create(&path)?, &specs, options)?;
//! writer.write_batch(&batch)?;
//! writer.finish()?;
//!
//! let mut file = ArrowSequences::open(&path, &[])?;
//! assert_eq!(file.streams(), &specs[..]);
//! let mut back = SequenceBatch::<f32>::new(file.streams());
//! assert!(file.next_batch(&mut back)?);
//! assert_eq!(back, batch);
//! # std::fs::remove_file(&path)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod decode;
mod encode;
mod file;
mod read;
pub mod schema;
#[cfg(test)]
mod tests;

pub use decode::append_record_batch;
pub use encode::BatchBuilder;
pub use file::{write_batches, SequenceWriter, WriteOptions};
pub use read::{ArrowSequences, ColumnarFile, ColumnarInput};

use arrow_array::types::{Float32Type, Float64Type};
use arrow_array::ArrowPrimitiveType;
use arrow_schema::DataType;

/// An element type with its Arrow type: `f32` (`float32`) or `f64` (`float64`).
pub trait Value: crate::Element + arrow_buffer::ArrowNativeType {
    /// The Arrow primitive type of the values.
    type Arrow: ArrowPrimitiveType<Native = Self>;
    /// `float32` or `float64`.
    fn data_type() -> DataType {
        schema::value_type(Self::PRECISION)
    }
}

impl Value for f32 {
    type Arrow = Float32Type;
}

impl Value for f64 {
    type Arrow = Float64Type;
}
