//! Lens example files: `.ex` text and `.bex` binary.
