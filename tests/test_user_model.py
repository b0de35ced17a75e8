"""A user's own network (issue 20): residual additions found by name, the plain twin, the recorder against autograd."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from simulation.core.residual_adds import Interceptor, NoResidualError, find_residual_adds
from simulation.kinds.user_model import UserRecorder

import user_models as um

# Recorded norms against torch.autograd.grad on the same forward: the same float32 tensors reduced by the same
# kernels, so they agree to float rounding of the reduction (relative 1e-5; the observed difference is ~1e-7).
RTOL = 1e-5


def _names(model, x, **kw):
    found = find_residual_adds(model, (x,), **kw)
    return [a.name for a in found.adds], [a.shortcut for a in found.adds]



# One torch thread, as training uses (conftest.one_thread): two threads on a busy 2-core machine are ~15x slower here.
pytestmark = pytest.mark.usefixtures("one_thread")

# -- discovery ----------------------------------------------------------------------------------------

def test_resnet18_blocks_are_its_basic_blocks():
    torch.manual_seed(0)
    names, kinds = _names(um.torchvision_models().resnet18(weights=None, num_classes=10), torch.randn(2, 3, 16, 16))
    assert names == [f"layer{s}.{i}" for s in range(1, 5) for i in range(2)]
    # The first block of stages 2-4 halves the map and doubles the channels: a 1x1 conv + BN projection.
    assert kinds == ["identity", "identity", "projection", "identity"] * 1 + ["projection", "identity"] * 2


@pytest.mark.slow  # ResNet-50's build and probe take seconds; CI runs it
def test_resnet50_bottlenecks_with_projection_downsample():
    torch.manual_seed(0)
    names, kinds = _names(um.torchvision_models().resnet50(weights=None, num_classes=10), torch.randn(2, 3, 16, 16))
    layout = {1: 3, 2: 4, 3: 6, 4: 3}
    assert names == [f"layer{s}.{i}" for s, n in layout.items() for i in range(n)]
    # Stage 1's first bottleneck projects too: 64 -> 256 channels (He et al. 2015, Table 1, option B).
    assert [n for n, k in zip(names, kinds) if k == "projection"] == ["layer1.0", "layer2.0", "layer3.0", "layer4.0"]


@pytest.mark.slow  # transformers / ResNet-50: seconds of import and build; CI runs it
def test_gpt2_names_attention_and_mlp_of_each_block():
    torch.manual_seed(0)
    names, kinds = _names(um.tiny_gpt2(layers=3), torch.randint(0, 9, (2, 16)))
    assert names == [f"transformer.h.{i}.{part}" for i in range(3) for part in ("attn", "mlp")]
    assert set(kinds) == {"identity"}


@pytest.mark.parametrize("norm_first", [True, False])
def test_transformer_encoder_both_layer_norm_placements(norm_first):
    torch.manual_seed(0)
    names, kinds = _names(um.encoder(norm_first, layers=3), torch.randn(2, 5, 16))
    # Two additions per layer, each named by the branch's child with the most parameters.
    assert names == [f"layers.{i}.{part}" for i in range(3) for part in ("self_attn", "linear1")]
    assert set(kinds) == {"identity"}


def test_inplace_mlp_loop_names_each_branch():
    torch.manual_seed(0)
    found = find_residual_adds(um.InplaceMLP(depth=4), (torch.randn(2, 64),))
    assert [a.name for a in found.adds] == ["layers.0", "layers.1", "layers.2", "layers.3"]
    assert all(a.inplace and a.shortcut == "identity" for a in found.adds)
    assert found.adds[2].weights == ("layers.2.3.weight", "layers.2.1.weight")


def test_module_used_twice_gives_two_blocks():
    torch.manual_seed(0)
    found = find_residual_adds(um.Twice(), (torch.randn(2, 64),))
    assert [a.name for a in found.adds] == ["block", "block#2"]
    assert found.adds[0].weights == found.adds[1].weights == ("block.0.weight",)


def test_plain_model_is_refused_with_what_was_found():
    with pytest.raises(NoResidualError) as info:
        find_residual_adds(um.Plain(), (torch.randn(2, 64),))
    message = str(info.value)
    assert "\n" not in message
    assert "0 addition(s) in 4 module call(s)" in message and "model.blocks=" in message


def test_non_residual_additions_are_not_blocks():
    """x + bias, x + position embedding and two equal parallel branches are additions, not residual ones."""

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b, self.pos = nn.Linear(8, 8), nn.Linear(8, 8), nn.Parameter(torch.zeros(8))

        def forward(self, x):
            x = x + self.pos
            return self.a(x) + self.b(x) + torch.ones(8)

    with pytest.raises(NoResidualError, match="3 addition"):
        find_residual_adds(Net(), (torch.randn(2, 8),))


def test_glob_names_blocks_automatic_discovery_cannot_see():
    torch.manual_seed(0)
    model, x = um.FunctionalNet(depth=3), torch.randn(2, 64)
    with pytest.raises(NoResidualError):
        find_residual_adds(model, (x,))
    found = find_residual_adds(model, (x,), blocks="blocks.*")
    assert [a.name for a in found.adds] == ["blocks.0", "blocks.1", "blocks.2"]
    assert [a.weights for a in found.adds] == [(f"blocks.{i}.weight",) for i in range(3)]


def test_glob_on_resnet_matches_automatic():
    torch.manual_seed(0)
    model, x = um.torchvision_models().resnet18(weights=None, num_classes=10), torch.randn(2, 3, 16, 16)
    assert _names(model, x, blocks="layer*.*") == _names(model, x)


# -- recording against autograd -----------------------------------------------------------------------

def _record(model, x, y, adds, plain=False):
    interceptor = Interceptor(model, adds, plain=plain)
    with UserRecorder(model, adds, interceptor) as rec:
        rec.arm()
        out = model(x)
        logits = getattr(out, "logits", out)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        loss.backward()
        row = rec.collect()
    assert not interceptor.handles and interceptor.users == 0  # every hook removed
    return row, logits.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def _norms(grads):
    return [float(g.norm()) for g in grads]


def test_inplace_mlp_gradients_match_autograd():
    torch.manual_seed(0)
    model, x, y = um.InplaceMLP(depth=4), torch.randn(16, 64), torch.randint(0, 10, (16,))
    adds = find_residual_adds(model, (x[:2],)).adds
    row, logits, _ = _record(model, x, y, adds)

    model.zero_grad()
    ref_logits, inputs, outputs = model.manual(x)
    assert torch.allclose(ref_logits, logits, atol=1e-6)
    grads = torch.autograd.grad(F.cross_entropy(ref_logits, y), inputs + outputs)
    assert row["in_grad_norm"] == pytest.approx(_norms(grads[:4]), rel=RTOL)
    assert row["out_grad_norm"] == pytest.approx(_norms(grads[4:]), rel=RTOL)
    assert row["input_norm"] == pytest.approx([float(t.detach().norm(dim=1).mean()) for t in inputs], rel=RTOL)
    assert row["act_norm"] == pytest.approx([float(t.detach().norm(dim=1).mean()) for t in outputs], rel=RTOL)
    assert row["shortcut_norm"] == pytest.approx(row["input_norm"])
    branch = [o - i for i, o in zip(inputs, outputs)]
    assert row["branch_norm"] == pytest.approx([float(t.detach().norm(dim=1).mean()) for t in branch], rel=1e-4)
    weights = [[m.weight for m in f if isinstance(m, nn.Linear)] for f in model.layers]
    wgrads = torch.autograd.grad(F.cross_entropy(model.manual(x)[0], y), [w for ws in weights for w in ws])
    per_block = [float(torch.stack([wgrads[2 * i].norm(), wgrads[2 * i + 1].norm()]).norm()) for i in range(4)]
    assert row["grad_norm"] == pytest.approx(per_block, rel=RTOL)


def test_resnet18_gradients_match_autograd():
    """dL/dx is the gradient at each BasicBlock's input; h = F(x) + shortcut(x) is followed by ReLU in place,
    so dL/dh = dL/d(block output) * [block output > 0]."""
    torch.manual_seed(0)
    model = um.torchvision_models().resnet18(weights=None, num_classes=10)
    x, y = torch.randn(4, 3, 16, 16), torch.randint(0, 10, (4,))
    adds = find_residual_adds(model, (x[:2],)).adds
    reference = copy.deepcopy(model)
    row, logits, _ = _record(model, x, y, adds)

    blocks = [getattr(reference, f"layer{s}")[i] for s in range(1, 5) for i in range(2)]
    inputs, outputs = [], []
    def keep(module, args, out):
        inputs.append(args[0])
        outputs.append(out)

    handles = [b.register_forward_hook(keep) for b in blocks]
    ref_logits = reference(x)
    for h in handles:
        h.remove()
    assert torch.equal(ref_logits, logits)
    grads = torch.autograd.grad(F.cross_entropy(ref_logits, y), inputs + outputs)
    assert row["in_grad_norm"] == pytest.approx(_norms(grads[:8]), rel=RTOL)
    expected = [float((g * (o > 0)).norm()) for g, o in zip(grads[8:], outputs)]
    assert row["out_grad_norm"] == pytest.approx(expected, rel=RTOL)


@pytest.mark.slow  # transformers / ResNet-50: seconds of import and build; CI runs it
def test_gpt2_gradients_match_autograd():
    """The MLP addition's h is the block's output; the attention addition's h is what ln_2 reads; x of the
    attention addition is the block's input."""
    torch.manual_seed(0)
    model = um.tiny_gpt2(layers=2)
    x = torch.randint(0, 9, (3, 16))
    adds = find_residual_adds(model, (x[:2],)).adds
    reference = copy.deepcopy(model)
    row, logits, _ = _record(model, x, x, adds)

    captured: dict[str, torch.Tensor] = {}

    def keep(name):
        def hook(module, args, kwargs, out):
            first = args[0] if args else next(iter(kwargs.values()))
            captured[f"{name}.in"] = first
            captured[f"{name}.out"] = out[0] if isinstance(out, tuple) else out
        return hook

    handles = []
    for i, block in enumerate(reference.transformer.h):
        handles.append(block.register_forward_hook(keep(f"h{i}"), with_kwargs=True))
        handles.append(block.ln_2.register_forward_hook(keep(f"ln2_{i}"), with_kwargs=True))
    ref_logits = reference(x).logits
    for h in handles:
        h.remove()
    assert torch.equal(ref_logits, logits)
    order = ["h0.in", "ln2_0.in", "h1.in", "ln2_1.in", "ln2_0.in", "h0.out", "ln2_1.in", "h1.out"]
    grads = torch.autograd.grad(F.cross_entropy(ref_logits.reshape(-1, 9), x.reshape(-1)), [captured[k] for k in order])
    # blocks in forward order: h0.attn (x = h0.in, h = ln2_0.in), h0.mlp (x = ln2_0.in, h = h0.out), ...
    assert row["in_grad_norm"] == pytest.approx(_norms([grads[0], grads[4], grads[2], grads[6]]), rel=RTOL)
    assert row["out_grad_norm"] == pytest.approx(_norms([grads[1], grads[5], grads[3], grads[7]]), rel=RTOL)


