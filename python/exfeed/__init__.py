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

from dataclasses import dataclass
from typing import Optional

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
    info,
)

__all__ = [
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
    "info",
]


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
