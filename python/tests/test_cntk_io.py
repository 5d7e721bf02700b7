"""exfeed.cntk.io: CNTK 2.7's reader API, tested point by point against the real extension and
real files (temporary CTF files written here, samples/ and the CNTK conformance corpus)."""

import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest
from conftest import IN_CI, REPO, child_env, require

import exfeed

from exfeed.cntk.cntk_py import DictionaryValue, are_equal, to_dictionary
from exfeed.cntk.io import (
    DEFAULT_RANDOMIZATION_WINDOW_IN_CHUNKS,
    FULL_DATA_SWEEP,
    INFINITELY_REPEAT,
    CBFDeserializer,
    CTFDeserializer,
    MinibatchData,
    MinibatchSource,
    MinibatchSourceConfig,
    StreamDef,
    StreamDefs,
    StreamInformation,
    sequence_to_cntk_text_format,
)
from exfeed.cntk.logging import TraceLevel

# Two sequences (ids 0 and 1) of 4 and 3 samples; S1 is on 3 and 2 of their lines.
JAGGED = """0 |S0 0 |S1 0
0 |S0 1 |S1 1
0 |S0 2
0 |S0 3 |S1 3
1 |S0 4
1 |S0 5 |S1 1
1 |S0 6 |S1 2
"""

# A sparse input on every line and a dense label on each sequence's first line.
SPARSE_WITH_LABELS = """0\t|x 560:1\t|y 1 0 0 0 0
0\t|x 0:1
0\t|x 0:1
1\t|x 560:1\t|y 0 1 0 0 0
1\t|x 0:1
1\t|x 0:1
1\t|x 424:1
"""


def write(tmp_path, text, name="data.ctf"):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def one_per_line(tmp_path, n, name="lines.ctf"):
    """n sequences of one sample each, |v k for k = 0..n-1 (keys = line numbers)."""
    return write(tmp_path, "".join("|v %d\n" % k for k in range(n)), name)


def values_source(path, chunk_size=None, **kwargs):
    d = CTFDeserializer(path, StreamDefs(v=StreamDef(field="v", shape=1)))
    if chunk_size:
        d["chunkSizeInBytes"] = chunk_size
    return MinibatchSource(d, **kwargs)


def sparse_source(tmp_path, labels_define_size=False, **kwargs):
    """SPARSE_WITH_LABELS: features (sparse x, dim 1000) and labels (dense y, dim 5)."""
    defs = StreamDefs(
        features=StreamDef(field="x", shape=1000, is_sparse=True),
        labels=StreamDef(field="y", shape=5, defines_mb_size=labels_define_size),
    )
    return MinibatchSource(CTFDeserializer(write(tmp_path, SPARSE_WITH_LABELS), defs), **kwargs)


def jagged_source(path, **kwargs):
    """features (S0) and labels (S1) of a JAGGED-like file."""
    defs = StreamDefs(features=StreamDef(field="S0", shape=1), labels=StreamDef(field="S1", shape=1))
    return MinibatchSource(CTFDeserializer(path, defs), **kwargs)


def minibatches(source, size, count=None, **partition):
    """Up to `count` minibatches of `size` (all, if None), each its v stream's data."""
    while count is None or count > 0:
        mb = source.next_minibatch(size, **partition)
        if not mb:
            return
        yield mb[source.streams.v]
        count = None if count is None else count - 1


def read_values(source, size, count=None, **partition):
    """The v values of up to `count` minibatches of `size` (all, if None), one list each."""
    return [v.asarray().ravel().tolist() for v in minibatches(source, size, count, **partition)]


def conformance():
    root = pathlib.Path(os.environ.get("EXFEED_CONFORMANCE", REPO.parent / "shared" / "conformance"))
    if not root.is_dir():
        if IN_CI:
            pytest.fail("conformance corpus not found at %s (required in CI)" % root)
        pytest.skip("conformance corpus not found at %s" % root)
    return root / "cntk"


# --- constants ---------------------------------------------------------------------------------


def test_constants_have_cntk_values():
    assert INFINITELY_REPEAT == 2**64 - 1
    assert FULL_DATA_SWEEP == 2**64 - 2
    assert DEFAULT_RANDOMIZATION_WINDOW_IN_CHUNKS == 128


# --- minibatches: sizes, shapes, masks, arrays --------------------------------------------------


def test_sparse_and_dense_streams_of_a_text_file(tmp_path):
    source = sparse_source(tmp_path, randomize=False)
    features_si, labels_si = source.stream_info("features"), source.stream_info("labels")
    mb = source.next_minibatch(7)
    features, labels = mb[features_si], mb[labels_si]
    assert isinstance(features, MinibatchData)
    assert (features.shape, features.num_sequences, features.num_samples) == ((2, 4, 1000), 2, 7)
    assert features.is_sparse and features.end_of_sweep and len(features) == 2
    assert (labels.shape, labels.num_sequences, labels.num_samples) == ((2, 1, 5), 2, 2)
    assert not labels.is_sparse and labels.end_of_sweep
    dense = labels.asarray()
    assert dense.dtype == np.float32
    np.testing.assert_array_equal(dense, [[[1, 0, 0, 0, 0]], [[0, 1, 0, 0, 0]]])

    # The next sweep starts; its first sequence is taken whole although larger than 1.
    mb = source.next_minibatch(1)
    assert mb[features_si].num_samples == 3 and mb[labels_si].num_samples == 1
    assert not mb[features_si].end_of_sweep


def test_sparse_data_without_scipy_says_what_to_install(tmp_path):
    # A fresh interpreter in which `import scipy` fails, as where SciPy is not installed.
    path = write(tmp_path, SPARSE_WITH_LABELS)
    script = f"""
import sys

class NoScipy:
    def find_spec(self, name, path=None, target=None):
        if name == "scipy" or name.startswith("scipy."):
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)

sys.meta_path.insert(0, NoScipy())
from exfeed.cntk.io import MinibatchSource, CTFDeserializer, StreamDef, StreamDefs
source = MinibatchSource(CTFDeserializer({str(path)!r}, StreamDefs(x=StreamDef(field="x", shape=1000, is_sparse=True))),
                         randomize=False)
data = source.next_minibatch(7)[source.streams.x]
try:
    data.asarray()
except ModuleNotFoundError as e:
    print(e)
"""
    env = child_env()
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (
        'stream "x" is sparse: as a scipy.sparse matrix (Stream.to_scipy(), as_sequences(), exfeed.cntk.io) '
        "it needs SciPy, which is not installed: pip install scipy (or pip install 'exfeed[scipy]')"
    )


