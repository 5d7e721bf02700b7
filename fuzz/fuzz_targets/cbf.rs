//! Fuzzes the CBF reader: opening any bytes and decoding every chunk (as float and as double)
//! must end in a value or a clean error, never a panic, a hang or a huge allocation.
#![no_main]

use exfeed::cbf::CbfFile;
use exfeed::SequenceBatch;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(file) = CbfFile::open(data) {
        let mut f32s = SequenceBatch::<f32>::new(&[]);
        let mut f64s = SequenceBatch::<f64>::new(&[]);
        for i in 0..file.num_chunks() {
            if file.read_chunk(i, &mut f32s).is_ok() {
                assert_eq!(f32s.len(), file.chunk_info(i).sequences as usize);
                file.read_chunk(i, &mut f64s).expect("a chunk read as float reads as double");
            }
        }
    }
});
