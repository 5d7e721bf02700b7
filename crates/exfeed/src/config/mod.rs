//! Reader configuration: CNTK's config syntax, its TOML form, and the option structs.