def test_sparse_data_as_csr_per_sequence(tmp_path):
    scipy_sparse = require("scipy.sparse")
    path = write(tmp_path, SPARSE_WITH_LABELS)
    source = MinibatchSource(
        CTFDeserializer(path, StreamDefs(x=StreamDef(field="x", shape=1000, is_sparse=True))),
        randomize=False,
    )
    data = source.next_minibatch(7)[source.streams.x]
    for converted in (data.asarray(), data.as_sequences()):
        assert [m.shape for m in converted] == [(3, 1000), (4, 1000)]
        assert all(isinstance(m, scipy_sparse.csr_matrix) for m in converted)
        assert converted[0].dtype == np.float32
        assert [m.indices.tolist() for m in converted] == [[560, 0, 0], [560, 0, 0, 424]]
        np.testing.assert_array_equal(converted[1].toarray()[3, 424], 1.0)


def test_jagged_sequences_mask_and_as_sequences(tmp_path):
    source = jagged_source(write(tmp_path, JAGGED), randomization_window_in_chunks=0, max_sweeps=1)
    mb = source.next_minibatch(1000)
    features, labels = mb[source["features"]], mb[source["labels"]]
    assert features.end_of_sweep and labels.end_of_sweep
    assert [s.ravel().tolist() for s in features.as_sequences()] == [[0, 1, 2, 3], [4, 5, 6]]
    assert [s.ravel().tolist() for s in labels.as_sequences()] == [[0, 1, 3], [1, 2]]
    np.testing.assert_array_equal(features.mask, [[2, 1, 1, 1], [2, 1, 1, 0]])
    np.testing.assert_array_equal(features.data.mask, features.mask)
    np.testing.assert_array_equal(labels.mask, [[2, 1, 1], [2, 1, 0]])
    assert features.data.masked_count() == 1 and labels.data.masked_count() == 1
    padded = features.asarray()
    assert padded.shape == features.shape == (2, 4, 1)
    np.testing.assert_array_equal(padded[:, :, 0], [[0, 1, 2, 3], [4, 5, 6, 0]])
    assert not source.next_minibatch(1000)


# --- limits: samples, sweeps, one sweep ---------------------------------------------------------


def test_max_samples_stops_inside_a_sweep(tmp_path):
    source = values_source(one_per_line(tmp_path, 4), max_samples=1)
    mb = source.next_minibatch(10, {"v": source["v"]})
    assert mb["v"].num_samples == 1 and not mb["v"].end_of_sweep
    assert source.next_minibatch(10, {"v": source["v"]}) == {}


def test_max_sweeps_counts_whole_sweeps(tmp_path):
    source = values_source(one_per_line(tmp_path, 4), max_sweeps=3)
    sizes = [(mb["v"].num_samples, mb["v"].end_of_sweep) for mb in iter_mapped(source, 5)]
    assert sizes == [(5, True), (5, True), (2, True)]


def iter_mapped(source, size):
    while True:
        mb = source.next_minibatch(size, {"v": source.streams.v})
        if not mb:
            return
        yield dict(mb)  # the mapped dict is emptied by the next call, as in CNTK


def test_max_samples_over_several_sweeps(tmp_path):
    source = values_source(one_per_line(tmp_path, 4), max_samples=11)
    sizes = [(mb["v"].num_samples, mb["v"].end_of_sweep) for mb in iter_mapped(source, 5)]
    assert sizes == [(5, True), (5, True), (1, False)]


def test_every_way_of_asking_for_one_sweep(tmp_path):
    path = one_per_line(tmp_path, 4)
    for kwargs in (
        {"max_sweeps": 1},
        {"max_samples": FULL_DATA_SWEEP},
        {"max_sweeps": 1, "max_samples": INFINITELY_REPEAT},
        {"max_samples": FULL_DATA_SWEEP, "max_sweeps": INFINITELY_REPEAT},
    ):
        source = values_source(path, **kwargs)
        first = source.next_minibatch(100)
        assert first[source.streams.v].num_samples == 4 and first[source.streams.v].end_of_sweep
        assert source.next_minibatch(100) == {}
        assert source.next_minibatch(100) == {}  # stays exhausted


def test_infinite_repeat_spans_sweeps_in_one_minibatch(tmp_path):
    path = write(tmp_path, JAGGED.replace("1 |", "0 |"))  # one sequence of 7 samples
    source = jagged_source(path, randomization_window_in_chunks=0)
    mb = source.next_minibatch(1000)
    features, labels = mb[source.streams.features], mb[source.streams.labels]
    assert features.end_of_sweep and labels.end_of_sweep
    assert features.num_samples == 1000 - 1000 % 7 and labels.num_samples == 5 * (1000 // 7)
    assert features.num_sequences == labels.num_sequences == 1000 // 7


# --- mutually exclusive arguments -----------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_samples": 10, "max_sweeps": 2},
        {"max_samples": FULL_DATA_SWEEP, "max_sweeps": 1},
        {"randomization_window_in_chunks": 4, "randomization_window_in_samples": 100},
        {"frame_mode": True, "truncation_length": 10},
    ],
)
def test_mutually_exclusive_arguments_raise_value_error(tmp_path, kwargs):
    path = one_per_line(tmp_path, 4)
    with pytest.raises(ValueError, match="mutually exclusive"):
        values_source(path, **kwargs)
    with pytest.raises(RuntimeError):  # CNTK raised it from C++ as a logic error
        values_source(path, **kwargs)


def test_randomize_false_clears_both_windows(tmp_path):
    path = one_per_line(tmp_path, 30)
    source = values_source(
        path, randomize=False, randomization_window_in_chunks=4, randomization_window_in_samples=9
    )
    assert read_values(source, 30, 2) == [list(range(30))] * 2


