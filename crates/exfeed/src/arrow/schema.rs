//! The Arrow schema of exfeed's sequences, and reading it back from a file's schema.
//!
//! One row per sequence. Column `key` (`uint64`) is the sequence's key: a CTF file's sequence
//! id (its line number with `skipSequenceIds`), the 0-based index of a CBF file's sequence, of a
//! Lens example, or of a row of an Arrow/Parquet file read back. Then one column per stream,
//! named by the stream's name, one list entry per sample:
//!
//! - dense: `list<fixed_size_list<float32 | float64, DIM>>`;
//! - sparse: `list<struct<indices: list<uint32>, values: list<float32 | float64>>>`, the
//!   non-zero entries of each sample (CSR: a sample's indices and values have equal lengths).
//!
//! No value is null. Each stream's field carries metadata that makes the conversion back
//! lossless: `exfeed.storage` (`dense` or `sparse`), `exfeed.dim` and, when the stream has one,
//! `exfeed.alias` (the CTF name, e.g. `F` for `features`). A file without the metadata is
//! still read: storage follows from the column's type and a dense dim from the list size; a
//! sparse stream's dim must then be given ([`Streams::of`]'s `given`).

use crate::{Error, Precision, Result, Storage, StreamSpec};
use arrow_schema::{DataType, Field, Fields, Schema, SchemaRef};
use std::collections::HashMap;
use std::sync::Arc;

/// The name of the key column.
pub const KEY: &str = "key";
/// Field metadata: `dense` or `sparse`.
pub const META_STORAGE: &str = "exfeed.storage";
/// Field metadata: the stream's dimension, in decimal.
pub const META_DIM: &str = "exfeed.dim";
/// Field metadata: the stream's alias (its name in CTF files), when it has one.
pub const META_ALIAS: &str = "exfeed.alias";

/// The Arrow type of values of `precision`.
pub fn value_type(precision: Precision) -> DataType {
    match precision {
        Precision::Float => DataType::Float32,
        Precision::Double => DataType::Float64,
    }
}

/// A list of non-null `item`s.
fn list_of(item: DataType) -> DataType {
    DataType::List(Arc::new(Field::new("item", item, false)))
}

/// The fields of a sparse sample's struct: its indices and its values.
pub(crate) fn sparse_fields(precision: Precision) -> Fields {
    Fields::from(vec![
        Field::new("indices", list_of(DataType::UInt32), false),
        Field::new("values", list_of(value_type(precision)), false),
    ])
}

/// The type of one sample of a stream (the item of its column's list).
pub(crate) fn sample_type(spec: &StreamSpec, precision: Precision) -> Result<DataType> {
    Ok(match spec.storage {
        Storage::Dense => {
            let dim = i32::try_from(spec.dim).map_err(|_| {
                Error::config(format!(
                    "stream '{}': dim {} is larger than Arrow's fixed-size lists hold ({})",
                    spec.name,
                    spec.dim,
                    i32::MAX
                ))
            })?;
            DataType::FixedSizeList(
                Arc::new(Field::new("item", value_type(precision), false)),
                dim,
            )
        }
        Storage::Sparse => DataType::Struct(sparse_fields(precision)),
    })
}

/// The schema of `streams` with values of `precision` (see the [module documentation](self)).
pub fn schema(streams: &[StreamSpec], precision: Precision) -> Result<SchemaRef> {
    let mut fields = vec![Field::new(KEY, DataType::UInt64, false)];
    for spec in streams {
        if spec.name == KEY {
            return Err(Error::config(format!(
                "a stream named '{KEY}' would clash with the key column; rename it"
            )));
        }
        let mut meta = HashMap::from([
            (META_STORAGE.to_string(), spec.storage.as_str().to_string()),
            (META_DIM.to_string(), spec.dim.to_string()),
        ]);
        if let Some(alias) = &spec.alias {
            meta.insert(META_ALIAS.to_string(), alias.clone());
        }
        fields.push(
            Field::new(&spec.name, list_of(sample_type(spec, precision)?), false)
                .with_metadata(meta),
        );
    }
    Ok(Arc::new(Schema::new(fields)))
}

/// The streams of a file's schema: what [`crate::arrow::append_record_batch`] decodes.
#[derive(Debug, Clone, PartialEq)]
pub struct Streams {
    /// The streams, in column order.
    pub specs: Vec<StreamSpec>,
    /// `Double` when any stream's values are `float64`.
    pub precision: Precision,
    /// The column of the key.
    pub key_column: usize,
    /// The column of each stream.
    pub columns: Vec<usize>,
}

