//! Reader configuration: CNTK's config syntax, its TOML form, and the option structs.
//!
//! Both forms are parsed into one tree ([`syntax::Block`]) and converted by the same code into a
//! [`ReaderConfig`], so they accept the same parameter names (matched case-insensitively, as
//! CNTK does) and report the same errors, each with the file, line and column:
//!
//! ```
//! use exfeed::config::ReaderConfig;
//!
//! let text = r#"
//! defMBSize = true
//! train = [
//!     precision = "double"
//!     reader = [
//!         readerType = "CNTKTextFormatReader"
//!         file = "train.ctf"
//!         randomize = false
//!         input = [ features = [ dim = 3; format = "dense"; alias = "F"; definesMBSize = $defMBSize$ ] ]
//!     ]
//! ]
//! "#;
//! let cfg = ReaderConfig::from_cntk_str(text, "train.cntk", Some("train")).unwrap();
//! assert_eq!(cfg.precision, exfeed::Precision::Double);
//! assert!(!cfg.randomize);
//! let input = &cfg.deserializers[0].inputs[0];
//! assert_eq!((input.name.as_str(), input.dim, input.defines_mb_size), ("features", 3, true));
//!
//! let err = ReaderConfig::from_cntk_str("reader = [ randomise = false ]", "x.cntk", None).unwrap_err();
//! assert_eq!(err.to_string(), "x.cntk:1:12: unknown reader parameter 'randomise' (did you mean 'randomize'?)");
//! ```
//!
//! See `docs/config.md` for both forms, every parameter and the TOML layout.

mod options;
pub mod syntax;
mod toml_form;

use std::path::Path;

pub use options::{DeserializerConfig, DeserializerKind, ReaderConfig, DEFAULT_CHUNK_SIZE_BYTES};

use crate::error::{Error, Result};

fn read_config(path: &Path) -> Result<String> {
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    String::from_utf8(bytes).map_err(|_| {
        Error::config("the file is not UTF-8 text").in_file(path.display().to_string())
    })
}

impl ReaderConfig {
    /// Reads the reader block of CNTK config text. `file` names the text in errors. `section`
    /// selects a top-level section (`name = [ ... reader = [ ... ] ]`); without it the text must
    /// have a top-level `reader` block or exactly one section with one (the error lists them).
    pub fn from_cntk_str(text: &str, file: &str, section: Option<&str>) -> Result<ReaderConfig> {
        let top = syntax::parse(text, file)?;
        options::reader_from_tree(&top, file, section)
    }

    /// [`ReaderConfig::from_cntk_str`] on a file.
    pub fn from_cntk_file(path: impl AsRef<Path>, section: Option<&str>) -> Result<ReaderConfig> {
        let path = path.as_ref();
        Self::from_cntk_str(&read_config(path)?, &path.display().to_string(), section)
    }

    /// Reads the TOML form (same parameter names; see `docs/config.md`).
    pub fn from_toml_str(text: &str, file: &str, section: Option<&str>) -> Result<ReaderConfig> {
        let top = toml_form::parse(text, file)?;
        options::reader_from_tree(&top, file, section)
    }

    /// [`ReaderConfig::from_toml_str`] on a file.
    pub fn from_toml_file(path: impl AsRef<Path>, section: Option<&str>) -> Result<ReaderConfig> {
        let path = path.as_ref();
        Self::from_toml_str(&read_config(path)?, &path.display().to_string(), section)
    }

    /// Reads a file in the form its name says: TOML for `.toml`, CNTK's syntax otherwise.
    pub fn from_file(path: impl AsRef<Path>, section: Option<&str>) -> Result<ReaderConfig> {
        let path = path.as_ref();
        if path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("toml"))
        {
            Self::from_toml_file(path, section)
        } else {
            Self::from_cntk_file(path, section)
        }
    }
}

/// The top-level sections of CNTK config text that hold a reader block, in file order.
pub fn cntk_sections(text: &str, file: &str) -> Result<Vec<String>> {
    Ok(options::section_names(&syntax::parse(text, file)?))
}

#[cfg(test)]
mod tests;
