//! The one error type of the library, and the diagnostics (warnings, tolerated errors) that
//! parsers report on the way.
//!
//! Every error carries a [`Location`]: the file, the 1-based line and column (text formats), the
//! byte offset, and a structural context such as `input 'a'`, `chunk 3, stream 'features'` or
//! `example 12`. Its `Display` reads
//! `data.ctf:2:9 (byte 17): input 'a': has 4 dense values, dim is 3`.
//! Pure parsing cores know only byte offsets; the layer that owns the buffer fills in the line
//! and column with [`line_column`] when (and only when) something goes wrong.
//!
//! ```
//! use exfeed::ctf::CtfOptions;
//! use exfeed::{Diagnostic, ErrorKind, SequenceBatch, Severity};
//!
//! let text = b"0 |a 1 2\n1 |a 3 x\n2 |a 5 6\n";
//! let opts = CtfOptions { inputs: vec!["a:dense:2".parse()?], ..CtfOptions::default() };
//! let mut batch = SequenceBatch::<f32>::new(&opts.inputs);
//! let err = exfeed::ctf::parse(text, &opts, &mut batch, &mut Vec::new()).unwrap_err();
//! assert_eq!(err.kind(), ErrorKind::Syntax);
//! assert_eq!((err.location().line, err.location().column), (Some(2), Some(8)));
//! assert_eq!(
//!     err.to_string(),
//!     "2:8 (byte 16): input 'a': malformed number 'x': unexpected 'x' \
//!      (expected [+-]digits[.digits][e[+-]digits])"
//! );
//!
//! // With a budget (CNTK's maxErrors), the bad sample is reported and skipped, then its
//! // sequence, left without a sample: two errors tolerated.
//! let opts = CtfOptions { max_errors: 2, ..opts };
//! let mut batch = SequenceBatch::<f32>::new(&opts.inputs);
//! let mut diagnostics: Vec<Diagnostic> = Vec::new();
//! exfeed::ctf::parse(text, &opts, &mut batch, &mut diagnostics)?;
//! assert_eq!(batch.keys(), [0, 2]);
//! let errors: Vec<_> = diagnostics.iter().filter(|d| d.severity == Severity::Error).collect();
//! assert_eq!(errors.len(), 2);
//! assert_eq!(errors[0].location.line, Some(2));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::fmt;
use std::path::Path;
use std::sync::Arc;

mod arg;
pub use arg::{ArgError, ReaderArg};

/// What went wrong, broadly. The message says exactly what.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// Reading or writing failed at the operating-system level.
    Io,
    /// Text that does not follow the format's grammar (a malformed number, a stray character).
    Syntax,
    /// Well-formed input whose content is invalid (index out of range, too many values, ...).
    Invalid,
    /// A binary structure that is corrupt (bad magic, offsets out of range, ...).
    Corrupt,
    /// The input ends before what it started is complete (a truncated file, or a stream whose
    /// next bytes have not arrived yet). See [`Error::is_eof`].
    UnexpectedEof,
    /// A configuration problem: an unknown or mistyped parameter, a missing input definition.
    Config,
    /// The error budget (`maxErrors`) is used up.
    TooManyErrors,
    /// Something the format allows but exfeed does not do (yet).
    Unsupported,
    /// An output exists and would be clobbered, or an input and output are the same file.
    Refused,
}

/// Where something happened. Every field is optional: binary formats have no lines, a
/// configuration error may have no byte offset.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Location {
    /// The file (as the user named it), `-` for standard input.
    pub file: Option<Arc<str>>,
    /// 1-based line number.
    pub line: Option<u64>,
    /// 1-based column, counted in bytes.
    pub column: Option<u64>,
    /// 0-based byte offset from the start of the file (of the decompressed stream).
    pub byte: Option<u64>,
    /// Structure the problem is in, e.g. `input 'a'`, `chunk 3, stream 'labels'`, `example 7`.
    pub context: Option<String>,
}

impl Location {
    /// A location at a byte offset, nothing else known yet.
    pub fn at_byte(byte: u64) -> Self {
        Location {
            byte: Some(byte),
            ..Location::default()
        }
    }

    /// Sets the file name.
    pub fn with_file(mut self, file: impl Into<Arc<str>>) -> Self {
        self.file = Some(file.into());
        self
    }

    /// Sets the structural context (`input 'a'`, `chunk 2`, ...).
    pub fn with_context(mut self, context: impl Into<String>) -> Self {
        self.context = Some(context.into());
        self
    }

