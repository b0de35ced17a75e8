"""A user's own network from the outside (issue 20): model files and specs (hostile ones generated), data, the
digest, the memory guard, training a model and its twin, the command line."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simulation.config import ConfigError, UserModelConfig
from simulation.runs import check_memory
from simulation.kinds.user_model import UserModelError, estimate_memory, load_user_data, run

from support import examples, invoke

ROOT = Path(__file__).resolve().parent.parent

# A residual MLP as a user would write it; {head} and {extra} are filled in by the tests.
RESIDUAL_FILE = '''
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self, width=8, depth=2, classes=10):
        super().__init__()
        self.stem = nn.Linear(64, width)
        self.blocks = nn.ModuleList(nn.Sequential(nn.Linear(width, width), nn.ReLU()) for _ in range(depth))
        self.head = nn.Linear(width, classes)

    def forward(self, x):
        h = self.stem(x)
        for block in self.blocks:
            h = h + block(h)
        {extra}
        return self.head(h){head}


def build(width=8, depth=2, classes=10):
    return Net(width, depth, classes)
'''


def write(path: Path, text: str) -> str:
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return str(path)


def residual_file(path: Path, head: str = "", extra: str = "pass") -> str:
    return write(path, RESIDUAL_FILE.replace("{head}", head).replace("{extra}", extra))


def one_line(exc: BaseException) -> str:
    message = str(exc)
    assert "\n" not in message and "Traceback" not in message and message
    return message



# One torch thread, as training uses (conftest.one_thread): two threads on a busy 2-core machine are ~15x slower here.
pytestmark = pytest.mark.usefixtures("one_thread")

# -- hostile models, generated ------------------------------------------------------------------------

EXCEPTIONS = ("ValueError", "RuntimeError", "KeyError", "TypeError", "ZeroDivisionError", "AssertionError")
NOT_MODULES = ("1", "'resnet'", "None", "[1, 2]", "nn.Linear", "torch.zeros(3)")


@st.composite
def hostile_models(draw):
    """(file text, factory name, what the message must contain), one defect each, at a varying line."""
    padding = "\n" * draw(st.integers(0, 6)) + "".join(f"# comment {i}\n" for i in range(draw(st.integers(0, 3))))
    head = "import torch\nfrom torch import nn\n" + padding
    line = head.count("\n") + 2  # the line of the defect in the templates below (after `def build():`)
    defect = draw(st.sampled_from(["factory_raises", "import_raises", "syntax", "missing", "not_module",
                                   "wrong_output", "no_residual", "nan_output", "forward_raises", "factory_exits",
                                   "import_exits", "detached_output", "backward_raises"]))
    exc = draw(st.sampled_from(EXCEPTIONS))
    message = draw(st.text(st.characters(codec="ascii", categories=("L", "N")), min_size=1, max_size=20))
    if defect == "factory_raises":
        return head + f"def build():\n    raise {exc}({message!r})\n", "build", [f"line {line}", exc]
    if defect == "import_raises":
        return head + f"raise {exc}({message!r})\n", "build", [f"line {line - 1}", exc, "importing"]
    if defect == "factory_exits":  # sys.exit in the user's code: one line too, not a silent end of the command
        return head + f"def build():\n    raise SystemExit({message!r})\n", "build", [f"line {line}", "SystemExit"]
    if defect == "import_exits":
        return head + "raise SystemExit(3)\n", "build", [f"line {line - 1}", "SystemExit: 3", "importing"]
    if defect == "syntax":
        return head + "def build(:\n    pass\n", "build", [f"line {line - 1}", "SyntaxError"]
    if defect == "missing":
        return head + "def make():\n    return nn.Linear(64, 10)\n", "build", ["has no 'build'"]
    if defect == "not_module":
        value = draw(st.sampled_from(NOT_MODULES))
        article = {"1": "an int", "'resnet'": "a str", "None": "a NoneType", "[1, 2]": "a list", "nn.Linear": "a type",
                   "torch.zeros(3)": "a Tensor"}[value]
        return head + f"def build():\n    return {value}\n", "build", [f"returned {article}, not a torch.nn.Module"]
    if defect == "wrong_output":
        classes = draw(st.integers(1, 40).filter(lambda n: n != 10))
        text = RESIDUAL_FILE.replace("{head}", "").replace("{extra}", "pass").replace("classes=10", f"classes={classes}")
        return text, "build", [f"outputs shape [2, {classes}]", "needs [2, 10]"]
    if defect == "no_residual":
        return head + "def build():\n    return nn.Sequential(nn.Linear(64, 8), nn.ReLU(), nn.Linear(8, 10))\n", "build", \
            ["no residual addition", "model.blocks="]
    if defect == "nan_output":
        return RESIDUAL_FILE.replace("{head}", " * float('nan')").replace("{extra}", "pass"), "build", ["non-finite"]
    if defect == "detached_output":
        cut = draw(st.sampled_from([".detach()", ".detach().clone()", ".data"]))
        return RESIDUAL_FILE.replace("{head}", cut).replace("{extra}", "pass"), "build", ["has no gradient"]
    if defect == "backward_raises":  # a custom autograd.Function whose backward raises: the forward is fine
        text = RESIDUAL_FILE.replace("{head}", "").replace("{extra}", "h = Raising.apply(h)") + (
            f"\n\nclass Raising(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, h):\n"
            f"        return h.clone()\n\n    @staticmethod\n    def backward(ctx, g):\n"
            f"        raise {exc}({message!r})\n")
        raising = text.splitlines().index(f"        raise {exc}({message!r})") + 1
        return text, "build", [f"line {raising}", exc, "backward pass"]
    text = RESIDUAL_FILE.replace("{head}", "").replace("{extra}", f"raise {exc}({message!r})")
    raising = text.splitlines().index(f"        raise {exc}({message!r})") + 1
    return text, "build", [f"line {raising}", exc, "forward pass"]


@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(model=hostile_models())
def test_hostile_models_end_in_one_line_naming_the_file(tmp_path_factory, model):
    text, factory, expected = model
    path = tmp_path_factory.mktemp("hostile") / "net.py"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        estimate_memory(UserModelConfig(spec=f"{path}:{factory}", steps=2))
    message = one_line(info.value)
    for part in expected:
        assert part in message, (part, message)
    if any(p.startswith("line ") for p in expected):
        assert str(path) in message and message.count("line ") == 1, message  # a SyntaxError's str() repeats it


@settings(max_examples=examples(60), deadline=None)
@given(spec=st.text(max_size=40))
def test_bad_spec_strings_end_in_one_line(spec):
    try:
        config = UserModelConfig(spec=spec)
    except ConfigError as exc:
        one_line(exc)
        return
    # A well-formed spec naming nothing that exists: loading it says so in one line.
    with pytest.raises(ConfigError) as info:
        estimate_memory(config)
    one_line(info.value)


def test_factory_arguments_reach_the_factory(tmp_path):
    spec = residual_file(tmp_path / "net.py") + ":build"
    config = UserModelConfig(spec=spec, args='{"width": 4, "depth": 5}')
    assert estimate_memory(config).parameters == 4 * (64 * 4 + 4 + 5 * (4 * 4 + 4) + 4 * 10 + 10)
    with pytest.raises(UserModelError, match="unexpected keyword argument 'depht'"):
        estimate_memory(UserModelConfig(spec=spec, args='{"depht": 5}'))


# -- the digest ---------------------------------------------------------------------------------------

def test_digest_follows_code_args_data_and_training(tmp_path):
    path = tmp_path / "net.py"
    spec = residual_file(path) + ":build"
    base = UserModelConfig(spec=spec)
    digest = base.digest()
    # A comment- or docstring-only edit keeps the digest (the syntax tree is hashed, as for our own code) ...
    path.write_text("# my network\n" + path.read_text() + "\n# the end\n", encoding="utf-8")
    assert UserModelConfig(spec=spec).digest() == digest
    # ... an edit of the code does not.
    residual_file(path, extra="h = h * 1.0")
    assert UserModelConfig(spec=spec).digest() != digest
    residual_file(path)
    assert UserModelConfig(spec=spec).digest() == digest
    changed = [base.replace(args='{"width": 16}'), base.replace(data="digits-image"), base.replace(steps=101),
               base.replace(lr=0.01), base.replace(optimizer="sgd"), base.replace(seed=1), base.replace(arch="plain")]
    assert len({c.digest() for c in changed} | {digest}) == len(changed) + 1
    data = tmp_path / "data.npz"
    np.savez(data, x=np.zeros((4, 64), np.float32), y=np.arange(4))
    first = base.replace(data=str(data)).digest()
    np.savez(data, x=np.ones((4, 64), np.float32), y=np.arange(4))
    assert UserModelConfig(spec=spec, data=str(data)).digest() != first


@pytest.mark.parametrize("key", ["source", "data_source", "kind"])
def test_the_fingerprints_are_not_parameters(tmp_path, key):
    """A --set source=... would stand for the file's fingerprint: an edited model would keep its old trace."""
    from simulation.experiments import EXPERIMENTS, split_params

    experiment = EXPERIMENTS["model"]
    assert key not in experiment.params()
    with pytest.raises(ConfigError, match=f"'{key}' is not a parameter") as info:
        split_params(experiment, {"spec": residual_file(tmp_path / "net.py") + ":build", key: "zzz"})
    one_line(info.value)
    result = invoke("train", "--model", f"{tmp_path / 'net.py'}:build", "--set", f"{key}=zzz")  # refused before any work
    assert result.exit_code != 0 and f"unknown parameter '{key}'" in result.output, result.output


