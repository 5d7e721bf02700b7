"""The extension's optional parts (exfeed.features) and what a build without them says."""

import pytest

import exfeed


def test_the_test_build_has_every_optional_part():
    # scripts/test builds the extension with --features full; the other tests rely on it.
    assert set(exfeed.features) == {"arrow", "remote"}
    assert "ArrowStream" in exfeed.__all__


def test_a_build_without_arrow_says_how_to_get_it(monkeypatch, tmp_path):
    monkeypatch.setattr(exfeed, "features", ("remote",))
    with pytest.raises(ImportError) as e:
        exfeed.to_arrow(tmp_path / "any.ctf")
    message = str(e.value)
    assert "exfeed.to_arrow needs exfeed built with its 'arrow' feature" in message
    assert "--config-settings=build-args=--features=full" in message
    assert "('remote',)" in message
