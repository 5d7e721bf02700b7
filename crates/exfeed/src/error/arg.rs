//! Errors about a reader's arguments, naming them as data: each front end (the command line's
//! flags, Python's keywords) spells them its own way, the library by their configuration keys.

use std::fmt;

/// An argument of a reader (see [`ReaderArgs`](crate::configured::ReaderArgs)) that a message
/// names. [`ReaderArg::config_key`] is its neutral name; a front end maps each to its own
/// spelling (`--chunk-size`, `chunk_size`) and renders an [`ArgError`] with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ReaderArg {
    /// The data files.
    Files,
    /// A corpus instead of files.
    Corpus,
    /// The samples of a sweep of a mix.
    MixEpochSamples,
    /// The inputs (streams) of a CTF or CBF file.
    Inputs,
    /// A configuration file.
    Config,
    /// `chunkSizeInBytes`.
    ChunkSize,
    /// `maxRecordSizeInBytes`.
    MaxRecordSize,
    /// `randomize`, as turned off (reading in file order).
    Randomize,
    /// `randomizationWindow` in chunks.
    WindowChunks,
    /// `randomizationWindow` in samples.
    WindowSamples,
    /// `randomizationWindowInBytes`.
    WindowBytes,
    /// Lens's example selection.
    LensMode,
    /// A Lens network's input groups.
    InputGroups,
    /// A Lens network's target groups.
    TargetGroups,
    /// The value NaN becomes in Lens files.
    Nan,
}

impl ReaderArg {
    /// The name in a configuration (`chunkSizeInBytes`), the neutral spelling; a configuration
    /// file itself is `configuration`.
    pub fn config_key(self) -> &'static str {
        match self {
            ReaderArg::Files => "file",
            ReaderArg::Corpus => "corpus",
            ReaderArg::MixEpochSamples => "mixEpochSamples",
            ReaderArg::Inputs => "input",
            ReaderArg::Config => "configuration",
            ReaderArg::ChunkSize => "chunkSizeInBytes",
            ReaderArg::MaxRecordSize => "maxRecordSizeInBytes",
            ReaderArg::Randomize => "randomize",
            ReaderArg::WindowChunks => "randomizationWindow",
            ReaderArg::WindowSamples => "sampleBasedRandomizationWindow",
            ReaderArg::WindowBytes => "randomizationWindowInBytes",
            ReaderArg::LensMode => "lensMode",
            ReaderArg::InputGroups => "inputGroups",
            ReaderArg::TargetGroups => "targetGroups",
            ReaderArg::Nan => "nanValue",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Part {
    Text(String),
    Name(ReaderArg),
}

/// A problem with one of a reader's arguments: which one ([`ArgError::arg`]), and a message
/// that names arguments as data, rendered with the front end's spelling of them. It converts
/// into an [`Error`](super::Error) of [`ErrorKind::Config`](super::ErrorKind::Config) whose
/// message uses [`ReaderArg::config_key`]; [`Error::arg_error`](super::Error::arg_error) gives
/// it back.
///
/// ```
/// use exfeed::configured::ReaderArgs;
/// use exfeed::error::ReaderArg;
/// use exfeed::options::{ChunkSize, ReadOptions};
///
/// let args = ReaderArgs {
///     read: ReadOptions::new().with_chunk_size(ChunkSize::Bytes(0)),
///     ..ReaderArgs::default()
/// };
/// let err = args.configure(None).unwrap_err();
/// assert_eq!(err.to_string(), "chunkSizeInBytes must be at least 1 byte");
/// let bad = err.arg_error().unwrap();
/// assert_eq!(bad.arg(), ReaderArg::ChunkSize);
/// let flag = |arg: ReaderArg| match arg {
///     ReaderArg::ChunkSize => "--chunk-size",
///     other => other.config_key(),
/// };
/// assert_eq!(bad.message(flag), "--chunk-size must be at least 1 byte");
/// assert_eq!(bad.keyed_message(|_| "chunk_size"), "chunk_size: must be at least 1 byte");
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct ArgError {
    arg: ReaderArg,
    parts: Vec<Part>,
}

impl ArgError {
    /// A problem with `arg`, its message to be written with [`ArgError::say`] and
    /// [`ArgError::name`].
    pub(crate) fn about(arg: ReaderArg) -> Self {
        ArgError {
            arg,
            parts: Vec::new(),
        }
    }

    /// `arg` out of range: `{arg} must {what}`.
    pub(crate) fn must(arg: ReaderArg, what: &str) -> Self {
        ArgError::about(arg).name(arg).say(format!(" must {what}"))
    }

    /// Adds text to the message.
    pub(crate) fn say(mut self, text: impl Into<String>) -> Self {
        self.parts.push(Part::Text(text.into()));
        self
    }

    /// Adds the name of an argument to the message.
    pub(crate) fn name(mut self, arg: ReaderArg) -> Self {
        self.parts.push(Part::Name(arg));
        self
    }

    /// The argument the problem is about.
    pub fn arg(&self) -> ReaderArg {
        self.arg
    }

    /// The message with each argument named by `name`: `--chunk-size must be at least 1 byte`.
    pub fn message<'a>(&self, name: impl Fn(ReaderArg) -> &'a str) -> String {
        render(&self.parts, name)
    }

    /// The message as a keyword argument's error reads, starting with the argument it is about
    /// (a message that starts with it names it once): `chunk_size: must be at least 1 byte`.
    pub fn keyed_message<'a>(&self, name: impl Fn(ReaderArg) -> &'a str) -> String {
        let rest = match self.parts.first() {
            Some(Part::Name(a)) if *a == self.arg => &self.parts[1..],
            _ => &self.parts[..],
        };
        let rest = render(rest, &name);
        format!("{}: {}", name(self.arg), rest.trim_start())
    }
}

fn render<'a>(parts: &[Part], name: impl Fn(ReaderArg) -> &'a str) -> String {
    let mut out = String::new();
    for part in parts {
        out.push_str(match part {
            Part::Text(text) => text,
            Part::Name(arg) => name(*arg),
        });
    }
    out
}

impl fmt::Display for ArgError {
    /// The message with the configuration keys.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message(ReaderArg::config_key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_argument_is_data_and_each_spelling_renders_it() {
        let e = ArgError::about(ReaderArg::WindowSamples)
            .say("give ")
            .name(ReaderArg::WindowChunks)
            .say(" or ")
            .name(ReaderArg::WindowSamples)
            .say(", not both");
        assert_eq!(e.arg(), ReaderArg::WindowSamples);
        assert_eq!(
            e.to_string(),
            "give randomizationWindow or sampleBasedRandomizationWindow, not both"
        );
        let flag = |a: ReaderArg| match a {
            ReaderArg::WindowChunks => "--window-chunks",
            _ => "--window-samples",
        };
        assert_eq!(
            e.message(flag),
            "give --window-chunks or --window-samples, not both"
        );
        let keyword = |a: ReaderArg| match a {
            ReaderArg::WindowChunks => "window_chunks",
            _ => "window_samples",
        };
        assert_eq!(
            e.keyed_message(keyword),
            "window_samples: give window_chunks or window_samples, not both"
        );
        // A message led by its argument names it once when keyed.
        let must = ArgError::must(ReaderArg::MaxRecordSize, "be at least 1 byte");
        assert_eq!(
            must.keyed_message(|_| "max_record_size"),
            "max_record_size: must be at least 1 byte"
        );
        assert_eq!(
            must.to_string(),
            "maxRecordSizeInBytes must be at least 1 byte"
        );
    }
}
