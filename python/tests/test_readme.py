"""The README's Python examples run as written (from the repository's root)."""

from __future__ import annotations

import os
import re

from conftest import REPO


def test_readme_python_examples_run(capsys):
    text = (REPO / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert blocks, "the README has Python examples"
    cwd = os.getcwd()
    os.chdir(REPO)
    try:
        for code in blocks:
            exec(compile(code, "README.md", "exec"), {})
    finally:
        os.chdir(cwd)
    assert "[ 0" in capsys.readouterr().out  # it printed offsets