    /// Fills in line and column from the buffer the byte offset points into, where the buffer
    /// starts at byte `base` of the file and its first byte is at line `base_line` (1-based).
    pub fn resolve_in(&mut self, buf: &[u8], base: u64, base_line: u64) {
        if let (Some(byte), None) = (self.byte, self.line) {
            if byte >= base && byte - base <= buf.len() as u64 {
                let (line, column) = line_column(buf, (byte - base) as usize);
                self.line = Some(base_line + line - 1);
                self.column = Some(column);
            }
        }
    }

    fn is_empty(&self) -> bool {
        self.file.is_none() && self.line.is_none() && self.byte.is_none() && self.context.is_none()
    }
}

impl fmt::Display for Location {
    /// `file:line:col (byte N): context` with the parts that are known.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut wrote = false;
        if let Some(file) = &self.file {
            f.write_str(file)?;
            wrote = true;
        }
        if let Some(line) = self.line {
            if wrote {
                f.write_str(":")?;
            }
            write!(f, "{line}")?;
            if let Some(col) = self.column {
                write!(f, ":{col}")?;
            }
            wrote = true;
        }
        if let Some(byte) = self.byte {
            if wrote {
                f.write_str(" ")?;
            }
            write!(f, "(byte {byte})")?;
            wrote = true;
        }
        if let Some(context) = &self.context {
            if wrote {
                f.write_str(": ")?;
            }
            f.write_str(context)?;
        }
        Ok(())
    }
}

/// 1-based line and column of byte `offset` in `buf` (an offset one past the end is allowed).
pub fn line_column(buf: &[u8], offset: usize) -> (u64, u64) {
    let offset = offset.min(buf.len());
    let before = &buf[..offset];
    let line = memchr::memchr_iter(b'\n', before).count() as u64 + 1;
    let line_start = memchr::memrchr(b'\n', before).map_or(0, |i| i + 1);
    (line, (offset - line_start) as u64 + 1)
}

struct ErrorImpl {
    kind: ErrorKind,
    location: Location,
    message: String,
    source: Option<std::io::Error>,
    arg: Option<ArgError>,
}

/// The library's error: a kind, a location and a message saying what was expected and found.
/// Boxed, so a `Result<T, Error>` stays one pointer wide.
pub struct Error(Box<ErrorImpl>);

