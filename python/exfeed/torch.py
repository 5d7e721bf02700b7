"""PyTorch: :class:`Dataset`, an ``IterableDataset`` of whole minibatches.

Use it with ``DataLoader(dataset, batch_size=None)``: the dataset already delivers minibatches.
Importing this module imports torch; ``import exfeed`` never does.

Sharding: ranks (``rank``/``world_size``, by default those of an initialised
``torch.distributed``) and the DataLoader's worker processes split every sweep: partition
``rank * workers + worker_id`` of ``world_size * workers`` reads its own chunks only, and the
partitions together read the sweep exactly once. The Rust reader is opened inside ``__iter__``
(in the worker process, never before a fork) and the dataset pickles, so the ``spawn`` start
method works.

Epochs: each iteration is one sweep, shuffled with ``seed + epoch``; call :meth:`set_epoch`
before each epoch, as with ``DistributedSampler``.

Equal step counts (``equalize=True``, the default): DDP needs every rank to take the same
number of steps. Every rank then delivers exactly ``S = total_samples // (world_size *
minibatch_size)`` minibatches per sweep (at least 1), split between its DataLoader workers: a
partition whose part yields more minibatches drops the rest of its part for this sweep; one
whose part yields fewer goes through its part again from its start. This is the library's
equalize mode (``exfeed.Reader(equalize=world_size)``, ``exfeed read --equalize``): one
implementation, whose ``Reader.take_notes()`` say per sweep what was repeated or dropped. With
``equalize=False`` every sequence is delivered exactly once per sweep and ranks may differ by
a few steps.

Checkpoints: :meth:`state_dict` / :meth:`load_state_dict` follow the protocol of torchdata's
``StatefulDataLoader``, which saves each worker's position with every minibatch, so a job
killed mid-epoch resumes with exactly the minibatches it had not seen.

Layouts of each stream ``name`` in the dict a minibatch becomes:

- ``"padded"``: dense ``name`` [sequences, longest, dim] padded with 0 (a copy) and
  ``name_lengths`` int64 [sequences];
- ``"jagged"``: dense ``name`` a nested tensor (``torch.jagged`` layout) [sequences, j, dim]
  built on the reader's buffers without a copy;
- ``"packed"``: dense ``name`` [samples, dim] without a copy and ``name_offsets`` int64
  [sequences + 1].

Sparse streams are ``torch.sparse_csr_tensor`` [samples, dim] in every layout, with
``name_offsets`` (and ``name_lengths`` in the padded layout). ``with_keys=True`` adds ``keys``
and ``sweeps`` (int64 [sequences]).
"""

from __future__ import annotations

from typing import Any, Dict, Iterator, Optional, Sequence, Union

import numpy as np
import torch
import torch.utils.data

import exfeed

__all__ = ["Dataset", "to_tensors"]

LAYOUTS = ("padded", "jagged", "packed")
_RESERVED = ("max_sweeps", "max_samples", "num_workers", "worker_rank", "minibatch_size")


def to_tensors(mb: "exfeed.Minibatch", layout: str = "padded", with_keys: bool = False) -> Dict[str, torch.Tensor]:
    """A minibatch as a dict of tensors in `layout` (see the module documentation)."""
    if layout not in LAYOUTS:
        raise ValueError(f"layout: expected one of {', '.join(LAYOUTS)}, found {layout!r}")
    out: Dict[str, torch.Tensor] = {}
    for name, s in mb.items():
        offsets = torch.from_numpy(s.offsets)
        if s.is_sparse:
            indptr = torch.from_numpy(s.indptr)
            out[name] = torch.sparse_csr_tensor(
                indptr, torch.from_numpy(s.indices).to(indptr.dtype), torch.from_numpy(s.data),
                size=(s.num_samples, s.dim), check_invariants=False,
            )
            out[f"{name}_offsets"] = offsets
            if layout == "padded":
                out[f"{name}_lengths"] = offsets[1:] - offsets[:-1]
        elif layout == "padded":
            values, _ = s.to_padded()
            out[name] = torch.from_numpy(values)
            out[f"{name}_lengths"] = offsets[1:] - offsets[:-1]
        elif layout == "jagged":
            out[name] = torch.nested.nested_tensor_from_jagged(torch.from_numpy(s.values), offsets)
        else:
            out[name] = torch.from_numpy(s.values)
            out[f"{name}_offsets"] = offsets
    if with_keys:
        out["keys"] = torch.from_numpy(mb.keys)
        out["sweeps"] = torch.from_numpy(mb.sweeps)
    return out


