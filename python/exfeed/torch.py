"""PyTorch: :class:`Dataset`, an ``IterableDataset`` of whole minibatches (docs/pytorch.md).

Use it with ``DataLoader(dataset, batch_size=None)``: the dataset already delivers minibatches.
Importing this module imports torch; ``import exfeed`` never does.

Sharding: ranks (``rank``/``world_size``, by default those of an initialised
``torch.distributed``) and the DataLoader's worker processes split every sweep: partition
``rank * workers + worker_id`` of ``world_size * workers`` reads its own chunks only, and the
partitions together read the sweep exactly once. The Rust reader is opened inside ``__iter__``
(in the worker process, never before a fork) and the dataset pickles, so the ``spawn`` start
method works.

Epochs: each iteration is one sweep, shuffled with ``seed + epoch``. The epoch advances by
itself on each new iteration (``for epoch in ...: for batch in loader``), in the worker processes
too; :meth:`set_epoch` fixes it instead (as with ``DistributedSampler``), and from then on it
changes only when you call it again.

Equal step counts (``equalize=True``, the default, applies only where there are several ranks):
DDP needs every rank to take the same number of steps. Every rank then delivers exactly ``S =
total_samples // (world_size * minibatch_size)`` minibatches per sweep (at least 1), split
between its DataLoader workers: a partition whose part yields more minibatches drops the rest
of its part for this sweep; one whose part yields fewer goes through its part again from its
start. This is the library's equalize mode (``exfeed.Reader(equalize=world_size)``, ``exfeed
read --equalize``). With one rank (with or without DataLoader workers), or with
``equalize=False``, every sequence is delivered exactly once per sweep (ranks may then differ
by a few steps).

``len(dataset)``: the minibatches of one rank per sweep. Exact where the data is equalized over
several ranks (``S`` above). Otherwise an estimate, ``ceil(total_samples / (world_size *
minibatch_size))``, the count if every minibatch were full, and :attr:`Dataset.len_is_exact` is
False; the DataLoader's warning that more minibatches came than ``len()`` said is not shown for
an estimate. ``total_samples`` itself is exact with an index (``index="full"``, CBF, Lens) and
estimated from the file's first 64 KiB without one.

Checkpoints: :meth:`state_dict` / :meth:`load_state_dict` follow the protocol of torchdata's
``StatefulDataLoader``, which saves each worker's position with every minibatch, so a job
killed mid-epoch resumes with exactly the minibatches it had not seen, and the epochs after it
follow as they would have. On another number of ranks or DataLoader workers, give every rank's
``StatefulDataLoader.state_dict()`` (in rank order, as ``torch.distributed.all_gather_object``
gathers them) to :meth:`resume_from` before making the new loader: the rest of the epoch comes
exactly once across the new partitions (equalized, every rank takes the same number of steps in
it), and the epochs after it are planned for the new count (docs/pytorch.md).

Layouts of each stream ``name`` in the dict a minibatch becomes:

- ``"padded"``: dense ``name`` [sequences, longest, dim] padded with 0 (a copy) and
  ``name_lengths`` int64 [sequences];
- ``"jagged"``: dense ``name`` a nested tensor (``torch.jagged`` layout) [sequences, j, dim]
  built on the reader's buffers without a copy;
- ``"packed"``: dense ``name`` [samples, dim] without a copy and ``name_offsets`` int64
  [sequences + 1].

Sparse streams (``sparse=``, one mode for all sparse streams or a dict ``{name: mode}``):

- ``"csr"`` (the default): ``torch.sparse_csr_tensor`` [samples, dim] on the reader's buffers,
  in every layout, with ``name_offsets`` (and ``name_lengths`` in the padded layout);
- ``"ids"``: the class ids of one-hot samples (exactly one entry, of value 1, per sample) as
  int64, laid out as a dense stream of dim 1 without its last axis: padded [sequences, longest]
  padded with -100 (``cross_entropy``'s ``ignore_index``), jagged [sequences, j], packed
  [samples]; a sample that is not one-hot is a ``ValueError``;
- ``"dense"``: the stream as a dense one, laid out as the dense streams are (a copy).

``with_keys=True`` adds ``keys`` and ``sweeps`` (int64 [sequences]).

Defaults for PyTorch (not CNTK's, which ``exfeed.Reader`` and ``exfeed read --config`` keep):
without ``config=``, chunks of :data:`CHUNK_SIZE` bytes, windows of at most :data:`WINDOW_BYTES`
bytes of the file (``window_bytes``; at least one chunk, and a quarter of that for an epoch's
first window), the whole next window decoded ahead on the reader's threads while one is delivered
(``prefetch_chunks``; unless a configuration or CNTK's randomizer decide the window; on a busy
machine reading CTF, ``prefetch_chunks`` twice the threads decodes less ahead), and CTF files
read without a full index (``index="none"``, unless ``cache_index``, ``max_errors`` or files
joined by key need one; a file without sequence ids then keys its lines by byte offset), so that
the first minibatch waits for a small window and no pass over the file, and the data held is
bounded whatever the data set's size and its chunks' (the shuffle this gives beside a full one:
docs/pytorch.md).
In a DataLoader worker, the worker's own thread is one of its ``cores // (workers * local ranks)``
cores and the reader decodes on the rest (none where a worker has one core or less: it decodes on
the worker's thread), unless ``threads=`` says otherwise, so the workers' threads together do not
outnumber the cores. Workers build each minibatch in shared memory, which PyTorch then sends to
the main process without a copy (docs/pytorch.md).
"""

