"""Corpora of many shard files (exfeed.Reader(corpus=...)), and ranks that stay in step."""

from __future__ import annotations

import gzip

import numpy as np
import pytest

import exfeed
from conftest import INPUTS, require, write_ctf

SIZES = (60, 45, 70)


@pytest.fixture
def shards(tmp_path):
    """Three CTF shards (the second gzip-compressed by Python's gzip): {(shard, key): rows}."""
    truth = {}
    for i, n in enumerate(SIZES):
        path = tmp_path / f"train-{i}.ctf"
        for key, (rows, _) in write_ctf(path, n, seed=i).items():
            truth[(i, key)] = rows
        if i == 1:
            with gzip.open(tmp_path / "train-1.ctf.gz", "wb") as out:
                out.write(path.read_bytes())
            path.unlink()
    return tmp_path, truth


def split(key: int) -> tuple:
    return key >> 40, key & ((1 << 40) - 1)


def test_two_workers_read_every_sequence_of_every_shard_once(shards):
    d, truth = shards
    seen = []
    for rank in (0, 1):
        with exfeed.Reader(corpus=str(d / "train-*"), inputs=INPUTS, minibatch_size=16, chunk_size=256,
                           max_sweeps=2, seed=7, num_workers=2, worker_rank=rank) as r:
            mine = 0
            for mb in r:
                x = mb["x"]
                for i, key in enumerate(mb.keys.tolist()):
                    rows = truth[split(key)]
                    np.testing.assert_array_equal(x.values[x.offsets[i]:x.offsets[i + 1]], rows.astype(np.float32))
                seen.extend(zip(mb.sweeps.tolist(), map(split, mb.keys.tolist())))
                mine += mb.num_sequences
            assert mine > 0
    for sweep in (0, 1):
        keys = sorted(k for s, k in seen if s == sweep)
        assert keys == sorted(truth)


def test_a_list_of_paths_and_a_list_file(shards):
    d, truth = shards
    files = [d / "train-2.ctf", d / "train-0.ctf"]
    with exfeed.Reader(corpus=files, inputs=INPUTS, minibatch_size=1000, randomize=False) as r:
        keys = [split(k) for mb in r for k in mb.keys.tolist()]
    assert keys == [(0, k) for k in range(SIZES[2])] + [(1, k) for k in range(SIZES[0])]
    (d / "list.txt").write_text("train-2.ctf\ntrain-0.ctf\n")
    with exfeed.Reader(corpus=f"@{d / 'list.txt'}", inputs=INPUTS, minibatch_size=1000, randomize=False) as r:
        assert [split(k) for mb in r for k in mb.keys.tolist()] == keys


def test_a_state_is_refused_by_another_corpus(shards):
    d, _ = shards
    with exfeed.Reader(corpus=str(d / "train-*"), inputs=INPUTS, minibatch_size=16) as r:
        next(r)
        state = r.state_dict()
    with exfeed.Reader(corpus=[d / "train-0.ctf", d / "train-2.ctf"], inputs=INPUTS, minibatch_size=16) as r:
        with pytest.raises(ValueError, match="corpus"):
            r.load_state_dict(state)


def test_files_and_corpus_are_refused_together(shards):
    d, _ = shards
    with pytest.raises(ValueError, match="corpus"):
        exfeed.Reader(d / "train-0.ctf", corpus=str(d / "train-*"), inputs=INPUTS, minibatch_size=16)
    with pytest.raises(ValueError, match="files"):
        exfeed.Reader(inputs=INPUTS, minibatch_size=16)


