//! Record batches of the [schema](crate::arrow::schema) back to [`SequenceBatch`]es.

use crate::arrow::schema::Streams;
use crate::{Element, Error, Result, SequenceBatch, Storage, StreamSpec};
use arrow_array::cast::AsArray;
use arrow_array::types::{Float32Type, Float64Type, Int32Type, Int64Type, UInt32Type, UInt64Type};
use arrow_array::{Array, ArrayRef, GenericListArray, OffsetSizeTrait, RecordBatch};
use arrow_schema::DataType;

/// The values of a float array as `T`.
fn floats<T: Element>(a: &dyn Array, column: &str) -> Result<Vec<T>> {
    no_nulls(a, column)?;
    Ok(match a.data_type() {
        DataType::Float32 => a
            .as_primitive::<Float32Type>()
            .values()
            .iter()
            .map(|&v| T::from_f32(v))
            .collect(),
        DataType::Float64 => a
            .as_primitive::<Float64Type>()
            .values()
            .iter()
            .map(|&v| T::from_f64(v))
            .collect(),
        t => return Err(Error::config(format!("column '{column}': values are {t}"))),
    })
}

/// Sparse indices, each checked against `dim`.
fn indices(a: &dyn Array, column: &str, dim: usize) -> Result<Vec<u32>> {
    fn checked<I: Copy + Into<i128>>(wide: &[I], column: &str, dim: usize) -> Result<Vec<u32>> {
        let mut out = Vec::with_capacity(wide.len());
        for &i in wide {
            let i: i128 = i.into();
            if i < 0 || i >= dim as i128 {
                return Err(Error::new(
                    crate::ErrorKind::Invalid,
                    crate::Location::default(),
                    format!("column '{column}': sparse index {i} is outside [0, {dim})"),
                ));
            }
            out.push(i as u32);
        }
        Ok(out)
    }
    no_nulls(a, column)?;
    match a.data_type() {
        DataType::UInt32 => checked(a.as_primitive::<UInt32Type>().values(), column, dim),
        DataType::Int32 => checked(a.as_primitive::<Int32Type>().values(), column, dim),
        DataType::Int64 => checked(a.as_primitive::<Int64Type>().values(), column, dim),
        DataType::UInt64 => checked(a.as_primitive::<UInt64Type>().values(), column, dim),
        t => Err(Error::config(format!("column '{column}': indices are {t}"))),
    }
}

fn no_nulls(a: &dyn Array, column: &str) -> Result<()> {
    if a.null_count() == 0 {
        return Ok(());
    }
    match a.nulls().and_then(|n| (0..a.len()).find(|&i| n.is_null(i))) {
        None => Ok(()),
        Some(i) => Err(Error::new(
            crate::ErrorKind::Invalid,
            crate::Location::default(),
            format!("column '{column}': a null at position {i}; exfeed's data has no nulls"),
        )),
    }
}

/// A list column's offsets (as `usize`, made relative to its first) and its values.
fn list_parts(a: &dyn Array, column: &str) -> Result<(Vec<usize>, ArrayRef)> {
    fn parts<O: OffsetSizeTrait>(l: &GenericListArray<O>) -> (Vec<usize>, ArrayRef) {
        let o = l.value_offsets();
        let first = o[0].as_usize();
        let values = l.values().slice(first, o[o.len() - 1].as_usize() - first);
        (o.iter().map(|v| v.as_usize() - first).collect(), values)
    }
    no_nulls(a, column)?;
    match a.data_type() {
        DataType::List(_) => Ok(parts(a.as_list::<i32>())),
        DataType::LargeList(_) => Ok(parts(a.as_list::<i64>())),
        t => Err(Error::config(format!(
            "column '{column}' is {t}, not a list"
        ))),
    }
}

