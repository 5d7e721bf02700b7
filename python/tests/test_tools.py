"""exfeed.check, exfeed.info and exfeed.dump: the library's front door as Python calls."""

from __future__ import annotations

import numpy as np
import pytest

import exfeed
from conftest import INPUTS, SAMPLES, write_ctf


def test_check_summarizes_and_lists_every_problem(tmp_path):
    report = exfeed.check(SAMPLES / "sequences.ctf", inputs={"features": ("dense", 4), "label": ("sparse", 3)})
    assert report["ok"] and report["error"] is None and report["problems"] == []
    assert report["sequences"] == 40 and report["longest"] == {"samples": 4, "key": 2}
    assert [(s["name"], s["samples"], s["non_zeros"]) for s in report["streams"]] == [
        ("features", 96, 0), ("label", 40, 40)]
    bad = tmp_path / "bad.ctf"
    bad.write_text("0 |x 1 2 3 |y 0:1\n1 |x 1 2 3 4 |y 1:1\n2 |x 1 2 3 |y 9:1\n3 |x 1 2 3 |y 2:1\n")
    report = exfeed.check(bad, inputs=INPUTS)
    problems = report["problems"]
    assert not report["ok"] and report["sequences"] == 2 and report["error"] is None
    assert (problems[0]["line"], problems[0]["column"]) == (2, 4)
    assert "has 4 dense values, dim is 3" in problems[0]["message"]
    assert any(p["line"] == 3 and "index 9" in p["message"] for p in problems), problems
    # Every problem is listed; max_errors decides whether the file is usable.
    errors = sum(p["severity"] == "error" for p in problems)
    assert exfeed.check(bad, inputs=INPUTS, max_errors=errors)["ok"]
    assert not exfeed.check(bad, inputs=INPUTS, max_errors=errors - 1)["ok"]


def test_info_describes_a_lens_set(tmp_path):
    lens = exfeed.info(SAMPLES / "patterns.ex")
    assert (lens["format"], lens["examples"], lens["events"]) == ("Lens text (.ex)", 4, 8)
    assert lens["input_groups"] == ["in"]
    with pytest.raises(exfeed.DataError, match="this looks like CTF"):
        exfeed.info(SAMPLES / "sequences.ctf")


def test_dump_gives_every_sequence_in_file_order(tmp_path):
    path = tmp_path / "d.ctf"
    truth = write_ctf(path, 30)
    seqs = list(exfeed.dump(path, inputs=INPUTS))
    assert [s["key"] for s in seqs] == list(range(30))
    for s in seqs:
        rows, label = truth[s["key"]]
        np.testing.assert_array_equal(s["x"], rows.astype(np.float32))
        indptr, indices, data = s["y"]
        assert indptr.tolist() == [0, 1] and indices.tolist() == [label] and data.tolist() == [1.0]
    double = next(iter(exfeed.dump(path, inputs=INPUTS, precision="double")))
    assert double["x"].dtype == np.float64
    lens = list(exfeed.dump(SAMPLES / "patterns.ex", input_groups="in:4", target_groups="out:2", nan=0))
    assert len(lens) == 4 and lens[0]["input"].tolist()[0] == [1, 0, 0, 1]
    bad = tmp_path / "bad.ctf"
    bad.write_text("0 |x 1 2 3\n1 |x 1 2 3 4\n")
    it = exfeed.dump(bad, inputs={"x": ("dense", 3)})
    assert next(it)["key"] == 0
    with pytest.raises(exfeed.DataError) as e:
        next(it)
    assert (e.value.line, e.value.column) == (2, 4)


def test_max_record_size_bounds_one_sequence_in_every_function(tmp_path):
    path = tmp_path / "long.ctf"
    entries = " ".join(f"{i}:1" for i in range(1000))
    path.write_text(f"0 |s {entries}\n1 |s {entries}\n")
    inputs = {"s": ("sparse", 1000)}
    assert exfeed.check(path, inputs=inputs)["ok"]
    report = exfeed.check(path, inputs=inputs, max_record_size=4096)
    assert not report["ok"] and "longer than the maximum record size (4096 bytes)" in report["error"]
    with pytest.raises(exfeed.DataError, match=r"\(byte 4096\): a sequence longer than the maximum"):
        list(exfeed.dump(path, inputs=inputs, max_record_size=4096))
    with pytest.raises(exfeed.DataError, match="longer than the maximum record size"):
        list(exfeed.Reader(path, minibatch_size=2, inputs=inputs, max_record_size=4096))
    assert len(list(exfeed.Reader(path, minibatch_size=2, inputs=inputs, max_record_size=1 << 20))) == 1
    with pytest.raises(ValueError, match="max_record_size: must be at least 1 byte"):
        exfeed.check(path, inputs=inputs, max_record_size=0)
