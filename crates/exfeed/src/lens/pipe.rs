//! PIPE mode: examples read one at a time from a stream (a pipe, standard input, a program's
//! output, a file), with memory bounded by one example, and, as in Lens, the source reopened
//! and read again from the start when it ends, unless looping is off.

use super::model::*;
use super::{binary, text};
use crate::error::{Error, Result};
use std::io::BufRead;

/// A stream of example-file bytes.
pub type Source = Box<dyn BufRead + Send>;

/// How [`PipeReader`] waits for more input.
enum Fill {
    /// Up to the next newline (text: parsing resumes at line ends).
    Line,
    /// Whatever the source has ready.
    Available,
}
/// Opens the source again, for looping.
pub type Opener = Box<dyn FnMut() -> Result<Source> + Send>;

/// Reads examples one at a time.
pub struct PipeReader {
    opener: Option<Opener>,
    src: Source,
    name: String,
    buf: Vec<u8>,
    /// Absolute byte offset and line of `buf[0]` in the current pass.
    base_byte: u64,
    base_line: u64,
    eof: bool,
    binary: bool,
    header: SetHeader,
    /// Binary: examples left according to the header's count.
    left: usize,
    /// Examples returned in this pass (a pass that yields none ends the loop).
    this_pass: usize,
    /// Examples returned in all.
    total: usize,
}

impl PipeReader {
    /// Reads from `src` (at its first byte), then, when `reopen` is given, from each new source
    /// it opens when the previous one ends (looping).
    pub fn new(src: Source, reopen: Option<Opener>, name: impl Into<String>) -> Result<Self> {
        Self::start(src, reopen, name.into())
    }

    /// Reads from `src` once (no looping).
    pub fn from_reader(src: Source, name: impl Into<String>) -> Result<Self> {
        Self::start(src, None, name.into())
    }

    /// Reads from sources made by `opener`, looping: each time one ends, the next is opened.
    pub fn looping(mut opener: Opener, name: impl Into<String>) -> Result<Self> {
        let src = opener()?;
        Self::start(src, Some(opener), name.into())
    }

    fn start(src: Source, opener: Option<Opener>, name: String) -> Result<Self> {
        let mut r = PipeReader {
            opener,
            src,
            name,
            buf: Vec::new(),
            base_byte: 0,
            base_line: 1,
            eof: false,
            binary: false,
            header: SetHeader::default(),
            left: 0,
            this_pass: 0,
            total: 0,
        };
        r.read_header()?;
        Ok(r)
    }

    /// The set header.
    pub fn header(&self) -> &SetHeader {
        &self.header
    }

    /// Reads one more line (text) or whatever bytes have arrived (binary, and before the
    /// format is known: a binary file need not hold a newline); false at the end of the source.
    fn fill(&mut self) -> Result<bool> {
        self.fill_in(if self.binary {
            Fill::Available
        } else {
            Fill::Line
        })
    }

    fn fill_in(&mut self, how: Fill) -> Result<bool> {
        if self.eof {
            return Ok(false);
        }
        let n = match how {
            Fill::Available => {
                let chunk = self
                    .src
                    .fill_buf()
                    .map_err(|e| Error::from(e).in_file(self.name.clone()))?;
                let n = chunk.len();
                self.buf.extend_from_slice(chunk);
                self.src.consume(n);
                n
            }
            Fill::Line => self
                .src
                .read_until(b'\n', &mut self.buf)
                .map_err(|e| Error::from(e).in_file(self.name.clone()))?,
        };
        if n == 0 {
            self.eof = true;
        }
        Ok(n > 0)
    }

    fn positioned(&self, mut e: Error) -> Error {
        if let Some(b) = e.location().byte {
            e.location_mut().byte = Some(b + self.base_byte);
        }
        if !self.binary {
            e = e.resolve_in(&self.buf, self.base_byte, self.base_line);
        }
        e.in_file(self.name.clone())
    }

