"""The Python examples of the README and of docs/python.md run as written, from the repository's
root, each as its own script in a fresh interpreter (as a user would paste it into a file): the
PyTorch one with real DataLoader worker processes."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from conftest import REPO, require


def python_blocks(page: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", (REPO / page).read_text(), re.S)


def run_script(code: str, tmp_path, name: str, quiet: bool = True) -> str:
    script = tmp_path / name
    script.write_text(code)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO / "python"), env.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, str(script)], cwd=REPO, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, f"{name}:\n{code}\n{done.stderr}"
    if quiet:
        assert "Warning" not in done.stderr, done.stderr
    return done.stdout


def readme_block(mentioning: str) -> str:
    blocks = [b for b in python_blocks("README.md") if mentioning in b]
    assert len(blocks) == 1, f"one README example uses {mentioning}"
    return blocks[0]


def test_the_readme_numpy_example_runs(tmp_path):
    out = run_script(readme_block("exfeed.Reader("), tmp_path, "readme_numpy.py")
    # It printed each minibatch's sequence count, value shape and offsets: 2 sweeps of 96 samples.
    lines = out.splitlines()
    assert sum(int(line.split()[0]) for line in lines) == 80, out
    assert "[ 0" in out, out


def test_the_readme_pytorch_example_runs_with_dataloader_workers(tmp_path):
    require("torch")
    code = readme_block("DataLoader")
    assert "num_workers=2" in code
    # Quiet is not asserted here: torch warns about its sparse CSR tensors (exfeed.torch's part).
    out = run_script(code, tmp_path, "readme_torch.py", quiet=False)
    assert re.fullmatch(r"epoch 0 last batch \(\d+, \d+, 4\)\nepoch 1 last batch \(\d+, \d+, 4\)\n", out), out


@pytest.mark.parametrize("index", range(len(python_blocks("docs/python.md"))))
def test_the_python_page_examples_run(index, tmp_path):
    code = python_blocks("docs/python.md")[index]
    if "exfeed.cntk" in code:
        require("scipy")
    run_script(code, tmp_path, f"python_md_{index}.py")


def test_every_python_example_is_run():
    assert len(python_blocks("README.md")) == 2
    assert len(python_blocks("docs/python.md")) >= 3
