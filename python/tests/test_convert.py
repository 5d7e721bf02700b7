"""exfeed.convert (the library's conversion, atomic), and every function on a FIFO: an input
that cannot be read twice is read once, from its first byte."""

from __future__ import annotations

import os
import threading

import numpy as np
import pytest

import exfeed
import exfeed.lens
from conftest import INPUTS, SAMPLES, write_ctf


def files_in(path):
    return sorted(p.name for p in path.iterdir())


def test_ctf_to_cbf_and_back_keeps_every_value(tmp_path):
    src = tmp_path / "data.ctf"
    truth = write_ctf(src, 50)
    done = exfeed.convert(src, tmp_path / "data.cbf", inputs=INPUTS, precision="double", chunk_size=512)
    assert (done["from"], done["to"], done["sequences"]) == ("ctf", "cbf", 50)
    assert done["chunks"] > 1 and done["problems"] == []
    assert exfeed.info(tmp_path / "data.cbf")["streams"][0]["element"] == "double"
    back = exfeed.convert(tmp_path / "data.cbf", tmp_path / "back.ctf")
    assert (back["from"], back["to"], back["sequences"], back["chunks"]) == ("cbf", "ctf", 50, 0)
    # CBF keeps no ids: the sequences come back numbered 0.. in file order, as written.
    seqs = list(exfeed.dump(tmp_path / "back.ctf", inputs=INPUTS, precision="double"))
    assert [s["key"] for s in seqs] == list(range(50))
    for s in seqs:
        rows, label = truth[s["key"]]
        np.testing.assert_array_equal(s["x"], rows)
        assert s["y"][1].tolist() == [label]


def test_lens_text_to_binary_and_to_cbf_with_a_layout(tmp_path):
    bex = tmp_path / "patterns.bex"
    done = exfeed.convert(SAMPLES / "patterns.ex", bex)
    assert (done["from"], done["to"], done["sequences"]) == ("ex", "bex", 4)
    assert exfeed.info(bex)["format"] == "Lens binary (.bex)"
    text, binary = exfeed.lens.load(SAMPLES / "patterns.ex"), exfeed.lens.load(bex)
    assert [e.name for e in binary.examples] == [e.name for e in text.examples]
    layout = dict(input_groups="in:4", target_groups="out:2", nan=0.0)
    with pytest.raises(exfeed.ConfigError, match="needs the network's layout"):
        exfeed.convert(bex, tmp_path / "p.cbf")
    exfeed.convert(bex, tmp_path / "p.cbf", **layout)
    want = list(exfeed.dump(SAMPLES / "patterns.ex", **layout))
    got = list(exfeed.dump(tmp_path / "p.cbf"))
    assert len(got) == len(want) == 4
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g["input"], w["input"])
        np.testing.assert_array_equal(g["target"], w["target"])


def test_an_existing_output_is_refused_unless_overwrite_and_kept_on_error(tmp_path):
    src = tmp_path / "data.ctf"
    write_ctf(src, 10)
    out = tmp_path / "out.cbf"
    out.write_bytes(b"old")
    with pytest.raises(FileExistsError) as e:
        exfeed.convert(src, out, inputs=INPUTS)
    assert e.value.filename == str(out)
    assert "overwrite=True" in str(e.value)
    assert out.read_bytes() == b"old"
    bad = tmp_path / "bad.ctf"
    bad.write_text(src.read_text() + "99 |x 1 2 3 4 |y 0:1\n")
    with pytest.raises(exfeed.DataError) as e:
        exfeed.convert(bad, out, inputs=INPUTS, overwrite=True)
    assert e.value.path == str(bad) and e.value.line == src.read_text().count("\n") + 1
    assert out.read_bytes() == b"old", "an error keeps the old output"
    assert files_in(tmp_path) == ["bad.ctf", "data.ctf", "out.cbf"], "no partial file is left"
    # Under an error budget the bad sequence is skipped and reported.
    done = exfeed.convert(bad, out, inputs=INPUTS, overwrite=True, max_errors=5)
    assert done["sequences"] == 10 and done["problems"]
    assert all(p["severity"] == "error" and p["line"] == e.value.line for p in done["problems"])
    assert exfeed.info(out)["sequences"] == 10