    fn drain(&mut self, used: usize) {
        self.base_line += memchr::memchr_iter(b'\n', &self.buf[..used]).count() as u64;
        self.base_byte += used as u64;
        self.buf.drain(..used);
    }

    fn read_header(&mut self) -> Result<()> {
        self.buf.clear();
        self.base_byte = 0;
        self.base_line = 1;
        self.eof = false;
        self.this_pass = 0;
        while self.buf.len() < 4 && self.fill_in(Fill::Available)? {}
        if self.buf.len() < 4 {
            return Err(self.positioned(super::too_short()));
        }
        self.binary = binary::is_binary(&self.buf);
        if !self.binary && !self.buf.ends_with(b"\n") {
            // Text is parsed at line ends: complete the line the sniff read into.
            self.fill()?;
        }
        loop {
            if self.binary {
                match binary::read_header_prefix(&self.buf) {
                    Ok((h, n, used)) => {
                        self.header = h;
                        self.left = n;
                        self.drain(used);
                        return Ok(());
                    }
                    Err(e) if binary::is_incomplete(&e) && self.fill()? => {}
                    Err(e) => return Err(self.positioned(e)),
                }
            } else {
                match text::parse_header_prefix(&self.buf) {
                    Ok((h, used, at_end)) if !at_end || self.eof => {
                        self.header = h;
                        self.drain(used);
                        return Ok(());
                    }
                    Ok(_) => {
                        self.fill()?;
                    }
                    Err(e) if text::is_incomplete(&e) && self.fill()? => {}
                    Err(e) => return Err(self.positioned(e)),
                }
            }
        }
    }

    /// The next example: `Ok(None)` when the source has ended (and, looping, when a fresh pass
    /// yields no example either).
    pub fn next_example(&mut self) -> Result<Option<Example>> {
        loop {
            if let Some(ex) = self.next_in_pass()? {
                self.this_pass += 1;
                self.total += 1;
                return Ok(Some(ex));
            }
            if self.this_pass == 0 {
                return Ok(None);
            }
            let Some(opener) = self.opener.as_mut() else {
                return Ok(None);
            };
            self.src = opener()?;
            self.read_header()?;
        }
    }

    fn next_in_pass(&mut self) -> Result<Option<Example>> {
        let index = self.this_pass;
        let ctx = |e: Error| e.in_context(format!("example {index}"));
        if self.binary {
            if self.left == 0 {
                return Ok(None);
            }
            loop {
                match binary::read_example_prefix(&self.buf, &self.header) {
                    Ok((ex, used)) => {
                        self.drain(used);
                        self.left -= 1;
                        return Ok(Some(ex));
                    }
                    Err(e) if binary::is_incomplete(&e) && self.fill()? => {}
                    Err(e) => return Err(self.positioned(ctx(e))),
                }
            }
        }
        loop {
            match text::parse_example_prefix(&self.buf, &self.header) {
                Ok(Some((ex, used))) => {
                    self.drain(used);
                    return Ok(Some(ex));
                }
                Ok(None) if !self.fill()? => return Ok(None),
                Ok(None) => {}
                Err(e) if text::is_incomplete(&e) && !self.eof => {
                    // An example ends with ';': read on until a line that has one.
                    while self.fill()? && !self.buf.ends_with(b"\n") {}
                    loop {
                        let start = self.buf.len();
                        if !self.fill()? || memchr::memchr(b';', &self.buf[start..]).is_some() {
                            break;
                        }
                    }
                }
                Err(e) => return Err(self.positioned(ctx(e))),
            }
        }
    }

