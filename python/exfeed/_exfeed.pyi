"""Type stubs of the extension module exfeed._exfeed (re-exported by exfeed)."""

from __future__ import annotations

import os
from typing import Any, Iterator, Literal, Mapping, Optional, Sequence, Tuple, Union, final

import numpy as np
from typing_extensions import TypedDict, Unpack
import numpy.typing as npt

__all__ = [
    "DataError", "ConfigError", "ConfigWarning", "InternalError", "Reader", "Minibatch", "Stream",
    "StreamInfo", "release_memory", "_panic_for_tests", "_buffer_address", "_lens_load", "check", "info",
    "dump", "convert", "Dump", "ArrowStream", "_to_arrow", "_chunks", "_read_chunks",
    "_expand_glob", "__version__", "features",
]

__version__: str
# The optional parts this build has: "arrow" (Parquet, Arrow IPC, to_arrow, exfeed.ray) and
# "remote" (s3://, gs://, http(s):// URLs); docs/python-build.md.
features: Tuple[str, ...]

_PathLike = Union[str, os.PathLike]
_Layout = Union[str, Sequence[Tuple[str, int]], Mapping[str, int]]

class DataError(ValueError):
    """Invalid data. str() is the command line's message."""

    path: Optional[str]
    line: Optional[int]
    column: Optional[int]
    byte: Optional[int]
    input: Optional[str]
    context: Optional[str]
    kind: str
    message: str

class ConfigError(ValueError):
    path: Optional[str]
    line: Optional[int]
    column: Optional[int]
    byte: Optional[int]
    input: Optional[str]
    context: Optional[str]
    kind: str
    message: str

class InternalError(RuntimeError): ...
class ConfigWarning(UserWarning): ...

@final
class StreamInfo:
    name: str
    storage: str
    dim: int
    alias: Optional[str]
    defines_mb_size: bool
    @property
    def dtype(self) -> np.dtype: ...
    @property
    def is_sparse(self) -> bool: ...

@final
class Stream:
    """One stream of a minibatch; arrays are views on the minibatch's buffers."""

    @property
    def name(self) -> str: ...
    @property
    def storage(self) -> str: ...
    @property
    def is_sparse(self) -> bool: ...
    @property
    def dim(self) -> int: ...
    @property
    def dtype(self) -> np.dtype: ...
    @property
    def num_samples(self) -> int: ...
    @property
    def num_sequences(self) -> int: ...
    @property
    def values(self) -> npt.NDArray[np.floating]:
        """Dense: [samples, dim]."""
    @property
    def offsets(self) -> npt.NDArray[np.int64]:
        """[num_sequences + 1]: sequence i is samples offsets[i]:offsets[i+1]."""
    @property
    def indptr(self) -> npt.NDArray[np.int64]: ...
    @property
    def indices(self) -> npt.NDArray[np.int32]: ...
    @property
    def data(self) -> npt.NDArray[np.floating]: ...
    def to_scipy(self) -> Any:
        """Sparse: scipy.sparse.csr_matrix [samples, dim]."""
    def one_hot_ids(self) -> Optional[npt.NDArray[np.int64]]:
        """Sparse: each sample's one column where every sample is one-hot, else None."""
    def to_padded(self, pad: float = 0.0) -> Tuple[npt.NDArray[np.floating], npt.NDArray[np.bool_]]:
        """(values [sequences, longest, dim], mask [sequences, longest]); a copy."""
    def as_sequences(self) -> list: ...

@final
class Minibatch:
    num_samples: int
    num_sequences: int
    end_of_sweep: bool
    @property
    def keys(self) -> npt.NDArray[np.int64]: ...
    @property
    def sweeps(self) -> npt.NDArray[np.int64]: ...
    @property
    def stream_names(self) -> list[str]: ...
    def __getitem__(self, name: str, /) -> Stream: ...
    def __contains__(self, name: str, /) -> bool: ...
    def items(self) -> list[Tuple[str, Stream]]: ...

_InputsArg = Union[
    Mapping[str, Union[Tuple[str, int], Tuple[str, int, str]]],
    Sequence[Any],  # exfeed.Input objects or "NAME:FORMAT:DIM[:ALIAS]" strings
]

