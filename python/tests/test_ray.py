"""exfeed.ray on a real local Ray (ray.init(num_cpus=2)): a sharded corpus read by read tasks
of exfeed chunks, every sequence exactly once, and written to Parquet by Ray."""

from __future__ import annotations

import numpy as np
import pytest

import exfeed
from conftest import INPUTS, require, write_ctf


def write_shards(tmp_path, shards: int, sequences: int) -> dict:
    """CTF shards train-00000.ctf, ... of `sequences` sequences each, shard i keyed from
    i * 1000; {key: (x rows as float32, label)}."""
    truth = {}
    for i in range(shards):
        shard = write_ctf(tmp_path / f"train-{i:05d}.ctf", sequences, seed=i, first_key=i * 1000)
        truth |= {key: (rows.astype(np.float32), label) for key, (rows, label) in shard.items()}
    return truth


@pytest.fixture(scope="module")
def local_ray():
    ray = require("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    yield ray
    ray.shutdown()


def test_a_sharded_corpus_arrives_exactly_once_and_ray_writes_parquet(local_ray, tmp_path):
    pq = require("pyarrow.parquet")
    import exfeed.ray

    truth = write_shards(tmp_path, 4, 150)
    corpus = str(tmp_path / "train-*.ctf")
    # Chunks of 2 KiB: each shard is several chunks, so tasks read parts of files. The shards
    # have sequence ids, so by default they are read without an index: the chunks are byte
    # ranges whose row counts are only estimated, and the tasks' metadata gives none...
    tasks = exfeed.ray.ExfeedDatasource(corpus, inputs=INPUTS, chunk_size=2048).get_read_tasks(6)
    assert len(tasks) == 6
    assert all(t.metadata.num_rows is None for t in tasks)
    # ...while with the index it gives the exact counts.
    indexed = exfeed.ray.ExfeedDatasource(corpus, inputs=INPUTS, chunk_size=2048, index="full")
    assert sum(t.metadata.num_rows for t in indexed.get_read_tasks(6)) == 600
    for index in ("full", "auto"):
        ds = exfeed.ray.read(corpus, inputs=INPUTS, chunk_size=2048, override_num_blocks=6, index=index)
        assert ds.count() == 600, index
        rows = ds.take_all()
        keys = sorted(r["key"] for r in rows)
        assert keys == sorted(truth), f"every sequence exactly once (index={index})"
        for r in rows:
            rows_x, label = truth[r["key"]]
            np.testing.assert_array_equal(np.array([list(s) for s in r["x"]], dtype=np.float32), rows_x)
            assert [list(s["indices"]) for s in r["y"]] == [[label]]
    with pytest.raises(ValueError, match="index"):
        exfeed.ray.ExfeedDatasource(corpus, inputs=INPUTS, index="sometimes")
    # Ray writes the dataset as Parquet; the files keep exfeed's schema and its metadata.
    out = tmp_path / "parquet"
    ds.write_parquet(str(out))
    table = pq.read_table(out)
    assert sorted(table.column("key").to_pylist()) == keys
    written = sorted(out.glob("*.parquet"))
    assert written
    field = pq.read_schema(written[0]).field("y")
    assert field.metadata[b"exfeed.storage"] == b"sparse" and field.metadata[b"exfeed.dim"] == b"5"
    # ...so exfeed reads Ray's files back.
    back = tmp_path / "back.ctf"
    n = exfeed.convert(written[0], back)["sequences"]
    assert n == pq.read_metadata(written[0]).num_rows
    for d in exfeed.dump(back, inputs=INPUTS):
        np.testing.assert_array_equal(d["x"], truth[d["key"]][0])


def test_iter_torch_batches_feeds_every_sequence_once_as_padded_tensors(local_ray, tmp_path):
    torch = require("torch")
    import exfeed.ray

    truth = write_shards(tmp_path, 3, 120)
    ds = exfeed.ray.read(str(tmp_path / "train-*.ctf"), inputs=INPUTS, chunk_size=2048, override_num_blocks=4)
    # Without a collate_fn Ray refuses the ragged sequences, saying to pass one.
    with pytest.raises(Exception, match="collate_fn"):
        next(iter(ds.iter_torch_batches(batch_size=32)))
    seen, sizes = [], []
    for batch in ds.iter_torch_batches(batch_size=32, collate_fn=exfeed.ray.TorchCollate({"y": 5})):
        assert set(batch) == {"key", "x", "x_lengths", "y", "y_lengths"}
        keys = batch["key"]
        n = len(keys)
        sizes.append(n)
        assert keys.dtype == torch.uint64 and keys.shape == (n,)
        x, lengths = batch["x"], batch["x_lengths"]
        assert x.dtype == torch.float32 and lengths.dtype == torch.int64
        assert x.shape == (n, int(lengths.max()), 3)
        assert batch["y"].shape == (n, int(batch["y_lengths"].max()), 5)
        for b, key in enumerate(keys.tolist()):
            rows, label = truth[key]
            length = int(lengths[b])
            assert length == len(rows)
            np.testing.assert_array_equal(x[b, :length].numpy(), rows)
            assert not x[b, length:].any(), "padding is zeros"
            # One label sample, one-hot.
            assert int(batch["y_lengths"][b]) == 1
            assert batch["y"][b, 0].tolist() == [float(i == label) for i in range(5)]
            seen.append(key)
    assert sorted(seen) == sorted(truth), "every sequence exactly once"
    assert sum(sizes) == 360 and max(sizes) == 32
    # A sparse stream without its dim: the error says what to pass.
    with pytest.raises(Exception, match=r"TorchCollate\(\{'y': DIM\}\)"):
        next(iter(ds.iter_torch_batches(batch_size=8, collate_fn=exfeed.ray.TorchCollate())))


def test_a_parquet_file_is_read_by_tasks_of_its_own_row_groups(local_ray, tmp_path):
    import exfeed.ray

    truth = write_shards(tmp_path, 1, 400)
    parquet = tmp_path / "train.parquet"
    exfeed.convert(tmp_path / "train-00000.ctf", parquet, inputs=INPUTS, chunk_size=2048)
    groups = exfeed.info(parquet)["chunks"]
    assert groups >= 4
    # A row group is a chunk: the tasks split them, their row counts exact from the footer.
    tasks = exfeed.ray.ExfeedDatasource(str(parquet)).get_read_tasks(4)
    assert len(tasks) == 4 and sum(t.metadata.num_rows for t in tasks) == 400
    rows = exfeed.ray.read(str(parquet), override_num_blocks=4).take_all()
    assert sorted(r["key"] for r in rows) == sorted(truth)
    for r in rows:
        np.testing.assert_array_equal(np.array([list(s) for s in r["x"]], dtype=np.float32), truth[r["key"]][0])