/// One stream column of a record batch, decoded into flat buffers.
struct Decoded<T> {
    /// Per row: where its samples begin (rows + 1 entries).
    sequences: Vec<usize>,
    values: Vec<T>,
    /// Sparse: indices and per sample where its entries begin (samples + 1 entries).
    indices: Vec<u32>,
    samples: Vec<usize>,
}

fn decode_column<T: Element>(a: &dyn Array, spec: &StreamSpec, column: &str) -> Result<Decoded<T>> {
    let (sequences, samples) = list_parts(a, column)?;
    no_nulls(&samples, column)?;
    match spec.storage {
        Storage::Dense => {
            let fsl = samples.as_fixed_size_list();
            let dim = fsl.value_length() as usize;
            let values = fsl.values().slice(0, fsl.len() * dim);
            Ok(Decoded {
                sequences,
                values: floats(&values, column)?,
                indices: Vec::new(),
                samples: Vec::new(),
            })
        }
        Storage::Sparse => {
            let st = samples.as_struct();
            let member = |n: &str| {
                st.column_by_name(n)
                    .ok_or_else(|| Error::config(format!("column '{column}': no '{n}' member")))
            };
            let (offsets, idx) = list_parts(member("indices")?, column)?;
            let (value_offsets, vals) = list_parts(member("values")?, column)?;
            if offsets != value_offsets {
                return Err(Error::new(
                    crate::ErrorKind::Invalid,
                    crate::Location::default(),
                    format!("column '{column}': a sample's indices and values differ in number"),
                ));
            }
            Ok(Decoded {
                sequences,
                values: floats(&vals, column)?,
                indices: indices(&idx, column, spec.dim)?,
                samples: offsets,
            })
        }
    }
}

/// Appends the rows of `rb` (a record batch of the file whose streams are `streams`) to `out`
/// (whose streams are `streams.specs`), keyed by the key column.
pub fn append_record_batch<T: Element>(
    rb: &RecordBatch,
    streams: &Streams,
    out: &mut SequenceBatch<T>,
) -> Result<()> {
    let key_name = crate::arrow::schema::KEY;
    let keys_array = rb.column(streams.key_column);
    no_nulls(keys_array.as_ref(), key_name)?;
    let keys: Vec<u64> = match keys_array.data_type() {
        DataType::UInt64 => keys_array.as_primitive::<UInt64Type>().values().to_vec(),
        DataType::Int64 => keys_array
            .as_primitive::<Int64Type>()
            .values()
            .iter()
            .map(|&k| {
                u64::try_from(k)
                    .map_err(|_| Error::config(format!("column '{key_name}': negative key {k}")))
            })
            .collect::<Result<_>>()?,
        t => return Err(Error::config(format!("column '{key_name}' is {t}"))),
    };
    let mut decoded = Vec::with_capacity(streams.columns.len());
    for (&c, spec) in streams.columns.iter().zip(&streams.specs) {
        let column = rb.schema().field(c).name().clone();
        decoded.push(decode_column::<T>(rb.column(c).as_ref(), spec, &column)?);
    }
    out.reserve_sequences(keys.len());
    for (row, &key) in keys.iter().enumerate() {
        for (i, (d, spec)) in decoded.iter().zip(&streams.specs).enumerate() {
            let (from, to) = (d.sequences[row], d.sequences[row + 1]);
            let s = out.stream_mut(i);
            match spec.storage {
                Storage::Dense => {
                    let dim = spec.dim;
                    s.extend_dense_samples(
                        to - from,
                        d.values[from * dim..to * dim].iter().copied(),
                    );
                }
                Storage::Sparse => {
                    let (a, b) = (d.samples[from], d.samples[to]);
                    s.extend_sparse_samples(
                        d.indices[a..b].iter().copied(),
                        d.values[a..b].iter().copied(),
                        d.samples[from..=to].windows(2).map(|w| w[1] - w[0]),
                    );
                }
            }
        }
        out.finish_sequence(key);
    }
    Ok(())
}
