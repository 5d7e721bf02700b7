//! exfeed's errors as Python exceptions: one class per kind of problem, the position as
//! attributes, and panics caught before they reach Python.

use exfeed::error::ReaderArg;
use exfeed::{Error, ErrorKind};
use pyo3::exceptions::{PyOSError, PyOverflowError, PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use std::panic::{catch_unwind, AssertUnwindSafe};

pyo3::create_exception!(
    exfeed,
    DataError,
    PyValueError,
    "Invalid data: a syntax error, invalid content or a corrupt binary structure. Attributes: \
     path, line, column, byte (each None when unknown), input (the input's name, when the \
     problem is in one), context, kind and message; str() is the command line's message."
);
pyo3::create_exception!(
    exfeed,
    ConfigError,
    PyValueError,
    "An invalid reader configuration or option (same attributes as DataError)."
);
pyo3::create_exception!(
    exfeed,
    ConfigWarning,
    pyo3::exceptions::PyUserWarning,
    "A configuration parameter accepted without effect, or set twice."
);
pyo3::create_exception!(
    exfeed,
    InternalError,
    PyRuntimeError,
    "A bug in exfeed (a Rust panic caught at the boundary). The object that raised it is closed."
);

/// The Python exception for a library error; a bad reader argument names the keyword.
pub fn to_py(err: Error) -> PyErr {
    let err = match err.arg_error() {
        Some(bad) => Error::config(bad.keyed_message(keyword)),
        None => err,
    };
    Python::attach(|py| match err.kind() {
        ErrorKind::Io | ErrorKind::Refused => os_error(&err),
        ErrorKind::Config => with_position(py, ConfigError::new_err(err.to_string()), &err),
        _ => with_position(py, DataError::new_err(err.to_string()), &err),
    })
}

/// The keyword of a reader's argument, as messages name it.
fn keyword(arg: ReaderArg) -> &'static str {
    match arg {
        ReaderArg::Files => "files",
        ReaderArg::Corpus => "corpus",
        ReaderArg::MixEpochSamples => "mix_epoch_samples",
        ReaderArg::Inputs => "inputs",
        ReaderArg::Config => "config",
        ReaderArg::ChunkSize => "chunk_size",
        ReaderArg::MaxRecordSize => "max_record_size",
        ReaderArg::Randomize => "randomize=False",
        ReaderArg::WindowChunks => "window_chunks",
        ReaderArg::WindowSamples => "window_samples",
        ReaderArg::WindowBytes => "window_bytes",
        ReaderArg::LensMode => "lens_mode",
        ReaderArg::InputGroups => "input_groups",
        ReaderArg::TargetGroups => "target_groups",
        ReaderArg::Nan => "nan",
        other => other.config_key(),
    }
}

/// `OSError(errno, message, path)`: Python picks the subclass from the errno
/// (FileNotFoundError for ENOENT, ...). Refusing to overwrite a file is EEXIST.
fn os_error(err: &Error) -> PyErr {
    use std::io::ErrorKind as K;
    let io = err.io_error();
    let errno = match (err.kind(), io) {
        (ErrorKind::Refused, _) => libc_errno::EEXIST,
        (_, Some(e)) => e.raw_os_error().unwrap_or(match e.kind() {
            K::NotFound => libc_errno::ENOENT,
            K::PermissionDenied => libc_errno::EACCES,
            K::AlreadyExists => libc_errno::EEXIST,
            _ => libc_errno::EIO,
        }),
        // An I/O error that kept only its message ("... (os error 21)").
        (_, None) => err
            .message()
            .rsplit_once("(os error ")
            .and_then(|(_, n)| n.trim_end_matches(')').parse().ok())
            .unwrap_or(libc_errno::EIO),
    };
    let path = err.location().file.as_deref().map(str::to_string);
    // str() reads "[Errno 2] No such file or directory (os error 2): 'path'".
    PyOSError::new_err((errno, err.message().to_string(), path))
}

/// The errno values used when the OS gave none (the same on every Unix and on Windows' CRT).
mod libc_errno {
    pub const ENOENT: i32 = 2;
    pub const EIO: i32 = 5;
    pub const EACCES: i32 = 13;
    pub const EEXIST: i32 = 17;
}