from __future__ import annotations

import math
import os
import sys
import uuid
import warnings
import weakref
from typing import Any, Dict, Iterator, Mapping, Optional, Sequence, Union

import numpy as np
import torch
import torch.utils.data

import exfeed
from torch.multiprocessing.reductions import StorageWeakRef

__all__ = ["Dataset", "to_tensors"]

LAYOUTS = ("padded", "jagged", "packed")
SPARSE_MODES = ("csr", "ids", "dense")
IGNORE_INDEX = -100  # the pad of "ids": torch.nn.functional.cross_entropy's default ignore_index
_RESERVED = ("max_sweeps", "max_samples", "num_workers", "worker_rank", "minibatch_size", "minibatch_sequences")
# The most DataLoader workers one Dataset counts epochs for (a slot of shared memory each).
MAX_WORKERS = 1024
# The chunk size and window without config= (CNTK's, 32 MiB and 128 chunks, decode up to 4 GiB
# before the first minibatch): a window of 64 MiB of the file decodes in a few hundredths of a
# second from CBF and about a tenth from CTF text, and bounds memory whatever the chunk size of
# a CBF file; small chunks mix more of the file into each window (docs/pytorch.md).
CHUNK_SIZE = 1 << 20
WINDOW_BYTES = 64 << 20
_WINDOWS = ("window_chunks", "window_samples", "window_bytes")
# Segments of shared memory each DataLoader worker builds its minibatches in, refilled once the
# main process has let go of them (docs/pytorch.md, "Workers: minibatches in shared memory").
SHARED_SEGMENTS = 8
_ALIGN = 64  # where each tensor starts in a segment: any dtype's alignment
# The pool uses two private calls of PyTorch's; a version without them sends minibatches as
# PyTorch does by itself (a copy into new shared memory).
_SHARED_POOL = hasattr(torch._C, "_storage_Use_Count") and hasattr(torch.UntypedStorage, "_new_shared")

# Warnings that say nothing to an exfeed user, each only where it comes from: the DataLoader's that
# more minibatches came than len() said, for a len() documented as an estimate (the message names
# the dataset, whose repr says so); torch's note that sparse CSR is in beta, on the tensors built
# here; and that the invariant checks are off, on those tensors received from DataLoader workers
# (built here with check_invariants=False: their indices are the reader's, checked as parsed).
warnings.filterwarnings("ignore", message=r"Length of IterableDataset <exfeed\.torch\.Dataset, estimated len")
_TORCH_REBUILDS = r"torch\.multiprocessing\.reductions"
warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta",
                        module=rf"exfeed\.torch|{_TORCH_REBUILDS}")
warnings.filterwarnings("ignore", message="Sparse invariant checks are implicitly disabled", module=_TORCH_REBUILDS)

SparseArg = Union[str, Mapping[str, str]]


def _check_sparse(sparse: SparseArg) -> None:
    modes = [sparse] if isinstance(sparse, str) or not isinstance(sparse, Mapping) else sparse.values()
    for mode in modes:
        if mode not in SPARSE_MODES:
            raise ValueError(f"sparse: expected one of {', '.join(SPARSE_MODES)}, found {mode!r}")


def _padded(values: np.ndarray, offsets: np.ndarray, pad: float) -> np.ndarray:
    """[samples, ...] as [sequences, longest, ...], `pad` after each sequence's end."""
    lengths = np.diff(offsets)
    out = np.full((len(lengths), int(lengths.max(initial=0)), *values.shape[1:]), pad, dtype=values.dtype)
    seq = np.repeat(np.arange(len(lengths)), lengths)
    out[seq, np.arange(len(values)) - offsets[seq]] = values
    return out


def _class_ids(name: str, s: "exfeed.Stream", keys: np.ndarray) -> np.ndarray:
    """The column of each sample's one entry; a ValueError names the first sample that is not
    one-hot."""
    ids = s.one_hot_ids()
    if ids is not None:
        return ids
    counts = np.diff(s.indptr)
    bad = np.flatnonzero(counts != 1)
    if len(bad) == 0:
        bad = np.flatnonzero(s.data != 1)
    if len(bad):
        sample = int(bad[0])
        sequence = int(np.searchsorted(s.offsets, sample, side="right")) - 1
        lo, hi = s.indptr[sample], s.indptr[sample + 1]
        entries = ", ".join(f"{i}:{v:g}" for i, v in zip(s.indices[lo:hi], s.data[lo:hi])) or "none"
        raise ValueError(
            f"sparse={name!r}: 'ids' needs one-hot samples (one entry of value 1), found sample "
            f"{sample - int(s.offsets[sequence])} of sequence {int(keys[sequence])} with entries: {entries}"
        )
    return s.indices.astype(np.int64)


