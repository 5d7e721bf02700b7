//! [`ReadAhead`]: a stream read on a thread of its own, so that decompressing a file and parsing
//! it overlap (on two cores a compressed file then takes about as long as its decompression).

use std::io::{BufRead, Read};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};

/// A stream whose reads happen on a thread of its own, at most `depth` blocks ahead of the
/// consumer: memory is bounded by `depth + 2` blocks. Each block is one read of the inner
/// stream (so bytes are handed on as they come, never held back to fill a block). An error of
/// the inner stream is returned where it happened, once; the thread ends at the end of the
/// stream, at an error, or when the `ReadAhead` is dropped (after its read in progress).
pub struct ReadAhead {
    blocks: Receiver<std::io::Result<Vec<u8>>>,
    /// Blocks done with, sent back to be filled again.
    emptied: SyncSender<Vec<u8>>,
    current: Vec<u8>,
    pos: usize,
    done: bool,
}

impl ReadAhead {
    /// Starts reading `inner` on a new thread, in reads of up to `block` bytes.
    pub fn new(mut inner: Box<dyn Read + Send>, block: usize, depth: usize) -> Self {
        let (send, blocks) = sync_channel(depth);
        let (emptied, refill) = sync_channel::<Vec<u8>>(depth + 2);
        std::thread::Builder::new()
            .name("exfeed-read-ahead".into())
            .spawn(move || loop {
                let mut buf = refill.try_recv().unwrap_or_default();
                buf.resize(block, 0);
                let got = loop {
                    match inner.read(&mut buf) {
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                        got => break got,
                    }
                };
                let last = !matches!(got, Ok(n) if n > 0);
                let sent = send.send(got.map(|n| {
                    buf.truncate(n);
                    buf
                }));
                if last || sent.is_err() {
                    return;
                }
            })
            .expect("a thread can be started");
        ReadAhead {
            blocks,
            emptied,
            current: Vec::new(),
            pos: 0,
            done: false,
        }
    }
}

impl BufRead for ReadAhead {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        while self.pos == self.current.len() && !self.done {
            match self.blocks.recv() {
                Ok(Ok(block)) => {
                    self.done = block.is_empty();
                    let old = std::mem::replace(&mut self.current, block);
                    // The thread may have ended (end of stream): the block is dropped then.
                    let _ = self.emptied.try_send(old);
                    self.pos = 0;
                }
                Ok(Err(e)) => {
                    self.done = true;
                    return Err(e);
                }
                // The thread ended after its last block.
                Err(_) => self.done = true,
            }
        }
        Ok(&self.current[self.pos..])
    }

    fn consume(&mut self, n: usize) {
        self.pos = (self.pos + n).min(self.current.len());
    }
}

impl Read for ReadAhead {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        read_buffered(self, out)
    }
}

/// `Read::read` for a reader that holds its own buffer: copies from it into `out`.
pub(crate) fn read_buffered(reader: &mut impl BufRead, out: &mut [u8]) -> std::io::Result<usize> {
    let got = reader.fill_buf()?;
    let n = got.len().min(out.len());
    out[..n].copy_from_slice(&got[..n]);
    reader.consume(n);
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Gives `data` a few bytes a read, then fails once if `fail` is set.
    struct Trickle {
        data: Vec<u8>,
        pos: usize,
        fail: bool,
    }

    impl Read for Trickle {
        fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
            if self.pos == self.data.len() && std::mem::take(&mut self.fail) {
                return Err(std::io::Error::other("broken"));
            }
            let n = out.len().min(7).min(self.data.len() - self.pos);
            out[..n].copy_from_slice(&self.data[self.pos..self.pos + n]);
            self.pos += n;
            Ok(n)
        }
    }

    #[test]
    fn gives_the_stream_in_order_then_its_error() {
        let data: Vec<u8> = (0..100_000u32).map(|i| (i * 7 % 251) as u8).collect();
        for fail in [false, true] {
            let src = Trickle {
                data: data.clone(),
                pos: 0,
                fail,
            };
            let mut r = ReadAhead::new(Box::new(src), 5, 2);
            let mut got = Vec::new();
            let result = r.read_to_end(&mut got);
            assert_eq!(got, data);
            assert_eq!(result.is_err(), fail);
            // After the end (or the error), the end.
            assert_eq!(r.read(&mut [0; 4]).unwrap(), 0);
        }
    }

    /// An endless stream of ones that says when it is dropped.
    struct Ones(std::sync::Arc<std::sync::atomic::AtomicBool>);

    impl Read for Ones {
        fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
            out.fill(1);
            Ok(out.len())
        }
    }

    impl Drop for Ones {
        fn drop(&mut self) {
            self.0.store(true, std::sync::atomic::Ordering::SeqCst);
        }
    }

    #[test]
    fn dropping_it_early_ends_the_thread() {
        let dropped = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let mut r = ReadAhead::new(Box::new(Ones(dropped.clone())), 1 << 16, 2);
        assert_eq!(r.fill_buf().unwrap()[..3], [1, 1, 1]);
        drop(r);
        // The thread drops the stream when it ends.
        let t = std::time::Instant::now();
        while !dropped.load(std::sync::atomic::Ordering::SeqCst) {
            assert!(t.elapsed().as_secs() < 10, "the thread still reads");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }
}
