"""exfeed.torch.Dataset with the real PyTorch DataLoader, worker processes and torchdata."""

from __future__ import annotations

import json
import os
import pickle
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from conftest import INPUTS, REPO, child_env, require, write_ctf

torch = require("torch")
import exfeed  # noqa: E402
import exfeed.torch  # noqa: E402

OPTS = dict(inputs=INPUTS, chunk_size=600, window_chunks=2)


@pytest.fixture
def data(tmp_path):
    path = tmp_path / "data.ctf"
    return path, write_ctf(path, 300)


def keys_of(batches):
    return [k for b in batches for k in b["keys"].tolist()]


def test_layouts_match_the_reader(data):
    path, truth = data
    mb = exfeed.Reader(path, minibatch_size=16, randomize=False, **OPTS).next_minibatch()
    keys = mb.keys.tolist()
    for layout in ("padded", "jagged", "packed"):
        ds = exfeed.torch.Dataset(path, minibatch_size=16, layout=layout, randomize=False, equalize=False,
                                  with_keys=True, **OPTS)
        b = next(iter(ds))
        assert b["keys"].tolist() == keys
        y = b["y"]
        assert y.layout == torch.sparse_csr and y.shape == (len(keys), 5)
        assert y.to_dense().argmax(dim=1).tolist() == [truth[k][1] for k in keys]
        x = b["x"]
        for i, k in enumerate(keys):
            want = torch.from_numpy(truth[k][0].astype(np.float32))
            if layout == "padded":
                n = int(b["x_lengths"][i])
                assert n == len(want) and torch.equal(x[i, :n], want) and (x[i, n:] == 0).all()
            elif layout == "jagged":
                assert x.is_nested and torch.equal(x[i], want)
            else:
                o = b["x_offsets"]
                assert torch.equal(x[o[i] : o[i + 1]], want)


def test_jagged_packed_and_sparse_tensors_share_the_readers_memory(data):
    path, _ = data
    mb = exfeed.Reader(path, minibatch_size=16, **OPTS).next_minibatch()
    address = mb["x"].values.ctypes.data
    assert exfeed.torch.to_tensors(mb, "packed")["x"].data_ptr() == address
    assert exfeed.torch.to_tensors(mb, "jagged")["x"].values().data_ptr() == address
    y = exfeed.torch.to_tensors(mb, "packed")["y"]
    assert y.values().data_ptr() == mb["y"].data.ctypes.data
    assert y.crow_indices().data_ptr() == mb["y"].indptr.ctypes.data


@pytest.mark.parametrize("start_method", ["fork", "spawn"])
def test_dataloader_workers_read_each_sweep_exactly_once(data, start_method):
    path, truth = data
    ds = exfeed.torch.Dataset(path, minibatch_size=8, layout="packed", equalize=False, with_keys=True,
                              seed=4, **OPTS)
    ds = pickle.loads(pickle.dumps(ds))
    loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2,
                                         multiprocessing_context=start_method)
    for epoch in (0, 1):
        ds.set_epoch(epoch)
        batches = list(loader)
        keys = keys_of(batches)
        assert sorted(keys) == sorted(truth), epoch
        assert {b["sweeps"].unique().item() for b in batches} == {0}
        if epoch == 0:
            first = keys
    assert keys != first  # a new order each epoch


def test_two_ranks_with_two_workers_each_read_each_sweep_once(data):
    path, truth = data
    per_rank = []
    for rank in range(2):
        ds = exfeed.torch.Dataset(path, minibatch_size=8, layout="packed", rank=rank, world_size=2,
                                  equalize=False, with_keys=True, **OPTS)
        per_rank.append(keys_of(torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2)))
    assert per_rank[0] and per_rank[1] and not set(per_rank[0]) & set(per_rank[1])
    assert sorted(per_rank[0] + per_rank[1]) == sorted(truth)


def test_equalize_gives_every_rank_the_same_number_of_steps(tmp_path):
    path = tmp_path / "uneven.ctf"
    truth = write_ctf(path, 257, seed=3)
    total = sum(len(rows) for rows, _ in truth.values())
    # Without an index (the default here) the steps come from the samples estimated from the
    # file's start, the same on every rank; with the index, from its exact count.
    estimated = exfeed.Reader(path, minibatch_size=8, **OPTS).total_samples
    counts = []
    for world, index in ((2, "full"), (3, "full"), (2, "none"), (3, "auto")):
        steps = []
        for rank in range(world):
            ds = exfeed.torch.Dataset(path, minibatch_size=8, layout="packed", rank=rank, world_size=world,
                                      index=index, **OPTS)
            steps.append(len(list(torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2))))
        samples = total if index == "full" else estimated
        assert len(set(steps)) == 1 and steps[0] == samples // (world * 8), (world, index, steps)
        counts.append(steps)