def test_package_spec_is_fingerprinted_by_its_version():
    assert UserModelConfig(spec="torchvision.models:resnet18").source == "torchvision==0.28.0"


# -- data ---------------------------------------------------------------------------------------------

def test_data_shapes():
    digits = load_user_data(UserModelConfig(data="digits"))
    image = load_user_data(UserModelConfig(data="digits-image"))
    image32 = load_user_data(UserModelConfig(data="digits-image32"))
    assert digits.x_train.shape[1:] == (64,) and image.x_train.shape[1:] == (1, 8, 8)
    assert image32.x_train.shape[1:] == (3, 32, 32) and image32.x_train.shape[0] == digits.x_train.shape[0]
    assert torch.equal(image.x_train.flatten(1), digits.x_train) and digits.n_classes == 10
    tokens = load_user_data(UserModelConfig(data="reverse", vocab=5, seq_len=6, batch_size=4))
    assert tokens.x_test.shape == (512, 12) and tokens.y_test.shape == (512, 6) and tokens.n_classes == 6
    # reverse: the target is the source reversed; the input carries BOS then the target shifted right
    assert torch.equal(tokens.y_test, tokens.x_test[:, :6].flip(1))
    assert (tokens.x_test[:, 6] == 0).all() and torch.equal(tokens.x_test[:, 7:], tokens.y_test[:, :-1])


