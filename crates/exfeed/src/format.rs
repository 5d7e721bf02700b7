//! Recognising which format a file is in.
//!
//! [`crate::open()`] decides once per input: magic bytes first, then the name, unless the
//! caller says which format it is. Parquet and Arrow IPC files are known here whatever the
//! build; reading and writing them needs the `arrow` feature (the CLI and the Python package
//! have it).
//!
//! ```
//! use exfeed::format::FileFormat;
//! use std::path::Path;
//!
//! assert_eq!(FileFormat::from_magic(&[0xaa, 0xaa, 0xaa, 0xaa, 0]), Some(FileFormat::LensBinary));
//! assert_eq!(FileFormat::from_magic(b"0 |x 1"), None); // text: the name decides
//! assert_eq!(FileFormat::from_name(Path::new("train.ex.gz")), FileFormat::LensText);
//! assert_eq!(FileFormat::from_name(Path::new("Train-28x28_cntk_text.txt")), FileFormat::Ctf);
//! assert_eq!("bex".parse::<FileFormat>()?, FileFormat::LensBinary);
//! assert_eq!(FileFormat::from_magic(b"PAR1\x15\x04"), Some(FileFormat::Parquet));
//! assert_eq!(FileFormat::from_name(Path::new("train.feather")), FileFormat::ArrowIpc);
//! # Ok::<(), exfeed::Error>(())
//! ```

use std::path::Path;

/// The file formats exfeed knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum FileFormat {
    /// CNTK Text Format (the default: CNTK's text files have no magic and many names).
    #[default]
    Ctf,
    /// CNTK Binary Format.
    Cbf,
    /// Lens text example file (`.ex`).
    LensText,
    /// Lens binary example file (`.bex`).
    LensBinary,
    /// Apache Parquet (`.parquet`, `.pq`): one row per sequence (see `exfeed::arrow::schema`).
    Parquet,
    /// The Arrow IPC file format (`.arrow`, `.feather`, `.ipc`), the same schema.
    ArrowIpc,
}

/// CBF's magic number, stored little-endian at the start and as the header's sentinel.
pub const CBF_MAGIC: u64 = 0x636e_746b_5f62_696e;
/// Lens binary example files start with this big-endian cookie.
pub const LENS_BINARY_COOKIE: u32 = 0xaaaa_aaaa;

impl FileFormat {
    /// The names accepted by `--from`/`--to` (see also its [`FromStr`](std::str::FromStr)).
    pub fn parse_name(name: &str) -> Option<Self> {
        Some(match name {
            "ctf" => FileFormat::Ctf,
            "cbf" => FileFormat::Cbf,
            "ex" | "lens" => FileFormat::LensText,
            "bex" => FileFormat::LensBinary,
            "parquet" | "pq" => FileFormat::Parquet,
            "arrow" | "ipc" | "feather" => FileFormat::ArrowIpc,
            _ => return None,
        })
    }

    /// The format's name in messages: "CTF", "CBF", "a Lens .ex file", ...
    pub fn describe(self) -> &'static str {
        match self {
            FileFormat::Ctf => "CTF",
            FileFormat::Cbf => "CBF",
            FileFormat::LensText => "Lens text (.ex)",
            FileFormat::LensBinary => "Lens binary (.bex)",
            FileFormat::Parquet => "Parquet",
            FileFormat::ArrowIpc => "Arrow IPC",
        }
    }

    /// The short name `--from`/`--to` take: ctf, cbf, ex, bex, parquet, arrow.
    pub fn short_name(self) -> &'static str {
        match self {
            FileFormat::Ctf => "ctf",
            FileFormat::Cbf => "cbf",
            FileFormat::LensText => "ex",
            FileFormat::LensBinary => "bex",
            FileFormat::Parquet => "parquet",
            FileFormat::ArrowIpc => "arrow",
        }
    }

    /// A Lens example file, text or binary.
    pub fn is_lens(self) -> bool {
        matches!(self, FileFormat::LensText | FileFormat::LensBinary)
    }

    /// Parquet or Arrow IPC: columnar files, one row per sequence, read with the `arrow`
    /// feature.
    pub fn is_columnar(self) -> bool {
        matches!(self, FileFormat::Parquet | FileFormat::ArrowIpc)
    }

    /// From the content's first bytes (already decompressed), where they are decisive.
    pub fn from_magic(head: &[u8]) -> Option<Self> {
        if head.len() >= 8 && u64::from_le_bytes(head[..8].try_into().unwrap()) == CBF_MAGIC {
            Some(FileFormat::Cbf)
        } else if head.len() >= 4
            && u32::from_be_bytes(head[..4].try_into().unwrap()) == LENS_BINARY_COOKIE
        {
            Some(FileFormat::LensBinary)
        } else if head.starts_with(b"PAR1") {
            Some(FileFormat::Parquet)
        } else if head.starts_with(b"ARROW1") {
            Some(FileFormat::ArrowIpc)
        } else {
            None
        }
    }

    /// From the file name, looking through a `.gz`/`.bz2` suffix: `.ex` is Lens text, `.bex`
    /// Lens binary, `.bin`/`.cbf` CBF, `.parquet`/`.pq` Parquet, `.arrow`/`.feather`/`.ipc`
    /// Arrow IPC, anything else CTF (CNTK's text files are often `.txt`).
    pub fn from_name(path: &Path) -> Self {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let name = name
            .strip_suffix(".gz")
            .or_else(|| name.strip_suffix(".bz2"))
            .unwrap_or(name);
        match name.rsplit_once('.').map(|(_, ext)| ext) {
            Some("ex") => FileFormat::LensText,
            Some("bex") => FileFormat::LensBinary,
            Some("cbf") | Some("bin") => FileFormat::Cbf,
            Some(ext) => Self::parse_name(ext)
                .filter(|f| f.is_columnar())
                .unwrap_or(FileFormat::Ctf),
            None => FileFormat::Ctf,
        }
    }

    /// Magic bytes win; otherwise the name decides.
    pub fn detect(path: &Path, head: &[u8]) -> Self {
        Self::from_magic(head).unwrap_or_else(|| Self::from_name(path))
    }
}

impl std::str::FromStr for FileFormat {
    type Err = crate::Error;
    /// `ctf`, `cbf`, `ex` (or `lens`), `bex`, `parquet`, `arrow` (or `ipc`, `feather`).
    fn from_str(s: &str) -> crate::Result<Self> {
        Self::parse_name(s).ok_or_else(|| {
            crate::Error::config(format!(
                "unknown format '{s}' (ctf, cbf, ex, bex, parquet, arrow)"
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn magic_beats_name() {
        let mut cbf = CBF_MAGIC.to_le_bytes().to_vec();
        cbf.extend_from_slice(&1u32.to_le_bytes());
        assert_eq!(
            FileFormat::detect(Path::new("x.txt"), &cbf),
            FileFormat::Cbf
        );
        assert_eq!(
            FileFormat::detect(Path::new("x.ex"), &[0xaa; 8]),
            FileFormat::LensBinary
        );
        assert_eq!(
            FileFormat::detect(Path::new("x.ex.gz"), b"I: 1"),
            FileFormat::LensText
        );
        assert_eq!(
            FileFormat::detect(Path::new("x.txt"), b"|a 1"),
            FileFormat::Ctf
        );
        assert_eq!(
            FileFormat::from_name(Path::new("a.bex.bz2")),
            FileFormat::LensBinary
        );
    }
}
