"""exfeed.to_arrow, and the Parquet and Arrow IPC files exfeed writes read by the real pyarrow,
Polars and DuckDB: each sees the values exfeed's own reader (exfeed.dump) gives."""

from __future__ import annotations

import numpy as np
import pytest

import exfeed
from conftest import INPUTS, require, write_ctf


def convert_arrow(src, dst, **options) -> int:
    """exfeed.convert, returning the number of sequences written."""
    return exfeed.convert(src, dst, **options)["sequences"]


def own(path, **options) -> dict:
    """{key: {"x": [samples, 3] array, "y": (indptr, indices, data)}} by exfeed's reader."""
    return {d["key"]: {"x": d["x"], "y": d["y"]} for d in exfeed.dump(path, inputs=INPUTS, **options)}


def from_rows(rows) -> dict:
    """The same from rows {"key", "x": [[...]], "y": [{"indices", "values"}]} of any reader."""
    out = {}
    for r in rows:
        y = r["y"]
        indptr = np.cumsum([0] + [len(s["indices"]) for s in y])
        indices = np.array([i for s in y for i in s["indices"]], dtype=np.int64)
        values = np.array([v for s in y for v in s["values"]], dtype=np.float32)
        out[r["key"]] = {"x": np.array(r["x"], dtype=np.float32).reshape(-1, 3), "y": (indptr, indices, values)}
    return out


def assert_same(got: dict, want: dict) -> None:
    assert sorted(got) == sorted(want)
    for key, w in want.items():
        g = got[key]
        np.testing.assert_array_equal(g["x"], w["x"], err_msg=f"x of {key}")
        for a, b in zip(g["y"], w["y"]):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=f"y of {key}")


def test_to_arrow_streams_record_batches_of_the_schema(tmp_path):
    pa = require("pyarrow")
    path = tmp_path / "d.ctf"
    write_ctf(path, 200)
    reader = exfeed.to_arrow(path, inputs=INPUTS, chunk_size=2048)
    assert isinstance(reader, pa.RecordBatchReader)
    batches = list(reader)
    assert len(batches) > 3 and all(isinstance(b, pa.RecordBatch) for b in batches)
    schema = batches[0].schema
    assert schema.field("key").type == pa.uint64()
    assert schema.field("x").type == pa.list_(pa.field("item", pa.list_(pa.field("item", pa.float32(), False), 3), False))
    sparse = pa.struct([
        pa.field("indices", pa.list_(pa.field("item", pa.uint32(), False)), False),
        pa.field("values", pa.list_(pa.field("item", pa.float32(), False)), False),
    ])
    assert schema.field("y").type == pa.list_(pa.field("item", sparse, False))
    assert schema.field("x").metadata == {b"exfeed.storage": b"dense", b"exfeed.dim": b"3"}
    assert schema.field("y").metadata == {b"exfeed.storage": b"sparse", b"exfeed.dim": b"5"}
    table = pa.Table.from_batches(batches)
    assert table.column("key").to_pylist() == list(range(200))
    assert_same(from_rows(table.to_pylist()), own(path))
    # double precision: float64 values, the same numbers as exfeed's double reader.
    double = exfeed.to_arrow(path, inputs=INPUTS, precision="double").read_all()
    assert double.schema.field("x").type.value_type.value_type == pa.float64()
    np.testing.assert_array_equal(
        np.array(double.column("x")[7].as_py()), own(path, precision="double")[7]["x"]
    )
    with pytest.raises(TypeError, match="unexpected keyword argument 'chunksize'"):
        exfeed.to_arrow(path, inputs=INPUTS, chunksize=10)
    # The stream is consumed once; errors in the data come out of the batches' pull.
    stream = exfeed._exfeed._to_arrow(path, inputs=INPUTS)
    pa.RecordBatchReader.from_stream(stream)
    with pytest.raises(ValueError, match="already consumed"):
        stream.__arrow_c_stream__()
    bad = tmp_path / "bad.ctf"
    bad.write_text("0 |x 1 2 3\n1 |x 1 2 3 4\n")
    # The batch before the error arrives; the error (pyarrow's exception) names the place.
    reader = exfeed.to_arrow(bad, inputs={"x": ("dense", 3)}, chunk_size=1)
    assert reader.read_next_batch().column("key").to_pylist() == [0]
    with pytest.raises(Exception, match=r"bad.ctf:2:4 \(byte 14\): input 'x': has 4 dense values"):
        reader.read_next_batch()


def test_pyarrow_polars_and_duckdb_read_the_parquet_exfeed_writes(tmp_path):
    pa = require("pyarrow")
    pq = require("pyarrow.parquet")
    pl = require("polars")
    duckdb = require("duckdb")
    path = tmp_path / "d.ctf"
    write_ctf(path, 300)
    want = own(path)
    out = tmp_path / "d.parquet"
    assert convert_arrow(path, out, inputs=INPUTS, chunk_size=4096) == 300
    assert pq.ParquetFile(out).metadata.num_row_groups > 3
    assert_same(from_rows(pq.read_table(out).to_pylist()), want)
    assert_same(from_rows(pl.read_parquet(out).to_dicts()), want)
    con = duckdb.connect()
    rows = con.execute(f"SELECT key, x, y FROM read_parquet('{out}') ORDER BY key").fetchall()
    assert_same(from_rows({"key": k, "x": x, "y": y} for k, x, y in rows), want)
    samples = exfeed.check(path, inputs=INPUTS)["streams"][0]["samples"]
    assert con.execute(f"SELECT sum(len(x)) FROM read_parquet('{out}')").fetchone()[0] == samples
    # The Arrow IPC file holds the same table; exfeed's stream of the CTF file too.
    ipc = tmp_path / "d.arrow"
    convert_arrow(path, ipc, inputs=INPUTS)
    table = pa.ipc.open_file(ipc).read_all()
    assert table.equals(pq.read_table(out))
    assert table.equals(exfeed.to_arrow(path, inputs=INPUTS).read_all())
    # Polars and DuckDB also take exfeed's stream directly (the PyCapsule protocol).
    assert pl.from_arrow(exfeed.to_arrow(path, inputs=INPUTS)).height == 300


def test_parquet_converts_back_and_other_schemas_are_named_errors(tmp_path):
    pa = require("pyarrow")
    pq = require("pyarrow.parquet")
    path = tmp_path / "d.ctf"
    write_ctf(path, 50)
    out = tmp_path / "d.parquet"
    convert_arrow(path, out, inputs=INPUTS)
    for back in ("back.ctf", "back.cbf"):
        assert convert_arrow(out, tmp_path / back) == 50
        assert_same(own(tmp_path / back), own(path))
    with pytest.raises(FileExistsError, match="output exists"):
        convert_arrow(path, out, inputs=INPUTS)
    other = tmp_path / "other.parquet"
    pq.write_table(pa.table({"key": pa.array([0], pa.uint64()), "label": ["a"]}), other)
    with pytest.raises(exfeed.ConfigError, match=r"column 'label' is Utf8, which is not an exfeed stream"):
        convert_arrow(other, tmp_path / "o.cbf")
    assert not (tmp_path / "o.cbf").exists()