@final
class Reader(Iterator[Minibatch]):
    """The minibatch reader; every option of `exfeed read`.

    A file may be a URL (``"s3://bucket/key"``, ``"http://..."``, ``"https://..."``), read by
    byte range; ``storage_options`` are the store's settings over the environment's
    (``{"aws_endpoint": ..., "aws_region": ..., "aws_access_key_id": ...}``, see
    docs/remote.md). ``cache_dir`` keeps the byte ranges read in a local cache that the
    processes naming it share (``cache_limit`` bytes at most, default 10 GiB); what it cannot
    keep is a ``ConfigWarning``.

    ``files`` are joined by sequence key (one per deserializer); ``corpus`` is one data set
    of many shard files instead: a glob (``"data/train-*.ctf"``), ``"@list.txt"`` or a list
    of paths. In a corpus a key is ``shard << 40 | key in its file``. ``mix`` mixes data sets
    by weight instead: ``{"a.ctf": 0.7, "b/*.cbf": 0.3}`` (or ``"a.ctf=0.7,b/*.cbf=0.3"``),
    each source a file, glob or ``"@LIST"``, a weight being a share of a sweep's samples, a
    sweep ``mix_epoch_samples`` samples (default: the sum of the sources'); a source smaller
    than its share cycles within the sweep. ``stats()["mix"]`` says per sweep what each source
    contributed (see docs/mixing.md).

    The shuffle window is ``window_chunks`` chunks, ``window_samples`` samples or
    ``window_bytes`` bytes of the file (consecutive chunks of at most that many bytes, at
    least one, and as many bytes at most decoded ahead of it: what is held stays within
    twice the window whatever the chunk size); one of them, over the configuration's.

    ``chunk_size="auto"`` sizes chunks for the workers (at least 4 per worker when the data
    allows); ``equalize=True`` makes every worker deliver the same number of minibatches per
    sweep (an int: that many ranks kept in step, the workers split evenly between them), and
    ``take_notes()`` says per sweep what was repeated or dropped. A worker whose share of a
    sweep is empty or under half the mean is warned (``UserWarning``) when the reader opens.

    ``index`` says how a CTF file's chunks are found: ``"full"`` indexes the whole file first;
    ``"none"`` cuts it into byte ranges resolved to whole sequences as they are read, so the
    first minibatch comes without a pass over the file and a worker reads only its own
    ranges; ``"auto"`` (the default) is ``"none"`` unless ``cache_index``, ``max_errors``, a
    file without sequence ids or a join by key needs the index (see docs/reader.md).

    ``randomizer="cntk"`` gives CNTK 2.7's order of sequences and minibatches exactly (its block
    randomizer; CTF and CBF files, read with the full index, chunks decoded on the calling
    thread; see docs/cntk-order.md); ``"exfeed"`` (the default) is exfeed's own order.

    Defaults of the options left None: those of the configuration (config=), else
    randomize=True, seed=0, CNTK's window, chunk_size=32 MiB, max_errors=0,
    precision="float", threads=the available cores, max_record_size=64 MiB (the most bytes one
    record, a CTF sequence, may take).

    Threads and processes: calls from several threads take turns (the GIL is released while
    one waits or decodes); ``close()`` from another thread stops a read in progress, which then
    raises ValueError. A Reader inherited through ``os.fork()`` raises RuntimeError at once in
    the child (its decoding threads stayed in the parent) unless ``threads=0``: create readers
    after the fork. A negative or too large number is a ValueError naming its argument.
    """

    def __new__(
        cls,
        files: Optional[Union[_PathLike, Sequence[_PathLike]]] = None,
        *,
        minibatch_size: Optional[int] = None,
        minibatch_sequences: Optional[int] = None,
        corpus: Optional[Union[_PathLike, Sequence[_PathLike]]] = None,
        mix: Optional[Union[str, Mapping[_PathLike, float]]] = None,
        mix_epoch_samples: Optional[int] = None,
        inputs: Optional[_InputsArg] = None,
        config: Optional[_PathLike] = None,
        section: Optional[str] = None,
        set: Optional[Union[Mapping[str, Any], Sequence[str]]] = None,
        max_sweeps: Optional[int] = ...,  # 1: one sweep; None: no limit
        max_samples: Optional[int] = None,
        randomize: Optional[bool] = None,
        seed: Optional[int] = None,
        window_chunks: Optional[int] = None,
        window_samples: Optional[int] = None,
        window_bytes: Optional[int] = None,
        frame_mode: bool = False,
        chunk_size: Optional[Union[int, str]] = None,
        keep_in_memory: bool = False,
        cache_index: bool = False,
        max_errors: Optional[int] = None,
        precision: Optional[Union[str, np.dtype, type]] = None,
        num_workers: int = 1,
        worker_rank: int = 0,
        threads: Optional[int] = None,
        prefetch_chunks: Optional[int] = None,
        input_groups: Optional[_Layout] = None,
        target_groups: Optional[_Layout] = None,
        lens_mode: Optional[str] = None,
        nan: Optional[float] = None,
        equalize: Optional[Union[bool, int]] = None,
        equalize_mode: Optional[Literal["repeat", "spread"]] = None,
        max_record_size: Optional[int] = None,
        index: Optional[Literal["auto", "full", "none"]] = None,
        randomizer: Optional[Literal["exfeed", "cntk"]] = None,
        storage_options: Optional[Mapping[str, Any]] = None,
        cache_dir: Optional[_PathLike] = None,
        cache_limit: Optional[int] = None,
    ) -> Reader: ...
    @property
    def streams(self) -> list[StreamInfo]: ...
    @property
    def minibatch_size(self) -> Optional[int]: ...
    @property
    def minibatch_sequences(self) -> Optional[int]: ...
    @property
    def dtype(self) -> np.dtype: ...
    @property
    def total_samples(self) -> int: ...
    @property
    def total_sequences(self) -> int: ...
    @property
    def diagnostics(self) -> list[str]: ...
    @property
    def done(self) -> bool: ...
    @property
    def closed(self) -> bool: ...
    def next_minibatch(self, size: Optional[int] = None) -> Optional[Minibatch]: ...
    def __iter__(self) -> Reader: ...
    def __next__(self) -> Minibatch: ...
    def state_dict(self) -> dict: ...
    def load_state_dict(self, state: Union[Mapping[str, Any], Sequence[Mapping[str, Any]]]) -> None: ...
    def set_cntk_position(self, position: int) -> None: ...
    def close(self) -> None: ...
    def take_notes(self) -> list[str]: ...
    @property
    def sweep_quota(self) -> Optional[int]:
        """With equalize: the minibatches this worker delivers in the current sweep (of a sweep
        resumed on another number of workers: its quota of the rest); None without."""
    def stats(self) -> _ReaderStats:
        """What the reader has done so far (decoding, and the time spent waiting for it)."""
    def __enter__(self) -> Reader: ...
    def __exit__(self, *args: object) -> bool: ...

