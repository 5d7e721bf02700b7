//! The CNTK Binary Format (CBF).
