"""CNTK 2.7's Python reader API on exfeed.

``from exfeed.cntk.io import MinibatchSource, CTFDeserializer, StreamDef, StreamDefs`` in place
of ``from cntk.io import ...`` runs CNTK reader code unchanged; see :mod:`exfeed.cntk.io`.
:mod:`exfeed.cntk.cntk_py` holds the configuration helpers CNTK exposed there
(``MinibatchSourceConfig``, ``to_dictionary``) and :mod:`exfeed.cntk.logging` ``TraceLevel``.
"""

from . import cntk_py, io, logging

__all__ = ["cntk_py", "io", "logging"]