def test_rank_defaults_to_torch_distributed(data, tmp_path):
    path, truth = data
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{tmp_path}/pg", rank=0, world_size=1)
    try:
        ds = exfeed.torch.Dataset(path, minibatch_size=8, equalize=False, with_keys=True, **OPTS)
        assert ds._partition()[:2] == (0, 1)
        assert sorted(keys_of(ds)) == sorted(truth)
    finally:
        dist.destroy_process_group()


def test_state_dict_resumes_within_an_epoch(data):
    stateful = require("torchdata.stateful_dataloader")
    path, _ = data
    make = lambda: exfeed.torch.Dataset(path, minibatch_size=8, layout="packed", with_keys=True, seed=2, **OPTS)
    whole = keys_of(stateful.StatefulDataLoader(make(), batch_size=None, num_workers=2))
    loader = stateful.StatefulDataLoader(make(), batch_size=None, num_workers=2)
    head = []
    it = iter(loader)
    for _ in range(5):
        head.extend(next(it)["keys"].tolist())
    state = json.loads(json.dumps(loader.state_dict()))
    del it, loader
    again = stateful.StatefulDataLoader(make(), batch_size=None, num_workers=2)
    again.load_state_dict(state)
    assert head + keys_of(again) == whole


def checkpoint_after(loader, steps):
    """The keys of the loader's first `steps` minibatches, and its state_dict() then (through
    JSON, as a checkpoint file has it)."""
    it = iter(loader)
    head = [k for _ in range(steps) for k in next(it)["keys"].tolist()]
    return head, json.loads(json.dumps(loader.state_dict()))


@pytest.mark.parametrize("index", ["full", "none"])  # none: byte-range chunks, counted at resume
def test_resume_from_two_dataloader_workers_on_three(data, index):
    stateful = require("torchdata.stateful_dataloader")
    path, truth = data
    make = lambda: exfeed.torch.Dataset(path, minibatch_size=8, layout="packed", with_keys=True, seed=2,
                                        index=index, **OPTS)
    head, state = checkpoint_after(stateful.StatefulDataLoader(make(), batch_size=None, num_workers=2), 5)
    ds = make()
    ds.resume_from([state])
    again = stateful.StatefulDataLoader(ds, batch_size=None, num_workers=3)
    rest = keys_of(again)
    assert sorted(head + rest) == sorted(truth)  # the rest of the epoch, each sequence once
    # The next epoch is a fresh one of three workers.
    fresh = make()
    fresh.set_epoch(1)
    assert keys_of(again) == keys_of(stateful.StatefulDataLoader(fresh, batch_size=None, num_workers=3))


def test_resume_from_ranks_gathered_on_fewer_ranks(data):
    """Two ranks of two workers each, checkpointed mid-epoch, resumed on one rank of three
    workers: the states are what all_gather_object would gather, in rank order."""
    stateful = require("torchdata.stateful_dataloader")
    path, truth = data
    make = lambda rank, world: exfeed.torch.Dataset(path, minibatch_size=8, layout="packed", with_keys=True,
                                                    seed=4, rank=rank, world_size=world, equalize=False,
                                                    index="full", **OPTS)
    head, states = [], []
    for rank, steps in enumerate([4, 1]):  # rank 1 worker 1 has not delivered yet
        keys, state = checkpoint_after(stateful.StatefulDataLoader(make(rank, 2), batch_size=None, num_workers=2), steps)
        head += keys
        states.append(state)
    ds = make(0, 1)
    ds.resume_from(states)
    rest = keys_of(stateful.StatefulDataLoader(ds, batch_size=None, num_workers=3))
    assert sorted(head + rest) == sorted(truth)
    with pytest.raises(ValueError, match=r"partition 0 of 4 holds the state of partition \[2, 4\]"):
        make(0, 1).resume_from(states[::-1])


def test_an_unfinished_epoch_at_interpreter_exit_prints_nothing(data):
    """A script that stops iterating mid-epoch and exits: the generator is closed as the
    interpreter shuts down, and must not print an ignored exception."""
    path, _ = data
    script = (
        "import exfeed.torch\n"
        f"ds = exfeed.torch.Dataset({str(path)!r}, minibatch_size=16, **{OPTS!r})\n"
        "it = iter(ds)\n"
        "next(it)\n"
        "print('one minibatch')\n"
    )
    env = child_env()
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "one minibatch\n"
    assert done.stderr == ""