fn with_position(py: Python<'_>, py_err: PyErr, err: &Error) -> PyErr {
    let loc = err.location();
    let value = py_err.value(py);
    let input = loc.context.as_deref().and_then(|c| {
        let rest = c.strip_prefix("input '")?;
        Some(rest[..rest.find('\'')?].to_string())
    });
    let kind = format!("{:?}", err.kind()).to_lowercase();
    let attrs: [(&str, Py<PyAny>); 8] = [
        (
            "path",
            loc.file.as_deref().into_pyobject(py).unwrap().unbind(),
        ),
        ("line", loc.line.into_pyobject(py).unwrap().unbind()),
        ("column", loc.column.into_pyobject(py).unwrap().unbind()),
        ("byte", loc.byte.into_pyobject(py).unwrap().unbind()),
        ("input", input.into_pyobject(py).unwrap().unbind()),
        (
            "context",
            loc.context.as_deref().into_pyobject(py).unwrap().unbind(),
        ),
        ("kind", kind.into_pyobject(py).unwrap().into_any().unbind()),
        (
            "message",
            err.message().into_pyobject(py).unwrap().into_any().unbind(),
        ),
    ];
    for (name, v) in attrs {
        // Setting an attribute on a fresh exception instance cannot fail.
        let _ = value.setattr(name, v);
    }
    py_err
}

/// A `TypeError` or `ValueError` naming the argument.
pub fn bad_arg(name: &str, what: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(format!("{name}: {what}"))
}

/// Extracts the argument `name`: a negative or too large int is a `ValueError` naming it
/// (pyo3 alone raises `OverflowError`, naming the argument only in a note), a wrong type a
/// `TypeError` naming it. Every unsigned argument goes through here.
pub fn extract_arg<'py, T: pyo3::conversion::FromPyObjectOwned<'py>>(
    v: &Bound<'py, PyAny>,
    name: &str,
) -> PyResult<T> {
    v.extract::<T>().map_err(|e| {
        let e: PyErr = e.into();
        let py = v.py();
        let found = v.repr().map(|r| r.to_string()).unwrap_or_default();
        if e.is_instance_of::<PyOverflowError>(py) {
            let what = match v.lt(0) {
                Ok(true) => "must not be negative",
                _ => "is too large",
            };
            bad_arg(name, format!("{what}, found {found}"))
        } else if e.is_instance_of::<PyTypeError>(py) {
            PyTypeError::new_err(format!("{name}: {}", e.value(py)))
        } else {
            e
        }
    })
}

/// Converters for `#[pyo3(from_py_with = ...)]`, one per unsigned argument of a signature and
/// named after it: [`extract_arg`] with the argument's name.
macro_rules! named_args {
    ($($name:ident),* $(,)?) => {
        $(
            pub fn $name<'py, T: pyo3::conversion::FromPyObjectOwned<'py>>(
                v: &Bound<'py, PyAny>,
            ) -> PyResult<T> {
                extract_arg(v, stringify!($name))
            }
        )*
    };
}

/// The unsigned arguments of `exfeed.Reader` and its methods.
pub mod arg {
    use super::extract_arg;
    use pyo3::prelude::*;
    named_args!(
        minibatch_size,
        minibatch_sequences,
        max_sweeps,
        max_samples,
        seed,
        window_chunks,
        window_samples,
        window_bytes,
        max_errors,
        num_workers,
        worker_rank,
        threads,
        prefetch_chunks,
        max_record_size,
        size,
    );
    /// `exfeed.ray`'s chunk range.
    #[cfg(feature = "arrow")]
    pub mod range {
        use super::super::extract_arg;
        use pyo3::prelude::*;
        named_args!(start, end);
    }
    #[cfg(feature = "arrow")]
    pub use range::{end, start};
}

/// Runs `f` with the GIL released, turning a library error into its exception and a panic
/// into [`InternalError`] (the panic never unwinds into Python).
pub fn detached<T: Send>(
    py: Python<'_>,
    f: impl FnOnce() -> exfeed::Result<T> + Send,
) -> PyResult<T> {
    match py.detach(|| catch_unwind(AssertUnwindSafe(f))) {
        Ok(r) => r.map_err(to_py),
        Err(panic) => Err(panic_to_py(panic)),
    }
}

/// The exception for a caught panic payload.
pub fn panic_to_py(panic: Box<dyn std::any::Any + Send>) -> PyErr {
    let what = panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_string());
    InternalError::new_err(format!(
        "internal error in exfeed (please report it): {what}"
    ))
}