class _ReaderStats(TypedDict):
    """Reader.stats(): counts since the reader was opened, and two figures now."""

    minibatches: int
    samples: int
    chunks_decoded: int
    bytes_decoded: int
    decode_seconds: float
    wait_seconds: float
    elapsed_seconds: float
    samples_per_second: float
    wait_share: float
    window_chunks: int
    window_bytes: int
    chunks_held: int
    peak_chunks_held: int
    peak_bytes_held: int
    buffers_reused: int
    buffers_new: int
    mix: list[_SweepMix]

class _SweepMix(TypedDict):
    """What each source of a mix contributed to one sweep (of this reader's part)."""

    sweep: int
    ended: bool
    sources: list[_MixSource]

class _MixSource(TypedDict):
    source: str
    weight: float
    sequences: int
    samples: int

class _OpenArgs(TypedDict, total=False):
    """How check, dump and convert read a file (as `exfeed check/dump/convert` take it).
    ``corpus`` (a glob, ``"@LIST"`` or a list of paths) reads many files as one data set in
    place of the path: keys are ``"SHARD:KEY"``."""

    corpus: Optional[Union[_PathLike, Sequence[_PathLike]]]
    inputs: Optional[_InputsArg]
    config: Optional[_PathLike]
    section: Optional[str]
    set: Optional[Union[Mapping[str, Any], Sequence[str]]]
    format: Optional[str]
    max_errors: Optional[int]
    skip_sequence_ids: bool
    precision: Optional[Union[str, np.dtype, type]]
    input_groups: Optional[_Layout]
    target_groups: Optional[_Layout]
    nan: Optional[float]
    max_record_size: Optional[int]
    storage_options: Optional[Mapping[str, Any]]
    cache_dir: Optional[_PathLike]
    cache_limit: Optional[int]

