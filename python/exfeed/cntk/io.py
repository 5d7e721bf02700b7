"""CNTK 2.7's reader API (``cntk.io``) on exfeed's reader.

Change ``from cntk.io import ...`` to ``from exfeed.cntk.io import ...`` and reader code written
for CNTK 2.7 runs unchanged: the same names, defaults and semantics (``MinibatchSource``,
``CTFDeserializer``, ``CBFDeserializer``, ``StreamDef``, ``StreamDefs``, ``MinibatchData``,
checkpoints, ``sequence_to_cntk_text_format``, ``MinibatchSourceConfig``). Deserializers are
dictionaries in CNTK's configuration vocabulary (``d["cacheIndex"] = True`` works as in CNTK); a
``MinibatchSource`` turns its configuration into a CNTK reader block that exfeed's configuration
reader parses, so every CTF/CBF parameter means what it means in a CNTK config file.

Data is float32, as in CNTK's built-in composite reader. The differences from CNTK that remain
are listed in docs/deviations.md ("CNTK's Python reader API").
"""

import os
import tempfile

import numpy as np

import exfeed
from exfeed.cntk.logging import TraceLevel

INFINITELY_REPEAT = (1 << 64) - 1
"""``max_samples``/``max_sweeps`` value: no limit (CNTK's ``SIZE_MAX``)."""

FULL_DATA_SWEEP = (1 << 64) - 2
"""``max_samples`` value meaning one sweep over the data (CNTK's ``SIZE_MAX - 1``)."""

DEFAULT_RANDOMIZATION_WINDOW_IN_CHUNKS = 128
"""4 GiB of 32 MiB chunks, CNTK's default window."""

_CTF = "CNTKTextFormatDeserializer"
_CBF = "CNTKBinaryFormatDeserializer"
# The reader module CNTK's configuration names for each deserializer type.
_MODULES = {_CTF: "CNTKTextFormatReader", _CBF: "CNTKBinaryReader"}


class _ConfigurationError(ValueError, RuntimeError):
    """An invalid reader configuration. CNTK reports these as a logic error from C++; code may
    catch either ``ValueError`` or ``RuntimeError``."""


# ---------------------------------------------------------------------------------------------
# Stream definitions and deserializers


class Record(dict):
    """A dictionary whose entries are also read as attributes (``r.x`` is ``r["x"]``);
    attributes cannot be assigned. ``StreamDefs`` is this class."""

    def __init__(self, **entries):
        super().__init__(entries)

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError("record has no attribute '%s'" % name) from None

    def __setattr__(self, name, value):
        raise AttributeError("record is immutable")

    def updated_with(self, **entries):
        """A new record with ``entries`` added or replaced."""
        merged = dict(self)
        merged.update(entries)
        return Record(**merged)


StreamDefs = Record


def StreamDef(  # noqa: N802 (CNTK's name)
    field=None,
    shape=None,
    is_sparse=False,
    transforms=None,
    context=None,
    scp=None,
    mlf=None,
    broadcast=None,
    defines_mb_size=False,
    max_sequence_length=65535,
):
    """One stream of a deserializer: ``field`` is its name in the file (CTF's ``|name``, a CBF
    stream's name), ``shape`` its dimension, ``is_sparse`` its storage, ``defines_mb_size``
    whether minibatch sizes count its samples. ``transforms``, ``context``, ``scp``, ``mlf``,
    ``broadcast`` and ``max_sequence_length`` belong to CNTK's image and HTK deserializers and
    are kept only as entries of the record, as CNTK's CTF and CBF deserializers ignore them."""
    entries = {"stream_alias": field, "is_sparse": is_sparse}
    if shape is not None:
        entries["dim"] = shape
    optional = {"transforms": transforms, "context": context, "scp": scp, "broadcast": broadcast}
    entries.update((k, v) for k, v in optional.items() if v is not None)
    if mlf is not None:
        entries["mlf"] = mlf
        entries["is_sparse"] = True
    entries["defines_mb_size"] = bool(defines_mb_size)
    entries["max_sequence_length"] = max_sequence_length
    return Record(**entries)


def _stream_dim(name, stream):
    dim = stream.get("dim")
    if isinstance(dim, (tuple, list)) and len(dim) == 1:
        dim = dim[0]
    if dim is None or isinstance(dim, bool) or not isinstance(dim, (int, np.integer)) or dim <= 0:
        raise ValueError(
            "CTFDeserializer: stream '%s' needs shape, a positive integer (got %r)" % (name, dim)
        )
    return int(dim)


