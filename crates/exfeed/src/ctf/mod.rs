//! The CNTK Text Format (CTF).
