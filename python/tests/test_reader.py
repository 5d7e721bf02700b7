"""exfeed.Reader, Minibatch and Stream: values, options, state, errors."""

from __future__ import annotations

import json
import pickle

import numpy as np
import pytest

import exfeed
from conftest import INPUTS, SAMPLES, require, write_ctf


def read_all(reader):
    """(sweep, key) of every sequence delivered, in order."""
    out = []
    for mb in reader:
        out.extend(zip(mb.sweeps.tolist(), mb.keys.tolist()))
    return out


def test_values_offsets_and_csr_match_the_file(ctf):
    path, truth = ctf
    with exfeed.Reader(path, inputs=INPUTS, minibatch_size=16, randomize=False) as r:
        seen = 0
        for mb in r:
            x, y = mb["x"], mb["y"]
            assert x.values.dtype == np.float32 and x.values.shape == (x.num_samples, 3)
            assert x.offsets.dtype == np.int64 and len(x.offsets) == mb.num_sequences + 1
            assert y.indptr.dtype == np.int64 and y.indices.dtype == np.int32
            for i, key in enumerate(mb.keys.tolist()):
                rows, label = truth[key]
                np.testing.assert_array_equal(x.values[x.offsets[i] : x.offsets[i + 1]], rows.astype(np.float32))
                # y has one sample per sequence: the one-hot label.
                s = y.offsets[i]
                assert y.indices[y.indptr[s] : y.indptr[s + 1]].tolist() == [label]
                assert y.data[y.indptr[s] : y.indptr[s + 1]].tolist() == [1.0]
            seen += mb.num_sequences
            # Minibatches hold whole sequences, about 16 samples (the first is always taken).
            assert mb.num_samples <= 16 or mb.num_sequences == 1
        assert seen == len(truth)
        assert r.done


def test_a_randomized_sweep_delivers_each_sequence_once_in_a_new_order(ctf):
    path, truth = ctf
    r = exfeed.Reader(path, inputs=INPUTS, minibatch_size=32, max_sweeps=2, seed=3, chunk_size=512)
    got = read_all(r)
    for sweep in (0, 1):
        keys = [k for s, k in got if s == sweep]
        assert sorted(keys) == sorted(truth)
    first, second = ([k for s, k in got if s == w] for w in (0, 1))
    assert first != sorted(first) and first != second


def test_end_of_sweep_and_max_samples(ctf):
    path, truth = ctf
    ends = [mb.end_of_sweep for mb in exfeed.Reader(path, inputs=INPUTS, minibatch_size=50, randomize=False)]
    assert ends[-1] and not any(ends[:-1])
    total = 0
    for mb in exfeed.Reader(path, inputs=INPUTS, minibatch_size=10, max_samples=100):
        total += mb.num_samples
    # The limit cuts minibatches; the last holds at least one sequence (1..4 samples).
    assert 96 < total < 104
    # max_sweeps=None: unlimited; the caller stops.
    r = exfeed.Reader(path, inputs=INPUTS, minibatch_size=64, max_sweeps=None)
    sweeps = {s for _ in range(40) for s in r.next_minibatch().sweeps.tolist()}
    assert sweeps >= {0, 1, 2}