def CTFDeserializer(filename, streams):  # noqa: N802 (CNTK's name)
    """The CNTK Text Format file ``filename`` with ``streams`` (name -> :func:`StreamDef`, each
    with ``field`` and ``shape``). Returns the deserializer's configuration, a ``dict`` that
    takes CNTK's CTF parameters: ``d["cacheIndex"] = True``, ``"maxErrors"``,
    ``"skipSequenceIds"``, ``"chunkSizeInBytes"``, ``"keepDataInMemory"``, ``"traceLevel"``."""
    inputs = {}
    for name, stream in streams.items():
        if stream.get("stream_alias") is None:
            raise ValueError("CTFDeserializer: stream name for key %s must be specified" % name)
        entry = {
            "dim": _stream_dim(name, stream),
            "format": "sparse" if stream.get("is_sparse") else "dense",
            "definesMBSize": bool(stream.get("defines_mb_size", False)),
        }
        if stream["stream_alias"]:
            entry["alias"] = stream["stream_alias"]
        inputs[name] = entry
    return {"type": _CTF, "file": filename, "input": inputs}


def CBFDeserializer(filename, streams={}):  # noqa: N802,B006 (CNTK's name and default)
    """The CNTK Binary Format file ``filename``. Its header gives every stream's dimension and
    storage; every stream of the file is read, and ``streams`` only renames:
    ``StreamDefs(features=StreamDef(field="F"))`` exposes the file's stream ``F`` as
    ``features``, and a ``field`` the file has no stream of renames nothing (as in CNTK: a file
    made by ctf2bin stores the names of its CTF header, ``features`` rather than ``F``). Shapes
    and ``is_sparse`` given here are not used, as in CNTK. Returns the deserializer's configuration (a ``dict``, see :func:`CTFDeserializer`)."""
    renames = {}
    for name, stream in streams.items():
        in_file = stream.get("stream_alias")
        if in_file and in_file != name:
            renames[name] = {"alias": in_file}
    return {"type": _CBF, "file": filename, "input": renames}


# ---------------------------------------------------------------------------------------------
# Configuration


class _Optional:
    """A value that may be unset (CNTK's ``Optional<bool>``, as ``config.is_multithreaded``)."""

    def __init__(self):
        self._value = None

    def set(self, value):
        self._value = bool(value)

    def get(self):
        if self._value is None:
            raise ValueError("the optional value is not set")
        return self._value

    def is_initialized(self):
        return self._value is not None

    def reset(self):
        self._value = None


class MinibatchSourceConfig:
    """The configuration of a :class:`MinibatchSource` (CNTK's ``MinibatchSourceConfig``):
    the deserializers and the snake_case properties ``max_samples``, ``max_sweeps``,
    ``randomization_window_in_chunks``, ``randomization_window_in_samples``,
    ``randomization_seed``, ``trace_level``, ``is_multithreaded``, ``is_frame_mode_enabled``,
    ``truncation_length``, ``max_errors``. ``randomize=False`` sets both windows to 0.
    :meth:`create` opens the source; :func:`to_dictionary` validates it and gives CNTK's
    reader configuration."""

    def __init__(self, deserializers=(), randomize=True):
        self.deserializers = list(deserializers)
        self.max_samples = INFINITELY_REPEAT
        self.max_sweeps = INFINITELY_REPEAT
        self.randomization_window_in_chunks = DEFAULT_RANDOMIZATION_WINDOW_IN_CHUNKS
        self.randomization_window_in_samples = 0
        self.randomization_seed = 0
        self.trace_level = TraceLevel.Warning.value
        self._is_multithreaded = _Optional()
        self.is_frame_mode_enabled = False
        self.truncation_length = 0
        self.max_errors = 0
        if not randomize:
            self.randomization_window_in_chunks = 0

    @property
    def is_multithreaded(self):
        """Unset (automatic), or ``.set(True/False)``; assigning a bool also sets it."""
        return self._is_multithreaded

    @is_multithreaded.setter
    def is_multithreaded(self, value):
        self._is_multithreaded.set(value)

    def add_deserializer(self, deserializer):
        """Appends a deserializer; returns this configuration."""
        self.deserializers.append(deserializer)
        return self

    def create(self):
        """Opens a :class:`MinibatchSource` with this configuration."""
        return MinibatchSource._from_config(self)

    create_minibatch_source = create