def release_memory() -> int:
    """Frees now the decoded-chunk buffers that closed readers left for the process's next
    reader (freed on their own 10 seconds after the reader closed); returns the bytes freed."""

def check(
    path: Optional[_PathLike] = None,
    **kwargs: Unpack[_OpenArgs],
) -> dict:
    """Reads the whole file: its summary and every problem (`exfeed check`). For a corpus,
    the whole corpus's and, under "shards", each file's."""

def info(
    path: _PathLike,
    *,
    format: Optional[str] = None,
    storage_options: Optional[Mapping[str, Any]] = None,
    cache_dir: Optional[_PathLike] = None,
    cache_limit: Optional[int] = None,
) -> dict:
    """A CBF header or a Lens set's summary (`exfeed info`)."""

@final
class Dump(Iterator[dict]):
    def __next__(self) -> dict: ...

def dump(
    path: Optional[_PathLike] = None,
    **kwargs: Unpack[_OpenArgs],
) -> Dump:
    """Every sequence in file order: {"key": int, name: array | (indptr, indices, data)}; of a
    corpus, file after file, keys "SHARD:KEY"."""

def convert(
    src: Optional[_PathLike] = None,
    dst: Optional[_PathLike] = None,
    *,
    to: Optional[str] = None,
    chunk_size: Optional[int] = None,
    overwrite: bool = False,
    sync: bool = True,
    **kwargs: Unpack[_OpenArgs],
) -> dict:
    """Converts src to the file dst (`exfeed convert`), atomically: dst keeps its old content
    or gets the whole new file. `to` (ctf, cbf, ex, bex, parquet, arrow) defaults to dst's
    name; an existing dst is refused (FileExistsError) unless overwrite=True, which replaces a
    regular file or a symlink (the link, not its target) and writes into a FIFO or character
    device in place (docs/hardening.md). Returns {"from", "to", "sequences",
    "chunks", "problems"}. ``convert(dst=..., corpus=...)`` writes every file of a corpus into
    the one file dst (keys SHARD << 40 | KEY)."""

# These exist only in a build with the "arrow" feature.
@final
class ArrowStream:
    """Arrow record batches of exfeed's sequence schema (docs/arrow.md), consumed once."""

    def __arrow_c_stream__(self, requested_schema: object = None) -> object: ...
    def __arrow_c_schema__(self) -> object: ...

def _to_arrow(path: _PathLike, *, chunk_size: Optional[int] = None, **kwargs: Unpack[_OpenArgs]) -> ArrowStream:
    """A whole file as record batches of about chunk_size bytes (exfeed.to_arrow)."""

def _chunks(path: _PathLike, **options: Any) -> Tuple[list, bool, ArrowStream]:
    """[(sequences, samples, bytes)] of each chunk of a file (exfeed.ray's read tasks), whether
    those counts are exact (an index's; else estimates of byte ranges), and the stream of none
    of them (its schema is theirs)."""

def _read_chunks(path: _PathLike, start: int, end: int, **options: Any) -> ArrowStream:
    """Chunks start..end of a file, one record batch each."""

def _expand_glob(pattern: str, storage_options: Optional[Mapping[str, Any]] = None) -> list[str]:
    """The objects a URL glob matches, sorted (the bucket's prefix listed as --corpus lists it)."""

def _buffer_address(stream: Stream) -> int:
    """The address of a dense stream's values in the Rust buffers (for the zero-copy tests)."""

def _lens_load(
    path: _PathLike, *, input_groups: Optional[_Layout] = None, target_groups: Optional[_Layout] = None,
    nan: Optional[float] = None,
) -> Tuple[dict, list]:
    """(header dict, [example dict]) of a whole Lens example file (exfeed.lens wraps them)."""

def _panic_for_tests(message: str) -> None:
    """Raises InternalError from a Rust panic (for tests)."""
