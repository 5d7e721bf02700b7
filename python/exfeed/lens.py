"""Lens example sets from Python: :func:`load` returns the examples themselves.

To feed a Lens file to training as minibatches use :class:`exfeed.Reader` with
``input_groups``/``target_groups`` (and ``lens_mode`` for Lens's example selection).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import List, Optional, Sequence, Tuple, Union

import numpy as np

from ._exfeed import _lens_load

__all__ = ["Event", "Example", "ExampleSet", "load"]

Layout = Union[str, Sequence[Tuple[str, int]]]


@dataclass
class Event:
    """One event: its proc (Tcl text, never run) and times (NaN: the set's)."""

    proc: str
    max_time: float
    min_time: float
    grace_time: float


@dataclass
class Example:
    """One example. ``inputs``/``targets``: float32 [events, units], the vectors Lens would load
    into the network of the layout given to :func:`load` (None without one)."""

    name: str
    freq: float
    proc: str
    events: List[Event]
    inputs: Optional[np.ndarray] = None
    targets: Optional[np.ndarray] = None


@dataclass
class ExampleSet:
    """A whole example set: the set header's values and the examples in file order."""

    header: dict
    examples: List[Example] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.examples)


def load(
    path: Union[str, os.PathLike],
    *,
    input_groups: Optional[Layout] = None,
    target_groups: Optional[Layout] = None,
    nan: Optional[float] = None,
) -> ExampleSet:
    """Reads a Lens example file (.ex or .bex, plain or gzip/bzip2-compressed; a missing name is
    retried with .gz/.bz2 as Lens does). With ``input_groups`` and ``target_groups`` (the
    network's groups in order: ``"in:4,ctx:2"`` or ``[("in", 4), ("ctx", 2)]``) every example
    gets its ``inputs`` and ``targets``; NaN (Lens's ``-``) stays NaN unless ``nan`` replaces it.
    """
    header, examples = _lens_load(path, input_groups=input_groups, target_groups=target_groups, nan=nan)
    return ExampleSet(
        header=header,
        examples=[
            Example(
                name=e["name"], freq=e["freq"], proc=e["proc"], events=[Event(**v) for v in e["events"]],
                inputs=e.get("inputs"), targets=e.get("targets"),
            )
            for e in examples
        ],
    )
