//! CNTK config text and its TOML form: any text must parse to a reader configuration or a
//! clean error (no panic, no hang, no runaway `$var$` expansion), and the sections listed must
//! each be accepted by the section selector.
#![no_main]

use exfeed::config::{cntk_sections, ReaderConfig};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let _ = ReaderConfig::from_toml_str(text, "fuzz.toml", None);
    let _ = ReaderConfig::from_cntk_str(text, "fuzz.cntk", None);
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