    /// Examples returned so far (over all passes).
    pub fn examples_read(&self) -> usize {
        self.total
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    fn reader(bytes: &[u8]) -> PipeReader {
        PipeReader::from_reader(Box::new(Cursor::new(bytes.to_vec())), "pipe").unwrap()
    }

    #[test]
    fn text_examples_one_at_a_time_match_whole_file_parsing() {
        let src = b"max:2\n# c\nname:{a\nb} I: 1\n 2 T: 0;\nI: 3; I: 4;\n\n2 [0] i: 1 2\n;\n";
        let whole = text::parse(src).unwrap();
        let mut r = reader(src);
        assert_eq!(r.header().max_time, 2.0);
        let mut got = Vec::new();
        while let Some(ex) = r.next_example().unwrap() {
            got.push(ex);
        }
        let set = ExampleSet {
            header: r.header().clone(),
            examples: got,
        };
        assert!(set.same_content(&whole));
    }

    #[test]
    fn binary_pipe_and_errors_are_positioned() {
        let set = text::parse(b";\nI: 1 2 T: 3;\nname:x 2 i: 4 i: 5;\n").unwrap();
        let bex = binary::write(&set).unwrap();
        let mut r = reader(&bex);
        let mut n = 0;
        while let Some(ex) = r.next_example().unwrap() {
            assert!(ex.same_content(&set.examples[n]));
            n += 1;
        }
        assert_eq!(n, 2);
        let mut r = reader(b";\nI: 1;\nI: 2\nx;\n");
        assert!(r.next_example().unwrap().is_some());
        let e = r.next_example().unwrap_err();
        assert_eq!(
            (e.location().line, e.location().column),
            (Some(4), Some(1)),
            "{e}"
        );
        let mut r = reader(&bex[..bex.len() - 3]);
        assert!(r.next_example().unwrap().is_some());
        assert!(r.next_example().is_err());
    }

    /// A pipe whose writer has sent `data` and is still open: reading past it would block.
    struct OpenPipe {
        data: Vec<u8>,
        pos: usize,
    }

    impl std::io::Read for OpenPipe {
        fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
            assert!(
                self.pos < self.data.len(),
                "read past the bytes sent: would block"
            );
            let n = out.len().min(self.data.len() - self.pos);
            out[..n].copy_from_slice(&self.data[self.pos..self.pos + n]);
            self.pos += n;
            Ok(n)
        }
    }

    #[test]
    fn each_example_is_returned_without_waiting_for_more_bytes() {
        let text_bytes = b"max: 3;\nname: a I: 1.25 T: 0;\nname: b 2 I: 2;\n".to_vec();
        let set = text::parse(&text_bytes).unwrap();
        // Small read sizes also split numbers and lines between reads.
        for capacity in [1, 3, 11, 8192] {
            for data in [binary::write(&set).unwrap(), text_bytes.clone()] {
                let pipe = OpenPipe { data, pos: 0 };
                let src = std::io::BufReader::with_capacity(capacity, pipe);
                let mut r = PipeReader::from_reader(Box::new(src), "pipe").unwrap();
                for want in &set.examples {
                    let got = r.next_example().unwrap().unwrap();
                    assert!(got.same_content(want), "read {capacity} bytes at a time");
                }
            }
        }
    }

    #[test]
    fn looping_reopens_and_stops_on_an_empty_source() {
        let passes = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counter = passes.clone();
        let opener: Opener = Box::new(move || {
            counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            Ok(Box::new(Cursor::new(b";\nI: 1; I: 2;\n".to_vec())) as Source)
        });
        let mut r = PipeReader::looping(opener, "gen").unwrap();
        let got: Vec<_> = (0..5)
            .map(|_| r.next_example().unwrap().is_some())
            .collect();
        assert_eq!(got, [true; 5]);
        assert_eq!(r.examples_read(), 5);
        assert_eq!(passes.load(std::sync::atomic::Ordering::Relaxed), 3);
        let opener: Opener = Box::new(|| Ok(Box::new(Cursor::new(b";   \n".to_vec())) as Source));
        let mut r = PipeReader::looping(opener, "empty").unwrap();
        assert!(r.next_example().unwrap().is_none());
    }
}