# -- recording changes nothing ------------------------------------------------------------------------

def _bare(model, x, y):
    out = model(x)
    logits = getattr(out, "logits", out)
    F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1)).backward()
    return logits.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


CASES = {
    "resnet18": lambda: (um.torchvision_models().resnet18(weights=None, num_classes=10), torch.randn(4, 3, 16, 16),
                         torch.randint(0, 10, (4,))),
    "gpt2": lambda: (um.tiny_gpt2(dropout=0.1), torch.randint(0, 9, (2, 16)), torch.randint(0, 9, (2, 16))),
    "encoder_pre_ln": lambda: (nn.Sequential(um.encoder(True, dropout=0.1), nn.Linear(16, 4)), torch.randn(2, 5, 16),
                               torch.randint(0, 4, (2, 5))),
    "encoder_post_ln": lambda: (nn.Sequential(um.encoder(False, dropout=0.1), nn.Linear(16, 4)), torch.randn(2, 5, 16),
                                torch.randint(0, 4, (2, 5))),
    "inplace_mlp": lambda: (um.InplaceMLP(), torch.randn(8, 64), torch.randint(0, 10, (8,))),
    "twice": lambda: (um.Twice(), torch.randn(8, 64), torch.randint(0, 10, (8,))),
}


@pytest.mark.parametrize("case", [pytest.param(c, marks=pytest.mark.slow) if c == "gpt2" else c for c in sorted(CASES)])
def test_recorded_step_is_bit_identical_to_a_bare_step(case):
    torch.manual_seed(0)
    model, x, y = CASES[case]()
    model.train()
    adds = find_residual_adds(copy.deepcopy(model), (x[:2],)).adds
    twin = copy.deepcopy(model)
    torch.manual_seed(1)
    bare_logits, bare_grads = _bare(model, x, y)
    torch.manual_seed(1)  # the same dropout masks
    row, logits, grads = _record(twin, x, y, adds)
    assert torch.equal(logits, bare_logits)
    assert grads.keys() == bare_grads.keys()
    assert all(torch.equal(grads[n], bare_grads[n]) for n in grads)
    assert torch.isfinite(torch.as_tensor(row["out_grad_norm"])).all()


