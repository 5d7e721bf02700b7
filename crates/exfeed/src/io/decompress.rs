//! Decompressing an input (gzip, bzip2) with errors that say where: a corrupt or truncated
//! stream is reported at the compressed byte the decoder had read up to and the decompressed
//! bytes it had delivered (the input's name is added by the caller, as for every I/O error).

use super::Compression;
use std::io::{self, BufRead, BufReader, Read};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// `compressed` decompressed as `compression` says (gzip and bzip2 members one after the
/// other, as gzip and bzip2 themselves read them), buffered.
pub(crate) fn decoder(
    compression: Compression,
    compressed: impl BufRead + Send + 'static,
) -> Box<dyn BufRead + Send> {
    let consumed = Arc::new(AtomicU64::new(0));
    let counted = Counted {
        inner: compressed,
        consumed: consumed.clone(),
    };
    let (decoder, format): (Box<dyn Read + Send>, &str) = match compression {
        Compression::None => return Box::new(counted.inner),
        Compression::Gzip => (
            Box::new(flate2::bufread::MultiGzDecoder::new(counted)),
            "gzip",
        ),
        Compression::Bzip2 => (
            Box::new(bzip2::bufread::MultiBzDecoder::new(counted)),
            "bzip2",
        ),
    };
    Box::new(BufReader::with_capacity(
        1 << 16,
        Located {
            decoder,
            format,
            consumed,
            delivered: 0,
        },
    ))
}

/// The compressed stream, counting the bytes the decoder has taken from it.
struct Counted<R> {
    inner: R,
    consumed: Arc<AtomicU64>,
}

impl<R: BufRead> Read for Counted<R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(out)?;
        self.consumed.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

impl<R: BufRead> BufRead for Counted<R> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        self.inner.fill_buf()
    }

    fn consume(&mut self, n: usize) {
        self.consumed.fetch_add(n as u64, Ordering::Relaxed);
        self.inner.consume(n);
    }
}

/// The decoder, its errors rewritten to say where the stream broke.
struct Located {
    decoder: Box<dyn Read + Send>,
    format: &'static str,
    consumed: Arc<AtomicU64>,
    delivered: u64,
}

impl Read for Located {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        match self.decoder.read(out) {
            Ok(n) => {
                self.delivered += n as u64;
                Ok(n)
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Err(e),
            Err(e) => {
                let consumed = self.consumed.load(Ordering::Relaxed);
                // bzip2's messages start with its name; flate2's do not.
                let what = match e.to_string() {
                    m if m.starts_with(self.format) => m,
                    m => format!("{} data: {m}", self.format),
                };
                Err(io::Error::new(
                    e.kind(),
                    format!(
                        "{what}, at compressed byte {consumed} (decompressed byte {})",
                        self.delivered
                    ),
                ))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        enc.write_all(data).unwrap();
        enc.finish().unwrap()
    }

    fn read_all(compression: Compression, bytes: Vec<u8>) -> (Vec<u8>, io::Result<()>) {
        let mut out = Vec::new();
        let mut r = decoder(compression, io::Cursor::new(bytes));
        let result = r.read_to_end(&mut out).map(|_| ());
        (out, result)
    }

    #[test]
    fn a_truncated_stream_is_reported_at_its_last_compressed_byte() {
        let data: Vec<u8> = (0..200_000u32).flat_map(|i| i.to_le_bytes()).collect();
        let whole = gzip(&data);
        let (out, ok) = read_all(Compression::Gzip, whole.clone());
        assert!(ok.is_ok() && out == data);
        let cut = whole.len() / 2;
        let (out, err) = read_all(Compression::Gzip, whole[..cut].to_vec());
        let err = err.unwrap_err().to_string();
        assert!(
            err.starts_with("gzip data: incomplete deflate stream")
                && err.ends_with(&format!(
                    ", at compressed byte {cut} (decompressed byte {})",
                    out.len()
                )),
            "{err}"
        );
        assert!(!out.is_empty() && out.len() < data.len());
    }

    #[test]
    fn a_damaged_bzip2_stream_names_the_format_and_a_place_after_the_damage() {
        let data = b"0 |x 1 2\n".repeat(50_000);
        let mut enc = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::default());
        enc.write_all(&data).unwrap();
        let mut bytes = enc.finish().unwrap();
        let at = bytes.len() / 2;
        bytes[at] ^= 0xff;
        let len = bytes.len();
        let (_, err) = read_all(Compression::Bzip2, bytes);
        let err = err.unwrap_err().to_string();
        let place: u64 = err
            .split("at compressed byte ")
            .nth(1)
            .and_then(|s| s.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{err}"));
        assert!(err.starts_with("bzip2: "), "{err}");
        assert!((at as u64..=len as u64).contains(&place), "{err}");
    }
}