def test_truncation_is_refused_as_unsupported(tmp_path):
    with pytest.raises(NotImplementedError, match="truncat"):
        values_source(one_per_line(tmp_path, 4), truncation_length=5)


def test_minibatch_size_and_partitions_are_checked(tmp_path):
    source = values_source(one_per_line(tmp_path, 4))
    for bad in ({"minibatch_size_in_samples": 0}, {"minibatch_size_in_samples": 2.5}):
        with pytest.raises(ValueError, match="minibatch_size_in_samples"):
            source.next_minibatch(**bad)
    with pytest.raises(ValueError, match="partition_index"):
        source.next_minibatch(4, num_data_partitions=2, partition_index=2)


# --- randomization --------------------------------------------------------------------------------


def test_seed_grows_by_one_each_sweep(tmp_path):
    path = one_per_line(tmp_path, 40)
    sweeps = read_values(values_source(path), 40, 4)  # seed 0, sweeps 0..3
    assert all(sorted(s) == list(range(40)) for s in sweeps)
    assert sweeps[0] != list(range(40)) and len({tuple(s) for s in sweeps}) == 4
    for k in range(4):  # sweep k of seed 0 is sweep 0 of seed k
        assert read_values(values_source(path, randomization_seed=k), 40, 1) == [sweeps[k]]
    assert read_values(values_source(path, randomization_seed=123), 40, 1) != [sweeps[0]]


def test_default_seed_and_window(tmp_path):
    path = one_per_line(tmp_path, 40)
    default = read_values(values_source(path), 40, 2)
    explicit = read_values(
        values_source(
            path,
            randomization_seed=0,
            randomization_window_in_chunks=DEFAULT_RANDOMIZATION_WINDOW_IN_CHUNKS,
        ),
        40,
        2,
    )
    assert default == explicit
    # Accepted for CNTK's signature; they change nothing here.
    quiet = values_source(path, trace_level=TraceLevel.Error, multithreaded_deserializer=True)
    assert read_values(quiet, 40, 2) == default


def test_window_in_samples_randomizes(tmp_path):
    path = one_per_line(tmp_path, 40)
    sweeps = read_values(
        values_source(path, randomization_window_in_chunks=0, randomization_window_in_samples=40),
        40,
        2,
    )
    assert all(sorted(s) == list(range(40)) for s in sweeps) and sweeps[0] != list(range(40))


# --- definesMBSize, composite sources, frame mode ----------------------------------------------


def test_defines_mb_size_counts_the_label_stream(tmp_path):
    source = sparse_source(tmp_path, labels_define_size=True, randomize=False)
    assert source.streams.labels.defines_mb_size and not source.streams.features.defines_mb_size
    mb = source.next_minibatch(2)
    assert mb[source.streams.labels].num_samples == 2
    assert mb[source.streams.features].num_samples == 7
    mb = source.next_minibatch(3)  # sequences 0, 1, 0 of the next sweeps
    assert mb[source.streams.labels].num_samples == 3
    assert mb[source.streams.features].num_samples == 10


def test_two_deserializers_are_joined_by_sequence_key(tmp_path):
    features = write(tmp_path, "".join(l.split("\t|y")[0] + "\n" for l in SPARSE_WITH_LABELS.splitlines()), "x.ctf")
    labels = write(tmp_path, "0\t|y 1 0 0 0 0\n1\t|y 0 1 0 0 0\n", "y.ctf")
    source = MinibatchSource(
        [
            CTFDeserializer(features, StreamDefs(features=StreamDef(field="x", shape=1000, is_sparse=True))),
            CTFDeserializer(labels, StreamDefs(labels=StreamDef(field="y", shape=5, defines_mb_size=True))),
        ],
        randomize=False,
    )
    assert sorted(s.name for s in source.stream_infos()) == ["features", "labels"]
    mb = source.next_minibatch(2)
    assert mb[source.streams.features].num_samples == 7 and mb[source.streams.labels].num_samples == 2
    np.testing.assert_array_equal(
        mb[source.streams.labels].asarray(), [[[1, 0, 0, 0, 0]], [[0, 1, 0, 0, 0]]]
    )


def test_frame_mode_delivers_samples(tmp_path):
    source = values_source(one_per_line(tmp_path, 10), frame_mode=True, max_sweeps=1)
    mb = source.next_minibatch(5)[source.streams.v]
    assert (mb.num_sequences, mb.num_samples, mb.shape) == (5, 5, (5, 1, 1))
    rest = source.next_minibatch(100)[source.streams.v]
    assert sorted(mb.asarray().ravel().tolist() + rest.asarray().ravel().tolist()) == list(range(10))


# --- stream information and input maps ------------------------------------------------------------


def test_stream_information(tmp_path):
    source = sparse_source(tmp_path)
    infos = {s.name: s for s in source.stream_infos()}
    assert set(infos) == {"features", "labels"}
    features = infos["features"]
    assert isinstance(features, StreamInformation)
    assert (features.m_name, features.is_sparse, features.sample_shape) == ("features", True, (1000,))
    assert (features.storage_format, features.dtype) == ("sparse", np.float32)
    assert source.streams.features == source.stream_info("features") == source["features"] == features
    assert source.streams["labels"].storage_format == "dense"
    with pytest.raises(RuntimeError, match="nosuch"):
        source.stream_info("nosuch")
    with pytest.raises(AttributeError):
        source.streams.nosuch


def test_input_map_keys_and_its_dict_emptied_by_the_next_call(tmp_path):
    source = values_source(one_per_line(tmp_path, 4), randomize=False)
    first = source.next_minibatch(2, input_map={"a": source.streams.v, "b": "v"})
    assert set(first) == {"a", "b"} and first["a"].asarray().ravel().tolist() == [0, 1]
    second = source.next_minibatch(2, {"a": source.streams.v}, device="cpu")  # device: unused
    assert first == {} and second["a"].asarray().ravel().tolist() == [2, 3]
    unmapped = source.next_minibatch(2)
    assert list(unmapped) == [source.streams.v] and second == {}


# --- partitions -----------------------------------------------------------------------------------


