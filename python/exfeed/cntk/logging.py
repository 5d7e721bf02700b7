"""CNTK 2.7's ``cntk.logging.TraceLevel``, for reader code that passes ``trace_level``."""

from enum import IntEnum


class TraceLevel(IntEnum):
    """Verbosity of the reader's messages (an ``IntEnum``: compares equal to CNTK's integers)."""

    Error = 0
    Warning = 1
    Info = 2


__all__ = ["TraceLevel"]