/// `Result` with the library's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// A new error of `kind` at `location`.
    pub fn new(kind: ErrorKind, location: Location, message: impl Into<String>) -> Self {
        Error(Box::new(ErrorImpl {
            kind,
            location,
            message: message.into(),
            source: None,
            arg: None,
        }))
    }

    /// A syntax error at byte `byte`.
    pub fn syntax(byte: u64, message: impl Into<String>) -> Self {
        Error::new(ErrorKind::Syntax, Location::at_byte(byte), message)
    }

    /// An invalid-content error at byte `byte`.
    pub fn invalid(byte: u64, message: impl Into<String>) -> Self {
        Error::new(ErrorKind::Invalid, Location::at_byte(byte), message)
    }

    /// A corrupt-binary-structure error at byte `byte`.
    pub fn corrupt(byte: u64, message: impl Into<String>) -> Self {
        Error::new(ErrorKind::Corrupt, Location::at_byte(byte), message)
    }

    /// An input that ends too soon, at byte `byte` (see [`ErrorKind::UnexpectedEof`]).
    pub fn eof(byte: u64, message: impl Into<String>) -> Self {
        Error::new(ErrorKind::UnexpectedEof, Location::at_byte(byte), message)
    }

    /// A configuration error.
    pub fn config(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::Config, Location::default(), message)
    }

    /// An I/O error, with the file it concerns. Its message is the operating system's (so it
    /// is displayed), and [`std::error::Error::source`] is `None`: a chain printer does not
    /// repeat it. [`Error::io_error`] gives the original error.
    pub fn io(file: &Path, err: std::io::Error) -> Self {
        Error::from(err).in_file(file.display().to_string())
    }

    /// The problem with a reader's argument this error is, if it is one: which argument, and
    /// the message to render in the front end's spelling of the arguments.
    pub fn arg_error(&self) -> Option<&ArgError> {
        self.0.arg.as_ref()
    }

    /// The operating system's error behind an [`ErrorKind::Io`] error, if any.
    pub fn io_error(&self) -> Option<&std::io::Error> {
        self.0.source.as_ref()
    }

    /// This error as an [`std::io::Error`] (of the kind of its I/O source, if any), to pass
    /// through an [`std::io::Write`]: converting it back ([`Error::io`], `From`) gives this
    /// error again, file and all.
    pub fn into_io(self) -> std::io::Error {
        let kind = self
            .0
            .source
            .as_ref()
            .map_or(std::io::ErrorKind::Other, |s| s.kind());
        std::io::Error::new(kind, self)
    }

    /// The error an [`std::io::Error`] carries (from [`Error::into_io`]), or the io error.
    fn carried(err: std::io::Error) -> std::result::Result<Error, std::io::Error> {
        if err.get_ref().is_some_and(|e| e.is::<Error>()) {
            let inner = err.into_inner().expect("checked above");
            Ok(*inner.downcast::<Error>().expect("checked above"))
        } else {
            Err(err)
        }
    }

    /// The kind of error.
    pub fn kind(&self) -> ErrorKind {
        self.0.kind
    }

    /// Whether the input ended before what it started was complete: a truncated file, or, when
    /// reading a stream a piece at a time, a sign to wait for more bytes.
    pub fn is_eof(&self) -> bool {
        self.0.kind == ErrorKind::UnexpectedEof
    }

    /// Where it happened.
    pub fn location(&self) -> &Location {
        &self.0.location
    }

    /// Where it happened, for filling in what the caller knows.
    pub fn location_mut(&mut self) -> &mut Location {
        &mut self.0.location
    }

    /// What went wrong, without the location.
    pub fn message(&self) -> &str {
        &self.0.message
    }

    /// Sets the file name unless one is set already.
    pub fn in_file(mut self, file: impl Into<Arc<str>>) -> Self {
        if self.0.location.file.is_none() {
            self.0.location.file = Some(file.into());
        }
        self
    }

    /// Sets the structural context unless one is set already.
    pub fn in_context(mut self, context: impl Into<String>) -> Self {
        if self.0.location.context.is_none() {
            self.0.location.context = Some(context.into());
        }
        self
    }

    /// Puts the error inside `outer` structure: the context becomes `outer, CONTEXT` (e.g.
    /// `example 3` around `event 1`), or `outer` when there was none.
    pub fn within(mut self, outer: impl fmt::Display) -> Self {
        let c = &mut self.0.location.context;
        *c = Some(match c.take() {
            Some(inner) => format!("{outer}, {inner}"),
            None => outer.to_string(),
        });
        self
    }

    /// Fills in line and column; see [`Location::resolve_in`].
    pub fn resolve_in(mut self, buf: &[u8], base: u64, base_line: u64) -> Self {
        self.0.location.resolve_in(buf, base, base_line);
        self
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.location.is_empty() {
            f.write_str(&self.0.message)
        } else {
            write!(f, "{}: {}", self.0.location, self.0.message)
        }
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Error")
            .field("kind", &self.0.kind)
            .field("location", &self.0.location)
            .field("message", &self.0.message)
            .finish()
    }
}

/// The message already says what the source (an I/O error) says, so `source()` is `None`.
impl std::error::Error for Error {}

impl From<std::io::Error> for Error {
    fn from(err: std::io::Error) -> Self {
        let err = match Error::carried(err) {
            Ok(e) => return e,
            Err(err) => err,
        };
        let mut e = Error::new(ErrorKind::Io, Location::default(), err.to_string());
        e.0.source = Some(err);
        e
    }
}

impl From<ArgError> for Error {
    /// A configuration error, its message naming the arguments by their configuration keys.
    fn from(err: ArgError) -> Self {
        let mut e = Error::config(err.to_string());
        e.0.arg = Some(err);
        e
    }
}

/// How serious a diagnostic is; also the `traceLevel` that shows it (0 errors, 1 warnings, 2 info).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Severity {
    /// A bad sample or sequence that was skipped (within the error budget), or a fatal error.
    Error = 0,
    /// Something suspicious that was accepted (a short dense sample that was zero-padded).
    Warning = 1,
    /// Progress and information (an unknown input that was skipped).
    Info = 2,
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Info => "info",
        })
    }
}

/// A reported problem or piece of information that did not stop the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// How serious.
    pub severity: Severity,
    /// Where.
    pub location: Location,
    /// What.
    pub message: String,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.location.is_empty() {
            write!(f, "{}: {}", self.severity, self.message)
        } else {
            write!(f, "{}: {}: {}", self.severity, self.location, self.message)
        }
    }
}