def test_partitions_share_the_global_size_and_split_each_sweep(tmp_path):
    path = one_per_line(tmp_path, 30)
    seen = []
    for index in range(3):
        # Small chunks (two lines each): partitions take whole chunks.
        source = values_source(path, chunk_size=12, max_sweeps=1, randomize=False)
        values = read_values(source, 7, num_data_partitions=3, partition_index=index)
        assert all(len(v) <= (3 if index == 0 else 2) for v in values)  # 7 = 3 + 2 + 2
        seen.extend(x for v in values for x in v)
    assert sorted(seen) == list(range(30))


def test_max_samples_is_shared_by_the_partitions(tmp_path):
    path = one_per_line(tmp_path, 40)
    counts = [
        sum(map(len, read_values(values_source(path, chunk_size=12, max_samples=5), 2, **p)))
        for p in ({"num_data_partitions": 2, "partition_index": i} for i in range(2))
    ]
    assert counts == [3, 2]
    # A partition whose share is 0 delivers nothing.
    single = values_source(path, chunk_size=12, max_samples=1)
    assert read_values(single, 4, num_data_partitions=2, partition_index=1) == []


def test_partitioning_cannot_change_after_the_first_minibatch_in_exfeed_s_order(tmp_path):
    source = values_source(one_per_line(tmp_path, 8), chunk_size=12, randomizer="exfeed")
    assert len(read_values(source, 2, 2, num_data_partitions=2, partition_index=1)) == 2
    with pytest.raises(ValueError, match="partition"):
        source.next_minibatch(2)


# --- checkpoints ----------------------------------------------------------------------------------


def test_checkpoint_restores_the_exact_position(tmp_path):
    path = one_per_line(tmp_path, 50)
    source = values_source(path, max_sweeps=3)
    read_values(source, 7, 4)
    state = source.get_checkpoint_state()
    assert state["minibatchSourcePosition"] == 28
    state = json.loads(json.dumps(state))  # checkpoints are plain JSON
    ahead = read_values(source, 7, 5)
    source.restore_from_checkpoint(state)
    assert read_values(source, 7, 5) == ahead

    fresh = values_source(path, max_sweeps=3)
    fresh.current_position = state
    assert fresh.current_position["minibatchSourcePosition"] == 28
    rest = read_values(fresh, 7)
    assert rest[:5] == ahead
    assert sum(len(v) for v in rest) == 3 * 50 - 28


def test_checkpoint_of_a_partition(tmp_path):
    path = one_per_line(tmp_path, 40)
    partition = {"num_data_partitions": 2, "partition_index": 1}
    source = values_source(path, chunk_size=12, max_sweeps=2)
    read_values(source, 6, 3, **partition)
    state = source.get_checkpoint_state()
    expected = read_values(source, 6, **partition)
    fresh = values_source(path, chunk_size=12, max_sweeps=2)
    fresh.restore_from_checkpoint(state)
    assert read_values(fresh, 6, **partition) == expected and expected


def test_a_checkpoint_taken_before_reading_leaves_the_partitioning_open(tmp_path):
    path = one_per_line(tmp_path, 20)
    options = {"chunk_size": 12, "randomize": False, "randomizer": "exfeed"}
    state = values_source(path, **options).get_checkpoint_state()
    source = values_source(path, **options)
    source.restore_from_checkpoint(state)
    # Global size 4: this partition takes 2, from its chunks (lines 2-3, 6-7, ...).
    assert read_values(source, 4, 2, num_data_partitions=2, partition_index=1) == [[2, 3], [6, 7]]


def test_a_checkpoint_from_elsewhere_is_refused_in_exfeed_s_order(tmp_path):
    path = one_per_line(tmp_path, 40)
    source = values_source(path, randomization_seed=3, randomizer="exfeed")
    with pytest.raises(ValueError, match="randomizer='exfeed'"):
        source.restore_from_checkpoint({"minibatchSourcePosition": 3})
    other = values_source(path, randomizer="exfeed")
    read_values(other, 5, 1)
    with pytest.raises(ValueError, match="randomizationSeed"):
        source.restore_from_checkpoint(other.get_checkpoint_state())
    # The refused restores changed nothing.
    assert read_values(source, 40, 1) == read_values(
        values_source(path, randomization_seed=3, randomizer="exfeed"), 40, 1
    )
    # Across the two orders, a checkpoint is refused both ways.
    with pytest.raises(ValueError, match="randomizer='exfeed'"):
        values_source(path).restore_from_checkpoint(other.get_checkpoint_state())
    with pytest.raises(ValueError, match="minibatchSourcePosition"):
        values_source(path).restore_from_checkpoint({"position": 3})


# --- checkpoints in CNTK's order ------------------------------------------------------------------


def numbered_sequences(tmp_path, n, name="numbered.ctf"):
    """n sequences (ids 0..n-1) of 1 to 4 samples, every sample's |v value its sequence's id."""
    lines = ("%d |v %d\n" % (k, k) for k in range(n) for _ in range(1 + (k * 7) % 4))
    return write(tmp_path, "".join(lines), name)


def sequence_values(source, size, count=None, **partition):
    """Each minibatch's sequences, as the v value of each (numbered_sequences)."""
    return [
        [int(s[0, 0]) for s in v.as_sequences()]
        for v in minibatches(source, size, count, **partition)
    ]


def samples_of(sequences):
    """The samples of numbered_sequences' sequences."""
    return sum(1 + (k * 7) % 4 for k in sequences)


def test_a_cntk_order_checkpoint_is_cntk_s_dictionary_and_restores_the_same_minibatches(tmp_path):
    path = numbered_sequences(tmp_path, 120)
    options = {"chunk_size": 64, "randomization_window_in_chunks": 3, "max_sweeps": 3}
    source = values_source(path, **options)
    first = sequence_values(source, 9, 20)
    state = source.get_checkpoint_state()
    # Only CNTK's key: the global sample position, here all that was read (one partition).
    assert state == {"minibatchSourcePosition": samples_of(sum(first, []))}
    ahead = sequence_values(source, 9, 25)
    fresh = values_source(path, **options)
    fresh.restore_from_checkpoint(json.loads(json.dumps(state)))
    assert sequence_values(fresh, 9, 25) == ahead
    # current_position is the same dictionary.
    position = state["minibatchSourcePosition"] + samples_of(sum(ahead, []))
    assert fresh.current_position == {"minibatchSourcePosition": position}