def test_an_epoch_closed_after_the_modules_globals_are_cleared_raises_nothing(data, monkeypatch):
    """At interpreter exit a generator may be closed after its module's globals are set to
    None (seen through a DataLoader in a plain venv): its cleanup must not use them."""
    path, _ = data
    ds = exfeed.torch.Dataset(path, minibatch_size=16, **OPTS)
    it = iter(ds)
    next(it)
    monkeypatch.setattr(exfeed.torch, "sys", None)
    it.close()
    assert ds.state_dict()["position"]["reader"] is not None


@pytest.mark.parametrize("equalize, old, new", [
    ("off", (2, 2), (3, 1)),
    ("spread", (2, 2), (3, 1)),
    ("repeat", (3, 1), (2, 2)),
    ("spread", (2, 2), (4, 1)),
])
def test_ranks_gathered_with_all_gather_object_resume_on_other_ranks(tmp_path, equalize, old, new):
    """Real torch.distributed ranks with StatefulDataLoader workers, checkpointed mid-epoch
    (ranks x workers `old`) and resumed on `new`: nothing read before comes again; equalized,
    every new rank takes the same number of steps in the rest of the epoch; without equalize
    or spread, every sequence of the rest comes once."""
    require("torchdata.stateful_dataloader")
    data = tmp_path / "data.ctf"
    truth = write_ctf(data, 400, seed=6)
    script = REPO / "python" / "tests" / "ranks_resumed_elsewhere.py"
    env = child_env()

    def job(world, workers, *mode):
        rendezvous = tmp_path / f"rendezvous-{mode[0]}"
        procs = [subprocess.Popen([sys.executable, str(script), str(data), str(tmp_path), str(rank), str(world),
                                   str(workers), str(rendezvous), equalize, *mode], env=env) for rank in range(world)]
        assert [p.wait(timeout=300) for p in procs] == [0] * world

    job(*old, "save", "3")
    job(*new, "resume")
    read = lambda name: json.loads((tmp_path / name).read_text())
    head = [k for rank in range(old[0]) for k in read(f"head-{rank}.json")]
    rests = [read(f"rest-{rank}.json")["minibatches"] for rank in range(new[0])]
    lens = [read(f"rest-{rank}.json")["len"] for rank in range(new[0])]
    rest = [k for minibatches in rests for mb in minibatches for k in mb]
    assert len(head) > 0 and len(rest) > 0
    assert not set(head) & set(rest)
    if equalize == "repeat":  # a partition repeats only its own part: no key on two ranks
        keys = [{k for mb in minibatches for k in mb} for minibatches in rests]
        assert sum(map(len, keys)) == len(set().union(*keys))
    else:
        assert sorted(head + rest) == sorted(truth)
    if equalize != "off":
        steps = [len(minibatches) for minibatches in rests]
        assert steps[0] > 0 and steps == [steps[0]] * new[0], steps
        assert lens == steps  # len() of the resumed epoch: the rest's steps
        # After it, a whole epoch's.
        total = exfeed.Reader(data, inputs={"x": ("dense", 3), "y": ("sparse", 5)}, minibatch_size=8,
                              index="full").total_samples
        assert [read(f"rest-{rank}.json")["len_after"] for rank in range(new[0])] == [total // (new[0] * 8)] * new[0]


def test_kill_and_resume_through_stateful_dataloader(tmp_path):
    require("torchdata.stateful_dataloader")
    data = tmp_path / "data.ctf"
    write_ctf(data, 600, seed=9)
    script = REPO / "python" / "tests" / "train_until_killed.py"
    env = child_env()

    def run(log, ckpt, *extra, wait=True):
        cmd = [sys.executable, str(script), str(data), str(log), str(ckpt), *extra]
        return subprocess.run(cmd, env=env, check=True, timeout=300) if wait else subprocess.Popen(cmd, env=env)

    run(tmp_path / "full.log", tmp_path / "full.ckpt")
    full = (tmp_path / "full.log").read_text().splitlines()

    log, ckpt = tmp_path / "killed.log", tmp_path / "killed.ckpt"
    child = run(log, ckpt, wait=False)
    deadline = time.time() + 120
    while time.time() < deadline:
        if ckpt.exists() and json.loads(ckpt.read_text())["step"] >= 8:
            break
        time.sleep(0.02)
    child.send_signal(signal.SIGKILL)
    assert child.wait() == -signal.SIGKILL
    step = json.loads(ckpt.read_text())["step"]
    killed = log.read_text().splitlines()
    assert 8 <= step < len(full) and len(killed) >= step  # killed mid-epoch, after a checkpoint
    resumed_log = tmp_path / "resumed.log"
    run(resumed_log, ckpt, "resume")
    assert killed[:step] + resumed_log.read_text().splitlines() == full


SAMPLE = REPO / "samples" / "sequences.ctf"
SAMPLE_INPUTS = {"features": ("dense", 4), "label": ("sparse", 3)}


def sample_keys():
    return sorted({int(line.split()[0]) for line in SAMPLE.read_text().splitlines() if line.strip()})


@pytest.mark.parametrize("workers", [0, 2])
def test_one_rank_reads_every_sequence_once_by_default(tmp_path, workers):
    # equalize=True is the default: with one rank it must not drop or repeat anything, neither on
    # the 40-sequence sample nor on a file whose size is estimated from its start (no index).
    keys = keys_of(torch.utils.data.DataLoader(
        exfeed.torch.Dataset(SAMPLE, inputs=SAMPLE_INPUTS, minibatch_size=8, with_keys=True),
        batch_size=None, num_workers=workers))
    assert sorted(keys) == sample_keys()
    path = tmp_path / "big.ctf"
    truth = write_ctf(path, 3000, seed=5)
    ds = exfeed.torch.Dataset(path, minibatch_size=8, layout="packed", with_keys=True, index="none",
                              inputs=INPUTS, chunk_size=4096)
    keys = keys_of(torch.utils.data.DataLoader(ds, batch_size=None, num_workers=workers))
    assert sorted(keys) == sorted(truth)


@pytest.mark.parametrize("start_method,persistent", [("fork", False), ("spawn", False), ("fork", True)])
def test_the_epoch_advances_on_each_iteration_unless_set(data, start_method, persistent):
    path, truth = data

    def epochs(fix):
        ds = exfeed.torch.Dataset(path, minibatch_size=8, layout="packed", with_keys=True, seed=4, **OPTS)
        loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2, persistent_workers=persistent,
                                             multiprocessing_context=start_method)
        orders = []
        for epoch in range(2):
            if fix:
                ds.set_epoch(epoch)
            orders.append(keys_of(loader))
        return ds, loader, orders

    ds, loader, auto = epochs(fix=False)
    assert all(sorted(keys) == sorted(truth) for keys in auto) and auto[0] != auto[1]
    assert ds.epoch == 2
    if start_method == "spawn":
        return  # slow to start; the rest is the same with fork
    assert auto == epochs(fix=True)[2]  # the epochs counted are the epochs set
    ds.set_epoch(1)
    assert keys_of(loader) == auto[1] and keys_of(loader) == auto[1]  # set: it stays


