"""Ray Data: exfeed files as a ``ray.data.Dataset``, read in parallel by exfeed's chunks.

``read(paths, **options)`` opens every file (a path, a glob such as ``"data/train-*.ctf"``, a
URL or a URL glob such as ``"s3://bucket/train-*.ctf"``, whose bucket prefix is listed with
``storage_options``, or a list of them; CTF, CBF and Lens files, plain or compressed) and lists its chunks: a CTF file's
chunks of ``chunk_size`` bytes of text (default 32 MiB), a CBF file's own chunks, a Lens
file's. The read tasks are runs of consecutive chunks (at most the requested
parallelism of them, balanced by bytes); each decodes only its own chunks, on whichever worker
Ray runs it, and yields one Arrow block per chunk in the schema of ``exfeed.to_arrow`` and
``exfeed convert data.ctf data.parquet`` (docs/arrow.md): ``key`` and a list column per stream.

So a cluster converts a corpus in parallel (``exfeed.ray.read(...).write_parquet(dir)``),
preprocesses it with Ray Data's ``map_batches``, and feeds PyTorch with
``ds.iter_torch_batches(collate_fn=exfeed.ray.TorchCollate(...))`` (sequences of samples are
ragged: :class:`TorchCollate` pads them); see docs/distributed.md. ``options`` are those
of :func:`exfeed.to_arrow` (``inputs``, ``format``, ``max_errors``, ``skip_sequence_ids``,
``precision``, ``input_groups``, ``target_groups``, ``nan``, ``chunk_size``), and ``index``
as for :class:`exfeed.Reader`.

A CTF file is read without an index when it allows it (``index="auto"``, the default; see
docs/reader.md): its chunks are byte ranges fixed from its size, so listing them reads only the
file's first 64 KiB, and each task reads only its own chunks (and the lines around them), never
the whole file. Their row counts are then estimates, so the tasks' metadata gives none (Ray
counts the rows when it reads them). A file without sequence ids, ``max_errors`` above 0 or
``index="full"`` index the whole file instead, once to list the chunks and again in each task
that reads from it (a fast scan, about a seventh of a parse); the row counts are then exact.
Importing this module imports ray and pyarrow (the ``ray`` extra); ``import exfeed`` never does.
It needs the extension built with Arrow (``exfeed.features``; docs/python-build.md).
"""

from __future__ import annotations

import glob
import os
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np
import pyarrow as pa
import ray.data
from ray.data.block import BlockMetadata
from ray.data.datasource import Datasource, ReadTask

from . import _exfeed, _require

_require("arrow", "exfeed.ray")

__all__ = ["ExfeedDatasource", "TorchCollate", "read"]

PathLike = Union[str, "os.PathLike[str]"]

