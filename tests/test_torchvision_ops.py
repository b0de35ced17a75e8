"""A user's own script imports lightning, transformers and torchvision before anything of ours, in the venv
``bootstrap.sh`` sets up (simulation/torchvision_ops.py: the start-up hook it installs).

Each check runs a fresh interpreter of this venv from an empty folder, so nothing of the checkout is on its path
but what site-packages puts there. The twin removes the hook first and shows the same import failing, wherever
torchvision's ops do not load beside this torch (PyPI's CUDA wheel beside the CPU torch); it runs in a child of
tests/forked.py's server, which imported torch (as torchvision's first line does) and had not looked for torchvision.
"""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SITE = Path(sysconfig.get_paths()["purelib"])
SETUP = "run `bash bootstrap.sh setup` (it installs the torchvision start-up hook into the venv)"

OURS = """
ours = sorted(m for m in sys.modules if m.split('.')[0] in ('residual_lecture', 'simulation', 'cli', 'scenes'))
assert not ours, ours
"""


def _python(code: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", "import sys\n" + code], cwd=cwd, capture_output=True, text=True,
                          timeout=300)


def test_the_venv_holds_the_current_hook():
    """bootstrap.sh copied this checkout's simulation/torchvision_ops.py into site-packages beside its .pth."""
    copy, pth = SITE / "residual_lecture_torchvision.py", SITE / "residual_lecture_torchvision.pth"
    assert copy.is_file() and pth.is_file(), SETUP
    assert copy.read_bytes() == (ROOT / "simulation" / "torchvision_ops.py").read_bytes(), SETUP
    assert pth.read_text().strip() == "import residual_lecture_torchvision; residual_lecture_torchvision.install()"


def test_a_users_script_imports_torchvision_first(tmp_path):
    """``import torchvision`` first in a fresh interpreter, then a torchvision model's forward pass; none of our
    modules was imported on the way (~4 CPU s; the slow test below adds lightning and transformers, ~12)."""
    done = _python("import torchvision\nimport torch\n"
                   "y = torchvision.models.resnet18(num_classes=3).eval()(torch.zeros(1, 3, 32, 32))\n"
                   "assert y.shape == (1, 3), y.shape\n" + OURS + "print('ok')", tmp_path)
    assert done.returncode == 0 and done.stdout.strip() == "ok", (done.stderr[-2000:], SETUP)


@pytest.mark.slow
def test_a_users_script_imports_lightning_transformers_and_torchvision_first(tmp_path):
    """The imports of item 4 of issue 35, in a fresh interpreter, then a torchvision model's forward pass; none of
    our modules was imported on the way."""
    done = _python("import lightning\nimport transformers\nfrom transformers import GPT2LMHeadModel\n"
                   "import torchvision\nimport torch\n"
                   "y = torchvision.models.resnet18(num_classes=3).eval()(torch.zeros(1, 3, 32, 32))\n"
                   "assert y.shape == (1, 3), y.shape\n" + OURS + "print('ok')", tmp_path)
    assert done.returncode == 0 and done.stdout.strip() == "ok", (done.stderr[-2000:], SETUP)


def test_the_hook_imports_nothing_before_torchvision_is_looked_for(tmp_path):
    """A plain start of the interpreter: the hook is on sys.meta_path and torch is not imported."""
    done = _python("assert 'torch' not in sys.modules\n"
                   "assert [type(f).__name__ for f in sys.meta_path].count('TorchvisionOps') == 1\n" + OURS, tmp_path)
    assert done.returncode == 0, (done.stderr[-2000:], SETUP)


# One interpreter (a child of tests/forked.py's server, which imported torch; torchvision imports it first anyway),
# the hook taken off first: the import, then whether torchvision's own C++ ops load beside this torch (a CPU build
# of torchvision, which needs no hook).
TWIN = """
import importlib.util, json, pathlib, sys
hooked = [type(f).__name__ for f in sys.meta_path].count('TorchvisionOps') == 1 and 'torchvision' not in sys.modules
sys.meta_path[:] = [f for f in sys.meta_path if type(f).__name__ != 'TorchvisionOps']
try:
    import torchvision
    error = None
except Exception as exc:
    error = f'{type(exc).__name__}: {exc}'
import torch
try:
    for p in pathlib.Path(importlib.util.find_spec('torchvision').submodule_search_locations[0]).glob('_C*.so'):
        torch.ops.load_library(str(p))
    ops_load = True
except Exception:
    ops_load = False
print(json.dumps({'hooked': hooked, 'error': error, 'ops_load': ops_load}))
"""


@pytest.mark.xdist_group("torch-probes")  # the worker that holds the probe server (tests/forked.py)
def test_twin_without_the_hook_torchvision_fails_to_import(tmp_path):
    """The hook is what makes the import work: taken off sys.meta_path, ``import torchvision`` fails as the issue
    reports (skipped where torchvision's ops load: a CPU build needs no hook)."""
    from forked import run_forked

    done = run_forked(TWIN, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout.splitlines()[-1])
    assert found["hooked"], (found, SETUP)  # the hook was there, and nothing had looked for torchvision
    if found["ops_load"]:
        pytest.skip("torchvision's ops load beside this torch: nothing for the hook to do")
    assert found["error"] is not None and "operator torchvision::nms does not exist" in found["error"], found