def test_inputs_as_dict_input_objects_or_strings(ctf):
    path, _ = ctf
    forms = [
        INPUTS,
        [exfeed.Input("x", "dense", 3), exfeed.Input("y", "sparse", 5)],
        ["x:dense:3", "y:sparse:5"],
        {"features": ("dense", 3, "x"), "labels": ("sparse", 5, "y")},
    ]
    results = []
    for inputs in forms:
        r = exfeed.Reader(path, inputs=inputs, minibatch_size=1000, randomize=False)
        mb = r.next_minibatch()
        results.append([np.array(s.values if not s.is_sparse else s.data) for _, s in mb.items()])
        assert [s.name for s in r.streams] == mb.stream_names
    for other in results[1:]:
        for a, b in zip(results[0], other):
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize(
    "kwargs, error, words",
    [
        (dict(inputs={"x": ("dence", 3)}), ValueError, "inputs: 'x': format must be 'dense' or 'sparse'"),
        (dict(inputs={"x": ("dense", 0)}), ValueError, "inputs: 'x': dim must be at least 1"),
        (dict(inputs="x:dense:3"), TypeError, "inputs: expected a dict"),
        (dict(inputs=[3]), TypeError, "inputs: expected exfeed.Input"),
        (dict(inputs=INPUTS, minibatch_size=0), ValueError, "minibatch_size: must be at least 1"),
        (dict(inputs=INPUTS, max_sweeps=2, max_samples=5), ValueError, "give max_sweeps or max_samples"),
        (dict(inputs=INPUTS, window_chunks=2, window_samples=9), ValueError, "window_samples"),
        (dict(inputs=INPUTS, num_workers=2, worker_rank=2), ValueError, "worker_rank: must be below num_workers (2)"),
        (dict(inputs=INPUTS, precision="half"), ValueError, "precision: expected"),
        (dict(inputs=INPUTS, lens_mode="permuted"), ValueError, "lens_mode: applies to Lens"),
        (dict(), ValueError, "inputs: "),
    ],
)
def test_bad_arguments_name_the_argument(ctf, kwargs, error, words):
    path, _ = ctf
    kwargs.setdefault("minibatch_size", 8)
    with pytest.raises(error) as e:
        exfeed.Reader(path, **kwargs)
    assert words in str(e.value)


@pytest.mark.parametrize("name, value, error", [("minibatch_size", "8", TypeError), ("seed", "x", TypeError),
                                                 ("frame_mode", "yes", TypeError), ("threads", -1, ValueError)])
def test_mistyped_arguments_are_named(ctf, name, value, error):
    # pyo3 names the argument in a note, shown in the traceback (Python >= 3.11).
    path, _ = ctf
    kwargs = dict(inputs=INPUTS, minibatch_size=8)
    kwargs[name] = value
    with pytest.raises(error) as e:
        exfeed.Reader(path, **kwargs)
    if hasattr(e.value, "add_note"):
        assert f"while processing '{name}'" in e.value.__notes__


def test_double_precision(ctf):
    path, truth = ctf
    r = exfeed.Reader(path, inputs=INPUTS, minibatch_size=8, randomize=False, precision="double")
    mb = r.next_minibatch()
    assert r.dtype == np.float64 and mb["x"].values.dtype == np.float64 and mb["y"].data.dtype == np.float64
    np.testing.assert_array_equal(mb["x"].values[: len(truth[0][0])], truth[0][0])


def test_config_file_and_section():
    r = exfeed.Reader(SAMPLES / "sequences.ctf", config=SAMPLES / "sequences.cntk", minibatch_size=1000)
    assert [(s.name, s.storage, s.dim) for s in r.streams] == [("features", "dense", 4), ("label", "sparse", 3)]
    mb = r.next_minibatch()
    assert mb.num_sequences == 40 and mb["features"].num_samples == 96
    with pytest.raises(exfeed.ConfigError):
        exfeed.Reader(SAMPLES / "sequences.ctf", config=SAMPLES / "sequences.cntk", section="nope", minibatch_size=8)


def test_padded_sequences_and_scipy(ctf):
    path, truth = ctf
    mb = exfeed.Reader(path, inputs=INPUTS, minibatch_size=20, randomize=False).next_minibatch()
    keys = mb.keys.tolist()
    values, mask = mb["x"].to_padded(pad=-1.0)
    longest = max(len(truth[k][0]) for k in keys)
    assert values.shape == (len(keys), longest, 3) and mask.shape == (len(keys), longest)
    for i, k in enumerate(keys):
        n = len(truth[k][0])
        np.testing.assert_array_equal(values[i, :n], truth[k][0].astype(np.float32))
        assert (values[i, n:] == -1.0).all() and mask[i].tolist() == [True] * n + [False] * (longest - n)
    seqs = mb["x"].as_sequences()
    assert [s.shape[0] for s in seqs] == [len(truth[k][0]) for k in keys]
    ydense, ymask = mb["y"].to_padded()
    assert ydense.shape == (len(keys), 1, 5)
    assert [int(np.argmax(ydense[i, 0])) for i in range(len(keys))] == [truth[k][1] for k in keys]
    require("scipy")
    m = mb["y"].to_scipy()
    assert m.shape == (len(keys), 5)
    assert m.toarray().argmax(axis=1).tolist() == [truth[k][1] for k in keys]
    assert [s.shape for s in mb["y"].as_sequences()] == [(1, 5)] * len(keys)
    with pytest.raises(TypeError, match="stream 'x' is dense: to_scipy"):
        mb["x"].to_scipy()
    with pytest.raises(KeyError, match="no stream 'z'"):
        mb["z"]