impl From<Error> for Diagnostic {
    fn from(e: Error) -> Self {
        Diagnostic {
            severity: Severity::Error,
            location: e.0.location,
            message: e.0.message,
        }
    }
}

/// Where diagnostics go. The CLI prints them to stderr; tests collect them.
pub trait DiagnosticSink {
    /// Takes one diagnostic. Filtering by trace level is the sink's business.
    fn report(&mut self, diagnostic: Diagnostic);
}

/// A sink that keeps every diagnostic, for tests and for `check`.
impl DiagnosticSink for Vec<Diagnostic> {
    fn report(&mut self, diagnostic: Diagnostic) {
        self.push(diagnostic);
    }
}

/// A sink that drops everything.
#[derive(Debug, Default, Clone, Copy)]
pub struct Ignore;

impl DiagnosticSink for Ignore {
    fn report(&mut self, _: Diagnostic) {}
}

/// The `maxErrors` budget: up to `max_errors` bad samples or sequences are reported and skipped;
/// the next one stops the run.
#[derive(Debug, Clone, Default)]
pub struct ErrorBudget {
    max_errors: u64,
    seen: u64,
}

impl ErrorBudget {
    /// A budget that tolerates `max_errors` errors (0: the first error is fatal).
    pub fn new(max_errors: u64) -> Self {
        ErrorBudget {
            max_errors,
            seen: 0,
        }
    }

    /// How many errors were seen so far.
    pub fn seen(&self) -> u64 {
        self.seen
    }

    /// Counts `err`: within the budget it is reported to `sink` as a diagnostic and `Ok` is
    /// returned (the caller skips the bad item); past the budget it comes back as the fatal error,
    /// its message saying how many errors were seen.
    pub fn tolerate(&mut self, err: Error, sink: &mut dyn DiagnosticSink) -> Result<()> {
        self.seen += 1;
        if self.seen <= self.max_errors {
            sink.report(err.into());
            Ok(())
        } else {
            let mut err = err;
            if self.max_errors > 0 {
                err.0.kind = ErrorKind::TooManyErrors;
                err.0.message = format!(
                    "{} (error {} of at most {} tolerated; maxErrors exceeded)",
                    err.0.message, self.seen, self.max_errors
                );
            }
            Err(err)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_has_every_known_part() {
        let mut e = Error::invalid(17, "has 4 dense values, dim is 3").in_context("input 'a'");
        e = e.in_file("data.ctf");
        let buf = b"1 |a 1\n2 |a 1 2 3 4\n";
        let e = e.resolve_in(buf, 0, 1);
        assert_eq!(
            e.to_string(),
            "data.ctf:2:11 (byte 17): input 'a': has 4 dense values, dim is 3"
        );
    }

    #[test]
    fn line_column_counts_from_one() {
        assert_eq!(line_column(b"ab\ncd", 0), (1, 1));
        assert_eq!(line_column(b"ab\ncd", 2), (1, 3));
        assert_eq!(line_column(b"ab\ncd", 3), (2, 1));
        assert_eq!(line_column(b"ab\ncd", 99), (2, 3));
    }

    #[test]
    fn resolve_respects_buffer_base() {
        let mut loc = Location::at_byte(105);
        loc.resolve_in(b"xx\nyyyy", 100, 10);
        assert_eq!((loc.line, loc.column), (Some(11), Some(3)));
    }

    #[test]
    fn budget_tolerates_then_fails_with_count() {
        let mut sink = Vec::new();
        let mut budget = ErrorBudget::new(2);
        assert!(budget.tolerate(Error::syntax(1, "a"), &mut sink).is_ok());
        assert!(budget.tolerate(Error::syntax(2, "b"), &mut sink).is_ok());
        let err = budget
            .tolerate(Error::syntax(3, "c"), &mut sink)
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::TooManyErrors);
        assert!(err.message().contains("error 3 of at most 2"), "{err}");
        assert_eq!(sink.len(), 2);
    }

    #[test]
    fn zero_budget_returns_the_error_itself() {
        let mut budget = ErrorBudget::new(0);
        let err = budget
            .tolerate(Error::syntax(3, "bad"), &mut Ignore)
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Syntax);
        assert_eq!(err.message(), "bad");
    }

    #[test]
    fn error_is_one_pointer_wide() {
        assert_eq!(std::mem::size_of::<Error>(), std::mem::size_of::<usize>());
    }
}