# -- the plain twin -----------------------------------------------------------------------------------

def test_twin_of_inplace_mlp_is_the_plain_mlp():
    torch.manual_seed(0)
    model, x, y = um.InplaceMLP(depth=3), torch.randn(16, 64), torch.randint(0, 10, (16,))
    adds = find_residual_adds(model, (x[:2],)).adds
    row, logits, grads = _record(model, x, y, adds, plain=True)
    model.zero_grad()
    ref_logits, inputs, outputs = model.manual(x, residual=False)
    assert torch.allclose(logits, ref_logits, atol=1e-6)
    ref_grads = torch.autograd.grad(F.cross_entropy(ref_logits, y), outputs)
    assert row["out_grad_norm"] == pytest.approx(_norms(ref_grads), rel=RTOL)
    assert list(row["shortcut_norm"]) == [0.0, 0.0, 0.0]
    assert row["act_norm"] == pytest.approx(row["branch_norm"])


def test_twin_of_resnet18_drops_identity_and_projection_shortcuts():
    torch.manual_seed(0)
    tv = um.torchvision_models()
    model, x, y = tv.resnet18(weights=None, num_classes=10), torch.randn(4, 3, 16, 16), torch.randint(0, 10, (4,))
    adds = find_residual_adds(model, (x[:2],)).adds
    reference = copy.deepcopy(model)
    _, logits, grads = _record(model, x, y, adds, plain=True)

    def plain_forward(block, inp):  # torchvision's BasicBlock.forward without `out += identity`
        out = block.relu(block.bn1(block.conv1(inp)))
        return block.relu(block.bn2(block.conv2(out)))

    for stage in range(1, 5):
        for block in getattr(reference, f"layer{stage}"):
            block.forward = plain_forward.__get__(block)
    assert torch.equal(reference(x), logits)
    assert "layer2.0.downsample.0.weight" not in grads  # the projection's output is not used