def test_two_workers_split_each_sweep(ctf):
    path, truth = ctf
    parts = []
    for rank in range(2):
        r = exfeed.Reader(path, inputs=INPUTS, minibatch_size=16, max_sweeps=2, chunk_size=300,
                          num_workers=2, worker_rank=rank, seed=5)
        parts.append(read_all(r))
    for sweep in (0, 1):
        a = [k for s, k in parts[0] if s == sweep]
        b = [k for s, k in parts[1] if s == sweep]
        assert a and b and not set(a) & set(b)
        assert sorted(a + b) == sorted(truth)


def test_state_dict_resumes_exactly(ctf):
    path, _ = ctf
    opts = dict(inputs=INPUTS, minibatch_size=16, max_sweeps=2, seed=7, chunk_size=400, window_chunks=2)
    full = exfeed.Reader(path, **opts)
    whole = [mb.keys.tolist() for mb in full]
    r = exfeed.Reader(path, **opts)
    head = [r.next_minibatch().keys.tolist() for _ in range(7)]
    state = json.loads(json.dumps(r.state_dict()))
    r.close()
    again = exfeed.Reader(path, **opts)
    again.load_state_dict(state)
    rest = [mb.keys.tolist() for mb in again]
    assert head + rest == whole


def test_load_state_dict_refuses_other_data_or_options(ctf, tmp_path):
    path, _ = ctf
    r = exfeed.Reader(path, inputs=INPUTS, minibatch_size=16, seed=1)
    r.next_minibatch()
    state = r.state_dict()
    with pytest.raises(ValueError, match="randomizationSeed was 1, is 2"):
        exfeed.Reader(path, inputs=INPUTS, minibatch_size=16, seed=2).load_state_dict(state)
    other = tmp_path / "other.ctf"
    write_ctf(other, 50)
    with pytest.raises(ValueError, match="different data: files"):
        exfeed.Reader(other, inputs=INPUTS, minibatch_size=16, seed=1).load_state_dict(state)
    with pytest.raises(ValueError, match="not a state_dict"):
        r.load_state_dict({"position": 3})


@pytest.mark.parametrize("index", ["full", "none"])  # none: byte-range chunks, counted at resume
def test_load_state_dict_resumes_all_workers_on_another_count(ctf, index):
    path, truth = ctf
    opts = dict(inputs=INPUTS, minibatch_size=16, max_sweeps=2, seed=7, chunk_size=400, window_chunks=2, index=index)
    seen, states = [], []
    for rank, stop in enumerate([3, 6]):
        r = exfeed.Reader(path, num_workers=2, worker_rank=rank, **opts)
        for _ in range(stop):
            mb = r.next_minibatch()
            seen.extend(zip(mb.sweeps.tolist(), mb.keys.tolist()))
        states.append(json.loads(json.dumps(r.state_dict())))
        r.close()
    for rank in range(3):
        again = exfeed.Reader(path, num_workers=3, worker_rank=rank, **opts)
        again.load_state_dict(states[::-1])
        got = read_all(again)
        fresh = read_all(exfeed.Reader(path, num_workers=3, worker_rank=rank, **opts))
        assert [x for x in got if x[0] == 1] == [x for x in fresh if x[0] == 1]
        seen.extend(x for x in got if x[0] == 0)
    assert sorted(k for s, k in seen if s == 0) == sorted(truth)
    with pytest.raises(ValueError, match=r"worker\(s\) 1 of 2 are missing"):
        exfeed.Reader(path, num_workers=3, worker_rank=0, **opts).load_state_dict(states[:1])


def test_close_and_context_manager(ctf):
    path, _ = ctf
    with exfeed.Reader(path, inputs=INPUTS, minibatch_size=16) as r:
        mb = r.next_minibatch()
    assert r.closed
    with pytest.raises(ValueError, match="closed"):
        r.next_minibatch()
    # Arrays handed out stay valid after close.
    assert mb["x"].values.sum() == pytest.approx(float(np.asarray(mb["x"].values).sum()))