def _plain(value):
    """The Python value of a configuration entry (CNTK code wraps some in ``DictionaryValue``)."""
    return value.value if hasattr(value, "value") and not isinstance(value, dict) else value


def to_dictionary(config):
    """Validates ``config`` as CNTK does and returns the reader configuration it stands for, in
    CNTK's vocabulary (``randomize``, ``randomizationWindow``, ``sampleBasedRandomizationWindow``,
    ``randomizationSeed``, ``truncated``, ``truncationLength``, ``frameMode``, ``traceLevel``,
    ``multiThreadedDeserialization``, ``deserializers``, and ``maxErrors`` when not 0).
    Mutually exclusive settings raise ``ValueError``."""
    if config.max_samples != INFINITELY_REPEAT and config.max_sweeps != INFINITELY_REPEAT:
        raise _ConfigurationError(
            "max_samples and max_sweeps are mutually exclusive: give at most one of them"
        )
    chunks = config.randomization_window_in_chunks
    samples = config.randomization_window_in_samples
    if chunks != 0 and samples != 0:
        raise _ConfigurationError(
            "randomization_window_in_chunks and randomization_window_in_samples are mutually"
            " exclusive: set at most one of them to a non-zero value"
        )
    if config.is_frame_mode_enabled and config.truncation_length != 0:
        raise _ConfigurationError("frame_mode and truncation_length are mutually exclusive")
    result = {}
    if samples != 0 or chunks != 0:
        result["randomize"] = True
        result["randomizationWindow"] = samples if samples != 0 else chunks
        result["sampleBasedRandomizationWindow"] = samples != 0
        result["randomizationSeed"] = config.randomization_seed
    else:
        result["randomize"] = False
    if config.truncation_length != 0:
        result["truncated"] = True
        result["truncationLength"] = config.truncation_length
    result["frameMode"] = bool(config.is_frame_mode_enabled)
    result["traceLevel"] = int(config.trace_level)
    if config.max_errors:
        result["maxErrors"] = config.max_errors
    deserializers = []
    for d in config.deserializers:
        d = {k: _plain(v) for k, v in d.items()}
        kind = d.get("type")
        if kind in _MODULES:
            d["module"] = _MODULES[kind]
        elif "module" not in d:
            raise ValueError("unknown deserializer type '%s'" % kind)
        deserializers.append(d)
    multithreaded = config.is_multithreaded
    result["multiThreadedDeserialization"] = (
        multithreaded.get() if multithreaded.is_initialized() else False
    )
    result["deserializers"] = deserializers
    return result


def _config_value(value, indent):
    """``value`` written in CNTK's configuration syntax."""
    value = _plain(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (str, os.PathLike)):
        text = os.fspath(value)
        for quote in ('"', "'"):
            if quote not in text:
                return quote + text + quote
        raise ValueError("cannot write %r in a CNTK configuration (it holds both quotes)" % text)
    if isinstance(value, dict):
        inner = "".join(
            "%s%s = %s\n" % (indent + "  ", _config_name(k), _config_value(v, indent + "  "))
            for k, v in value.items()
        )
        return "[\n%s%s]" % (inner, indent)
    if isinstance(value, (list, tuple)):
        return "(" + " : ".join(_config_value(v, indent) for v in value) + ")"
    raise TypeError("cannot write %r (%s) in a reader configuration" % (value, type(value)))


def _config_name(name):
    if not isinstance(name, str) or not name or not all(c.isalnum() or c == "_" for c in name):
        raise ValueError("a configuration or stream name must be letters, digits or _: %r" % name)
    return name


def _data_file(name):
    """A deserializer's file as the reader takes it: a path made absolute, or a URL (s3://,
    gs://, http(s)://, read with the environment's credentials) as it is."""
    name = os.fspath(_plain(name))
    return name if "://" in name else os.path.abspath(name)


def _reader_config_text(settings):
    """A CNTK reader block for ``to_dictionary``'s ``settings``: files made absolute (the
    configuration is read from a temporary file). A CBF file's streams are all read, renamed
    where an alias names one (an alias naming none is ignored, as in CNTK, with a warning in
    the reader's ``diagnostics``)."""
    reader = {k: v for k, v in settings.items() if k != "deserializers"}
    reader["precision"] = "float"
    deserializers = []
    for d in settings["deserializers"]:
        kind = _plain(d.get("type"))
        if kind not in _MODULES:
            raise ValueError(
                "exfeed reads CTFDeserializer and CBFDeserializer only (got a '%s')" % kind
            )
        d = dict(d)
        d["file"] = _data_file(d["file"])
        if kind == _CBF and not d.get("input"):
            d.pop("input", None)  # every stream of the file, under its own name
        deserializers.append(d)
    reader["deserializers"] = deserializers
    return "reader = %s\n" % _config_value(reader, "")