def test_twin_of_resnet18_in_eval_mode():
    """The twin's test error is measured in eval mode, with the additions found in train mode: BatchNorm's
    train-mode ``num_batches_tracked.add_(1)`` must not shift their keys (it did: examples/my_resnet.py's twin read
    a test error of 0.677, its residual shortcuts back in place, for a train error of 0.000)."""
    torch.manual_seed(0)
    tv = um.torchvision_models()
    model, x = tv.resnet18(weights=None, num_classes=10), torch.randn(4, 3, 16, 16)
    adds = find_residual_adds(model, (x[:2],)).adds  # train mode, as the run finds them
    model.eval()
    twin = _plain_eval(model, adds, x)
    reference = copy.deepcopy(model)

    def plain_forward(block, inp):  # torchvision's BasicBlock.forward without `out += identity`
        return block.relu(block.bn2(block.conv2(block.relu(block.bn1(block.conv1(inp))))))

    for stage in range(1, 5):
        for block in getattr(reference, f"layer{stage}"):
            block.forward = plain_forward.__get__(block)
    with torch.no_grad():
        torch.testing.assert_close(twin, reference(x))
        assert not torch.allclose(twin, model(x), atol=1e-3)  # the residual model (no interceptor) differs


def _plain_eval(model, adds, x):
    """``model(x)`` without gradients through an interceptor that removes ``adds`` (the plain twin's forward)."""
    interceptor = Interceptor(model, adds, plain=True)
    interceptor.acquire()
    try:
        with torch.no_grad():
            return model(x)
    finally:
        interceptor.release()


