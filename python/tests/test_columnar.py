"""Parquet and Arrow IPC files through the front door: exfeed.Reader, exfeed.torch.Dataset with
DataLoader workers, to_arrow, info/check/dump, and files written by pyarrow (another tool) with the
same schema."""

from __future__ import annotations

import numpy as np
import pytest

import exfeed
from conftest import INPUTS, require, write_ctf


@pytest.fixture
def columnar(tmp_path):
    """{format: path} of one CTF file of 300 sequences converted to Parquet and Arrow IPC in small
    chunks (several row groups / record batches), and the truth."""
    ctf = tmp_path / "data.ctf"
    truth = write_ctf(ctf, 300, seed=7)
    paths = {}
    for name in ("data.parquet", "data.arrow"):
        exfeed.convert(ctf, tmp_path / name, inputs=INPUTS, chunk_size=4096)
        paths[name.split(".")[1]] = tmp_path / name
    return paths, truth


def check_sequences(keys, xs, truth):
    assert sorted(keys) == sorted(truth), "every sequence exactly once"
    for key, x in zip(keys, xs):
        np.testing.assert_array_equal(x, truth[key][0].astype(np.float32))


def test_the_reader_reads_every_sequence_once_in_every_rank(columnar):
    paths, truth = columnar
    for path in paths.values():
        assert exfeed.info(path)["chunks"] > 3
        keys, xs = [], []
        for rank in (0, 1):
            reader = exfeed.Reader(path, minibatch_size=32, num_workers=2, worker_rank=rank, seed=3)
            for mb in reader:
                for i, key in enumerate(mb.keys.tolist()):
                    keys.append(key)
                    xs.append(mb["x"].as_sequences()[i])
        check_sequences(keys, xs, truth)


def test_torch_dataloader_workers_read_parquet_like_ctf(columnar):
    torch = require("torch")
    import exfeed.torch

    paths, truth = columnar
    ds = exfeed.torch.Dataset(paths["parquet"], minibatch_size=16, layout="packed", with_keys=True, seed=1)
    loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2)
    keys = [k for b in loader for k in b["keys"].tolist()]
    assert sorted(keys) == sorted(truth)


def test_info_check_dump_and_to_arrow_agree_with_the_ctf(columnar, tmp_path):
    pa = require("pyarrow")
    paths, truth = columnar
    for fmt, path in paths.items():
        info = exfeed.info(path)
        assert info["format"] == {"parquet": "Parquet", "arrow": "Arrow IPC"}[fmt]
        assert info["sequences"] == len(truth)
        assert [(s["name"], s["storage"], s["dim"]) for s in info["streams"]] == [("x", "dense", 3), ("y", "sparse", 5)]
        summary = exfeed.check(path)
        assert summary["ok"] and summary["sequences"] == len(truth)
        dumped = list(exfeed.dump(path))
        check_sequences([d["key"] for d in dumped], [np.asarray(d["x"], dtype=np.float32) for d in dumped], truth)
        table = pa.table(exfeed.to_arrow(path))
        assert sorted(table.column("key").to_pylist()) == sorted(truth)


def test_a_parquet_file_written_by_pyarrow_reads_as_its_schema_says(tmp_path):
    pa = require("pyarrow")
    pq = require("pyarrow.parquet")
    rng = np.random.default_rng(0)
    keys = list(range(100, 160))
    lengths = rng.integers(1, 4, len(keys))
    x = [rng.standard_normal((n, 2)).astype(np.float32) for n in lengths]
    labels = [int(v) for v in rng.integers(0, 7, len(keys))]
    sample = pa.list_(pa.float32(), 2)
    sparse = pa.struct([("indices", pa.list_(pa.uint32())), ("values", pa.list_(pa.float32()))])
    table = pa.table(
        {
            "key": pa.array(keys, pa.uint64()),
            "x": pa.array([[list(map(float, row)) for row in s] for s in x], pa.list_(sample)),
            "y": pa.array([[{"indices": [c], "values": [1.0]}] for c in labels], pa.list_(sparse)),
        }
    )
    path = tmp_path / "foreign.parquet"
    pq.write_table(table, path, row_group_size=16)
    # No exfeed metadata: a sparse stream's dim must be given.
    with pytest.raises(exfeed.ConfigError, match="column .y.: a sparse stream needs its dim"):
        list(exfeed.Reader(path, minibatch_size=8))
    reader = exfeed.Reader(path, inputs={"x": ("dense", 2), "y": ("sparse", 7)}, minibatch_size=8, randomize=False)
    got_keys, got_x, got_y = [], [], []
    for mb in reader:
        got_keys += mb.keys.tolist()
        got_x += mb["x"].as_sequences()
        got_y += mb["y"].indices.tolist()
    assert got_keys == keys
    for want, got in zip(x, got_x):
        np.testing.assert_array_equal(got, want)
    assert got_y == labels
