//! The CTF index cache reader: any bytes must decode to an index or a reason not to use it
//! (no panic, no allocation beyond the bytes), and whatever decodes must encode back to the
//! same bytes. The target also fixes up each input's checksum, so the structural checks behind
//! it are reached.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| exfeed::source::fuzz_index_cache(data));
