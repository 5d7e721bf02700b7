//! The JSON-lines forms `exfeed dump` prints, one JSON object a line. Each function appends
//! one line (with its `\n`) to a byte buffer.
//!
//! - A sequence of a CTF or CBF file (or of any [`SequenceBatch`](crate::SequenceBatch)):
//!   [`write_sequence`].
//! - A Lens example set as it is written, events and shared range lists included:
//!   [`write_header`] (or [`write_set_header`] when examples are streamed) and then
//!   [`write_example`] for each example; or an example as the network sees it, with a layout:
//!   [`write_materialized`].
//!
//! ```
//! use exfeed::{SequenceBatch, Storage, StreamSpec};
//!
//! let specs = vec![StreamSpec::new("x", Storage::Dense, 2)];
//! let mut batch = SequenceBatch::<f32>::new(&specs);
//! batch.stream_mut(0).push_dense_sample(&[1.0, 0.5]);
//! batch.finish_sequence(7);
//! let mut line = Vec::new();
//! exfeed::dump::write_sequence(&mut line, &batch, 0, &["x"]);
//! assert_eq!(line, b"{\"key\":7,\"streams\":{\"x\":[[1,0.5]]}}\n");
//! ```

pub use crate::json::{write_keyed_sequence, write_sequence};
pub use crate::lens::dump::{write_example, write_header, write_materialized, write_set_header};