# ---------------------------------------------------------------------------------------------
# Minibatches


class StreamInformation:
    """A stream of a :class:`MinibatchSource`: ``name`` (also ``m_name``), ``m_id``,
    ``storage_format`` (``"dense"``/``"sparse"``), ``is_sparse``, ``dtype`` (also
    ``m_element_type``, float32), ``sample_shape`` (also ``m_sample_layout``, ``shape``),
    ``defines_mb_size``. Minibatches are dictionaries keyed by these."""

    def __init__(self, name, stream_id, storage_format, dtype, shape, defines_mb_size=False):
        self.m_name = name
        self.m_id = stream_id
        self.storage_format = storage_format
        self.m_element_type = np.dtype(dtype).type
        self.sample_shape = tuple(shape)
        self.m_defines_mb_size = bool(defines_mb_size)

    name = property(lambda self: self.m_name)
    is_sparse = property(lambda self: self.storage_format == "sparse")
    dtype = property(lambda self: self.m_element_type)
    shape = property(lambda self: self.sample_shape)
    m_sample_layout = property(lambda self: self.sample_shape)
    m_storage_format = property(lambda self: self.storage_format)
    defines_mb_size = property(lambda self: self.m_defines_mb_size)

    def _key(self):
        return (self.m_id, self.m_name)

    def __eq__(self, other):
        return isinstance(other, StreamInformation) and self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    def __repr__(self):
        return "StreamInformation(%r, %d, %r, %s, %r)" % (
            self.m_name,
            self.m_id,
            self.storage_format,
            np.dtype(self.m_element_type).name,
            self.sample_shape,
        )


class Value:
    """The data of one stream of a minibatch (what CNTK's ``MinibatchData.data`` is): ``shape``
    ``(sequences, longest sequence, dim)``, ``mask``, ``is_sparse``, ``dtype``, ``asarray()``,
    ``as_sequences()``, ``masked_count()``, ``data``."""

    def __init__(self, stream, is_sparse, dim):
        self._stream = stream
        self._offsets = np.asarray(stream.offsets, dtype=np.int64)
        self._lengths = np.diff(self._offsets)
        self.num_samples = int(self._offsets[-1])
        self.is_sparse = is_sparse
        self._dim = dim
        self.dtype = np.float32

    @property
    def shape(self):
        longest = int(self._lengths.max()) if len(self._lengths) else 0
        return (len(self._lengths), longest, self._dim)

    @property
    def mask(self):
        """``[sequences, longest]``: 2 where a sequence starts, 1 for its other samples, 0 for
        padding."""
        sequences, longest, _ = self.shape
        mask = (np.arange(longest)[None, :] < self._lengths[:, None]).astype(np.int8)
        mask[self._lengths > 0, 0] = 2
        return mask

    def masked_count(self):
        """The number of padding positions in ``[sequences, longest]``."""
        sequences, longest, _ = self.shape
        return sequences * longest - self.num_samples

    def asarray(self):
        """Dense: the padded array ``[sequences, longest, dim]`` (zeros where ``mask`` is 0).
        Sparse: one ``scipy.sparse.csr_matrix`` ``[length, dim]`` per sequence (what CNTK's
        conversion yields for sequences)."""
        if self.is_sparse:
            return self.as_sequences()
        sequences, longest, dim = self.shape
        out = np.zeros((sequences, longest, dim), dtype=np.float32)
        rows = np.repeat(np.arange(sequences), self._lengths)
        positions = np.arange(self.num_samples) - np.repeat(self._offsets[:-1], self._lengths)
        out[rows, positions] = np.asarray(self._stream.values).reshape(-1, dim)
        return out

    def as_sequences(self, variable=None):
        """One array per sequence, without padding: ``[length, dim]`` NumPy arrays (views of the
        minibatch) when dense, ``scipy.sparse.csr_matrix`` when sparse. ``variable`` is
        accepted for CNTK's signature and not needed."""
        whole = (
            self._stream.to_scipy()
            if self.is_sparse
            else np.asarray(self._stream.values).reshape(-1, self._dim)
        )
        bounds = self._offsets.tolist()
        return [whole[a:b] for a, b in zip(bounds[:-1], bounds[1:])]

    @property
    def data(self):
        """The value's array view (CNTK's ``NDArrayView``): here the value itself, with
        ``shape``, ``asarray()`` and :func:`exfeed.cntk.cntk_py.are_equal`."""
        return self

    def erase(self):
        """Kept for CNTK's signature: exfeed's buffers need no explicit release."""