@pytest.mark.parametrize("randomize", [True, False])
def test_a_hand_made_cntk_position_goes_on_at_the_next_sequence_start(tmp_path, randomize):
    # CNTK's SetState: sweep = position // sweep samples, then the first sequence of that
    # sweep's order starting at or after the position. Checked against one read from the start
    # with minibatches of one sequence each (a minibatch of 1 sample holds one sequence).
    path = numbered_sequences(tmp_path, 60)
    options = {"chunk_size": 40, "randomization_window_in_chunks": 4, "randomize": randomize}
    timeline = []  # (start position, sequence) over three sweeps
    start = 0
    for [seq] in sequence_values(values_source(path, max_sweeps=3, **options), 1):
        timeline.append((start, seq))
        start += samples_of([seq])
    sweep = start // 3
    assert sweep == samples_of(range(60))
    for position in (0, 1, 7, 100, sweep - 1, sweep, sweep + 5, 2 * sweep + 33, 3 * sweep - 1):
        source = values_source(path, max_sweeps=3, **options)
        source.restore_from_checkpoint({"minibatchSourcePosition": position})
        expected = [[seq] for begin, seq in timeline if begin >= position]
        assert sequence_values(source, 1) == expected, position
        # The position moves on to that sequence's start (the end once read), as in CNTK.
        assert source.get_checkpoint_state() == {"minibatchSourcePosition": 3 * sweep}


@pytest.mark.parametrize("randomize", [True, False])
def test_a_partition_restores_from_the_global_position(tmp_path, randomize):
    path = numbered_sequences(tmp_path, 90)
    options = {"chunk_size": 48, "max_sweeps": 2, "randomize": randomize}
    partition = {"num_data_partitions": 3, "partition_index": 1}
    source = values_source(path, **options)
    sequence_values(source, 12, 6, **partition)
    state = source.get_checkpoint_state()
    expected = sequence_values(source, 12, **partition)
    fresh = values_source(path, **options)
    fresh.restore_from_checkpoint(state)
    assert sequence_values(fresh, 12, **partition) == expected and expected
    # Every partition restored from the same global position gets its own part: together,
    # the rest of the epoch's sequences, each once.
    rest = []
    for index in range(3):
        other = values_source(path, **options)
        other.restore_from_checkpoint(state)
        rest += sum(sequence_values(other, 12, num_data_partitions=3, partition_index=index), [])
    whole = sum(sequence_values(values_source(path, **options), 1), [])
    assert sorted(rest) == sorted(whole[len(whole) - len(rest):])


def test_partitioning_may_change_between_minibatches_in_cntk_s_order(tmp_path):
    # CNTK's SetConfiguration keeps the global position: a source read by one partition, then
    # by another, goes on where the first stopped, as a source restored there would.
    path = one_per_line(tmp_path, 40)
    source = values_source(path, chunk_size=12, max_sweeps=1)
    read_values(source, 4, 3, num_data_partitions=2, partition_index=1)
    state = source.get_checkpoint_state()
    restored = values_source(path, chunk_size=12, max_sweeps=1)
    restored.restore_from_checkpoint(state)
    assert read_values(source, 4) == read_values(restored, 4)


def test_a_cntk_order_source_without_randomization_partitions_by_sequence(tmp_path):
    # CNTK's NoRandomizer: partition i of n takes the sequences whose running count modulo n
    # is i; a partition's size is its share of the global size.
    path = one_per_line(tmp_path, 20)
    state = values_source(path, chunk_size=12, randomize=False).get_checkpoint_state()
    assert state == {"minibatchSourcePosition": 0}
    source = values_source(path, chunk_size=12, randomize=False)
    source.restore_from_checkpoint(state)
    assert read_values(source, 4, 2, num_data_partitions=2, partition_index=1) == [[1, 3], [5, 7]]


# --- deserializers and their configuration ------------------------------------------------------


def test_ctf_stream_needs_a_field_and_a_shape(tmp_path):
    path = one_per_line(tmp_path, 2)
    with pytest.raises(ValueError, match="stream name for key v must be specified"):
        CTFDeserializer(path, StreamDefs(v=StreamDef(shape=1)))
    with pytest.raises(ValueError, match="shape"):
        CTFDeserializer(path, StreamDefs(v=StreamDef(field="v")))


def test_ctf_deserializer_is_a_dict_taking_ctf_parameters(tmp_path):
    path = one_per_line(tmp_path, 4)
    d = CTFDeserializer(path, StreamDefs(v=StreamDef(field="v", shape=1)))
    assert d["type"] == "CNTKTextFormatDeserializer" and d["file"] == path
    assert d["input"]["v"] == {"dim": 1, "format": "dense", "definesMBSize": False, "alias": "v"}
    d["cacheIndex"] = True
    MinibatchSource(d, randomize=False).next_minibatch(1)
    assert os.path.exists(path + ".exfeed-index")
    d["cacheIndex"] = DictionaryValue(False)  # as CNTK code wraps it
    d["skipSequenceIds"] = True
    assert read_values(MinibatchSource(d, randomize=False, max_sweeps=1), 4) == [[0, 1, 2, 3]]


def test_max_errors_tolerates_bad_samples(tmp_path):
    path = write(tmp_path, "|v 1\n|v x\n|v 3\n")
    d = CTFDeserializer(path, StreamDefs(v=StreamDef(field="v", shape=1)))
    with pytest.raises(Exception, match="line 2|:2:"):
        values = MinibatchSource(d, randomize=False, max_sweeps=1)
        values.next_minibatch(10)
    for source in (
        MinibatchSource(d, randomize=False, max_sweeps=1, max_errors=1),
        MinibatchSource(dict(d, maxErrors=1), randomize=False, max_sweeps=1),
    ):
        assert read_values(source, 10) == [[1, 3]]