def test_arguments_are_checked_and_named(tmp_path):
    src = tmp_path / "data.ctf"
    write_ctf(src, 3)
    with pytest.raises(TypeError, match="convert\\(\\) got an unexpected keyword argument 'force'"):
        exfeed.convert(src, tmp_path / "o.cbf", inputs=INPUTS, force=True)
    with pytest.raises(ValueError, match="to: expected ctf, cbf, ex, bex, parquet or arrow"):
        exfeed.convert(src, tmp_path / "o.cbf", inputs=INPUTS, to="orc")
    with pytest.raises(exfeed.DataError, match="converting CTF to CTF is not supported"):
        exfeed.convert(src, tmp_path / "o.txt", inputs=INPUTS)
    with pytest.raises(TypeError, match="check\\(\\) got an unexpected keyword argument 'x'"):
        exfeed.check(src, inputs=INPUTS, x=1)
    assert files_in(tmp_path) == ["data.ctf"]
    # The format from `to=` rather than the name; Parquet too (tests/test_arrow.py).
    assert exfeed.convert(src, tmp_path / "o.data", inputs=INPUTS, to="cbf")["to"] == "cbf"
    done = exfeed.convert(src, tmp_path / "o.pq.data", inputs=INPUTS, to="parquet")
    assert (done["from"], done["to"], done["sequences"]) == ("ctf", "parquet", 3)
    assert (tmp_path / "o.pq.data").read_bytes()[:4] == b"PAR1"


def test_a_configuration_gives_the_inputs_and_the_precision(tmp_path):
    args = dict(config=SAMPLES / "sequences.cntk", set={"sample.precision": "double"})
    done = exfeed.convert(SAMPLES / "sequences.ctf", tmp_path / "s.cbf", **args)
    assert done["sequences"] == 40
    header = exfeed.info(tmp_path / "s.cbf")
    assert [(s["name"], s["element"]) for s in header["streams"]] == [
        ("features", "double"), ("label", "double")]
    assert exfeed.check(SAMPLES / "sequences.ctf", **args)["sequences"] == 40


def fifo_of(tmp_path, name, content: bytes):
    """A FIFO named `name` and a thread writing `content` into it once a reader opens it."""
    path = tmp_path / name
    os.mkfifo(path)

    def write():
        with open(path, "wb") as f:
            f.write(content)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    return path, writer


needs_fifo = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this system")


@needs_fifo
def test_a_fifo_is_read_once_from_its_first_byte_by_every_function(tmp_path):
    ctf = (SAMPLES / "sequences.ctf").read_bytes()
    inputs = {"features": ("dense", 4), "label": ("sparse", 3)}
    want = [s["key"] for s in exfeed.dump(SAMPLES / "sequences.ctf", inputs=inputs)]
    assert len(want) == 40

    fifo, writer = fifo_of(tmp_path, "reader.ctf", ctf)
    reader = exfeed.Reader(fifo, inputs=inputs, minibatch_size=1000, randomize=False)
    keys = [k for mb in reader for k in mb.keys.tolist()]
    writer.join(10)
    assert keys == want

    fifo, writer = fifo_of(tmp_path, "check.ctf", ctf)
    report = exfeed.check(fifo, inputs=inputs)
    writer.join(10)
    assert report["ok"] and report["sequences"] == 40 and report["problems"] == []

    fifo, writer = fifo_of(tmp_path, "dump.ctf", ctf)
    assert [s["key"] for s in exfeed.dump(fifo, inputs=inputs)] == want
    writer.join(10)

    fifo, writer = fifo_of(tmp_path, "convert.ctf", ctf)
    assert exfeed.convert(fifo, tmp_path / "out.cbf", inputs=inputs)["sequences"] == 40
    writer.join(10)
    assert [s["key"] for s in exfeed.dump(tmp_path / "out.cbf")] == want

    # A CBF file through a FIFO, recognised by its magic bytes whatever the name.
    fifo, writer = fifo_of(tmp_path, "cbf-in-a-fifo", (tmp_path / "out.cbf").read_bytes())
    reader = exfeed.Reader(fifo, minibatch_size=1000, randomize=False)
    assert [k for mb in reader for k in mb.keys.tolist()] == want
    writer.join(10)

    # A Lens file named .ex: every example, none of its first bytes lost.
    fifo, writer = fifo_of(tmp_path, "patterns.ex", (SAMPLES / "patterns.ex").read_bytes())
    lens = exfeed.Reader(fifo, input_groups="in:4", target_groups="out:2", nan=0.0,
                         minibatch_size=100, randomize=False)
    assert [k for mb in lens for k in mb.keys.tolist()] == [0, 1, 2, 3]
    writer.join(10)
