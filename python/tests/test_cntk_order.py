"""exfeed.Reader(randomizer="cntk"): CNTK 2.7's order of sequences, checked against the
expected orders of CNTK's own randomizer tests (ReaderLibTests.cpp)."""

from __future__ import annotations

import pytest

import exfeed

# TestRandomization_TwoSweeps: 5 chunks of 2 one-sample sequences, a window of the whole data.
CNTK_TWO_SWEEPS = [6, 3, 1, 5, 9, 0, 4, 2, 7, 8, 3, 0, 8, 4, 7, 5, 2, 9, 1, 6]


def write_ten(tmp_path):
    """Ten one-sample sequences of 7 bytes each: chunks of 14 bytes are CNTK's mock chunks."""
    path = tmp_path / "ten.ctf"
    path.write_text("".join("%d |x %d\n" % (k, k) for k in range(10)))
    return str(path)


def keys(reader):
    return [k for mb in reader for k in mb.keys.tolist()]


def test_cntk_s_own_expected_order_through_the_reader(tmp_path):
    path = write_ten(tmp_path)
    base = dict(inputs=["x:dense:1"], chunk_size=14, max_sweeps=2, randomizer="cntk")
    for size in (1, 3, 7, 20):
        got = keys(exfeed.Reader(path, minibatch_size=size, window_samples=2**63, **base))
        assert got == CNTK_TWO_SWEEPS, size
    # BlockRandomizerOneEpochWithChunks1: a window of 4 samples.
    one = dict(base, max_sweeps=1)
    got = keys(exfeed.Reader(path, minibatch_size=1, window_samples=4, **one))
    assert got == [8, 9, 1, 0, 6, 7, 2, 3, 4, 5]
    # exfeed's own order is another one.
    own = dict(base, randomizer="exfeed")
    assert keys(exfeed.Reader(path, minibatch_size=1, window_samples=2**63, **own)) != CNTK_TWO_SWEEPS


def test_a_saved_state_goes_on_in_cntk_s_order(tmp_path):
    path = write_ten(tmp_path)
    base = dict(inputs=["x:dense:1"], chunk_size=14, max_sweeps=2, randomizer="cntk",
                window_samples=2**63, minibatch_size=3)
    r = exfeed.Reader(path, **base)
    first = [r.next_minibatch().keys.tolist() for _ in range(3)]
    state = r.state_dict()
    again = exfeed.Reader(path, **base)
    again.load_state_dict(state)
    rest = keys(again)
    assert rest == keys(r)
    assert sum(first, []) + rest == CNTK_TWO_SWEEPS


def test_bad_randomizers_are_refused(tmp_path):
    path = write_ten(tmp_path)
    with pytest.raises(ValueError, match="randomizer 'cnt' is not one of exfeed, cntk"):
        exfeed.Reader(path, inputs=["x:dense:1"], minibatch_size=1, randomizer="cnt")
    with pytest.raises(Exception, match="needs the full index"):
        exfeed.Reader(path, inputs=["x:dense:1"], minibatch_size=1, randomizer="cntk", index="none")