def test_npz_data_loaded_without_pickle(tmp_path):
    good = tmp_path / "good.npz"
    np.savez(good, x=np.random.default_rng(0).normal(size=(50, 64)).astype(np.float32), y=np.arange(50) % 3)
    data = load_user_data(UserModelConfig(data=str(good)))
    assert data.n_classes == 3 and len(data.x_train) + len(data.x_test) == 50
    pickled = tmp_path / "pickled.npz"
    np.savez(pickled, x=np.array([{"a": 1}] * 4, dtype=object), y=np.arange(4))
    missing = tmp_path / "missing.npz"
    np.savez(missing, inputs=np.zeros((4, 2)))
    labels = tmp_path / "labels.npz"
    np.savez(labels, x=np.zeros((4, 2)), y=np.array([0.5, 1, 2, 3]))
    for path, says in ((pickled, "cannot be read"), (missing, "must hold arrays 'x' and 'y'"),
                       (labels, "integer labels"), (tmp_path / "absent.npz", "does not exist")):
        with pytest.raises(ConfigError, match=says) as info:
            load_user_data(UserModelConfig(data=str(path)))
        one_line(info.value)


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(garbage=st.one_of(st.binary(min_size=0, max_size=1), st.binary(max_size=4096),
                         st.binary(max_size=64).map(lambda b: b"\x93NUMPY" + b)))  # an .npy's magic: not an .npz
def test_a_data_file_that_is_no_npz_archive_says_so(garbage, tmp_path):
    """Bytes that are no zip archive (one byte, random bytes, a torn .npy header): "not an .npz archive" in one
    line, never numpy's "contains pickled (object) data" nor a traceback (issue 34)."""
    import io
    import zipfile

    if zipfile.is_zipfile(io.BytesIO(garbage)):  # random bytes that happen to end a zip archive: not garbage
        return
    path = tmp_path / "data.npz"
    path.write_bytes(garbage)
    with pytest.raises(ConfigError, match="is not an .npz archive") as info:
        load_user_data(UserModelConfig(data=str(path)))
    assert "pickle" not in one_line(info.value)


def test_an_npy_array_named_npz_is_no_npz_archive(tmp_path):
    """np.load reads an .npy (here under an .npz name) as one bare array, without x and y: refused as not an .npz
    archive, not a TypeError."""
    path = tmp_path / "data.npz"
    with open(path, "wb") as f:
        np.save(f, np.zeros((4, 2)))
    with pytest.raises(ConfigError, match="is not an .npz archive"):
        load_user_data(UserModelConfig(data=str(path)))


# -- the memory guard ---------------------------------------------------------------------------------