def test_release_memory_frees_what_a_closed_reader_left():
    path = SAMPLES / "sequences.ctf"
    with exfeed.Reader(path, config=SAMPLES / "sequences.cntk", minibatch_size=4) as r:
        assert sum(mb.num_sequences for mb in r) > 0
    freed = exfeed.release_memory()
    assert freed > 0
    assert exfeed.release_memory() == 0


def test_lens_example_file_with_groups():
    r = exfeed.Reader(SAMPLES / "patterns.ex", input_groups="in:4", target_groups=[("out", 2)],
                      minibatch_size=100, randomize=False, nan=0.0)
    assert [(s.name, s.dim) for s in r.streams] == [("input", 4), ("target", 2)]
    mb = r.next_minibatch()
    assert mb.num_sequences == 4 and mb.keys.tolist() == [0, 1, 2, 3]
    np.testing.assert_array_equal(mb["input"].values[0], [1, 0, 0, 1])
    np.testing.assert_array_equal(mb["target"].values[0], [1, 0])
    modes = exfeed.Reader(SAMPLES / "patterns.ex", input_groups="in:4", target_groups="out:2",
                          minibatch_size=100, lens_mode="permuted", max_sweeps=3, nan=0.0)
    got = read_all(modes)
    assert sorted(k for s, k in got if s == 2) == [0, 1, 2, 3]
    with pytest.raises(exfeed.ConfigError, match="input_groups: reading the Lens example file .*"
                       "needs the network's layout: input_groups and target_groups"):
        exfeed.Reader(SAMPLES / "patterns.ex", minibatch_size=4)


def test_set_overrides_the_configuration():
    args = dict(config=SAMPLES / "sequences.cntk", minibatch_size=1000, max_sweeps=1)
    base = exfeed.Reader(SAMPLES / "sequences.ctf", **args).next_minibatch().keys.tolist()
    ordered = exfeed.Reader(SAMPLES / "sequences.ctf", set={"sample.reader.randomize": False}, **args)
    assert ordered.next_minibatch().keys.tolist() == sorted(base) != base
    listed = exfeed.Reader(SAMPLES / "sequences.ctf", set=["sample.reader.randomize=false"], **args)
    assert listed.next_minibatch().keys.tolist() == sorted(base)
    with pytest.raises(ValueError, match="set: 'randomize' is not NAME=VALUE"):
        exfeed.Reader(SAMPLES / "sequences.ctf", set=["randomize"], **args)
    with pytest.raises(ValueError, match="set: applies to a configuration file"):
        exfeed.Reader(SAMPLES / "sequences.ctf", inputs=INPUTS, set={"a": 1}, minibatch_size=8)


def test_data_warnings_are_reported(tmp_path):
    path = tmp_path / "short.ctf"
    path.write_text("0 |x 1 2 |y 0:1\n1 |x 1 2 3 |y 1:1\n")
    r = exfeed.Reader(path, inputs=INPUTS, minibatch_size=8, randomize=False)
    mb = r.next_minibatch()
    assert mb.num_sequences == 2
    assert any("has 2 dense values, dim is 3; padded with zeros" in d for d in r.diagnostics)


def test_every_read_option_reaches_the_reader(ctf, tmp_path):
    path, truth = ctf
    base = dict(inputs=INPUTS, minibatch_size=16, randomize=False)
    whole = read_all(exfeed.Reader(path, **base))
    # Options that change how, not what, is read.
    for extra in (dict(keep_in_memory=True), dict(threads=0), dict(threads=2, prefetch_chunks=1),
                  dict(chunk_size=256), dict(cache_index=True)):
        assert read_all(exfeed.Reader(path, **base, **extra)) == whole, extra
    assert (tmp_path / "data.ctf.exfeed-index").exists()  # cache_index wrote the index beside the data
    # Windows: in samples or chunks, each sweep still a permutation.
    for extra in (dict(window_samples=50), dict(window_chunks=1)):
        keys = [k for _, k in read_all(exfeed.Reader(path, inputs=INPUTS, minibatch_size=16, chunk_size=256, **extra))]
        assert sorted(keys) == sorted(truth)
    # frame_mode needs one sample per sequence.
    with pytest.raises(exfeed.DataError):
        read_all(exfeed.Reader(path, **base, frame_mode=True))
    # max_errors: a bad sequence is skipped, reported, and the rest is read.
    bad = tmp_path / "bad.ctf"
    bad.write_text("0 |x 1 2 3 |y 0:1\n1 |x 1 2 3 4 |y 1:1\n2 |x 1 2 3 |y 2:1\n")
    with pytest.raises(exfeed.DataError):
        read_all(exfeed.Reader(bad, **base))
    # (two errors: the bad sample, then sequence 1 without a sample of x)
    r = exfeed.Reader(bad, **base, max_errors=2)
    assert [k for _, k in read_all(r)] == [0, 2]
    assert any("has 4 dense values" in d for d in r.diagnostics)