def test_stream_def_record():
    s = StreamDef(field="x", shape=3)
    assert (s.stream_alias, s.dim, s.is_sparse, s.defines_mb_size, s.max_sequence_length) == (
        "x",
        3,
        False,
        False,
        65535,
    )
    assert "transforms" not in s and StreamDef(mlf="a.mlf").is_sparse
    with pytest.raises(AttributeError):
        s.dim = 4
    defs = StreamDefs(a=s)
    assert defs.a is defs["a"] is s
    assert s.updated_with(dim=5).dim == 5 and s.dim == 3


def assert_same_minibatches(source_a, mb_a, source_b, mb_b):
    """Two sources have the same streams, and their minibatches the same counts, shapes, masks
    and data in each (what CNTK's io_tests.py compares between CTF and CBF sources)."""
    names = sorted(s.m_name for s in source_a.stream_infos())
    assert names == sorted(s.m_name for s in source_b.stream_infos())
    for name in names:
        x, y = mb_a[source_a[name]], mb_b[source_b[name]]
        assert (x.num_samples, x.num_sequences, x.shape, x.end_of_sweep, x.is_sparse) == (
            y.num_samples,
            y.num_sequences,
            y.shape,
            y.end_of_sweep,
            y.is_sparse,
        )
        assert x.data.masked_count() == y.data.masked_count()
        np.testing.assert_array_equal(x.mask, y.mask)
        assert are_equal(x.data.data, y.data.data)  # CNTK's comparison
        for p, q in zip(x.as_sequences(), y.as_sequences()):
            if x.is_sparse:
                assert (p != q).nnz == 0
            else:
                np.testing.assert_array_equal(p, q)


def test_are_equal_compares_elements_and_shapes(tmp_path):
    def first(text, sparse):
        path = write(tmp_path, text, "v%d.ctf" % len(list(tmp_path.iterdir())))
        d = CTFDeserializer(path, StreamDefs(v=StreamDef(field="v", shape=3, is_sparse=sparse)))
        source = MinibatchSource(d, randomize=False)
        return source.next_minibatch(10)[source.streams.v].data.data

    for sparse, (a, b) in [(False, ("1 0 2", "1 0 3")), (True, ("0:1 2:2", "0:1 2:3"))]:
        x, y = first("0 |v %s\n1 |v %s\n" % (a, a), sparse), first("0 |v %s\n1 |v %s\n" % (a, b), sparse)
        assert are_equal(x, x) and not are_equal(x, y)
        # The same elements in another shape (one sequence of two samples) differ.
        assert not are_equal(x, first("0 |v %s\n0 |v %s\n" % (a, a), sparse))


def test_cbf_and_ctf_deliver_the_same_minibatches():
    root = conformance()
    for ctf_name, cbf_name, defs in [
        (
            "Simple_dense.txt",
            "Simple_dense.bin",
            StreamDefs(features=StreamDef(field="F", shape=2), labels=StreamDef(field="L", shape=2)),
        ),
        (
            "50x20_jagged_sequences_sparse.txt",
            "50x20_jagged_sequences_sparse.bin",
            StreamDefs(features=StreamDef(field="F0", shape=100, is_sparse=True)),
        ),
    ]:
        for randomize in (False, True):
            ctf = MinibatchSource(CTFDeserializer(str(root / "ctf" / ctf_name), defs), randomize=randomize)
            cbf = MinibatchSource(CBFDeserializer(str(root / "cbf" / cbf_name)), randomize=randomize)
            for size in (1, 10, 100, 2, 2000):
                assert_same_minibatches(ctf, ctf.next_minibatch(size), cbf, cbf.next_minibatch(size))


def test_a_double_cbf_file_is_delivered_as_float32():
    root = conformance()
    defs = StreamDefs(features=StreamDef(field="F0", shape=100, is_sparse=True))
    ctf = MinibatchSource(CTFDeserializer(str(root / "ctf" / "10x10_sparse.txt"), defs), max_sweeps=1)
    cbf = MinibatchSource(CBFDeserializer(str(root / "cbf" / "10x10_sparse.bin")), max_sweeps=1)
    a, b = ctf.next_minibatch(1000)[ctf.streams.features], cbf.next_minibatch(1000)[cbf.streams.features]
    assert (a.num_sequences, a.num_samples) == (b.num_sequences, b.num_samples) == (10, 100)
    for x, y in zip(a.as_sequences(), b.as_sequences()):
        assert x.dtype == y.dtype == np.float32
        np.testing.assert_allclose(x.toarray(), y.toarray(), rtol=1e-6)


def test_cbf_streams_only_rename():
    path = str(conformance() / "cbf" / "Simple_dense.bin")
    plain = MinibatchSource(CBFDeserializer(path), randomize=False)
    assert [(s.name, s.sample_shape) for s in plain.stream_infos()] == [
        ("features", (2,)),
        ("labels", (2,)),
    ]
    # A shape given here is not used (as in CNTK); the unnamed stream keeps its file name.
    renamed = MinibatchSource(
        CBFDeserializer(path, StreamDefs(x=StreamDef(field="features", shape=99))), randomize=False
    )
    assert sorted(s.name for s in renamed.stream_infos()) == ["labels", "x"]
    a, b = plain.next_minibatch(5), renamed.next_minibatch(5)
    np.testing.assert_array_equal(a[plain.streams.features].asarray(), b[renamed.streams.x].asarray())
    assert b[renamed.streams.x].shape == (5, 1, 2)


# The data of CNTK 2.7's io_tests.py test_compare_cbf_and_ctf, with its stream definitions:
# ids that repeat on a sequence's lines, jagged inputs, a file of one sequence, sparse and dense.
COMPARED = [
    (JAGGED, {"features": ("S0", 1, False), "labels": ("S1", 1, False)}),
    (JAGGED.replace("1 |", "0 |"), {"features": ("S0", 1, False), "labels": ("S1", 1, False)}),
    (SPARSE_WITH_LABELS, {"features": ("x", 1000, True), "labels": ("y", 5, False)}),
    ("".join(l.split("\t|y")[0] + "\n" for l in SPARSE_WITH_LABELS.splitlines()), {"features": ("x", 1000, True)}),
    ("0\t|y 1 0 0 0 0\n1\t|y 0 1 0 0 0\n", {"labels": ("y", 5, False)}),
]