def test_without_workers_the_epoch_advances_too(data):
    path, _ = data
    ds = exfeed.torch.Dataset(path, minibatch_size=8, with_keys=True, **OPTS)
    first, second = keys_of(ds), keys_of(ds)
    assert first != second and sorted(first) == sorted(second) and ds.epoch == 2


def test_resume_mid_epoch_then_the_next_epochs_follow(data):
    stateful = require("torchdata.stateful_dataloader")
    path, _ = data
    make = lambda: stateful.StatefulDataLoader(
        exfeed.torch.Dataset(path, minibatch_size=8, layout="packed", with_keys=True, seed=2, **OPTS),
        batch_size=None, num_workers=2)
    whole = make()
    epochs = [keys_of(whole) for _ in range(3)]
    loader = make()
    keys_of(loader)  # epoch 0
    it = iter(loader)
    head = [k for _ in range(5) for k in next(it)["keys"].tolist()]
    state = json.loads(json.dumps(loader.state_dict()))
    del it, loader
    again = make()
    again.load_state_dict(state)
    assert head + keys_of(again) == epochs[1]
    assert keys_of(again) == epochs[2]


def test_len_is_exact_where_equalized_else_an_estimate_without_warnings(tmp_path):
    path = tmp_path / "uneven.ctf"
    write_ctf(path, 257, seed=3)
    for rank in range(2):
        ds = exfeed.torch.Dataset(path, minibatch_size=8, rank=rank, world_size=2, index="full", **OPTS)
        loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2)
        assert ds.len_is_exact and len(loader) == len(list(loader))
    # One rank: an estimate (every minibatch full), exceeded here: the sequences are of 1..4
    # samples and each worker ends its part with a partial minibatch. The DataLoader's warning
    # about it, torch's sparse CSR notes and anything else would show on stderr.
    script = f"""
import torch, exfeed.torch
ds = exfeed.torch.Dataset({str(path)!r}, minibatch_size=8, layout="packed", inputs={INPUTS!r}, chunk_size=600,
                          index="full")
loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2)
total = exfeed.Reader({str(path)!r}, minibatch_size=8, inputs={INPUTS!r}, index="full").total_samples
assert not ds.len_is_exact and len(loader) == -(-total // 8), (len(loader), total)
for epoch in range(2):
    n = sum(1 for b in loader if b["y"].layout == torch.sparse_csr)
    assert n > len(loader), (n, len(loader))
print("ok", len(loader), n)
"""
    env = child_env()
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.startswith("ok"), done.stderr
    assert done.stderr == ""