def _expand(paths: Union[PathLike, Sequence[PathLike]], storage_options: Any = None) -> List[str]:
    """Paths in order, each glob replaced by its matches (sorted): a URL glob
    (``s3://bucket/train-*.ctf``) by listing the bucket's prefix with ``storage_options``."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    out: List[str] = []
    for p in paths:
        p = os.fspath(p)
        if glob.has_magic(p) and "://" in p:
            out.extend(_exfeed._expand_glob(p, storage_options))
        elif glob.has_magic(p):
            matches = sorted(glob.glob(p))
            if not matches:
                raise FileNotFoundError(f"{p}: no file matches")
            out.extend(matches)
        else:
            out.append(p)
    if not out:
        raise ValueError("paths: no file given")
    return out


def _read_runs(runs: List[Tuple[str, int, int]], options: dict) -> Iterator[pa.Table]:
    for path, start, end in runs:
        stream = _exfeed._read_chunks(path, start, end, **options)
        for batch in pa.RecordBatchReader.from_stream(stream):
            yield pa.Table.from_batches([batch])


class ExfeedDatasource(Datasource):
    """A ``ray.data.Datasource`` over exfeed files whose read tasks are runs of their chunks
    (see the module documentation)."""

    def __init__(self, paths: Union[PathLike, Sequence[PathLike]], **options: Any) -> None:
        super().__init__()
        self._paths = _expand(paths, options.get("storage_options"))
        self._options = dict(options)
        # (path, chunk, sequences or None where only estimated, bytes) of every chunk of every
        # file, in order; the schema of the first file's record batches.
        self._chunks: List[Tuple[str, int, Optional[int], int]] = []
        self._schema: Optional[pa.Schema] = None
        for path in self._paths:
            chunks, exact, none = _exfeed._chunks(path, **options)
            if self._schema is None:
                self._schema = pa.schema(none)
            self._chunks += [
                (path, i, seqs if exact else None, size) for i, (seqs, _, size) in enumerate(chunks)
            ]

    def estimate_inmemory_data_size(self) -> Optional[int]:
        # The files' bytes: about the decoded size of binary files, more than that of text.
        return sum(c[3] for c in self._chunks)

    def get_read_tasks(
        self, parallelism: int, per_task_row_limit: Optional[int] = None, data_context: Any = None
    ) -> List[ReadTask]:
        n = len(self._chunks)
        tasks = max(1, min(parallelism, n))
        # Cut the chunk list into `tasks` runs of about equal bytes.
        total = sum(c[3] for c in self._chunks) or 1
        groups: List[list] = [[] for _ in range(tasks)]
        done = 0
        for c in self._chunks:
            groups[min(tasks - 1, done * tasks // total)].append(c)
            done += c[3]
        read_tasks = []
        for group in filter(None, groups):
            runs: List[Tuple[str, int, int]] = []
            for path, i, _, _ in group:
                if runs and runs[-1][0] == path and runs[-1][2] == i:
                    runs[-1] = (path, runs[-1][1], i + 1)
                else:
                    runs.append((path, i, i + 1))
            rows = [c[2] for c in group]
            metadata = BlockMetadata(
                num_rows=None if None in rows else sum(rows),
                size_bytes=sum(c[3] for c in group),
                input_files=sorted({c[0] for c in group}),
                exec_stats=None,
            )
            options = self._options
            read_tasks.append(
                ReadTask(
                    lambda runs=runs: _read_runs(runs, options),
                    metadata,
                    schema=self._schema,
                    per_task_row_limit=per_task_row_limit,
                )
            )
        return read_tasks


def read(
    paths: Union[PathLike, Sequence[PathLike]],
    *,
    override_num_blocks: Optional[int] = None,
    **options: Any,
) -> "ray.data.Dataset":
    """A ``ray.data.Dataset`` of the sequences of `paths` (see the module documentation):
    one row per sequence, ``key`` and a list column per stream. ``override_num_blocks`` sets
    the number of read tasks (by default Ray's choice, at most one per chunk)."""
    return ray.data.read_datasource(ExfeedDatasource(paths, **options), override_num_blocks=override_num_blocks)


try:  # Ray 2.47 and later: collate functions are classes (a plain function is deprecated).
    from ray.data.collate_fn import NumpyBatchCollateFn as _CollateBase
except ImportError:  # pragma: no cover - older Ray takes any callable
    _CollateBase = object


class TorchCollate(_CollateBase):
    """A ``collate_fn`` for ``Dataset.iter_torch_batches`` on exfeed's schema, whose sequences
    are lists of samples of any length (which Ray's default conversion refuses as ragged):

    - ``key``: a ``uint64`` tensor ``[batch]``;
    - a dense stream ``NAME``: a float tensor ``[batch, longest, dim]``, zero-padded after each
      sequence's samples, and ``NAME_lengths``, an ``int64`` tensor ``[batch]`` of the sample
      counts;
    - a sparse stream ``NAME``: its samples made dense, ``[batch, longest, dim]`` (e.g. one-hot
      labels), and ``NAME_lengths``. Its dim is ``dims[NAME]`` (the ``DIM`` of
      ``NAME:sparse:DIM``; a batch does not carry it).

    ``ds.iter_torch_batches(batch_size=64, collate_fn=exfeed.ray.TorchCollate({"labels": 10}))``.
    Tensors are on the CPU; move them with ``.to(device)``. Needs torch, and Ray Train's extra
    (``ray[train]``), which ``iter_torch_batches`` imports."""

    def __init__(self, dims: Optional[Dict[str, int]] = None) -> None:
        super().__init__()
        self.dims = dict(dims or {})

    def __call__(self, batch: Dict[str, np.ndarray]) -> Dict[str, Any]:
        import torch

        out: Dict[str, Any] = {}
        for name, column in batch.items():
            if name == "key":
                out[name] = torch.from_numpy(np.ascontiguousarray(column))
                continue
            lengths = np.fromiter((len(s) for s in column), dtype=np.int64, count=len(column))
            longest = int(lengths.max(initial=0))
            first = next((s for seq in column for s in seq), None)
            if isinstance(first, dict):
                if name not in self.dims:
                    raise ValueError(
                        f"TorchCollate: sparse stream '{name}' needs its dim: TorchCollate({{'{name}': DIM}})"
                    )
                padded = np.zeros((len(column), longest, self.dims[name]), dtype=first["values"].dtype)
                for b, seq in enumerate(column):
                    for t, s in enumerate(seq):
                        padded[b, t, s["indices"]] = s["values"]
            else:
                dim = 0 if first is None else len(first)
                dtype = np.float32 if first is None else first.dtype
                padded = np.zeros((len(column), longest, dim), dtype=dtype)
                for b, seq in enumerate(column):
                    if len(seq):
                        padded[b, : len(seq)] = np.stack(seq)
            out[name] = torch.from_numpy(padded)
            out[f"{name}_lengths"] = torch.from_numpy(lengths)
        return out
