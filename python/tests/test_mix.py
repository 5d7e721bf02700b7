"""Data sets mixed by weight: exfeed.Reader(mix=...) and exfeed.torch.Dataset(mix=...), with
real files and real DataLoader worker processes."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest

import exfeed
from conftest import INPUTS, require, write_ctf

# Small chunks and the full index: exact sample counts, fine-grained proportions.
OPTS = dict(inputs=INPUTS, chunk_size=200, index="full")


@pytest.fixture
def sources(tmp_path):
    """a.ctf (120 sequences) and the corpus b/ of two files (30 each): {source: samples}."""
    (tmp_path / "b").mkdir()
    truth = {
        "a": write_ctf(tmp_path / "a.ctf", 120, seed=1),
        "b0": write_ctf(tmp_path / "b" / "part-0.ctf", 30, seed=2),
        "b1": write_ctf(tmp_path / "b" / "part-1.ctf", 30, seed=3),
    }
    samples = {"a": sum(len(rows) for rows, _ in truth["a"].values())}
    samples["b"] = sum(len(rows) for f in ("b0", "b1") for rows, _ in truth[f].values())
    mix = {str(tmp_path / "a.ctf"): 0.7, str(tmp_path / "b" / "*"): 0.3}
    return mix, samples


def delivered(reader):
    """(sweep, file, key, samples) of every sequence, in order; file 0 is a.ctf."""
    out = []
    for mb in reader:
        lengths = np.diff(mb["x"].offsets).tolist()
        for sweep, key, n in zip(mb.sweeps.tolist(), mb.keys.tolist(), lengths):
            out.append((sweep, key >> 40, key & ((1 << 40) - 1), n))
    return out


def by_source(seqs):
    """{sweep: [samples of a, samples of b]}."""
    out = {}
    for sweep, file, _, n in seqs:
        out.setdefault(sweep, [0, 0])[int(file > 0)] += n
    return out


def test_each_source_gives_its_share_and_stats_say_so(sources):
    mix, samples = sources
    epoch = 1000
    with exfeed.Reader(mix=mix, mix_epoch_samples=epoch, minibatch_size=50, max_sweeps=3, seed=1, **OPTS) as r:
        # A sweep's samples, by the plan of the first one.
        assert abs(r.total_samples - epoch) <= 40
        seqs = delivered(r)
        report = r.stats()["mix"]
    shares = by_source(seqs)
    assert sorted(shares) == [0, 1, 2]
    for sweep, (a, b) in shares.items():
        # Within a chunk (200 bytes: at most about 20 samples) of 70% and 30% of 1000.
        assert abs(a - 700) <= 25 and abs(b - 300) <= 25, (sweep, a, b)
    assert samples["b"] < 300  # b is smaller than its share: it cycles
    assert [s["sweep"] for s in report] == [0, 1, 2] and all(s["ended"] for s in report)
    for s in report:
        (a, b) = s["sources"]
        assert (a["weight"], b["weight"]) == (0.7, 0.3)
        assert a["source"].endswith("a.ctf") and b["source"].endswith("*")
        assert [a["samples"], b["samples"]] == shares[s["sweep"]]


def test_a_string_mix_is_the_same_and_deterministic_for_a_seed(sources):
    mix, _ = sources
    text = ",".join(f"{k}={v}" for k, v in mix.items())
    runs = []
    for m, seed in ((mix, 3), (text, 3), (mix, 4)):
        with exfeed.Reader(mix=m, minibatch_size=50, max_sweeps=2, seed=seed, **OPTS) as r:
            runs.append(delivered(r))
    assert runs[0] == runs[1]
    assert runs[0] != runs[2]


def test_workers_share_the_sweep_and_resume_is_exact(sources):
    mix, _ = sources
    common = dict(mix=mix, mix_epoch_samples=600, minibatch_size=40, max_sweeps=2, seed=5, **OPTS)
    with exfeed.Reader(**common) as r:
        whole = delivered(r)
    parts = []
    for rank in range(3):
        with exfeed.Reader(num_workers=3, worker_rank=rank, **common) as r:
            parts.append(delivered(r))
    assert all(parts)
    assert Counter(x for p in parts for x in p) == Counter(whole)
    # Stopped after 7 minibatches, saved as JSON, restored into a new reader: the same rest.
    with exfeed.Reader(**common) as r:
        first = [mb for _, mb in zip(range(7), r)]
        state = json.dumps(r.state_dict())
    with exfeed.Reader(**common) as r:
        r.load_state_dict(json.loads(state))
        rest = delivered(r)
        report = r.stats()["mix"]
    head = sum(mb.num_sequences for mb in first)
    assert rest == whole[head:]
    # The sweep in progress at the checkpoint is reported whole.
    assert [s["samples"] for s in report[0]["sources"]] == by_source(whole)[0]


def test_bad_mixes_are_refused(sources, tmp_path):
    mix, _ = sources
    with pytest.raises(ValueError, match="mix: .*weight must be a finite positive number"):
        exfeed.Reader(mix={k: 0 for k in mix}, minibatch_size=5, **OPTS)
    with pytest.raises(ValueError, match="give corpus= or mix=, not both"):
        exfeed.Reader(mix=mix, corpus=str(tmp_path / "b" / "*"), minibatch_size=5, **OPTS)
    with pytest.raises(TypeError, match="mix: a weight is a number"):
        exfeed.Reader(mix={k: "x" for k in mix}, minibatch_size=5, **OPTS)
    with pytest.raises(exfeed.ConfigError, match="mix_epoch_samples: applies to a mix"):
        exfeed.Reader(tmp_path / "a.ctf", mix_epoch_samples=10, minibatch_size=5, **OPTS)


def test_torch_dataloader_workers_read_the_mixed_sweep(sources):
    torch = require("torch")
    import exfeed.torch

    mix, _ = sources
    common = dict(mix=mix, mix_epoch_samples=600, **OPTS)
    ds = exfeed.torch.Dataset(minibatch_size=40, seed=2, equalize=False, with_keys=True, layout="packed", **common)
    loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2)
    for epoch in (0, 1):
        keys = Counter(k for b in loader for k in b["keys"].tolist())
        # Epoch e reads sweep 0 with the seed 2 + e: the reader's sweep e with the seed 2.
        with exfeed.Reader(minibatch_size=40, seed=2, max_sweeps=2, **common) as r:
            want = Counter((file << 40) | key for s, file, key, _ in delivered(r) if s == epoch)
        assert keys == want, epoch
    # In this process (no workers) the dataset's stats say what each source gave.
    samples = sum(int(b["x_offsets"][-1]) for b in ds)
    report = ds.stats()["mix"]
    assert len(report) == 1 and report[0]["ended"]
    assert sum(s["samples"] for s in report[0]["sources"]) == samples