def test_hooks_are_removed_after_an_exception():
    torch.manual_seed(0)
    model = um.InplaceMLP()
    adds = find_residual_adds(model, (torch.randn(2, 64),)).adds
    interceptor = Interceptor(model, adds)
    with pytest.raises(RuntimeError, match="boom"):
        with UserRecorder(model, adds, interceptor) as rec:
            rec.arm()
            model(torch.randn(2, 64))
            raise RuntimeError("boom")
    assert not interceptor.handles and not interceptor.inside
    assert all(not m._forward_hooks and not m._forward_pre_hooks for m in model.modules())
    assert torch._C._is_torch_function_mode_enabled() is False


@pytest.mark.parametrize("norm_first", [True, False])
def test_twin_of_transformer_encoder_in_eval_mode(norm_first):
    """In eval mode without gradients nn.TransformerEncoderLayer has a fused fast path with no additions to find;
    the interceptor's mode turns it off (has_torch_function), so the twin's test error is the plain net's."""
    torch.manual_seed(0)
    model, x = um.encoder(norm_first, layers=2), torch.randn(3, 5, 16)
    adds = find_residual_adds(model, (x[:2],)).adds
    model.eval()
    twin = _plain_eval(model, adds, x)

    def plain_layer(layer, h):  # TransformerEncoderLayer.forward without its two `x + ...`
        if norm_first:
            h = layer._sa_block(layer.norm1(h), None, None)
            return layer._ff_block(layer.norm2(h))
        h = layer.norm1(layer._sa_block(h, None, None))
        return layer.norm2(layer._ff_block(h))

    with torch.no_grad():
        expected = x
        for layer in model.layers:
            expected = plain_layer(layer, expected)
        residual = model(x)  # the fast path, no interceptor: the residual model as written
    assert torch.allclose(twin, expected, atol=1e-5)
    assert not torch.allclose(twin, residual, atol=1e-2)


def test_a_model_file_is_loaded_without_bytecode_beside_it(tmp_path, monkeypatch):
    """--model FILE.py:factory leaves the user's folder as it was, also where Python writes bytecode (a default
    Python: the tests' own processes do): no __pycache__ beside the file or the neighbour it imports, and Python's
    own flag is as it was after. The twin: the same file imported the plain way does write one."""
    import importlib.util
    import sys

    from simulation.kinds.user_model import load_factory

    (tmp_path / "helper_layers.py").write_text("WIDTH = 8\n")
    (tmp_path / "net.py").write_text("import torch\nfrom helper_layers import WIDTH\n\n"
                                     "def build():\n    return torch.nn.Linear(WIDTH, WIDTH)\n")
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    monkeypatch.delitem(sys.modules, "helper_layers", raising=False)
    factory = load_factory(f"{tmp_path / 'net.py'}:build", "no-bytecode")
    assert factory().in_features == 8
    assert sys.dont_write_bytecode is False
    assert sorted(p.name for p in tmp_path.iterdir()) == ["helper_layers.py", "net.py"]
    spec = importlib.util.spec_from_file_location("plain_net_import", tmp_path / "helper_layers.py")
    spec.loader.exec_module(importlib.util.module_from_spec(spec))
    assert (tmp_path / "__pycache__").is_dir()