impl Streams {
    /// Reads the streams of `schema`. `given` supplies what the metadata lacks (a sparse
    /// stream's dim) and, when not empty, selects and orders the streams (each names a column
    /// by [`StreamSpec::name_in_file`], exposed under its `name`; dim 0 takes the file's).
    /// Columns of another type are an error naming the column.
    pub fn of(schema: &Schema, given: &[StreamSpec]) -> Result<Streams> {
        let key_column = schema.index_of(KEY).map_err(|_| {
            Error::config(format!(
                "no column '{KEY}': this is not a file of exfeed's sequence schema (its columns: {})",
                column_names(schema)
            ))
        })?;
        let key_type = schema.field(key_column).data_type();
        if !matches!(key_type, DataType::UInt64 | DataType::Int64) {
            return Err(Error::config(format!(
                "column '{KEY}' is {key_type}, expected uint64 (the sequence keys)"
            )));
        }
        let mut found = Vec::new();
        for (i, field) in schema.fields().iter().enumerate() {
            if i != key_column {
                found.push((i, stream_of(field)?));
            }
        }
        let mut streams = Streams {
            specs: Vec::new(),
            precision: Precision::Float,
            key_column,
            columns: Vec::new(),
        };
        let mut add = |column: usize, spec: StreamSpec, precision: Precision| {
            if precision == Precision::Double {
                streams.precision = Precision::Double;
            }
            streams.columns.push(column);
            streams.specs.push(spec);
        };
        if given.is_empty() {
            for (column, (spec, precision)) in found {
                if spec.dim == 0 {
                    return Err(missing_dim(&spec.name));
                }
                add(column, spec, precision);
            }
        } else {
            for want in given {
                let in_file = want.name_in_file();
                let Some((column, (spec, precision))) =
                    found.iter().find(|(_, (s, _))| s.name == in_file)
                else {
                    return Err(Error::config(format!(
                        "input '{}': the file has no column '{in_file}' (its columns: {})",
                        want.name,
                        column_names(schema)
                    )));
                };
                if want.storage != spec.storage
                    || (want.dim != 0 && spec.dim != 0 && want.dim != spec.dim)
                {
                    return Err(Error::config(format!(
                        "input '{}': configured as {} dim {}, column '{in_file}' is {} dim {}",
                        want.name, want.storage, want.dim, spec.storage, spec.dim
                    )));
                }
                let dim = if spec.dim != 0 { spec.dim } else { want.dim };
                if dim == 0 {
                    return Err(missing_dim(in_file));
                }
                let spec = StreamSpec {
                    name: want.name.clone(),
                    dim,
                    defines_mb_size: want.defines_mb_size,
                    ..spec.clone()
                };
                add(*column, spec, *precision);
            }
        }
        Ok(streams)
    }
}

fn column_names(schema: &Schema) -> String {
    let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
    names.join(", ")
}

fn missing_dim(column: &str) -> Error {
    Error::config(format!(
        "column '{column}': a sparse stream needs its dim, and the column has no '{META_DIM}' \
         metadata; give the input (NAME:sparse:DIM)"
    ))
}

/// The item of a list type (`list` or `large_list`).
fn list_item(t: &DataType) -> Option<&DataType> {
    match t {
        DataType::List(f) | DataType::LargeList(f) => Some(f.data_type()),
        _ => None,
    }
}

fn precision_of(t: &DataType) -> Option<Precision> {
    match t {
        DataType::Float32 => Some(Precision::Float),
        DataType::Float64 => Some(Precision::Double),
        _ => None,
    }
}

/// The stream a column holds, with its dim (0 when neither the type nor the metadata says),
/// and its values' precision.
fn stream_of(field: &Field) -> Result<(StreamSpec, Precision)> {
    let name = field.name();
    let not_a_stream = || {
        Error::config(format!(
            "column '{name}' is {}, which is not an exfeed stream: expected \
             list<fixed_size_list<float>> (dense) or list<struct<indices: list<uint32>, \
             values: list<float>>> (sparse)",
            field.data_type()
        ))
    };
    let sample = list_item(field.data_type()).ok_or_else(not_a_stream)?;
    let (storage, dim, precision) = match sample {
        DataType::FixedSizeList(item, size) => {
            let p = precision_of(item.data_type()).ok_or_else(not_a_stream)?;
            (Storage::Dense, *size as usize, p)
        }
        DataType::Struct(fields) => {
            let member = |n: &str| {
                fields
                    .iter()
                    .find(|f| f.name() == n)
                    .and_then(|f| list_item(f.data_type()))
            };
            let (
                Some(DataType::UInt32 | DataType::Int32 | DataType::Int64 | DataType::UInt64),
                Some(v),
            ) = (member("indices"), member("values"))
            else {
                return Err(not_a_stream());
            };
            let p = precision_of(v).ok_or_else(not_a_stream)?;
            (Storage::Sparse, 0, p)
        }
        _ => return Err(not_a_stream()),
    };
    let meta = field.metadata();
    if let Some(s) = meta.get(META_STORAGE) {
        if s != storage.as_str() {
            return Err(Error::config(format!(
                "column '{name}': its metadata says {s}, its type is that of a {storage} stream"
            )));
        }
    }
    let meta_dim = match meta.get(META_DIM) {
        Some(d) => Some(
            d.parse::<usize>()
                .ok()
                .filter(|&d| d > 0 && d as u64 <= storage.max_dim())
                .ok_or_else(|| {
                    Error::config(format!("column '{name}': '{META_DIM}' is '{d}', not a dim"))
                })?,
        ),
        None => None,
    };
    let dim = match (storage, meta_dim) {
        (Storage::Dense, Some(d)) if d != dim => {
            return Err(Error::config(format!(
                "column '{name}': '{META_DIM}' is {d}, its samples have {dim} values"
            )))
        }
        (_, Some(d)) => d,
        (_, None) => dim,
    };
    let mut spec = StreamSpec::new(name.as_str(), storage, dim);
    spec.alias = meta.get(META_ALIAS).cloned();
    Ok((spec, precision))
}