def write_labels(path, labels):
    """One sample per sequence: x = the key, y = the entries given as text (one-hot: "c:1")."""
    path.write_text("".join(f"{k} |x {k} 0 0 |y {y}\n" for k, y in enumerate(labels)))


@pytest.mark.parametrize("layout", ["padded", "jagged", "packed"])
def test_sparse_streams_as_class_ids_or_dense_through_workers(data, layout):
    path, truth = data
    ds = exfeed.torch.Dataset(path, minibatch_size=8, layout=layout, with_keys=True, sparse={"y": "ids"}, **OPTS)
    dense = exfeed.torch.Dataset(path, minibatch_size=8, layout=layout, with_keys=True, sparse="dense", **OPTS)
    csr = exfeed.torch.Dataset(path, minibatch_size=8, layout="packed", with_keys=True, **OPTS)
    loader = lambda d: list(torch.utils.data.DataLoader(d, batch_size=None, num_workers=2))
    seen = 0
    for b, d, c in zip(loader(ds), loader(dense), loader(csr)):
        keys = b["keys"].tolist()
        labels = [truth[k][1] for k in keys]  # y: one sample per sequence
        ids, values, want = b["y"], d["y"], c["y"].to_dense()
        assert ids.dtype == torch.int64 and values.dtype == torch.float32
        if layout == "padded":
            assert ids[:, 0].tolist() == labels and (ids[:, 1:] == -100).all()
            assert torch.equal(values[:, 0], want) and (values[:, 1:] == 0).all()
            assert b["y_lengths"].tolist() == [1] * len(keys)
        elif layout == "jagged":
            assert ids.is_nested and [int(t[0]) for t in ids.unbind()] == labels
            assert torch.equal(torch.cat(values.unbind()), want)
        else:
            assert ids.tolist() == labels and torch.equal(values, want)
            assert b["y_offsets"].tolist() == list(range(len(keys) + 1))
        seen += len(keys)
    assert seen == len(truth)


def test_class_ids_refuse_a_sample_that_is_not_one_hot(tmp_path):
    path = tmp_path / "labels.ctf"
    write_labels(path, ["1:1", "0:1", "2:1 3:1", "4:1"])
    ds = exfeed.torch.Dataset(path, inputs=INPUTS, minibatch_size=8, randomize=False, sparse="ids")
    with pytest.raises(ValueError, match=r"'y'.*one-hot.*sample 0 of sequence 2 with entries: 2:1, 3:1"):
        list(torch.utils.data.DataLoader(ds, batch_size=None, num_workers=1))
    write_labels(path, ["1:1", "0:0.5"])
    with pytest.raises(ValueError, match=r"sequence 1 with entries: 0:0.5"):
        list(exfeed.torch.Dataset(path, inputs=INPUTS, minibatch_size=8, randomize=False, sparse="ids"))
    with pytest.raises(ValueError, match="sparse: expected one of csr, ids, dense, found 'onehot'"):
        exfeed.torch.Dataset(path, inputs=INPUTS, minibatch_size=8, sparse={"y": "onehot"})


def test_one_hot_ids_of_a_stream_or_none(tmp_path):
    path = tmp_path / "labels.ctf"

    def first_minibatch(labels):
        write_labels(path, labels)
        return exfeed.Reader(path, inputs=INPUTS, minibatch_size=8, randomize=False).next_minibatch()

    ids = first_minibatch(["1:1", "0:1", "4:1"])["y"].one_hot_ids()
    assert ids.dtype == np.int64 and ids.tolist() == [1, 0, 4]
    assert first_minibatch(["1:1", "0:1 2:1"])["y"].one_hot_ids() is None  # two entries
    assert first_minibatch(["1:1", "3:2"])["y"].one_hot_ids() is None  # a value other than 1
    with pytest.raises(TypeError, match="one_hot_ids"):
        first_minibatch(["1:1"])["x"].one_hot_ids()