def test_index_none_reads_the_same_sequences_as_the_full_index(ctf):
    path, truth = ctf
    base = dict(inputs=INPUTS, minibatch_size=16, randomize=False, chunk_size=300)
    full = read_all(exfeed.Reader(path, **base, index="full"))
    assert full == read_all(exfeed.Reader(path, **base, index="none"))
    assert full == read_all(exfeed.Reader(path, **base))  # auto: none, for a file with ids
    # Randomized and split between two workers: each sequence once.
    keys = []
    for rank in range(2):
        r = exfeed.Reader(path, inputs=INPUTS, minibatch_size=16, chunk_size=300, index="none",
                          num_workers=2, worker_rank=rank, seed=4)
        keys += [k for _, k in read_all(r)]
    assert sorted(keys) == sorted(truth)
    with pytest.raises(ValueError, match="index: index 'some' is not one of auto, full, none"):
        exfeed.Reader(path, **base, index="some")
    with pytest.raises(ValueError, match="cacheIndex asks for one"):
        exfeed.Reader(path, **base, index="none", cache_index=True)


def test_stats_say_what_was_decoded_and_how_long_the_loop_waited(ctf):
    path, truth = ctf
    size = path.stat().st_size
    # Chunks of 600 bytes, two sweeps: every chunk decoded once a sweep.
    with exfeed.Reader(path, inputs=INPUTS, minibatch_size=16, chunk_size=600, max_sweeps=2) as r:
        assert r.stats()["chunks_decoded"] == 0
        samples = sum(mb.num_samples for mb in r)
        s = r.stats()
    chunks = -(-size // 600)
    assert s["samples"] == samples and s["minibatches"] > 0
    assert s["bytes_decoded"] == 2 * size
    assert chunks - 1 <= s["chunks_decoded"] / 2 <= chunks + 1, s
    assert 0 < s["wait_seconds"] <= s["elapsed_seconds"]
    assert 0 < s["wait_share"] <= 1 and s["samples_per_second"] > 0 and s["decode_seconds"] > 0
    assert set(s) == {
        "minibatches", "samples", "chunks_decoded", "bytes_decoded", "decode_seconds", "wait_seconds",
        "elapsed_seconds", "samples_per_second", "wait_share", "window_chunks", "window_bytes", "chunks_held",
        "mix", "peak_chunks_held", "peak_bytes_held", "buffers_reused", "buffers_new",
    }
    # In bytes of the file: CNTK's window is all of it (and the next sweep's first chunks were
    # decoded ahead); none is held once the read is over.
    assert s["peak_bytes_held"] >= size and s["window_bytes"] == 0
    assert s["peak_chunks_held"] >= 1 and s["buffers_new"] + s["buffers_reused"] >= s["peak_chunks_held"]
    assert s["mix"] == []  # not a mix of data sets


def test_minibatches_counted_in_sequences(ctf):
    path, truth = ctf
    with exfeed.Reader(path, inputs=INPUTS, minibatch_sequences=16, seed=1) as r:
        assert (r.minibatch_size, r.minibatch_sequences) == (None, 16)
        assert r.total_sequences == 200
        sizes, keys = [], []
        for mb in r:
            sizes.append(mb.num_sequences)
            keys += mb.keys.tolist()
    assert sizes == [16] * 12 + [8]
    assert sorted(keys) == sorted(truth)
    with pytest.raises(ValueError, match="not both"):
        exfeed.Reader(path, inputs=INPUTS, minibatch_size=4, minibatch_sequences=4)
    with pytest.raises(ValueError, match="minibatch_sequences"):
        exfeed.Reader(path, inputs=INPUTS)