def test_memory_guard_estimates_before_training_and_refuses(tmp_path):
    spec = residual_file(tmp_path / "net.py") + ":build"
    config = UserModelConfig(spec=spec, args='{"width": 32}', batch_size=64)
    estimate = estimate_memory(config)
    params = 64 * 32 + 32 + 2 * (32 * 32 + 32) + 32 * 10 + 10
    assert estimate.parameters == params * 4 and estimate.optimizer == 3 * params * 4  # Adam: 2 states + 1
    # Per example the probe saw at least the stem, two blocks (Linear, ReLU, sum) and the head.
    assert estimate.activations >= 64 * (32 * 7 + 10) * 4
    with pytest.raises(ConfigError, match="over the memory budget") as info:
        check_memory(config, budget=estimate.total - 1)
    one_line(info.value)
    assert check_memory(config, budget=estimate.total).total == estimate.total


@pytest.mark.parametrize("budget", ["1G", "64M"])
def test_a_model_whose_parameters_are_over_the_budget_is_refused_before_it_is_built(tmp_path, monkeypatch, budget):
    """Counted on torch's meta device: the factory never builds it on the CPU (a model larger than the machine's
    memory would otherwise end in torch's allocator error, or take the machine's memory first)."""
    monkeypatch.setenv("RESIDUAL_MEMORY_BUDGET", budget)
    path = write(tmp_path / "big.py", """
        import torch
        from torch import nn

        DEVICES = []  # where each build put its parameters

        class Net(nn.Module):
            def __init__(self, width):
                super().__init__()
                self.stem, self.block, self.head = nn.Linear(64, width), nn.Linear(width, width), nn.Linear(width, 10)

            def forward(self, x):
                h = self.stem(x)
                return self.head(h + self.block(h))

        def build(width=8):
            model = Net(width)
            DEVICES.append(next(model.parameters()).device.type)
            return model
        """)
    width = 20_000  # 400 million weights: 1.6 GB of parameters, 8 GB with Adam's state and the gradients
    config = UserModelConfig(spec=f"{path}:build", args=f'{{"width": {width}}}')
    with pytest.raises(ConfigError, match="at least .* activations not measured.*over the memory budget") as info:
        check_memory(config)
    one_line(info.value)
    params = 64 * width + width + width * width + width + width * 10 + 10
    assert f"parameters {params * 4 / 1e9:.3g} GB" in str(info.value)
    from simulation.kinds.user_model import load_factory
    assert load_factory(config.spec, config.source).__globals__["DEVICES"] == ["meta"]
    # A model under the budget is built and probed as before: its activations are measured.
    small = UserModelConfig(spec=f"{path}:build")
    assert check_memory(small).activations > 0
    assert load_factory(small.spec, small.source).__globals__["DEVICES"] == ["meta", "meta", "cpu"]


# -- training a model and its twin ----------------------------------------------------------------------

def test_model_and_twin_train_with_the_users_block_names(tmp_path):
    spec = residual_file(tmp_path / "net.py") + ":build"
    residual = UserModelConfig(spec=spec, args='{"depth": 3}', steps=6, record_every=3, batch_size=16)
    traces = {arch: run(residual.replace(arch=arch), progress=False) for arch in ("residual", "plain")}
    for arch, trace in traces.items():
        assert trace.meta.layers == ["blocks.0", "blocks.1", "blocks.2"] and trace.meta.blocks == 3
        assert list(trace["step"]) == [0, 3, 5]
        for key in ("act_norm", "input_norm", "branch_norm", "shortcut_norm", "grad_norm", "out_grad_norm",
                    "in_grad_norm"):
            assert trace[key].shape == (3, 3) and np.isfinite(trace[key]).all(), key
        assert trace["loss_curve"].shape == (6,) and np.isfinite(trace["final_test_error"])
    assert (traces["plain"]["shortcut_norm"] == 0).all()
    assert traces["residual"]["shortcut_norm"] == pytest.approx(traces["residual"]["input_norm"])
    # Same weights at step 0 (the same seed before the factory), different networks: the first block sees the
    # same input, the outputs differ.
    assert traces["plain"]["input_norm"][0, 0] == traces["residual"]["input_norm"][0, 0]
    assert traces["plain"]["loss"][0] != traces["residual"]["loss"][0]
    again = run(residual, progress=False)
    assert all(np.array_equal(again[k], traces["residual"][k], equal_nan=True) for k in again.arrays)


