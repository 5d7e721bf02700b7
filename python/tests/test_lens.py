"""exfeed.lens.load: the example set itself, with the vectors Lens would load."""

from __future__ import annotations

import math

import numpy as np
import pytest

import exfeed
import exfeed.lens
from conftest import SAMPLES


def test_load_gives_examples_events_and_vectors():
    s = exfeed.lens.load(SAMPLES / "patterns.ex", input_groups="in:4", target_groups=[("out", 2)])
    assert [e.name for e in s.examples] == ["ab first", "ba", "flat", "sparse-pair"]
    assert [e.freq for e in s.examples] == [2.0, 1.0, 1.0, 1.0]
    assert s.examples[3].proc == 'puts "opaque proc text"'
    assert [len(e.events) for e in s.examples] == [2, 2, 2, 2]
    first = s.examples[0]
    assert first.inputs.dtype == np.float32 and first.inputs.shape == (2, 4) and first.targets.shape == (2, 2)
    np.testing.assert_array_equal(first.inputs[0], [1, 0, 0, 1])
    np.testing.assert_array_equal(first.targets[0], [1, 0])
    # Event 1: sparse input units 1 and 2 active (actI 1 over defI 0), target unit 1.
    np.testing.assert_array_equal(first.inputs[1], [0, 1, 1, 0])
    # "T: -  1" is NaN for the first target unit; nan= replaces it.
    assert math.isnan(s.examples[1].targets[1][0])
    again = exfeed.lens.load(SAMPLES / "patterns.ex", input_groups="in:4", target_groups="out:2", nan=0.5)
    assert again.examples[1].targets[1][0] == 0.5
    assert s.examples[1].events[0].max_time == 3.0


def test_the_reader_delivers_the_same_vectors():
    s = exfeed.lens.load(SAMPLES / "patterns.ex", input_groups="in:4", target_groups="out:2", nan=0)
    mb = exfeed.Reader(SAMPLES / "patterns.ex", input_groups="in:4", target_groups="out:2", nan=0,
                       minibatch_size=100, randomize=False).next_minibatch()
    for i, (inputs, targets) in enumerate(zip(mb["input"].as_sequences(), mb["target"].as_sequences())):
        np.testing.assert_array_equal(inputs, s.examples[i].inputs)
        np.testing.assert_array_equal(targets, s.examples[i].targets)


def test_without_a_layout_no_vectors_and_errors_are_data_errors(tmp_path):
    s = exfeed.lens.load(SAMPLES / "patterns.ex")
    assert len(s) == 4 and s.examples[0].inputs is None
    bad = tmp_path / "bad.ex"
    bad.write_text("name: x\nI: 1 2 Q;\n")
    with pytest.raises(exfeed.DataError) as e:
        exfeed.lens.load(bad)
    assert e.value.path == str(bad) and e.value.line == 2
    with pytest.raises(FileNotFoundError):
        exfeed.lens.load(tmp_path / "missing.ex")
    with pytest.raises(ValueError, match="target_groups: give input_groups and target_groups together"):
        exfeed.lens.load(SAMPLES / "patterns.ex", input_groups="in:4")