def _dense(s: "exfeed.Stream") -> np.ndarray:
    out = np.zeros((s.num_samples, s.dim), dtype=s.data.dtype)
    out[np.repeat(np.arange(s.num_samples), np.diff(s.indptr)), s.indices] = s.data
    return out


def _laid_out(out: Dict[str, torch.Tensor], name: str, values: np.ndarray, offsets: np.ndarray,
              layout: str, pad: float) -> None:
    """The tensors of values [samples, ...] in `layout` (padded: a copy; else views)."""
    t_offsets = torch.from_numpy(offsets)
    if layout == "padded":
        out[name] = torch.from_numpy(_padded(values, offsets, pad))
        out[f"{name}_lengths"] = t_offsets[1:] - t_offsets[:-1]
    elif layout == "jagged":
        out[name] = torch.nested.nested_tensor_from_jagged(torch.from_numpy(values), t_offsets)
    else:
        out[name] = torch.from_numpy(values)
        out[f"{name}_offsets"] = t_offsets


def _csr(s: "exfeed.Stream") -> torch.Tensor:
    indptr = torch.from_numpy(s.indptr)
    return torch.sparse_csr_tensor(
        indptr, torch.from_numpy(s.indices).to(indptr.dtype), torch.from_numpy(s.data),
        size=(s.num_samples, s.dim), check_invariants=False,
    )


def to_tensors(mb: "exfeed.Minibatch", layout: str = "padded", with_keys: bool = False,
               sparse: SparseArg = "csr") -> Dict[str, torch.Tensor]:
    """A minibatch as a dict of tensors in `layout`, sparse streams as `sparse` says (see the
    module documentation)."""
    if layout not in LAYOUTS:
        raise ValueError(f"layout: expected one of {', '.join(LAYOUTS)}, found {layout!r}")
    _check_sparse(sparse)
    out: Dict[str, torch.Tensor] = {}
    for name, s in mb.items():
        if not s.is_sparse:
            if layout == "padded":
                values, _ = s.to_padded()
                out[name] = torch.from_numpy(values)
                offsets = torch.from_numpy(s.offsets)
                out[f"{name}_lengths"] = offsets[1:] - offsets[:-1]
            else:
                _laid_out(out, name, s.values, s.offsets, layout, 0)
            continue
        # (str first: an isinstance check against Mapping costs more than the rest of a batch's
        # Python.)
        mode = sparse if isinstance(sparse, str) else sparse.get(name, "csr")
        if mode == "ids":
            _laid_out(out, name, _class_ids(name, s, mb.keys), s.offsets, layout, IGNORE_INDEX)
        elif mode == "dense":
            _laid_out(out, name, _dense(s), s.offsets, layout, 0)
        else:
            offsets = torch.from_numpy(s.offsets)
            out[name] = _csr(s)
            out[f"{name}_offsets"] = offsets
            if layout == "padded":
                out[f"{name}_lengths"] = offsets[1:] - offsets[:-1]
    if with_keys:
        out["keys"] = torch.from_numpy(mb.keys)
        out["sweeps"] = torch.from_numpy(mb.sweeps)
    return out


def _torch_defaults(files: Any, reader_options: Mapping[str, Any]) -> dict:
    """The chunk size, window and index where neither the keywords nor a configuration give
    them. No index but where asked for or needed (cache_index, max_errors, files joined by
    key): a CTF file without sequence ids then keys its lines by byte offset."""
    if "config" in reader_options:
        return {}
    defaults: Dict[str, Any] = {"chunk_size": CHUNK_SIZE}
    if not any(w in reader_options for w in _WINDOWS):
        defaults["window_bytes"] = WINDOW_BYTES
    joined = not isinstance(files, (str, os.PathLike)) and files is not None and len(files) > 1
    if not joined and not any(reader_options.get(o) for o in ("index", "cache_index", "max_errors")):
        defaults["index"] = "none"
    return defaults


def _ahead(options: Mapping[str, Any]) -> dict:
    """The whole next window decoded ahead, so that the reader's threads decode while the loop
    packs and uses the current one (else they wait for most of each next window, a few chunks
    being decoded ahead). Not where a configuration or CNTK's randomizer decide the window."""
    if "config" in options or options.get("randomizer") == "cntk":
        return {}
    if options.get("window_bytes"):
        # The reader caps it at as many of the data set's largest chunks as fit in the window.
        return {"prefetch_chunks": int(options["window_bytes"])}
    if options.get("window_chunks"):
        return {"prefetch_chunks": int(options["window_chunks"])}
    return {}


