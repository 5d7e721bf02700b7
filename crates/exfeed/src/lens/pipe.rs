//! PIPE mode: examples read one at a time from a stream (a pipe, standard input, a program's
//! output, a file), with memory bounded by one example, and, as in Lens, the source reopened
//! and read again from the start when it ends, unless looping is off.

use super::model::*;
use super::{binary, text};
use crate::error::{Error, Result};
use crate::limits::Limits;
use std::io::BufRead;

/// A stream of example-file bytes.
pub type Source = Box<dyn BufRead + Send>;

/// Opens the source again, for looping.
pub type Opener = Box<dyn FnMut() -> Result<Source> + Send>;

/// Bytes asked of the source at a time (more when an example is longer: the reads grow with
/// it, so a long example is parsed again only a few times while it arrives).
const READ_SIZE: usize = 256 << 10;

/// Reads examples one at a time, from a buffer of about one example plus one read.
pub struct PipeReader {
    opener: Option<Opener>,
    src: Source,
    name: String,
    /// Bytes read are `buf[..end]`; the rest is room for the next read.
    buf: Vec<u8>,
    end: usize,
    /// Where the unread part of `buf` starts.
    pos: usize,
    /// Text: `buf[..newline_scan]` has been searched for line ends, and the last one found
    /// ends at `line_end` (0: none), so each byte is searched once however slowly a line
    /// arrives (searching the whole unread part at every read made a source without line ends,
    /// such as /dev/zero, quadratic).
    newline_scan: usize,
    line_end: usize,
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
    /// The most bytes one example (or the set header) may take, in the file and in memory.
    max_record_bytes: u64,
    /// Whether this pass's set header has been read.
    header_done: bool,
    /// Allocations of examples handed back by [`PipeReader::recycle`].
    spare: Spare,
    /// Text examples are skimmed (see [`PipeReader::skim`]).
    skim: bool,
}

impl PipeReader {
    /// Reads from `src` (at its first byte), then, when `reopen` is given, from each new source
    /// it opens when the previous one ends (looping).
    pub fn new(src: Source, reopen: Option<Opener>, name: impl Into<String>) -> Result<Self> {
        Self::with_limits(src, reopen, name, Limits::default())
    }

    /// [`PipeReader::new`] with `limits` on the size of one example.
    pub fn with_limits(
        src: Source,
        reopen: Option<Opener>,
        name: impl Into<String>,
        limits: Limits,
    ) -> Result<Self> {
        let mut r = PipeReader {
            opener: reopen,
            src,
            name: name.into(),
            buf: Vec::new(),
            end: 0,
            pos: 0,
            newline_scan: 0,
            line_end: 0,
            base_byte: 0,
            base_line: 1,
            eof: false,
            binary: false,
            header: SetHeader::default(),
            left: 0,
            this_pass: 0,
            total: 0,
            max_record_bytes: limits.max_record_bytes,
            header_done: false,
            spare: Spare::default(),
            skim: false,
        };
        r.read_header()?;
        Ok(r)
    }

    /// Reads from `src` once (no looping).
    pub fn from_reader(src: Source, name: impl Into<String>) -> Result<Self> {
        Self::new(src, None, name)
    }

    /// Reads from sources made by `opener`, looping: each time one ends, the next is opened.
    pub fn looping(mut opener: Opener, name: impl Into<String>) -> Result<Self> {
        let src = opener()?;
        Self::new(src, Some(opener), name)
    }

    /// The set header.
    pub fn header(&self) -> &SetHeader {
        &self.header
    }

    /// Whether the file is the binary form.
    pub fn is_binary(&self) -> bool {
        self.binary
    }

    /// A `.bex` file's number of examples, from its header, before any is read (text declares
    /// none).
    pub fn declared_examples(&self) -> Option<usize> {
        (self.binary && self.total == 0).then_some(self.left)
    }

