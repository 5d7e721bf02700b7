//! CNTK config text and its TOML form: any text must parse to a reader configuration or a
//! clean error (no panic, no hang, no runaway `$var$` expansion), whole files included
//! (every section's reader, the command list, an override), and the sections listed must
//! each be accepted by the section selector.
#![no_main]

use exfeed::config::{cntk_sections, ConfigFile, ReaderConfig};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let _ = ReaderConfig::from_toml_str(text, "fuzz.toml", None);
    let _ = ReaderConfig::from_cntk_str(text, "fuzz.cntk", None);
    let overrides = [("x.reader.randomize".to_string(), "false".to_string())];
    if let Ok(file) = ConfigFile::parse_cntk(text, "fuzz.cntk", &overrides) {
        let _ = file.commands();
        for (_, reader) in file.all_readers().into_iter().take(4) {
            if let Ok(r) = reader {
                let _ = r.notes();
            }
        }
    }
    if let Ok(sections) = cntk_sections(text, "fuzz.cntk") {
        for s in sections.iter().take(4) {
            if let Err(e) = ReaderConfig::from_cntk_str(text, "fuzz.cntk", Some(s)) {
                assert!(
                    !e.to_string().contains("no section"),
                    "listed section {s} is not found: {e}"
                );
            }
        }
    }
});