def _cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def worker_threads(workers: int) -> int:
    """Decoding threads of one DataLoader worker's reader: the cores shared between the workers
    of every local rank (torchrun's ``LOCAL_WORLD_SIZE``) less the worker's own thread, which
    packs the minibatches (0: the reader decodes on that thread)."""
    local_ranks = int(os.environ.get("LOCAL_WORLD_SIZE", "1") or 1)
    return max(0, _cores() // (workers * max(1, local_ranks)) - 1)


def _distributed() -> tuple:
    dist = torch.distributed
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


# ------------------------------------------------------------------ minibatches in shared memory
# PyTorch sends a worker's tensor to the main process by its storage: one not in shared memory is
# first copied into a new segment (created, faulted in page by page, then unmapped), and every
# storage costs a round trip to the worker for its file descriptor. A worker here instead copies
# the minibatch's tensors into one segment of a small pool, whose pages are warm after the first
# use, and sends that segment once; the main process makes the tensors as views of it.
#
# A segment is refilled only when nobody can see it: `Dataset._held[worker, slot]` (shared
# memory) holds the worker's pid from the moment the minibatch is handed over until the main
# process finds the storage it rebuilt gone (checked each time a minibatch arrives), and nothing
# else in the worker refers to it either.

_DATASETS: "weakref.WeakValueDictionary[str, Dataset]" = weakref.WeakValueDictionary()


class _SegmentPool:
    """A DataLoader worker's segments of shared memory (one row of the dataset's `_held`)."""

    def __init__(self, held: torch.Tensor) -> None:
        self.held = held
        self.pid = os.getpid()
        self.segments: list = [None] * SHARED_SEGMENTS

    def take(self, nbytes: int) -> tuple:
        """(slot, storage) of at least `nbytes`, marked held; slot -1: a segment used once (every
        pooled one is still seen somewhere)."""
        held = self.held.tolist()
        free = [slot for slot, segment in enumerate(self.segments) if held[slot] == 0
                and (segment is None or torch._C._storage_Use_Count(segment._cdata) == 1)]
        fits = [slot for slot in free if self.segments[slot] is not None and self.segments[slot].nbytes() >= nbytes]
        if fits:
            slot = fits[0]
        elif free:
            slot = free[0]
            # Room for somewhat larger minibatches (padded sequences vary), in whole pages.
            self.segments[slot] = torch.UntypedStorage._new_shared(max(1, -(-(nbytes + nbytes // 4) // 4096)) * 4096)
        else:
            return -1, torch.UntypedStorage._new_shared(max(nbytes, 1))
        self.held[slot] = self.pid
        return slot, self.segments[slot]


class _SharedMinibatch(dict):
    """A worker's minibatch whose tensors are views of one segment of shared memory; pickled as
    that segment and where each tensor lies in it (see above)."""

    def __copy__(self) -> "_SharedMinibatch":
        clone = _SharedMinibatch(self)
        clone.lease = self.lease
        clone.placed = self.placed
        return clone

    def __reduce__(self) -> tuple:
        token, worker, slot, pid, segment = self.lease
        rest = {name: t for name, t in self.items() if name not in self.placed}
        return (_received, (token, worker, slot, pid, segment, list(self), self.placed, rest))


def _parts(t: torch.Tensor) -> Optional[tuple]:
    """(kind, size, the strided tensors `t` is made of) for the kinds a segment holds, else None."""
    if t.layout is torch.strided and not t.is_nested:
        return "strided", None, (t,)
    if t.layout is torch.sparse_csr:
        return "csr", tuple(t.shape), (t.crow_indices(), t.col_indices(), t.values())
    if t.layout is torch.jagged:
        return "jagged", None, (t.values(), t.offsets())
    return None


def _views(segment: torch.Tensor, where: list) -> list:
    """The tensors at `where` (offset, dtype, shape) in `segment`."""
    return [segment[offset:offset + math.prod(shape) * dtype.itemsize].view(dtype).view(shape)
            for offset, dtype, shape in where]


def _assembled(kind: str, size: Optional[tuple], parts: list) -> torch.Tensor:
    """The tensor of `kind` made of `parts` (see _parts)."""
    if kind == "csr":
        return torch.sparse_csr_tensor(*parts, size=size, check_invariants=False)
    if kind == "jagged":
        return torch.nested.nested_tensor_from_jagged(*parts)
    return parts[0]


def _in_shared_memory(batch: Dict[str, torch.Tensor], pool: _SegmentPool, token: str,
                      worker: int) -> Dict[str, torch.Tensor]:
    """`batch` with its tensors copied into one segment of `pool` (those of other kinds as they
    are)."""
    placed: Dict[str, tuple] = {}
    sources: Dict[str, tuple] = {}
    end = 0
    for name, t in batch.items():
        parts = _parts(t)
        if parts is None:
            continue
        kind, size, sources[name] = parts
        where = []
        for part in sources[name]:
            where.append((end, part.dtype, tuple(part.shape)))
            end += -(-part.nbytes // _ALIGN) * _ALIGN
        placed[name] = (kind, size, where)
    if not placed:
        return batch
    slot, storage = pool.take(end)
    segment = torch.empty(0, dtype=torch.uint8).set_(storage)[:end]
    out = _SharedMinibatch()
    for name, t in batch.items():
        if name in placed:
            kind, size, where = placed[name]
            views = _views(segment, where)
            for view, source in zip(views, sources[name]):
                view.copy_(source)
            t = _assembled(kind, size, views)
        out[name] = t
    out.lease = (token, worker, slot, pool.pid, segment)
    out.placed = placed
    return out


def _received(token: str, worker: int, slot: int, pid: int, segment: torch.Tensor, names: list,
              placed: Dict[str, tuple], rest: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
    """Unpickles a `_SharedMinibatch` (in the main process): its tensors as views of the segment;
    frees, for their workers, the segments whose earlier minibatches are gone."""
    dataset = _DATASETS.get(token)
    # Only where the DataLoader gathers minibatches (never in a worker, whose copy of a minibatch
    # says nothing of the main process's).
    if dataset is not None and torch.utils.data.get_worker_info() is None:
        dataset._let_go_of_segments()
        if slot >= 0:
            dataset._leases.append((worker, slot, pid, StorageWeakRef(segment.untyped_storage())))
    out = {}
    for name in names:
        if name in placed:
            kind, size, where = placed[name]
            out[name] = _assembled(kind, size, _views(segment, where))
        else:
            out[name] = rest[name]
    return out


# The epoch counter, in memory shared with the DataLoader's worker processes (inherited by fork,
# passed by torch's pickler to spawned ones): whether set_epoch fixed the epoch and which, the
# offset of the counted epochs, then per worker id the iterations it has begun. Each worker
# writes only its own slot, and every worker of an iteration has begun as many before it.
_EXPLICIT, _SET_EPOCH, _OFFSET, _SLOTS = 0, 1, 2, 3


class Dataset(torch.utils.data.IterableDataset):
    """Whole minibatches of exfeed files as dicts of tensors. See the module documentation.

    Give ``minibatch_size`` (samples per minibatch, CNTK's count; a sequence is never split) or
    ``batch_size`` (sequences per minibatch whatever their lengths, PyTorch's count; ``len()``
    and ``equalize`` then count sequences too). ``equalize_mode="spread"`` keeps ranks in step
    without dropping or repeating: every sequence once, minibatch sizes varying instead.
    ``reader_options`` are :class:`exfeed.Reader`'s (corpus, mix, inputs, config, window_bytes,
    threads, ...); the epoch, the partition and the minibatch size are the dataset's.
    ``sparse`` is ``"csr"``, ``"ids"`` or ``"dense"`` for every sparse stream, or a dict of them
    by stream name (others stay ``"csr"``).
    """

    def __init__(
        self,
        files: Optional[Union[str, Sequence[str]]] = None,
        *,
        minibatch_size: Optional[int] = None,
        batch_size: Optional[int] = None,
        layout: str = "padded",
        rank: Optional[int] = None,
        world_size: Optional[int] = None,
        seed: int = 0,
        equalize: bool = True,
        equalize_mode: str = "repeat",
        with_keys: bool = False,
        sparse: SparseArg = "csr",
        **reader_options: Any,
    ) -> None:
        super().__init__()
        if layout not in LAYOUTS:
            raise ValueError(f"layout: expected one of {', '.join(LAYOUTS)}, found {layout!r}")
        _check_sparse(sparse)
        for name in _RESERVED:
            if name in reader_options:
                raise TypeError(f"{name}: set by the Dataset (one sweep per epoch, its own partition)")
        if (minibatch_size is None) == (batch_size is None):
            raise TypeError("give minibatch_size (samples, CNTK's count) or batch_size (sequences), one of them")
        if (rank is None) != (world_size is None):
            raise ValueError("rank and world_size: give both or neither")
        if world_size is not None and not 0 <= rank < world_size:
            raise ValueError(f"rank: must be in 0..world_size ({world_size}), found {rank}")
        self.files = files
        self.minibatch_size = minibatch_size
        self.batch_size = batch_size
        self.layout = layout
        self.rank = rank
        self.world_size = world_size
        self.seed = seed
        self.equalize = equalize
        self.equalize_mode = equalize_mode
        self.with_keys = with_keys
        self.sparse = dict(sparse) if isinstance(sparse, Mapping) else sparse
        self.reader_options = {**_torch_defaults(files, reader_options), **reader_options}
        self._epochs = torch.zeros(_SLOTS + MAX_WORKERS, dtype=torch.int64).share_memory_()
        self._position: Optional[dict] = None  # where the current iteration is
        self._resume: Optional[dict] = None  # set by load_state_dict, used by the next __iter__
        self._live: Optional[exfeed.Reader] = None  # the reader of the iteration in progress
        self._last_stats: Optional[dict] = None  # its stats() when it ended
        self._len: Optional[tuple] = None  # (len, exact), worked out on the first len()
        # Minibatches in shared memory from DataLoader workers (see _SegmentPool): per worker
        # and segment the pid of the worker whose minibatch the main process may still see.
        self._held = torch.zeros((MAX_WORKERS, SHARED_SEGMENTS), dtype=torch.int64).share_memory_()
        self._token = uuid.uuid4().hex
        self._leases: list = []  # in the main process: (worker, slot, pid, StorageWeakRef)
        self._pool: Optional[_SegmentPool] = None  # in a worker: its segments
        self._register()

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_leases": [], "_pool": None}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        # A copy unpickled by plain pickle shares its own again.
        self._epochs.share_memory_()
        self._held.share_memory_()
        self._register()

    def _register(self) -> None:
        """Makes this dataset the one whose minibatches' segments `_received` frees; a copy with
        its own `_held` (plain pickle) takes a token of its own."""
        other = _DATASETS.get(self._token)
        if other is not None and other._held.data_ptr() != self._held.data_ptr():
            self._token = uuid.uuid4().hex
            other = None
        if other is None:
            _DATASETS[self._token] = self

    def _let_go_of_segments(self) -> None:
        """Frees the segments of the minibatches the main process no longer refers to."""
        kept = []
        for worker, slot, pid, storage in self._leases:
            if not storage.expired():
                kept.append((worker, slot, pid, storage))
            elif int(self._held[worker, slot]) == pid:
                self._held[worker, slot] = 0
        self._leases = kept

    def _segments(self, worker: int) -> _SegmentPool:
        """This worker process's segments of shared memory."""
        if self._pool is None or self._pool.pid != os.getpid():
            self._pool = _SegmentPool(self._held[worker])
        return self._pool

    def set_epoch(self, epoch: int) -> None:
        """Fixes the epoch the next iterations read (sweep order seeded with ``seed + epoch``),
        in the DataLoader's workers too (persistent ones included); without it the epoch
        advances by itself on each new iteration."""
        self._epochs[_SET_EPOCH] = epoch
        self._epochs[_EXPLICIT] = 1

    @property
    def epoch(self) -> int:
        """The epoch the next iteration reads (of worker 0, or of the process without workers)."""
        e = self._epochs
        return int(e[_SET_EPOCH] if e[_EXPLICIT] else e[_OFFSET] + e[_SLOTS])

    def _ranks(self) -> tuple:
        return (self.rank, self.world_size) if self.world_size is not None else _distributed()

    def _partition(self) -> tuple:
        rank, world = self._ranks()
        info = torch.utils.data.get_worker_info()
        workers, worker = (info.num_workers, info.id) if info is not None else (1, 0)
        return rank * workers + worker, world * workers, rank, world, workers, worker

    def _equalized(self, world: int) -> bool:
        return self.equalize and world > 1

    def _open(self, epoch: int, partition: int, partitions: int, world: int) -> "exfeed.Reader":
        # equalize: the world's ranks stay in step, the partitions split evenly between them.
        options = dict(self.reader_options)
        info = torch.utils.data.get_worker_info()
        if info is not None and "threads" not in options:
            options["threads"] = worker_threads(info.num_workers)
        if "prefetch_chunks" not in options and options.get("threads") != 0:
            options.update(_ahead(options))
        return exfeed.Reader(
            self.files, **self._size(), seed=self.seed + epoch, max_sweeps=1,
            num_workers=partitions, worker_rank=partition,
            equalize=world if self._equalized(world) else None,
            equalize_mode=self.equalize_mode if self._equalized(world) else None, **options,
        )

    def _begin(self, worker: int, resume_epoch: Optional[int]) -> int:
        """Counts an iteration begun by `worker`: the epoch it reads."""
        if worker >= MAX_WORKERS:
            raise ValueError(f"num_workers: at most {MAX_WORKERS} DataLoader workers, found worker {worker}")
        e = self._epochs
        begun = int(e[_SLOTS + worker])
        e[_SLOTS + worker] = begun + 1
        if resume_epoch is not None:
            if not e[_EXPLICIT]:
                e[_OFFSET] = resume_epoch - begun  # the epochs after it follow on
            return resume_epoch
        return int(e[_SET_EPOCH] if e[_EXPLICIT] else e[_OFFSET] + begun)

    def __iter__(self) -> Iterator[Dict[str, torch.Tensor]]:
        # Not a generator: the epoch is counted when the iteration begins, and state_dict(),
        # which StatefulDataLoader asks for at once, already says which epoch it is.
        partition, partitions, rank, world, workers, worker = self._partition()
        resume, self._resume = self._resume, None
        if resume is not None and "begun" in resume and worker < MAX_WORKERS \
                and int(self._epochs[_SLOTS + worker]) != resume["begun"][worker]:
            resume = None  # resume_from() was for an earlier iteration (the main process keeps it)
        epoch = self._begin(worker, None if resume is None else resume["epoch"])
        position = {"epoch": epoch, "partition": [partition, partitions], "delivered": 0, "reader": None}
        if resume is not None and "resumed_from" in resume:
            position["resumed_from"] = resume["resumed_from"]
        elif resume is not None and resume["partition"] is not None:
            if resume["partition"] != [partition, partitions]:
                raise ValueError(
                    f"state: saved for partition {resume['partition']} of epoch {resume['epoch']}, "
                    f"this is partition {[partition, partitions]}"
                )
            position.update(resume)
        self._position = position
        return self._minibatches(position, world)

    def _minibatches(self, position: dict, world: int) -> Iterator[Dict[str, torch.Tensor]]:
        partition, partitions = position["partition"]
        # Held here: at exit the generator may be closed after the module's globals are None.
        finalizing = sys.is_finalizing
        with self._open(position["epoch"], partition, partitions, world) as reader:
            self._restore(reader, position)
            position.pop("resumed_from", None)  # the reader's own position says it from now on
            # The reader's position is read only when a state is asked for (state_dict).
            self._live = reader
            info = torch.utils.data.get_worker_info()
            pool = None if info is None or not _SHARED_POOL else self._segments(info.id)
            try:
                for mb in reader:
                    position["delivered"] += 1
                    if pool is None:
                        yield to_tensors(mb, self.layout, self.with_keys, self.sparse)
                    else:
                        yield _in_shared_memory(to_tensors(mb, self.layout, self.with_keys, self.sparse),
                                                pool, self._token, info.id)
            finally:
                # A generator left unfinished is closed as the interpreter exits, when imports
                # no longer work and nobody will read the position.
                if not finalizing():
                    position["reader"] = reader.state_dict()
                    self._last_stats = reader.stats()
                self._live = None

    @staticmethod
    def _restore(reader: "exfeed.Reader", position: dict) -> None:
        """Puts a reader opened for `position` where it says: its own saved position, or (until
        the reader has one) the old partitions' positions it was resumed from."""
        if position["reader"] is not None:
            reader.load_state_dict(position["reader"])
        elif position.get("resumed_from") is not None:
            reader.load_state_dict(position["resumed_from"])

    def resume_from(self, loader_states: Sequence[dict]) -> None:
        """Continue, at the next ``iter()``, from the checkpoints of all the ranks of a run on
        this run's ranks and DataLoader workers, whose numbers may differ: ``loader_states`` is
        every rank's ``StatefulDataLoader.state_dict()`` in rank order (with one rank, a list of
        one; ``torch.distributed.all_gather_object`` gathers them), or this Dataset's own
        :meth:`state_dict` where there were no DataLoader workers. Every sequence of the
        interrupted epoch that no old partition delivered comes exactly once across the new
        partitions; the epochs after it are planned for the new count. Make the new loader
        without ``load_state_dict`` (a StatefulDataLoader refuses another num_workers). With
        equalize over several ranks, every new rank takes the same number of steps in the rest
        of the epoch: ``max(workers, rest // (world_size * minibatch_size))``, the rest counted in
        samples (sequences with ``batch_size``); ``spread`` delivers each sequence of the rest
        once, ``repeat`` repeats or drops some of a partition's part (docs/reader.md). A
        ValueError names the partitions whose states are missing, or an option that cannot be
        resumed on another count."""
        positions = []
        for rank, loader_state in enumerate(loader_states):
            snapshots = loader_state.get("_snapshot", {}).get("_worker_snapshots")
            if snapshots is not None:
                states = [snapshots[f"worker_{i}"]["dataset_state"] for i in range(len(snapshots))]
            else:
                states = [loader_state.get("dataset_state", loader_state)]
            for worker, state in enumerate(states):
                if not isinstance(state, dict) or state.get("version") != 1:
                    raise ValueError(f"loader_states[{rank}]: worker {worker}'s state is not exfeed.torch.Dataset's")
                positions.append(state)
        if not positions:
            raise ValueError("loader_states: no state given")
        epochs = sorted({p["epoch"] if p.get("position") is None else p["position"]["epoch"] for p in positions})
        if len(epochs) > 1:
            raise ValueError(f"loader_states: the partitions were in different epochs {epochs}; resume from a "
                             "checkpoint taken by all ranks at the same step")
        # Only for the next iteration of each DataLoader worker: the iterations each has begun.
        resume = {"epoch": epochs[0], "partition": None, "delivered": 0, "reader": None,
                  "begun": self._epochs[_SLOTS:].tolist()}
        if all(p.get("position") is None for p in positions):
            self._resume = resume  # saved before the epoch began: it is read from its start
            return
        partitions = len(positions)
        readers = []
        for partition, state in enumerate(positions):
            position = state.get("position")
            if position is None or position["partition"] != [partition, partitions]:
                saved = None if position is None else position["partition"]
                raise ValueError(f"loader_states: partition {partition} of {partitions} holds the state of "
                                 f"partition {saved}; give every rank's state, in rank order")
            readers.append(position["reader"] if position["reader"] is not None else self._unstarted(position))
        self._resume = {**resume, "resumed_from": readers}

    def _unstarted(self, position: dict) -> dict:
        """The reader position of a partition that had not read yet: where its reader starts."""
        partition, partitions = position["partition"]
        with self._counting_reader(seed=self.seed + position["epoch"], max_sweeps=1, num_workers=partitions,
                                   worker_rank=partition) as reader:
            self._restore(reader, position)
            return reader.state_dict()

    def _size(self) -> dict:
        """The minibatch size as exfeed.Reader takes it: in samples or in sequences."""
        if self.batch_size is not None:
            return {"minibatch_sequences": self.batch_size}
        return {"minibatch_size": self.minibatch_size}

    def _counting_reader(self, **options: Any) -> "exfeed.Reader":
        """A reader of the data set opened in this process only to count or to position (its
        sizes, a resumed quota, an unstarted partition's state): without reader threads
        (threads=0), as this process may fork DataLoader workers."""
        return exfeed.Reader(self.files, **self._size(), **{**self.reader_options, "threads": 0}, **options)

    def _length(self) -> tuple:
        resumed = self._resumed_length()
        if resumed is not None:
            return resumed
        if self._len is None:
            rank, world = self._ranks()
            with self._counting_reader(seed=self.seed) as reader:
                total = reader.total_samples if self.batch_size is None else reader.total_sequences
            size = self.minibatch_size or self.batch_size
            if self._equalized(world):
                self._len = (max(1, total // (world * size)), True)
            else:
                self._len = (math.ceil(total / (world * size)), False)
        return self._len

    def _resumed_length(self) -> Optional[tuple]:
        """Equalized, after resume_from() and until the resumed iteration begins: this rank's
        steps in the rest of the epoch, as with one DataLoader worker a rank (with V workers a
        rank takes at least V: more where the rest gives fewer)."""
        resume = self._resume
        rank, world = self._ranks()
        if resume is None or "resumed_from" not in resume or not self._equalized(world) \
                or int(self._epochs[_SLOTS]) != resume["begun"][0]:
            return None
        if "len" not in resume:
            with self._counting_reader(seed=self.seed + resume["epoch"], max_sweeps=1, num_workers=world,
                                       worker_rank=rank, equalize=world, equalize_mode=self.equalize_mode) as reader:
                reader.load_state_dict(resume["resumed_from"])
                resume["len"] = (reader.sweep_quota, True)
        return resume["len"]

    def __len__(self) -> int:
        """Minibatches of this rank per sweep: exact where equalized over several ranks, else an
        estimate (see :attr:`len_is_exact` and the module documentation). After
        :meth:`resume_from`, until the resumed epoch begins, equalized: the rank's steps in the
        rest of that epoch."""
        return self._length()[0]

    @property
    def len_is_exact(self) -> bool:
        """Whether ``len()`` is the exact count of minibatches (equalized over several ranks) or
        an estimate."""
        return self._length()[1]

    def __repr__(self) -> str:
        if self._len is not None and not self._len[1]:
            return f"<exfeed.torch.Dataset, estimated len {self._len[0]}>"
        return "<exfeed.torch.Dataset>"

    def stats(self) -> Optional[dict]:
        """:meth:`exfeed.Reader.stats` of the iteration in progress in this process, else of the
        last one that ended, else None: chunks and bytes decoded, the decoding time, and
        ``wait_seconds``/``wait_share``, the time the iteration waited for data. With DataLoader
        workers each worker has its own reader (call it on
        ``torch.utils.data.get_worker_info().dataset`` there); docs/pytorch.md."""
        return self._live.stats() if self._live is not None else self._last_stats

    def state_dict(self) -> dict:
        """The position of the iteration in progress (JSON-serialisable)."""
        position = self._position
        state: Dict[str, Any] = {"version": 1, "epoch": self.epoch if position is None else position["epoch"]}
        if position is not None:
            state["position"] = dict(position)
            if self._live is not None:
                state["position"]["reader"] = self._live.state_dict()
        return state

    def load_state_dict(self, state: dict) -> None:
        """Continue from `state` at the next ``iter()``: the rest of its epoch, then the epochs
        after it."""
        if state.get("version") != 1:
            raise ValueError("state: not a state_dict() of exfeed.torch.Dataset")
        position = state.get("position")
        if position is None:  # saved before an iteration began: the next one reads its epoch
            position = {"epoch": state["epoch"], "partition": None, "delivered": 0, "reader": None}
        self._resume = position