def test_check_reports_each_shard_and_the_corpus(shards):
    d, truth = shards
    (d / "train-3.ctf").write_text("0 |x 1 2 3 |y 1:1\n1 |x 1 2 q |y 0:1\n")
    report = exfeed.check(corpus=str(d / "train-*"), inputs=INPUTS)
    assert [s["path"].rsplit("/", 1)[1] for s in report["shards"]] == [
        "train-0.ctf", "train-1.ctf.gz", "train-2.ctf", "train-3.ctf"]
    assert [s["ok"] for s in report["shards"]] == [True, True, True, False]
    assert [s["sequences"] for s in report["shards"][:3]] == list(SIZES)
    assert not report["ok"]
    assert report["sequences"] == sum(s["sequences"] for s in report["shards"])
    assert report["streams"][0]["samples"] == sum(s["streams"][0]["samples"] for s in report["shards"])
    bad = [p for p in report["problems"] if p["severity"] == "error"]
    assert bad and all(p["path"].endswith("train-3.ctf") for p in bad)
    assert bad[0]["line"] == 2
    # A shard that cannot be opened (a CBF file cut short: its header is read when opened) is
    # named all the same, and the others are still checked.
    cbf = d.parent / f"{d.name}-whole.cbf"
    exfeed.convert(d / "train-0.ctf", cbf, inputs=INPUTS)
    (d / "train-4.cbf").write_bytes(cbf.read_bytes()[: cbf.stat().st_size // 2])
    report = exfeed.check(corpus=str(d / "train-*"), inputs=INPUTS)
    cut = report["shards"][4]
    assert cut["path"].endswith("train-4.cbf") and not cut["ok"] and cut["error"]
    assert [s["ok"] for s in report["shards"]] == [True, True, True, False, False]
    assert report["sequences"] == sum(s["sequences"] for s in report["shards"][:4])
    (d / "train-4.cbf").unlink()
    (d / "train-3.ctf").unlink()
    report = exfeed.check(corpus=str(d / "train-*"), inputs=INPUTS)
    assert report["ok"] and report["error"] is None
    shard, key = report["longest"]["key"].split(":")
    assert len(truth[(int(shard), int(key))]) == report["longest"]["samples"] == 4


def test_dump_gives_every_shard_in_order_keyed_shard_key(shards):
    d, truth = shards
    seen = []
    for seq in exfeed.dump(corpus=str(d / "train-*"), inputs=INPUTS):
        shard, key = map(int, seq["key"].split(":"))
        np.testing.assert_array_equal(seq["x"], truth[(shard, key)].astype(np.float32))
        seen.append((shard, key))
    assert seen == sorted(truth)
    with pytest.raises(ValueError, match="corpus"):
        exfeed.dump(d / "train-0.ctf", corpus=str(d / "train-*"), inputs=INPUTS)


def test_convert_writes_the_corpus_as_one_file(shards, tmp_path_factory):
    d, truth = shards
    out = tmp_path_factory.mktemp("out")
    done = exfeed.convert(dst=out / "all.cbf", corpus=str(d / "train-*"), inputs=INPUTS)
    assert done["sequences"] == len(truth) and done["from"] == "ctf" and done["to"] == "cbf"
    rows = [seq["x"] for seq in exfeed.dump(out / "all.cbf")]
    for got, want in zip(rows, sorted(truth)):
        np.testing.assert_array_equal(got, truth[want].astype(np.float32))
    assert len(rows) == len(truth)
    # Shards whose streams differ: the first one that differs is named, nothing is written.
    (d / "train-3.ctf").write_text("0 |x 1 2 3\n")
    exfeed.convert(d / "train-3.ctf", out / "three.cbf", inputs={"x": ("dense", 3)})
    (d / "train-3.ctf").unlink()
    (out / "three.cbf").rename(d / "train-3.cbf")
    with pytest.raises(ValueError, match=r"corpus file \S*train-3.cbf has the streams x:dense:3, not those of"):
        exfeed.convert(dst=out / "again.cbf", corpus=str(d / "train-*"), inputs=INPUTS)
    assert not (out / "again.cbf").exists()
    with pytest.raises(ValueError, match="dst"):
        exfeed.convert(corpus=str(d / "train-*"), inputs=INPUTS)


def test_torch_dataset_reads_a_corpus(shards):
    require("torch")
    import exfeed.torch

    d, truth = shards
    seen = []
    for rank in (0, 1):
        ds = exfeed.torch.Dataset(corpus=str(d / "train-*"), inputs=INPUTS, minibatch_size=16, chunk_size=256,
                                  rank=rank, world_size=2, equalize=False, with_keys=True, layout="packed")
        for batch in ds:
            seen.extend(split(k) for k in batch["keys"].tolist())
    assert sorted(seen) == sorted(truth)


def test_a_worker_without_data_is_warned(ctf):
    path, _ = ctf
    with pytest.warns(UserWarning, match="worker 1 of 2 gets no data"):
        r = exfeed.Reader(path, inputs=INPUTS, minibatch_size=16, num_workers=2, worker_rank=1)
    assert list(r) == []


def test_auto_chunk_size_gives_every_worker_its_part(ctf):
    path, truth = ctf
    seen = []
    for rank in range(3):
        with exfeed.Reader(path, inputs=INPUTS, minibatch_size=16, chunk_size="auto", num_workers=3,
                           worker_rank=rank) as r:
            mine = [k for mb in r for k in mb.keys.tolist()]
        assert mine
        seen.extend(mine)
    assert sorted(seen) == sorted(truth)
    with pytest.raises(ValueError, match="chunk_size"):
        exfeed.Reader(path, inputs=INPUTS, minibatch_size=16, chunk_size="big")


def test_equalize_gives_every_worker_the_same_minibatches_and_notes(ctf):
    path, _ = ctf
    counts = []
    for rank in range(3):
        with exfeed.Reader(path, inputs=INPUTS, minibatch_size=16, chunk_size=700, num_workers=3,
                           worker_rank=rank, equalize=True, max_sweeps=2) as r:
            total = r.total_samples
            n = sum(1 for _ in r)
            notes = r.take_notes()
        counts.append(n)
        assert len(notes) == 2 and all(f"worker {rank} of 3" in note for note in notes), notes
    assert counts == [2 * max(1, total // (3 * 16))] * 3
    with pytest.raises(ValueError, match="equalize"):
        exfeed.Reader(path, inputs=INPUTS, minibatch_size=16, num_workers=3, equalize=2)