class MinibatchData:
    """One stream of a minibatch, as :meth:`MinibatchSource.next_minibatch` returns it:
    ``num_samples`` (this stream's), ``num_sequences``, ``end_of_sweep`` (the minibatch ends a
    sweep or spans a sweep boundary), ``is_sparse``, ``shape``, ``mask``, ``asarray()``,
    ``as_sequences()``, ``data`` (a :class:`Value`), ``len()`` (the sequences)."""

    def __init__(self, value, num_sequences, num_samples, sweep_end):
        self.data = value
        self.num_sequences = num_sequences
        self.num_samples = num_samples
        self.end_of_sweep = bool(sweep_end)

    number_of_sequences = property(lambda self: self.num_sequences)
    number_of_samples = property(lambda self: self.num_samples)
    sweep_end = property(lambda self: self.end_of_sweep)
    shape = property(lambda self: self.data.shape)
    mask = property(lambda self: self.data.mask)
    is_sparse = property(lambda self: self.data.is_sparse)

    def asarray(self):
        """See :meth:`Value.asarray`."""
        return self.data.asarray()

    def as_sequences(self, variable=None):
        """See :meth:`Value.as_sequences`."""
        return self.data.as_sequences(variable)

    def __len__(self):
        return self.num_sequences

    def __repr__(self):
        return "MinibatchData(sequences=%d, samples=%d, end_of_sweep=%s, shape=%s)" % (
            self.num_sequences,
            self.num_samples,
            self.end_of_sweep,
            self.shape,
        )


def _share(total, parts, index):
    """Partition ``index``'s share of ``total`` split into ``parts`` near-equal shares (the
    first ``total % parts`` shares one larger)."""
    return total // parts + (1 if index < total % parts else 0)


def _check_count(name, value, minimum):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError("%s must be an integer >= %d (got %r)" % (name, minimum, value))
    return int(value)


