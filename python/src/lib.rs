//! The extension module `exfeed._exfeed`: a thin binding of the exfeed library. The Python
//! package `exfeed` (python/exfeed) re-exports it and adds the pure-Python parts.

#[cfg(feature = "arrow")]
mod arrow;
mod errors;
mod lens;
mod options;
mod reader;
mod tools;

use pyo3::prelude::*;
use pyo3::types::PyTuple;

#[pymodule]
fn _exfeed(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    // NumPy and its C API now, where an interrupt is an ordinary exception: loaded lazily by
    // the first array, a Ctrl-C during the import became a panic of rust-numpy.
    py.import("numpy")?;
    numpy::dtype::<f32>(py);
    m.add("DataError", py.get_type::<errors::DataError>())?;
    m.add("ConfigError", py.get_type::<errors::ConfigError>())?;
    m.add("ConfigWarning", py.get_type::<errors::ConfigWarning>())?;
    m.add("InternalError", py.get_type::<errors::InternalError>())?;
    m.add_class::<reader::Reader>()?;
    m.add_class::<reader::Minibatch>()?;
    m.add_class::<reader::Stream>()?;
    m.add_class::<reader::StreamInfo>()?;
    m.add_function(wrap_pyfunction!(reader::release_memory, m)?)?;
    m.add_function(wrap_pyfunction!(reader::_panic_for_tests, m)?)?;
    m.add_function(wrap_pyfunction!(reader::_buffer_address, m)?)?;
    m.add_function(wrap_pyfunction!(lens::_lens_load, m)?)?;
    m.add_function(wrap_pyfunction!(tools::check, m)?)?;
    m.add_function(wrap_pyfunction!(tools::info, m)?)?;
    m.add_function(wrap_pyfunction!(tools::dump, m)?)?;
    m.add_function(wrap_pyfunction!(tools::convert, m)?)?;
    m.add_class::<tools::Dump>()?;
    #[cfg(feature = "arrow")]
    {
        m.add_class::<arrow::ArrowStream>()?;
        m.add_function(wrap_pyfunction!(arrow::_to_arrow, m)?)?;
        m.add_function(wrap_pyfunction!(arrow::_chunks, m)?)?;
        m.add_function(wrap_pyfunction!(arrow::_read_chunks, m)?)?;
        m.add_function(wrap_pyfunction!(arrow::_expand_glob, m)?)?;
    }
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    let features: &[&str] = &[
        #[cfg(feature = "arrow")]
        "arrow",
        #[cfg(feature = "remote")]
        "remote",
    ];
    m.add("features", PyTuple::new(py, features)?)?;
    Ok(())
}