def test_a_backward_that_fails_only_in_training_ends_in_one_line(tmp_path):
    """The probe's backward passes; the user's autograd.Function raises on its third backward (training step 1):
    one line naming the file's line and the backward pass, not torch's traceback."""
    text = RESIDUAL_FILE.replace("{head}", "").replace("{extra}", "h = Later.apply(h)") + textwrap.dedent('''

        class Later(torch.autograd.Function):
            calls = 0

            @staticmethod
            def forward(ctx, h):
                return h.clone()

            @staticmethod
            def backward(ctx, g):
                Later.calls += 1
                if Later.calls == 3:
                    raise FloatingPointError("gradient went bad")
                return g
        ''')
    path = tmp_path / "net.py"
    path.write_text(text, encoding="utf-8")
    config = UserModelConfig(spec=f"{path}:build", steps=4, record_every=2, batch_size=8)
    with pytest.raises(UserModelError) as info:
        run(config, progress=False)
    message = one_line(info.value)
    line = next(n for n, row in enumerate(text.splitlines(), 1) if "raise FloatingPointError" in row)
    assert f"{path}, line {line}" in message and "FloatingPointError: gradient went bad (the backward pass)" in message


NANO_GPT = '''
import torch
from torch import nn
from torch.nn import functional as F


class Block(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.ln_1 = nn.LayerNorm(width)
        self.attn = nn.MultiheadAttention(width, heads, batch_first=True)
        self.ln_2 = nn.LayerNorm(width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

    def forward(self, x):
        T = x.shape[1]
        mask = torch.triu(torch.ones(T, T, dtype=torch.bool), 1)
        h = self.ln_1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        x = x + self.mlp(self.ln_2(x))
        return x


class GPT(nn.Module):
    def __init__(self, vocab, length, width, depth, heads):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, width), nn.Embedding(length, width)
        self.blocks = nn.ModuleList(Block(width, heads) for _ in range(depth))
        self.ln_f, self.head = nn.LayerNorm(width), nn.Linear(width, vocab)

    def forward(self, idx):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


def build(vocab=9, length=16, width=16, depth=2, heads=2):
    return GPT(vocab, length, width, depth, heads)
'''


def test_a_language_model_trains_on_a_token_task(tmp_path):
    spec = write(tmp_path / "gpt.py", NANO_GPT) + ":build"
    config = UserModelConfig(spec=spec, data="reverse", steps=3, record_every=1, batch_size=8, lr=3e-3)
    trace = run(config, progress=False)
    assert trace.meta.layers == ["blocks.0.attn", "blocks.0.mlp", "blocks.1.attn", "blocks.1.mlp"]
    assert trace["out_grad_norm"].shape == (3, 4) and np.isfinite(trace["out_grad_norm"]).all()
    plain = run(config.replace(arch="plain"), progress=False)
    assert (plain["shortcut_norm"] == 0).all() and np.isfinite(plain["loss"]).all()
    with pytest.raises(UserModelError, match=r"gpt.py, line \d+: IndexError.*token ids 0..8, shape \[2, 16\]"):
        estimate_memory(config.replace(args='{"vocab": 5}'))  # an embedding of 5 for the 9 ids of vocab 8


@pytest.mark.slow  # a subprocess that imports torch (~3 s)
@pytest.mark.parametrize("spec", ["sys:exit", "builtins:exit"])
def test_a_factory_that_exits_is_one_line_in_the_torch_free_probe(spec):
    """simulation.memory probes a model in a subprocess when the caller has no torch (render.py): a factory that ends
    that process itself (exit status 0, nothing printed) is one line, not an IndexError."""
    from simulation.memory import probe_in_subprocess

    config = UserModelConfig(spec=spec, steps=2)
    with pytest.raises(ConfigError, match="SystemExit"):
        probe_in_subprocess(config)


# -- the command line -----------------------------------------------------------------------------------

def test_command_line_refuses_a_raising_factory_in_one_line(tmp_path, isolated_cache):
    from click.testing import CliRunner

    import render

    bad = write(tmp_path / "bad.py", "from torch import nn\n\n\ndef build():\n    return nn.Linear(64, 10).missing\n")
    result = CliRunner().invoke(render.cli, ["train", "--model", f"{bad}:build"])
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output
    assert f"{bad}, line 5: AttributeError" in lines[0]
    assert not list(isolated_cache.iterdir())  # nothing half-written


@pytest.mark.slow  # a subprocess per call (the notebook's way): torch imported twice, ~20 s
def test_notebook_records_a_model_and_its_twin(tmp_path, isolated_cache):
    from cli.notebook import record_model

    spec = residual_file(tmp_path / "net.py") + ":build"
    traces = record_model(spec, {"steps": 2, "record_every": 1, "model.depth": 3})
    from simulation.runkeys import RunKey
    from simulation.trace import Trace

    assert set(traces) == {RunKey("residual", 0), RunKey("plain", 0)}

    for path in traces.values():
        assert Trace.load(path).meta.layers == ["blocks.0", "blocks.1", "blocks.2"]