def ctf2bin(ctf, streams):
    """The CBF file CNTK's ctf2bin.py makes of ``ctf`` with one header line ``NAME ALIAS FORMAT
    DIM`` per stream: its streams are stored under NAME."""
    cbf = ctf + ".bin"
    inputs = {name: ("sparse" if sparse else "dense", dim, field) for name, (field, dim, sparse) in streams.items()}
    exfeed.convert(ctf, cbf, inputs=inputs)
    return cbf


@pytest.mark.parametrize("data,streams", COMPARED)
def test_compare_cbf_and_ctf_as_cntk_io_tests_does(tmp_path, data, streams):
    """CNTK's test: the CBF file is read with the CTF file's StreamDefs, whose fields (S0) name
    no stream of it (ctf2bin stored features): CNTK ignores them, so both sources deliver the
    same streams and minibatches, in order and randomized."""
    ctf = write(tmp_path, data)
    cbf = ctf2bin(ctf, streams)
    defs = StreamDefs(
        **{name: StreamDef(field=field, shape=dim, is_sparse=sparse) for name, (field, dim, sparse) in streams.items()}
    )
    for randomize in (False, True):
        for num_mbs, mb_size in zip([1, 1, 3, 10], [1, 10, 100, 2]):
            a = MinibatchSource(CTFDeserializer(ctf, defs), randomize=randomize)
            b = MinibatchSource(CBFDeserializer(cbf, defs), randomize=randomize)
            assert sorted(s.m_name for s in b.stream_infos()) == sorted(streams)
            for _ in range(num_mbs):
                assert_same_minibatches(a, a.next_minibatch(mb_size), b, b.next_minibatch(mb_size))


def test_an_alias_naming_no_cbf_stream_is_ignored_with_a_warning(tmp_path):
    ctf = write(tmp_path, JAGGED)
    cbf = ctf2bin(ctf, {"features": ("S0", 1, False), "labels": ("S1", 1, False)})
    config = tmp_path / "r.cntk"
    config.write_text(
        'reader = [ deserializers = ([ type = "CNTKBinaryFormatDeserializer"; file = "%s"\n'
        "  input = [ x = [ alias = S0 ]; y = [ alias = labels ] ] ]) ]\n" % cbf
    )
    with exfeed.Reader(cbf, config=config, minibatch_size=100, max_sweeps=1) as reader:
        assert [s.name for s in reader.streams] == ["features", "y"]
        assert reader.diagnostics == [
            "warning: %s: input 'x': the file has no stream 'S0' (it has features, labels); "
            "ignored, as CNTK ignores it" % cbf
        ]


def test_repeated_sequence_ids_are_sequences_of_their_own(tmp_path):
    """Files joined with cat, each starting at id 0: a changed id starts a sequence (CNTK)."""
    part = "0 |S0 1 |S1 1\n0 |S0 2\n1 |S0 3 |S1 2\n"
    ctf = write(tmp_path, part + part.replace("|S0 ", "|S0 1"))
    defs = StreamDefs(features=StreamDef(field="S0", shape=1), labels=StreamDef(field="S1", shape=1))
    source = MinibatchSource(CTFDeserializer(ctf, defs), randomize=False, max_sweeps=1)
    mb = source.next_minibatch(100)
    features = mb[source.streams.features]
    assert (features.num_sequences, features.num_samples) == (4, 6)
    assert [s.ravel().tolist() for s in features.as_sequences()] == [[1, 2], [3], [11, 12], [13]]
    assert mb[source.streams.labels].num_samples == 4
    # Every index mode, and exfeed's own readers and dumps (keys repeat there).
    for index in ("full", "none"):
        with exfeed.Reader(ctf, inputs={"S0": ("dense", 1)}, index=index, randomize=False, minibatch_size=100) as r:
            assert r.next_minibatch().keys.tolist() == [0, 1, 0, 1]
    assert [seq["key"] for seq in exfeed.dump(ctf, inputs={"S0": ("dense", 1)})] == [0, 1, 0, 1]


def test_a_key_repeated_in_a_joined_deserializer_is_refused(tmp_path):
    features = write(tmp_path, "0 |x 1\n1 |x 2\n0 |x 3\n", "x.ctf")
    labels = write(tmp_path, "0 |y 1\n1 |y 2\n0 |y 3\n", "y.ctf")
    with pytest.raises(exfeed.DataError, match="sequence id 0 repeats in deserializer 1, which is joined by key"):
        MinibatchSource(
            [
                CTFDeserializer(features, StreamDefs(x=StreamDef(field="x", shape=1))),
                CTFDeserializer(labels, StreamDefs(y=StreamDef(field="y", shape=1))),
            ],
            randomize=False,
        )
    # Repeats in the first deserializer are joined, each with its key's label.
    labels = write(tmp_path, "0 |y 10\n1 |y 20\n", "y.ctf")
    source = MinibatchSource(
        [
            CTFDeserializer(features, StreamDefs(x=StreamDef(field="x", shape=1))),
            CTFDeserializer(labels, StreamDefs(y=StreamDef(field="y", shape=1))),
        ],
        randomize=False,
    )
    mb = source.next_minibatch(3)
    assert mb[source.streams.y].asarray().ravel().tolist() == [10, 20, 10]


def test_a_config_with_a_stray_bracket_reads_as_in_cntk(tmp_path):
    """CNTK's Tests/UnitTests/NetworkTests/Config/Network_Operator_Plus.cntk closes its section
    before its reader and ends with a ']' that closes nothing: CNTK reads the reader at the top
    level and the ']' as a parameter set to true."""
    data = write(tmp_path, "|X 1\n|X 2\n", "Network_Operator_Plus_Data.txt")
    config = tmp_path / "plus.cntk"
    config.write_text(
        'command=Predict\nPredict=[\n    action="write"\n    NDL=[\n        v1 = Constant(1)\n      ]\n    ]\n\n'
        '    reader = [\n        readerType = "CNTKTextFormatReader"\n        file = "%s"\n        randomize = false\n'
        '        input = [\n            features=[\n                alias = "X"\n                format = "dense"\n'
        "                dim = 1\n            ]\n        ]\n    ]\n]\n" % data
    )
    with pytest.warns(exfeed.ConfigWarning, match=r"plus.cntk:21: '\]' closes nothing: read as a parameter"):
        reader = exfeed.Reader(data, config=config, minibatch_size=100, max_sweeps=1)
    with reader:
        assert reader.next_minibatch().keys.tolist() == [0, 1]