class MinibatchSource:
    """CNTK's composite minibatch source over one deserializer or a list of them (joined by
    sequence key). The arguments are CNTK 2.7's, with its defaults and rules: ``max_samples``
    and ``max_sweeps`` are mutually exclusive, as are the two window kinds and ``frame_mode``
    with ``truncation_length`` (``ValueError``); ``randomize=False`` sets both windows to 0;
    the seed is ``randomization_seed + sweep``; ``max_samples=FULL_DATA_SWEEP`` is one sweep.
    ``trace_level`` and ``multithreaded_deserializer`` are accepted; ``truncation_length``
    (truncated BPTT) is not supported.

    ``randomizer`` (exfeed's own keyword) chooses the order. ``"cntk"``, the default, is CNTK
    2.7's exactly: its block randomizer (or its ``NoRandomizer`` with ``randomize=False``)
    over CNTK's chunks, the same minibatches, partitions and checkpoints as CNTK
    (``{"minibatchSourcePosition": n}``, which CNTK's own checkpoints restore). ``"exfeed"``
    is exfeed's order: chunks decoded ahead on a thread pool, faster, but other minibatches
    than CNTK's, and checkpoints only exfeed restores. Sources joined by sequence key (a list
    of deserializers) and sources with ``max_errors`` (or a deserializer's ``maxErrors``)
    always read in exfeed's order (see docs/cntk-order.md)."""

    def __init__(
        self,
        deserializers,
        max_samples=INFINITELY_REPEAT,
        max_sweeps=INFINITELY_REPEAT,
        randomization_window_in_chunks=DEFAULT_RANDOMIZATION_WINDOW_IN_CHUNKS,
        randomization_window_in_samples=0,
        randomization_seed=0,
        trace_level=TraceLevel.Warning,
        multithreaded_deserializer=None,
        frame_mode=False,
        truncation_length=0,
        randomize=True,
        max_errors=0,
        randomizer="cntk",
    ):
        if not isinstance(deserializers, (list, tuple)):
            deserializers = [deserializers]
        config = MinibatchSourceConfig(deserializers)
        config.max_samples = max_samples
        config.max_sweeps = max_sweeps
        config.randomization_window_in_chunks = randomization_window_in_chunks
        config.randomization_window_in_samples = randomization_window_in_samples
        config.randomization_seed = randomization_seed
        config.trace_level = int(trace_level)
        if multithreaded_deserializer is not None:
            config.is_multithreaded.set(multithreaded_deserializer)
        config.is_frame_mode_enabled = frame_mode
        config.truncation_length = truncation_length
        config.max_errors = max_errors
        if not randomize:
            config.randomization_window_in_chunks = 0
            config.randomization_window_in_samples = 0
        self._open(config, randomizer)

    @classmethod
    def _from_config(cls, config):
        source = cls.__new__(cls)
        source._open(config, "cntk")
        return source

    def _open(self, config, randomizer):
        if randomizer not in ("cntk", "exfeed"):
            raise ValueError("randomizer must be 'cntk' or 'exfeed' (got %r)" % (randomizer,))
        settings = to_dictionary(config)
        if settings.get("truncated"):
            raise NotImplementedError(
                "truncation_length (truncated BPTT) is not supported by exfeed; read whole"
                " sequences (truncation_length=0) and cut them in the training loop"
            )
        if not settings["deserializers"]:
            raise ValueError("MinibatchSource needs at least one deserializer")
        self._max_samples = _check_count("max_samples", config.max_samples, 0)
        self._max_sweeps = _check_count("max_sweeps", config.max_sweeps, 0)
        self._files = [_data_file(d["file"]) for d in settings["deserializers"]]
        self._config_text = _reader_config_text(settings)
        # CNTK's chunks are those of one file: sources joined by key read in exfeed's order;
        # so do sources that may drop a bad sequence (CNTK's order would keep its place).
        tolerant = settings.get("maxErrors") or any(
            _plain(d.get("maxErrors", 0)) for d in settings["deserializers"]
        )
        self._cntk_order = randomizer == "cntk" and len(self._files) == 1 and not tolerant
        self._partitions = (1, 0)
        self._reader = self._new_reader(*self._partitions)
        self._stream_infos = [
            StreamInformation(s.name, i, s.storage, np.float32, (s.dim,), s.defines_mb_size)
            for i, s in enumerate(self._reader.streams)
        ]
        self._streams = None
        self._started = False
        self._ended = False
        self._position = 0
        self._last_mapped = None

    def _new_reader(self, partitions, index):
        """A core reader for partition ``index`` of ``partitions``, positioned at the start."""
        limit = {"max_sweeps": None, "max_samples": None}
        if self._max_samples == FULL_DATA_SWEEP:
            limit["max_sweeps"] = 1
        elif self._max_samples != INFINITELY_REPEAT and self._cntk_order:
            # CNTK's epoch: samples of the global timeline, every partition's.
            limit["max_samples"] = max(1, self._max_samples)
        elif self._max_samples != INFINITELY_REPEAT:
            # A partition whose share is 0 is never read (see _limited_to_nothing).
            limit["max_samples"] = max(1, _share(self._max_samples, partitions, index))
        elif self._max_sweeps < FULL_DATA_SWEEP:
            limit["max_sweeps"] = self._max_sweeps
        with tempfile.NamedTemporaryFile("w", suffix=".cntk", delete=False) as f:
            f.write(self._config_text)
        try:
            return exfeed.Reader(
                self._files,
                config=f.name,
                minibatch_size=1,
                num_workers=partitions,
                worker_rank=index,
                precision="float",
                randomizer="cntk" if self._cntk_order else "exfeed",
                **limit,
            )
        finally:
            os.unlink(f.name)

    def _limited_to_nothing(self):
        """Whether this partition's share of ``max_samples`` is 0 (in CNTK's order, whether
        ``max_samples`` is 0)."""
        limited = self._max_samples not in (INFINITELY_REPEAT, FULL_DATA_SWEEP)
        if self._cntk_order:
            return limited and self._max_samples == 0
        return limited and _share(self._max_samples, *self._partitions) == 0

    def stream_infos(self):
        """The streams this source delivers, a list of :class:`StreamInformation`."""
        return list(self._stream_infos)

    @property
    def streams(self):
        """The streams by name, a :class:`Record` (``source.streams.features``)."""
        if self._streams is None:
            self._streams = Record(**{s.name: s for s in self._stream_infos})
        return self._streams

    def stream_info(self, name):
        """The :class:`StreamInformation` of stream ``name``."""
        for s in self._stream_infos:
            if s.name == name:
                return s
        raise RuntimeError(
            "No stream found matching given name '%s' (the streams are: %s)"
            % (name, ", ".join(s.name for s in self._stream_infos))
        )

    def __getitem__(self, name):
        return self.stream_info(name)

    def next_minibatch(
        self,
        minibatch_size_in_samples,
        input_map=None,
        device=None,
        num_data_partitions=None,
        partition_index=None,
    ):
        """The next minibatch of about ``minibatch_size_in_samples`` samples (whole sequences;
        the first is taken even if larger), as ``{StreamInformation: MinibatchData}``, or keyed
        by ``input_map``'s keys (``{key: StreamInformation}``); ``{}`` once the data is
        exhausted. With ``num_data_partitions``/``partition_index`` the size is the global one:
        this partition reads its share of the data and of the size. The dictionary returned
        for an ``input_map`` is emptied by the next call, as in CNTK. ``device`` is accepted
        and not used (the data is NumPy)."""
        if self._last_mapped is not None:
            self._last_mapped.clear()
            self._last_mapped = None
        size = _check_count("minibatch_size_in_samples", minibatch_size_in_samples, 1)
        partitions = _check_count(
            "num_data_partitions", 1 if num_data_partitions is None else num_data_partitions, 1
        )
        index = _check_count("partition_index", 0 if partition_index is None else partition_index, 0)
        if index >= partitions:
            raise ValueError(
                "partition_index %d is out of range for %d partitions" % (index, partitions)
            )
        if (partitions, index) != self._partitions and self._cntk_order:
            # CNTK's SetConfiguration: the same global position, read by another partition.
            position = self._cntk_position()
            self._reader = self._new_reader(partitions, index)
            self._partitions = (partitions, index)
            self._reader.set_cntk_position(position)
            self._ended = self._limited_to_nothing()
        elif (partitions, index) != self._partitions:
            if self._started:
                raise ValueError(
                    "exfeed cannot change num_data_partitions/partition_index after the first"
                    " minibatch (this source reads partition %d of %d)"
                    % (self._partitions[1], self._partitions[0])
                )
            self._reader = self._new_reader(partitions, index)
            self._partitions = (partitions, index)
            self._ended = self._limited_to_nothing()
        self._started = True
        if self._ended:
            return {}
        # CNTK's order shares the global size itself (its local timeline).
        share = size if self._cntk_order else max(1, _share(size, partitions, index))
        minibatch = self._reader.next_minibatch(share)
        if minibatch is None:
            self._ended = True
            return {}
        self._position += minibatch.num_samples
        result = {}
        for info in self._stream_infos:
            stream = minibatch[info.name]
            value = Value(stream, info.is_sparse, info.sample_shape[0])
            result[info] = MinibatchData(
                value, minibatch.num_sequences, value.num_samples, minibatch.end_of_sweep
            )
        if not input_map:
            return result
        self._last_mapped = {
            key: result[self.stream_info(info) if isinstance(info, str) else info]
            for key, info in input_map.items()
        }
        return self._last_mapped

    def _cntk_position(self):
        """CNTK's global sample position (CNTK's order only)."""
        return int(self._reader.state_dict()["position"]["cntk_position"])

    def get_checkpoint_state(self):
        """The position, a JSON-serialisable dict. In CNTK's order it is CNTK's own,
        ``{"minibatchSourcePosition": n}``, the global sample position (every partition's
        samples, from the first sweep's start). With ``randomizer="exfeed"`` it also holds
        exfeed's exact reader state under ``exfeed*`` keys, and ``minibatchSourcePosition`` is
        the samples this source delivered."""
        if self._cntk_order:
            return {"minibatchSourcePosition": self._cntk_position()}
        return {
            "minibatchSourcePosition": self._position,
            "exfeedPartitions": list(self._partitions),
            "exfeedStarted": self._started,
            "exfeedEnded": self._ended,
            "exfeedReader": self._reader.state_dict(),
        }

    def restore_from_checkpoint(self, checkpoint):
        """Continues from ``checkpoint``, from :meth:`get_checkpoint_state` of a source with
        the same deserializers and options. In CNTK's order this is CNTK's restore: any dict
        with ``minibatchSourcePosition`` (one CNTK saved included) moves to that global sample
        position as CNTK does (the sweep is ``position // samples per sweep``; reading goes on
        at the first sequence of that sweep's order starting at or after the position)."""
        if self._cntk_order:
            self._restore_cntk_position(checkpoint)
            return
        if "exfeedReader" not in checkpoint:
            raise ValueError(
                "not a checkpoint of randomizer='exfeed' (it has no 'exfeedReader' entry): a"
                " CNTK checkpoint is restored in CNTK's order, the default randomizer='cntk'"
            )
        partitions, index = (int(v) for v in checkpoint["exfeedPartitions"])
        reader = self._new_reader(partitions, index)
        reader.load_state_dict(checkpoint["exfeedReader"])
        self._reader = reader
        self._partitions = (partitions, index)
        # Saved before the first minibatch, the partitioning is still open.
        self._started = bool(checkpoint.get("exfeedStarted", True))
        self._ended = bool(checkpoint.get("exfeedEnded", False))
        self._position = int(checkpoint["minibatchSourcePosition"])

    def _restore_cntk_position(self, checkpoint):
        if "exfeedReader" in checkpoint:
            raise ValueError(
                "this checkpoint was taken with randomizer='exfeed': its position is in"
                " exfeed's order, not CNTK's; restore it in a source with randomizer='exfeed'"
            )
        if "minibatchSourcePosition" not in checkpoint:
            raise ValueError("Checkpoint misses required field minibatchSourcePosition")
        position = _plain(checkpoint["minibatchSourcePosition"])
        position = _check_count("minibatchSourcePosition", position, 0)
        self._reader.set_cntk_position(position)
        self._ended = self._limited_to_nothing()

    @property
    def current_position(self):
        """:meth:`get_checkpoint_state`; assigning restores it."""
        return self.get_checkpoint_state()

    @current_position.setter
    def current_position(self, position):
        self.restore_from_checkpoint(position)