def test_the_example_of_docs_pytorch_md_runs_without_a_warning():
    text = (REPO / "docs" / "pytorch.md").read_text()
    start = text.index("```python\n") + len("```python\n")
    example = text[start : text.index("```", start)]
    env = child_env()
    done = subprocess.run([sys.executable, "-W", "error::UserWarning", "-c", example], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr


def test_stats_of_the_iteration_in_this_process(data):
    path, truth = data
    ds = exfeed.torch.Dataset(path, minibatch_size=16, equalize=False, **OPTS)
    assert ds.stats() is None
    it = iter(ds)
    next(it)
    live = ds.stats()
    assert live["minibatches"] == 1 and live["chunks_decoded"] >= 1
    rest = sum(1 for _ in it)
    done = ds.stats()
    assert done["minibatches"] == 1 + rest and done["bytes_decoded"] == path.stat().st_size


def test_batch_size_counts_sequences_with_workers_and_ranks(data):
    path, truth = data
    ds = exfeed.torch.Dataset(path, batch_size=8, equalize=False, with_keys=True, **OPTS)
    assert len(ds) == 300 // 8 + 1 and ds.len_is_exact is False
    loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2)
    batches = list(loader)
    # Each worker's part ends with a short batch; every other batch has 8 sequences.
    assert sum(len(b["keys"]) != 8 for b in batches) <= 2
    assert sorted(keys_of(batches)) == sorted(truth)
    # Two ranks kept in step: the same number of steps, in sequences.
    steps = [
        sum(1 for _ in exfeed.torch.Dataset(path, batch_size=8, rank=r, world_size=2, **OPTS)) for r in range(2)
    ]
    assert steps == [300 // 16] * 2
    with pytest.raises(TypeError, match="one of them"):
        exfeed.torch.Dataset(path, minibatch_size=8, batch_size=8, **OPTS)


def test_equalize_spread_keeps_ranks_in_step_without_dropping_or_repeating(data):
    path, truth = data
    keys, steps = [], []
    for rank in range(2):
        ds = exfeed.torch.Dataset(path, minibatch_size=16, rank=rank, world_size=2, with_keys=True,
                                  equalize_mode="spread", index="full", **OPTS)
        batches = list(ds)
        steps.append(len(batches))
        keys += keys_of(batches)
    assert steps[0] == steps[1] == len(ds)
    assert sorted(keys) == sorted(truth)


def test_pytorch_defaults_small_chunks_one_window_at_a_time(tmp_path):
    # Chunks of CHUNK_SIZE bytes, not CNTK's 32 MiB: a 3.2 MB file is 3 chunks or more.
    big = tmp_path / "big.ctf"
    big.write_text(("|x " + "1 " * 999 + "1\n") * 1600)
    ds = exfeed.torch.Dataset(big, inputs={"x": ("dense", 1000)}, minibatch_size=512)
    assert sum(1 for _ in ds) > 0
    assert ds.stats()["chunks_decoded"] >= big.stat().st_size // exfeed.torch.CHUNK_SIZE >= 2
    # Windows of at most window_bytes (10 chunks of 600 bytes here): the chunks held are bounded
    # by the window and as many bytes decoded ahead, not by the data set (CNTK's 128-chunk
    # window, exfeed.Reader's default, holds all of it).
    path = tmp_path / "data.ctf"
    write_ctf(path, 1000)
    small = dict(inputs=INPUTS, chunk_size=600, threads=2)
    with exfeed.Reader(path, minibatch_size=16, **small) as cntk:
        next(cntk)
        cntk_window = cntk.stats()["window_chunks"]
    bound = 6000
    ds = exfeed.torch.Dataset(path, minibatch_size=16, window_bytes=bound, **small)
    windows = set()
    for _ in ds:
        windows.add((ds.stats()["window_chunks"], ds.stats()["window_bytes"]))
    assert cntk_window > 3 * max(windows)[0] >= 3 * 8, (cntk_window, windows)
    assert max(b for _, b in windows) <= bound
    assert ds.stats()["peak_bytes_held"] <= 2 * bound
    # A configuration keeps its own window (here CNTK's default: all the chunks).
    config = tmp_path / "reader.cntk"
    config.write_text(f"""sample = [ reader = [
        readerType = "CNTKTextFormatReader"
        file = "{path}"
        chunkSizeInBytes = 600
        input = [ x = [ dim = 3 ; format = "dense" ] ; y = [ dim = 5 ; format = "sparse" ] ]
    ] ]
""")
    ds = exfeed.torch.Dataset(path, minibatch_size=16, config=config, threads=2)
    for _ in ds:
        assert ds.stats()["window_chunks"] > 3 * max(windows)[0]
        break
    # ... and window_bytes= goes over it, in place of its window in chunks.
    ds = exfeed.torch.Dataset(path, minibatch_size=16, config=config, window_bytes=bound, threads=2)
    for _ in ds:
        assert 0 < ds.stats()["window_bytes"] <= bound
        break


def test_pytorch_defaults_read_ctf_without_an_index_unless_one_is_needed(tmp_path):
    # A file without sequence ids: no pass over it, its lines keyed by byte offset; with the
    # index (asked for, or needed by cache_index), by line number.
    path = tmp_path / "lines.ctf"
    lines = [f"|x {i} 0 0 |y 1:1" for i in range(100)]
    path.write_text("\n".join(lines) + "\n")
    offsets = np.cumsum([0] + [len(line) + 1 for line in lines[:-1]]).tolist()
    options = dict(minibatch_size=16, inputs=INPUTS, with_keys=True, layout="packed")
    for extra, keys in (({}, offsets), ({"index": "full"}, list(range(100))),
                        ({"cache_index": True}, list(range(100)))):
        ds = exfeed.torch.Dataset(path, **options, **extra)
        assert sorted(k for b in ds for k in b["keys"].tolist()) == keys, extra


def test_the_default_window_bounds_what_is_held_whatever_the_chunk_size(tmp_path, monkeypatch):
    # A CBF file written in chunks larger than the window: windows of one chunk, one decoded
    # ahead, on any number of threads; in small chunks, windows of the bound's bytes.
    path = tmp_path / "data.ctf"
    write_ctf(path, 3000)
    monkeypatch.setattr(exfeed.torch, "WINDOW_BYTES", 20_000)
    # (A chunk holds whole sequences: up to one sequence, under 1000 bytes, past its size.)
    for chunk_size, window, held in ((40_000, 41_000, 2), (2_000, 20_000, 2 * 20_000 // 1_000)):
        cbf = tmp_path / f"data-{chunk_size}.cbf"
        exfeed.convert(path, cbf, inputs=INPUTS, chunk_size=chunk_size)
        ds = exfeed.torch.Dataset(cbf, batch_size=16, threads=4, with_keys=True)
        keys = []
        for batch in ds:
            keys += batch["keys"].tolist()
            assert ds.stats()["window_bytes"] <= window
        stats = ds.stats()
        assert sorted(keys) == list(range(3000))
        assert 0 < stats["peak_bytes_held"] <= 2 * window, (chunk_size, stats)
        assert stats["peak_chunks_held"] <= held, (chunk_size, stats)


def test_the_next_window_is_decoded_while_the_current_one_is_delivered(tmp_path):
    # The reader's threads decode the whole next window ahead, not a few chunks: the same
    # minibatches, with about two windows' chunks held (at most twice the window's bytes).
    path = tmp_path / "data.ctf"
    write_ctf(path, 3000)
    for window in (dict(window_bytes=6000), dict(window_chunks=10)):
        def epoch(**extra):
            ds = exfeed.torch.Dataset(path, minibatch_size=16, inputs=INPUTS, chunk_size=600, threads=1,
                                      with_keys=True, **window, **extra)
            keys = [b["keys"].tolist() for b in ds]
            return keys, ds.stats()

        keys, stats = epoch()
        few_keys, few = epoch(prefetch_chunks=2)
        assert keys == few_keys
        if "window_chunks" in window:
            assert (stats["peak_chunks_held"], few["peak_chunks_held"]) == (20, 12), (stats, few)
        else:
            assert stats["peak_chunks_held"] >= few["peak_chunks_held"] + 4, (stats, few)
            assert stats["peak_bytes_held"] <= 2 * window["window_bytes"], stats
    # Without threads nothing is decoded ahead of the window it is needed for.
    ds = exfeed.torch.Dataset(path, minibatch_size=16, inputs=INPUTS, chunk_size=600, threads=0, window_chunks=10)
    sum(1 for _ in ds)
    assert ds.stats()["peak_chunks_held"] <= 10 + 2, ds.stats()


def test_later_epochs_decode_into_the_first_epochs_buffers(data):
    path, _ = data
    exfeed.release_memory()  # what earlier tests' readers left
    ds = exfeed.torch.Dataset(path, minibatch_size=16, inputs=INPUTS, chunk_size=600, threads=2)
    sum(1 for _ in ds)
    first = ds.stats()
    assert first["buffers_new"] >= 2 and first["buffers_reused"] == 0, first
    sum(1 for _ in ds)
    second = ds.stats()
    assert (second["buffers_new"], second["buffers_reused"]) == (0, first["buffers_new"]), second


class _ReaderThreadsOfEachWorker(torch.utils.data.IterableDataset):
    """Per minibatch of `inner`, the exfeed reader threads of the worker process that made it and
    its PyTorch threads."""

    def __init__(self, inner):
        self.inner = inner

    def __iter__(self):
        for _ in self.inner:
            names = [open(f"/proc/self/task/{t}/comm").read().strip() for t in os.listdir("/proc/self/task")]
            yield sum(n.startswith("exfeed-reader") for n in names), torch.get_num_threads()


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="counts threads in /proc (Linux)")
def test_dataloader_workers_share_the_cores_between_their_threads(data):
    path, _ = data
    ds = exfeed.torch.Dataset(path, minibatch_size=16, inputs=INPUTS, chunk_size=600)
    loader = torch.utils.data.DataLoader(_ReaderThreadsOfEachWorker(ds), batch_size=None, num_workers=2)
    counts = {(int(reader), int(torch_threads)) for reader, torch_threads in loader}
    assert counts == {(exfeed.torch.worker_threads(2), 1)}
    # Each worker's own thread is one of its cores; the reader decodes on the rest.
    assert exfeed.torch.worker_threads(2) == max(0, len(os.sched_getaffinity(0)) // 2 - 1)


def _truth_rows(truth, keys):
    return np.concatenate([truth[k][0] for k in keys])


def _storages(t):
    """The data pointers of the storages a tensor is made of (strided, sparse CSR, jagged)."""
    if t.layout is torch.sparse_csr:
        parts = (t.crow_indices(), t.col_indices(), t.values())
    elif t.is_nested:
        parts = (t.values(), t.offsets())
    else:
        parts = (t,)
    return {p.untyped_storage().data_ptr() if p.is_shared() else None for p in parts}


@pytest.mark.parametrize("start_method, layout, sparse", [("fork", "packed", "ids"), ("spawn", "packed", "ids"),
                                                          ("fork", "jagged", "csr"), ("fork", "padded", "csr")])
def test_worker_minibatches_arrive_as_views_of_one_shared_segment(data, start_method, layout, sparse):
    path, truth = data
    ds = exfeed.torch.Dataset(path, minibatch_size=8, layout=layout, sparse=sparse, with_keys=True, **OPTS)
    loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2, multiprocessing_context=start_method)
    seen = 0
    for b in loader:
        # Every tensor is made of views of one storage in shared memory, mapped once: the worker
        # built the minibatch there, and PyTorch sent the segment without copying it.
        storages = set().union(*(_storages(t) for t in b.values()))
        assert len(storages) == 1 and None not in storages, {name: _storages(t) for name, t in b.items()}
        keys = b["keys"].tolist()
        labels = [truth[k][1] for k in keys]
        if layout == "packed":
            np.testing.assert_allclose(b["x"].numpy(), _truth_rows(truth, keys), rtol=1e-6)
            assert b["y"].tolist() == labels
        elif layout == "jagged":
            np.testing.assert_allclose(b["x"].values().numpy(), _truth_rows(truth, keys), rtol=1e-6)
            assert b["y"].col_indices().tolist() == labels
        else:
            rows = [row for k in keys for row in truth[k][0]]
            lengths = b["x_lengths"].tolist()
            got = [row for i, n in enumerate(lengths) for row in b["x"][i, :n].numpy()]
            np.testing.assert_allclose(np.array(got), np.array(rows), rtol=1e-6)
            assert b["y"].col_indices().tolist() == labels
        seen += len(keys)
    assert seen == len(truth)


def test_a_held_worker_minibatch_is_never_refilled_while_later_ones_arrive(data):
    path, truth = data
    ds = exfeed.torch.Dataset(path, minibatch_size=4, layout="packed", sparse="ids", with_keys=True, **OPTS)
    loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2, persistent_workers=True)
    held, copies = [], []
    for epoch in range(2):  # the workers' segments outlive the epoch
        for i, b in enumerate(loader):
            if i % 15 == 0:
                held.append(b)
                copies.append({name: t.clone() for name, t in b.items()})
    assert len(held) >= 6
    for b, copy in zip(held, copies):
        keys = b["keys"].tolist()
        np.testing.assert_allclose(b["x"].numpy(), _truth_rows(truth, keys), rtol=1e-6)
        assert all(torch.equal(t, copy[name]) for name, t in b.items())