def test_the_sample_in_the_repository(tmp_path):
    source = MinibatchSource(
        CTFDeserializer(
            str(REPO / "samples" / "sequences.ctf"),
            StreamDefs(
                features=StreamDef(field="features", shape=4),
                label=StreamDef(field="label", shape=3, is_sparse=True),
            ),
        ),
        max_sweeps=1,
        randomization_seed=1,
    )
    sequences = samples = 0
    while True:
        mb = source.next_minibatch(32)
        if not mb:
            break
        features, label = mb[source.streams.features], mb[source.streams.label]
        assert features.num_sequences == label.num_sequences
        assert [s.shape for s in label.as_sequences()] == [(1, 3)] * label.num_sequences
        sequences += features.num_sequences
        samples += features.num_samples
        assert features.asarray().dtype == np.float32
    assert sequences > 0 and samples > sequences


# --- MinibatchSourceConfig ------------------------------------------------------------------------


def test_minibatch_source_config_properties_and_dictionary(tmp_path):
    ctf = CTFDeserializer(one_per_line(tmp_path, 4), StreamDefs(v=StreamDef(field="v", shape=1)))
    off = to_dictionary(MinibatchSourceConfig([ctf], False))
    assert sorted(off) == sorted(
        ["randomize", "frameMode", "traceLevel", "multiThreadedDeserialization", "deserializers"]
    )
    assert off["randomize"] is False and off["frameMode"] is False
    assert off["traceLevel"] == TraceLevel.Warning and off["multiThreadedDeserialization"] is False
    assert off["deserializers"][0]["module"] == "CNTKTextFormatReader"

    config = MinibatchSourceConfig([ctf])
    on = to_dictionary(config)
    assert len(on) == 8 and on["randomize"] is True
    assert on["randomizationWindow"] == DEFAULT_RANDOMIZATION_WINDOW_IN_CHUNKS
    assert on["sampleBasedRandomizationWindow"] is False and on["randomizationSeed"] == 0

    assert config.max_samples == config.max_sweeps == INFINITELY_REPEAT
    config.max_samples, config.max_sweeps = 100, 3
    with pytest.raises(ValueError):
        to_dictionary(config)
    config.max_samples = INFINITELY_REPEAT
    config.randomization_window_in_samples = 100
    with pytest.raises(ValueError):
        to_dictionary(config)
    config.randomization_window_in_chunks = 0
    d = to_dictionary(config)
    assert (d["randomizationWindow"], d["sampleBasedRandomizationWindow"]) == (100, True)

    config.is_multithreaded.set(True)
    config.trace_level = TraceLevel.Info.value
    config.is_frame_mode_enabled = True
    d = to_dictionary(config)
    assert (d["multiThreadedDeserialization"], d["traceLevel"], d["frameMode"]) == (True, 2, True)
    config.truncation_length = 123
    with pytest.raises(ValueError):
        to_dictionary(config)
    config.is_frame_mode_enabled = False
    config.is_multithreaded = False
    d = to_dictionary(config)
    assert (d["truncated"], d["truncationLength"], len(d)) == (True, 123, 10)
    assert d["multiThreadedDeserialization"] is False


def test_minibatch_source_config_creates_a_source(tmp_path):
    path = one_per_line(tmp_path, 6)
    config = MinibatchSourceConfig(randomize=False).add_deserializer(
        CTFDeserializer(path, StreamDefs(v=StreamDef(field="v", shape=1)))
    )
    config.max_sweeps = 1
    source = config.create()
    assert isinstance(source, MinibatchSource)
    assert read_values(source, 4) == [[0, 1, 2, 3], [4, 5]]


# --- writing CTF ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "alias_tensor_map, expected",
    [
        ({"a": np.zeros((0, 3))}, ""),
        ({"a": np.array([[1, 2], [3, 4]])}, "7\t|a 1 2\n7\t|a 3 4"),
        ({"b": np.array([[[1.5], [2.0]]]), "a": [[5]]}, "7\t|a 5 |b 1.5 2.0"),
        ({"s": [{4: 1.0, 0: 2}], "d": np.array([[0.25], [1.0]])}, "7\t|d 0.25 |s 0:2 4:1.0\n7\t|d 1.0"),
    ],
)
def test_sequence_to_cntk_text_format(alias_tensor_map, expected):
    assert sequence_to_cntk_text_format(7, alias_tensor_map) == expected


def test_sequence_to_cntk_text_format_refuses_other_data():
    with pytest.raises(ValueError):
        sequence_to_cntk_text_format(0, {"a": [object()]})
    with pytest.raises(ValueError):
        sequence_to_cntk_text_format(0, {"a": [np.array([1.0])]})  # a list of arrays


def test_written_sequences_read_back(tmp_path):
    rng = np.random.default_rng(5)
    sequences = [rng.standard_normal((n, 3)).astype(np.float32) for n in (2, 5, 1)]
    labels = [[{int(rng.integers(10)): 1.0}] for _ in sequences]
    text = "\n".join(
        sequence_to_cntk_text_format(i, {"x": s, "y": l}) for i, (s, l) in enumerate(zip(sequences, labels))
    )
    path = write(tmp_path, text + "\n")
    source = MinibatchSource(
        CTFDeserializer(
            path,
            StreamDefs(x=StreamDef(field="x", shape=3), y=StreamDef(field="y", shape=10, is_sparse=True)),
        ),
        randomize=False,
        max_sweeps=1,
    )
    mb = source.next_minibatch(100)
    for got, want in zip(mb[source.streams.x].as_sequences(), sequences):
        np.testing.assert_array_equal(got, want)
    for got, want in zip(mb[source.streams.y].as_sequences(), labels):
        assert got.indices.tolist() == list(want[0])