    /// Reads what the source has ready (one read, so a pipe is never waited on for more than
    /// it has sent) after the unread bytes; false at the end of the source. The bytes already
    /// parsed are dropped first, but for the one before `pos` (a `#` starts a comment only
    /// at the start of a line). An unread part longer than the record limit is an error.
    fn fill(&mut self) -> Result<bool> {
        if self.eof {
            return Ok(false);
        }
        let unread = self.end - self.pos;
        self.check_record(self.pos, self.end)?;
        let keep = self.pos.saturating_sub(1);
        if keep > 0 {
            if !self.binary {
                self.base_line += memchr::memchr_iter(b'\n', &self.buf[..keep]).count() as u64;
            }
            self.base_byte += keep as u64;
            self.buf.copy_within(keep..self.end, 0);
            self.pos -= keep;
            self.end -= keep;
            self.newline_scan = self.newline_scan.saturating_sub(keep);
            self.line_end = self.line_end.saturating_sub(keep);
        }
        // The buffer only grows (zeroed once): bytes are read into it in place.
        let want = self.end + READ_SIZE.max(unread);
        if self.buf.len() < want {
            self.buf.resize(want, 0);
        }
        let n = loop {
            match self.src.read(&mut self.buf[self.end..want]) {
                Ok(n) => break n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Error::from(e).in_file(self.name.clone())),
            }
        };
        self.end += n;
        if n == 0 {
            self.eof = true;
        }
        Ok(n > 0)
    }

    /// An example (or the set header) over `buf[start..end]` must not be longer than the
    /// record limit, whether it is still arriving or was read at once.
    fn check_record(&self, start: usize, end: usize) -> Result<()> {
        if ((end - start) as u64) <= self.max_record_bytes {
            return Ok(());
        }
        let what = if self.header_done {
            format!("example {}", self.this_pass)
        } else {
            "the set header".to_string()
        };
        let at = start as u64 + self.max_record_bytes;
        Err(self.positioned(super::longer_than_a_record(
            &what,
            at,
            self.max_record_bytes,
            !self.binary,
        )))
    }

    fn positioned(&self, mut e: Error) -> Error {
        if let Some(b) = e.location().byte {
            e.location_mut().byte = Some(b + self.base_byte);
        }
        if !self.binary {
            e = e.resolve_in(&self.buf[..self.end], self.base_byte, self.base_line);
        }
        e.in_file(self.name.clone())
    }

    /// Text is parsed up to the end of its last complete line (a token never spans lines, so
    /// none is cut), or to the end of the source.
    fn text_end(&mut self) -> usize {
        if self.eof {
            return self.end;
        }
        let from = self.newline_scan.max(self.pos);
        if let Some(i) = memchr::memrchr(b'\n', &self.buf[from..self.end]) {
            self.line_end = from + i + 1;
        }
        self.newline_scan = self.end;
        self.line_end.max(self.pos)
    }

    /// Text: reads on until the source ends or a newly complete line holds a `;` (an example
    /// ends with one), so a long example is not parsed again at every read.
    fn fill_to_semicolon(&mut self) -> Result<()> {
        let mut scanned = self.text_end() - self.pos;
        while self.fill()? {
            let end = self.text_end();
            if memchr::memchr(b';', &self.buf[self.pos + scanned.min(end - self.pos)..end])
                .is_some()
            {
                break;
            }
            scanned = end - self.pos;
        }
        Ok(())
    }

    fn read_header(&mut self) -> Result<()> {
        self.end = 0;
        self.pos = 0;
        self.newline_scan = 0;
        self.line_end = 0;
        self.base_byte = 0;
        self.base_line = 1;
        self.eof = false;
        self.this_pass = 0;
        self.header_done = false;
        while self.end < 4 && self.fill()? {}
        if self.end < 4 {
            return Err(self.positioned(super::too_short()));
        }
        self.binary = binary::is_binary(&self.buf[..self.end]);
        loop {
            if self.binary {
                match binary::read_header_prefix(&self.buf[..self.end]) {
                    Ok((h, n, used)) => {
                        self.header = h;
                        self.left = n;
                        self.pos = used;
                        break;
                    }
                    Err(e) if binary::is_incomplete(&e) && self.fill()? => {}
                    Err(e) => return Err(self.positioned(e)),
                }
            } else {
                let end = self.text_end();
                match text::parse_header_prefix(&self.buf[..end]) {
                    // The header may go on after the text at hand, unless its `;` ended it.
                    Ok((h, used, at_end))
                        if !at_end || self.eof || self.buf[..used].ends_with(b";") =>
                    {
                        self.header = h;
                        self.pos = used;
                        break;
                    }
                    Ok(_) => {
                        self.fill()?;
                    }
                    Err(e) if text::is_incomplete(&e) && !self.eof => {
                        self.fill()?;
                    }
                    Err(e) => return Err(self.positioned(e)),
                }
            }
        }
        self.header_done = true;
        Ok(())
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
        if self.binary {
            if self.left == 0 {
                return self.end_of_binary().map(|()| None);
            }
            loop {
                match binary::read_example_prefix(
                    &self.buf[self.pos..self.end],
                    &self.header,
                    self.max_record_bytes,
                    &mut self.spare,
                ) {
                    Ok((ex, used)) => {
                        self.check_record(self.pos, self.pos + used)?;
                        self.pos += used;
                        self.left -= 1;
                        return Ok(Some(ex));
                    }
                    Err(e) if binary::is_incomplete(&e) && self.fill()? => {}
                    Err(e) => {
                        let e = e.in_context(format!("example {index}"));
                        // The cursor counted from `pos`.
                        let e = super::shifted(e, self.pos);
                        return Err(self.positioned(e));
                    }
                }
            }
        }
        loop {
            let end = self.text_end();
            match text::parse_example_at(
                &self.buf[..end],
                self.pos,
                index,
                &self.header,
                self.max_record_bytes,
                &mut self.spare,
                self.skim,
            ) {
                Ok(Some((ex, used_to))) => {
                    self.check_record(self.pos, used_to)?;
                    self.pos = used_to;
                    return Ok(Some(ex));
                }
                Ok(None) if self.eof => return Ok(None),
                // Only white space and comments so far: they are read.
                Ok(None) => {
                    self.pos = end;
                    self.fill()?;
                }
                Err(e) if text::is_incomplete(&e) && !self.eof => self.fill_to_semicolon()?,
                Err(e) => return Err(self.positioned(e)),
            }
        }
    }

    /// A binary file read once must end with its last example, as when it is read whole.
    fn end_of_binary(&mut self) -> Result<()> {
        if self.opener.is_some() {
            return Ok(());
        }
        while self.end == self.pos && self.fill()? {}
        if self.end > self.pos {
            let e = Error::corrupt(
                self.pos as u64,
                "bytes after the last example (the header's example count is reached)",
            );
            return Err(self.positioned(e));
        }
        Ok(())
    }

    /// Skims text examples from now on: their ranges come without values (dense values and
    /// sparse unit lists empty), their numbers passed over unchecked; names, frequencies,
    /// events and groups are as read. For counting examples and events without converting
    /// their numbers (a number that would not parse is not found then). Binary examples are
    /// read as ever.
    pub fn skim(&mut self) {
        self.skim = true;
    }

    /// Hands back an example done with: the next examples reuse its allocations, so a loop
    /// that recycles each example allocates only when one needs more than those before.
    pub fn recycle(&mut self, example: Example) {
        self.spare.keep(example);
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
    fn recycled_allocations_stay_those_of_one_example() {
        let mut text = String::from(";\n");
        for k in 0..2000 {
            text.push_str(&format!(
                "name: {{e {k}}} 2 I: 0.5 1 T: {{out}} 2 3 I: (g) 1 t: 4;\n"
            ));
        }
        let set = text::parse(text.as_bytes()).unwrap();
        for bytes in [text.clone().into_bytes(), binary::write(&set).unwrap()] {
            for skim in [false, true] {
                let mut r = reader(&bytes);
                if skim {
                    r.skim();
                }
                let mut held = Vec::new();
                while let Some(ex) = r.next_example().unwrap() {
                    r.recycle(ex);
                    held.push(r.spare.held());
                }
                assert_eq!(held.len(), 2000);
                assert!(held.iter().all(|&n| n <= held[0]), "skim {skim}: {held:?}");
            }
        }
    }

    /// Examples of every shape, each after each other shape (dense, sparse lists, `*`, groups,
    /// shared lists, empty sets, event headers with procs; more and fewer events, lists and
    /// ranges than the example before), as `.bex`.
    fn shapes_bex() -> Vec<u8> {
        let set = text::parse(
            b"max: 2 actT: 0.5;\n\
              name: {dense} proc: {p} 2 I: 0.5 1 -2.5 T: 0 1;\n\
              name: sparse 3 [0 2] B: 1 [1] i: {g 0.5} 1 -4 7 T: 3 4;\n\
              name: star 2 b: * i: 2;\n\
              name: many 4 [1 proc:{q} max:3 actI:0.25] [0 2] B: 1 [1] I: (g) 4 5 6 \
              [3] I: {h} 2 T:;\n\
              I: 9 8 7 6 5 4 3 2 1 0 1e-45 -0;\n\
              2 I: (h) 3 I: {g} 1 2 T: (out) 2 0.25;\n",
        )
        .unwrap();
        let n = set.examples.len();
        let order = (0..n)
            .chain((0..n).rev())
            .chain((0..n).map(|k| (k * 5) % n));
        let set = ExampleSet {
            header: set.header.clone(),
            examples: order.map(|k| set.examples[k].clone()).collect(),
        };
        binary::write(&set).unwrap()
    }

    #[test]
    fn examples_read_into_recycled_ones_are_read_as_into_new_ones() {
        let bex = shapes_bex();
        let whole = binary::read(&bex).unwrap();
        // Small reads cut examples anywhere: a cut one is read again into the same allocations.
        for capacity in [1, 5, 64, 1 << 20] {
            let src = std::io::BufReader::with_capacity(capacity, Cursor::new(bex.clone()));
            let mut r = PipeReader::from_reader(Box::new(src), "shapes").unwrap();
            let mut n = 0;
            while let Some(ex) = r.next_example().unwrap() {
                // Debug output: every field, the lists' sharing and each float's form.
                assert_eq!(
                    format!("{ex:?}"),
                    format!("{:?}", whole.examples[n]),
                    "example {n}, read {capacity} bytes at a time"
                );
                r.recycle(ex);
                n += 1;
            }
            assert_eq!(n, whole.examples.len());
        }
    }

    #[test]
    fn a_bex_cut_anywhere_fails_after_the_whole_examples_before_the_cut() {
        let bex = shapes_bex();
        let whole = binary::read(&bex).unwrap();
        let (_, _, header) = binary::read_header_prefix(&bex).unwrap();
        let mut ends = vec![header];
        let mut spare = Spare::default();
        for _ in &whole.examples {
            let at = *ends.last().unwrap();
            let (_, used) =
                binary::read_example_prefix(&bex[at..], &whole.header, u64::MAX, &mut spare)
                    .unwrap();
            ends.push(at + used);
        }
        // Each shape once and after another (the first 8 examples): a reader allocates its
        // buffer for each cut, which makes each cut slow in a debug build.
        for cut in header..ends[8] {
            let e = binary::read(&bex[..cut]).expect_err("a cut file read whole");
            assert!(
                e.location().byte.unwrap() <= cut as u64,
                "cut at {cut}: {e}"
            );
            let mut r = reader(&bex[..cut]);
            let mut n = 0;
            let e = loop {
                match r.next_example() {
                    Ok(Some(ex)) => {
                        assert!(ex.same_content(&whole.examples[n]), "cut at {cut}");
                        r.recycle(ex);
                        n += 1;
                    }
                    Ok(None) => panic!("a file cut at {cut} read to its end"),
                    Err(e) => break e,
                }
            };
            assert_eq!(
                n,
                ends.partition_point(|&end| end <= cut) - 1,
                "cut at {cut}"
            );
            let at = e.location().byte.unwrap();
            assert!(
                at >= ends[n] as u64 && at <= cut as u64,
                "cut at {cut}: {e}"
            );
        }
    }

    #[test]
    fn a_bex_cut_inside_dense_values_says_how_many_bytes_are_missing() {
        let set = text::parse(b";\nI: 1 2 3 4 5;\nI: 6 7 8;\n").unwrap();
        let bex = binary::write(&set).unwrap();
        // The second example's values are its last 12 bytes but for the shared-targets flag
        // and the number of target sets (5 bytes); cut none, one, two, three bytes in.
        let values = bex.len() - 5 - 12;
        for cut in [values, values + 1, values + 2, values + 3, values + 11] {
            let left = cut - values;
            let want = format!("file ends inside dense values (12 bytes needed, {left} left)");
            let e = binary::read(&bex[..cut]).unwrap_err();
            assert!(e.message().contains(&want), "{e}");
            assert_eq!(e.location().byte, Some(values as u64));
            let mut r = reader(&bex[..cut]);
            let first = r.next_example().unwrap().unwrap();
            r.recycle(first);
            let e = r.next_example().unwrap_err();
            assert!(e.message().contains(&want), "{e}");
            assert_eq!(e.location().byte, Some(values as u64));
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

    #[test]
    fn an_example_longer_than_the_record_limit_is_an_error_not_a_buffer() {
        let limits = Limits {
            max_record_bytes: 1000,
        };
        let open = |bytes: Vec<u8>| {
            PipeReader::with_limits(Box::new(Cursor::new(bytes)), None, "big", limits)
        };
        // Text without line ends, a long example over many lines, and a long binary example.
        let no_newline = [&b";\nI:"[..], &b" 1".repeat(5000)].concat();
        let many_lines = [&b";\nI:"[..], &b" 1\n".repeat(5000), b";\n"].concat();
        let set = text::parse(&[&b";\n"[..], &many_lines[2..]].concat()).unwrap();
        for bytes in [no_newline, many_lines, binary::write(&set).unwrap()] {
            let mut r = open(bytes).unwrap();
            let Err(e) = r.next_example() else {
                panic!("an example over the limit was read")
            };
            assert!(
                e.message()
                    .contains("example 0 is longer than the maximum record size (1000 bytes)"),
                "{e}"
            );
        }
        // A header without end is bounded too; examples within the limit are read.
        let e = open(b"proc:{".repeat(300)).err().unwrap();
        assert!(e.message().contains("the set header is longer"), "{e}");
        let mut r = open([&b";\n"[..], &b"I: 1;\nI: 2;\n".repeat(1000)].concat()).unwrap();
        let mut n = 0;
        while r.next_example().unwrap().is_some() {
            n += 1;
        }
        assert_eq!(n, 2000);
    }

    #[test]
    fn events_that_would_not_fit_in_a_record_are_refused_before_allocating() {
        // 1000 bytes of record hold about a dozen events.
        let limits = Limits {
            max_record_bytes: 1000,
        };
        let few = text::parse(b";\n3 I: 1;\n").unwrap();
        let many = text::parse(b";\n500 [*] I: 1;\n").unwrap();
        for (set, ok) in [(few, true), (many, false)] {
            for bytes in [text::write(&set).unwrap(), binary::write(&set).unwrap()] {
                let mut r =
                    PipeReader::with_limits(Box::new(Cursor::new(bytes)), None, "x", limits)
                        .unwrap();
                match r.next_example() {
                    Ok(ex) => assert!(ok && ex.unwrap().events.len() == 3),
                    Err(e) => {
                        assert!(!ok);
                        assert!(
                            e.message().contains("example declares 500 events")
                                && e.message().contains("maximum record size (1000 bytes)"),
                            "{e}"
                        );
                    }
                }
            }
        }
    }
}
