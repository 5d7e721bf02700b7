"""exfeed: read, check, convert and feed to training the example files of CNTK and Lens.

The CNTK Text Format (CTF), the CNTK Binary Format (CBF) and Lens example files (.ex, .bex),
as NumPy minibatches (:class:`Reader`), PyTorch datasets (:mod:`exfeed.torch`) and Lens example
sets (:mod:`exfeed.lens`). The reading is done by the Rust library, with the GIL released.

Zero-copy contract: the arrays of a :class:`Minibatch` are NumPy views on buffers the reader
filled, without a copy. The reader reuses those buffers for a later minibatch only when no
array, :class:`Stream` or :class:`Minibatch` of them is alive any more; an array you keep is
never overwritten (the reader then fills fresh buffers).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional, Union

from . import _exfeed
from ._exfeed import (
    ConfigError,
    ConfigWarning,
    DataError,
    Dump,
    InternalError,
    Minibatch,
    Reader,
    Stream,
    StreamInfo,
    __version__,
    check,
    convert,
    dump,
    features,
    info,
    release_memory,
)

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow

__all__ = [
    "ArrowStream",
    "ConfigError",
    "ConfigWarning",
    "DataError",
    "Dump",
    "Input",
    "InternalError",
    "Minibatch",
    "Reader",
    "Stream",
    "StreamInfo",
    "__version__",
    "check",
    "convert",
    "dump",
    "features",
    "info",
    "release_memory",
    "to_arrow",
]

if "arrow" in features:
    from ._exfeed import ArrowStream  # noqa: F401
else:
    __all__.remove("ArrowStream")


def _require(feature: str, what: str) -> None:
    """Raises ImportError when the extension was built without ``feature``, saying how to
    build it with."""
    if feature not in features:
        raise ImportError(
            f"{what} needs exfeed built with its {feature!r} feature, which this build has not "
            f"got (exfeed.features: {features}); rebuild it with: pip install ./python "
            "--config-settings=build-args=--features=full (docs/python-build.md)"
        )


@dataclass(frozen=True)
class Input:
    """One input (stream) of a CTF file: CNTK's ``input = [ name = [ dim; format; alias ] ]``.

    ``storage`` is ``"dense"`` or ``"sparse"``; ``alias`` is the name the file uses (``|F``),
    ``name`` the one minibatches are keyed by; ``defines_mb_size`` counts minibatch sizes in
    samples of this input.
    """

    name: str
    storage: str
    dim: int
    alias: Optional[str] = None
    defines_mb_size: bool = False

    def __post_init__(self) -> None:
        if self.storage not in ("dense", "sparse"):
            raise ValueError(f"Input {self.name!r}: storage must be 'dense' or 'sparse', found {self.storage!r}")
        if not isinstance(self.dim, int) or self.dim < 1:
            raise ValueError(f"Input {self.name!r}: dim must be a positive int, found {self.dim!r}")


def to_arrow(path: Union[str, "os.PathLike[str]"], **options: Any) -> "pyarrow.RecordBatchReader":
    """The sequences of a file as a ``pyarrow.RecordBatchReader`` (iterate it for
    ``pyarrow.RecordBatch``es, or ``read_all()`` for a table): one row per sequence, a ``key``
    column and a list column per stream, the schema of ``exfeed convert data.ctf
    data.parquet`` (docs/arrow.md). Batches hold about ``chunk_size`` bytes of data (default 32
    MiB) and are read as they are pulled, so memory holds about one.

    The batches cross from Rust to pyarrow through the Arrow C stream interface, without a copy
    through Python objects. ``options`` are :func:`check`'s (``inputs``, ``format``,
    ``max_errors``, ``skip_sequence_ids``, ``precision``, ``input_groups``, ``target_groups``,
    ``nan``) and ``chunk_size``; the element type is ``precision``, else a CBF file's own, else
    float32. Needs pyarrow; :class:`ArrowStream` (``exfeed._exfeed._to_arrow``) is the same
    stream for any other consumer of the Arrow PyCapsule protocol.
    """
    _require("arrow", "exfeed.to_arrow")
    import pyarrow as pa

    return pa.RecordBatchReader.from_stream(_exfeed._to_arrow(os.fspath(path), **options))