def _distributed() -> tuple:
    dist = torch.distributed
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


class Dataset(torch.utils.data.IterableDataset):
    """Whole minibatches of exfeed files as dicts of tensors. See the module documentation.

    ``reader_options`` are :class:`exfeed.Reader`'s (corpus, inputs, config, window_chunks,
    threads, ...); the epoch, the partition and the minibatch size are the dataset's.
    """

    def __init__(
        self,
        files: Optional[Union[str, Sequence[str]]] = None,
        *,
        minibatch_size: int,
        layout: str = "padded",
        rank: Optional[int] = None,
        world_size: Optional[int] = None,
        seed: int = 0,
        equalize: bool = True,
        with_keys: bool = False,
        **reader_options: Any,
    ) -> None:
        super().__init__()
        if layout not in LAYOUTS:
            raise ValueError(f"layout: expected one of {', '.join(LAYOUTS)}, found {layout!r}")
        for name in _RESERVED:
            if name in reader_options:
                raise TypeError(f"{name}: set by the Dataset (one sweep per epoch, its own partition)")
        if (rank is None) != (world_size is None):
            raise ValueError("rank and world_size: give both or neither")
        if world_size is not None and not 0 <= rank < world_size:
            raise ValueError(f"rank: must be in 0..world_size ({world_size}), found {rank}")
        self.files = files
        self.minibatch_size = minibatch_size
        self.layout = layout
        self.rank = rank
        self.world_size = world_size
        self.seed = seed
        self.equalize = equalize
        self.with_keys = with_keys
        self.reader_options = reader_options
        self.epoch = 0
        self._position: Optional[dict] = None  # where the current iteration is
        self._resume: Optional[dict] = None  # set by load_state_dict, used by the next __iter__
        self._live: Optional[exfeed.Reader] = None  # the reader of the iteration in progress

    def set_epoch(self, epoch: int) -> None:
        """The epoch the next iteration reads: sweep order seeded with ``seed + epoch``."""
        self.epoch = epoch

    def _partition(self) -> tuple:
        rank, world = (self.rank, self.world_size) if self.world_size is not None else _distributed()
        info = torch.utils.data.get_worker_info()
        workers, worker = (info.num_workers, info.id) if info is not None else (1, 0)
        return rank * workers + worker, world * workers, rank, world, workers, worker

    def _open(self, partition: int, partitions: int, world: int) -> "exfeed.Reader":
        # equalize: the world's ranks stay in step, the partitions split evenly between them.
        return exfeed.Reader(
            self.files, minibatch_size=self.minibatch_size, seed=self.seed + self.epoch, max_sweeps=1,
            num_workers=partitions, worker_rank=partition, equalize=world if self.equalize else None,
            **self.reader_options,
        )

    def __iter__(self) -> Iterator[Dict[str, torch.Tensor]]:
        partition, partitions, rank, world, workers, worker = self._partition()
        resume, self._resume = self._resume, None
        position = {"epoch": self.epoch, "partition": [partition, partitions], "delivered": 0, "reader": None}
        if resume is not None:
            if resume["partition"] != [partition, partitions] or resume["epoch"] != self.epoch:
                raise ValueError(
                    f"state: saved for partition {resume['partition']} of epoch {resume['epoch']}, "
                    f"this is partition {[partition, partitions]} of epoch {self.epoch}"
                )
            position.update(resume)
        self._position = position
        with self._open(partition, partitions, world) as reader:
            if position["reader"] is not None:
                reader.load_state_dict(position["reader"])
            # The reader's position is read only when a state is asked for (state_dict).
            self._live = reader
            try:
                for mb in reader:
                    position["delivered"] += 1
                    yield to_tensors(mb, self.layout, self.with_keys)
            finally:
                position["reader"] = reader.state_dict()
                self._live = None

    def state_dict(self) -> dict:
        """The position of the iteration in progress (JSON-serialisable)."""
        state: Dict[str, Any] = {"version": 1, "epoch": self.epoch}
        if self._position is not None:
            state["position"] = dict(self._position)
            if self._live is not None:
                state["position"]["reader"] = self._live.state_dict()
        return state

    def load_state_dict(self, state: dict) -> None:
        """Continue from `state` at the next ``iter()``."""
        if state.get("version") != 1:
            raise ValueError("state: not a state_dict() of exfeed.torch.Dataset")
        self.epoch = state["epoch"]
        self._resume = state.get("position")