# ---------------------------------------------------------------------------------------------
# Writing CTF


def _is_tensor(data):
    """Whether ``data`` is a NumPy array or nested lists ending in numbers (not in arrays)."""
    if isinstance(data, np.ndarray):
        return True
    if not isinstance(data, list):
        return False
    while data:
        first = data[0]
        try:
            first[0]
        except Exception:
            try:
                first + 0
            except Exception:
                return False
            return True
        if not isinstance(first, list):
            return False
        data = first
    return True


def _dense_text(sample):
    return " ".join(np.asarray(sample).ravel(order="C").astype(str))


def _sparse_text(sample):
    return " ".join("%s:%s" % (index, value) for index, value in sorted(sample.items()))


def sequence_to_cntk_text_format(seq_idx, alias_tensor_map):
    """Sequence ``seq_idx`` as CTF lines, exactly as CNTK writes it: ``alias_tensor_map`` maps
    each alias to its samples, a tensor (array or nested lists, one row a sample: values
    written flattened, as NumPy prints them) or a list of dicts ``{index: value}`` (sparse);
    one line per sample position, ``"%i\\t|"`` then the aliases present at that position in
    sorted order, joined by ``" |"``; lines joined by newlines, no trailing newline."""
    longest = max(len(t) for t in alias_tensor_map.values())
    if longest == 0:
        return ""
    writers = {}  # alias -> (samples, how to write one), decided when the alias is first written

    def writer(alias, tensor):
        if alias not in writers:
            if _is_tensor(tensor):
                writers[alias] = (np.asarray(tensor), _dense_text)
            elif isinstance(tensor, list) and isinstance(tensor[0], dict):
                writers[alias] = (tensor, _sparse_text)
            else:
                raise ValueError(
                    "alias '%s': expected a dense tensor or a list of {index: value} dicts,"
                    " got %s" % (alias, type(tensor))
                )
        return writers[alias]

    lines = []
    for position in range(longest):
        fields = []
        for alias, tensor in sorted(alias_tensor_map.items()):
            if position < len(tensor):
                samples, write = writer(alias, tensor)
                fields.append("%s %s" % (alias, write(samples[position])))
        lines.append("%i\t|" % seq_idx + " |".join(fields))
    return "\n".join(lines)


__all__ = [
    "CBFDeserializer",
    "CTFDeserializer",
    "DEFAULT_RANDOMIZATION_WINDOW_IN_CHUNKS",
    "FULL_DATA_SWEEP",
    "INFINITELY_REPEAT",
    "MinibatchData",
    "MinibatchSource",
    "MinibatchSourceConfig",
    "Record",
    "StreamDef",
    "StreamDefs",
    "StreamInformation",
    "Value",
    "sequence_to_cntk_text_format",
    "to_dictionary",
]
