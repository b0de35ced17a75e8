"""Find every residual addition h = shortcut(x) + F(x) in any nn.Module's forward pass, and intercept them.

Example::

    python -c "import torch, torchvision; from simulation.core.residual_adds import find_residual_adds; \
print([a.name for a in find_residual_adds(torchvision.models.resnet18(num_classes=10), \
(torch.randn(2, 3, 32, 32),)).adds])"

How (no tracing compiler: torch.fx fails on Hugging Face GPT-2 and on nn.TransformerEncoder's control flow):
one probe forward runs under a :class:`~torch.overrides.TorchFunctionMode` that sees every torch call, with
forward pre/post hooks on every submodule keeping the stack of module calls. Each tensor gets a node in a
lineage graph (which call made it, from which tensors; a module's output is a node of its own). An addition
``a + b`` (``+``, ``torch.add``, ``Tensor.add``, in-place ``+=`` / ``add_``) of two tensors of one shape is
*residual* when both operands descend from a common earlier activation x (the nearest one) and one of them,
the branch F(x), was computed from x through at least one module call with parameters, while the other, the
shortcut, is x itself (identity), x through parameter-free functions only (functional, e.g. zero padding)
or x through fewer parametrised module calls than the branch (a projection W_s x, e.g. ResNet's
``downsample``: He et al. 2015, eq. 2). Two parallel branches of equal depth (``f(x) + g(x)``) are not
residual; nor are ``x + bias``, ``x + position_embedding`` (no common activation) or ``x + x**3`` inside
GELU (no module call between).

Naming follows torchlens / TransformerLens: the user's module paths. An addition is named by the innermost
module call whose forward contains it (``layer2.0``); where that module holds several residual additions
(a GPT-2 block: attention and MLP; an MLP looping ``h += f(h)``), by the child module that the branch runs
through with the most parameters (``transformer.h.3.attn``, ``layers.1``). A module called twice gives
``name`` and ``name#2``. Where the automatic rule cannot see the structure, a glob over module paths
(``layer*.*``) names the blocks: each call of a matching module is one block, and the addition inside it one
of whose operands is the module's input (else its last addition of two same-shaped tensors that both
descend from that input) is the residual addition.

At training time :class:`Interceptor` finds the same additions again without the lineage graph, by a key
that does not depend on the values: (innermost module path, that module's call number in this forward,
number of the addition inside that call). It can hand each one to a recorder and, for the plain twin,
replace ``shortcut + F`` by ``F`` alone (projection shortcuts dropped too; the shortcut is still computed,
its result unused).
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

__all__ = ["ResidualAdd", "Discovery", "find_residual_adds", "Interceptor", "AddKey", "NoResidualError",
           "ADD_FUNCTIONS", "leaves"]

AddKey = tuple[str, int, int]  # (innermost module path, its call number in the forward, addition number in it)

# What `a + b`, `a += b`, torch.add(a, b), a.add(b), a.add_(b) arrive as under a TorchFunctionMode.
ADD_FUNCTIONS = frozenset({torch.add, torch.Tensor.add, torch.Tensor.add_, torch.Tensor.__add__,
                           torch.Tensor.__radd__, torch.Tensor.__iadd__, torch._C.TensorBase.add,
                           torch._C.TensorBase.add_})
_INPLACE = frozenset({torch.Tensor.add_, torch.Tensor.__iadd__, torch._C.TensorBase.add_})


class NoResidualError(ValueError):
    """The probe found no residual addition; the message is one line that says what it did find."""


def leaves(value: Any) -> Iterator[torch.Tensor]:
    """The tensors inside ``value``: a tensor, or tuples, lists and mappings (Hugging Face outputs) of them."""
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (tuple, list)):
        for item in value:
            yield from leaves(item)
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from leaves(item)


def _counted(a: Any, b: Any) -> bool:
    """Whether an addition counts in the keys: tensor + tensor only. A tensor + number, such as BatchNorm's
    ``num_batches_tracked.add_(1)`` (made in train mode only), is skipped, so that a block's keys are the same in
    train and eval mode (a plain twin first called in eval mode still finds its additions when it trains)."""
    return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)


def _operands(func: Callable, args: tuple, kwargs: dict) -> tuple[Any, Any, Any]:
    """(a, b, alpha) of an addition ``a + alpha * b`` in any of the call forms of :data:`ADD_FUNCTIONS`."""
    a = args[0] if args else kwargs.get("input", kwargs.get("self"))
    b = args[1] if len(args) > 1 else kwargs.get("other")
    alpha = args[2] if len(args) > 2 else kwargs.get("alpha", 1)
    if func is torch.Tensor.__radd__:
        a, b = b, a
    return a, b, alpha


@dataclass(frozen=True)
class ResidualAdd:
    """One residual addition h = shortcut(x) + F(x) found by :func:`find_residual_adds`.

    ``name``: the user's module path (see the module docstring); ``key``: how :class:`Interceptor` finds it
    again; ``branch``: which operand of the addition is F(x) (0 or 1); ``shortcut``: "identity" |
    "functional" | "projection"; ``inplace``: ``+=`` / ``add_``; ``input_at``: where x can be read at
    training time: ``("operand",)`` (an identity shortcut: x is the other operand), ``("module", path, call)``
    (x is the first input of that module call, e.g. the block's or the projection's), or ``("none",)``;
    ``weights``: names of the parameters with >= 2 dimensions that the branch and the shortcut use (the
    block's weight matrices, for ``grad_norm``); ``shape``: of h in the probe."""

    name: str
    key: AddKey
    branch: int
    shortcut: str
    inplace: bool
    input_at: tuple
    weights: tuple[str, ...]
    shape: tuple[int, ...]


@dataclass
class Discovery:
    """What the probe forward saw: the residual additions in forward order, how many additions and module
    calls there were (for the message when none is residual), the bytes of every tensor the forward made
    (an activation estimate for the memory guard) and the probe's output."""

    adds: list[ResidualAdd]
    additions: int
    module_calls: int
    activation_bytes: int
    output: Any = field(repr=False, default=None)


# -- the probe: one forward with a lineage graph --------------------------------------------------------

@dataclass
class _Call:
    index: int
    path: str
    number: int  # 1 for the module's first call in this forward
    parent: int | None
    module: nn.Module
    input_node: int | None  # node of the first tensor input
    adds: int = 0  # additions seen while this call was the innermost one


@dataclass
class _Node:
    parents: tuple[int, ...]
    from_input: bool
    weighted_call: int | None = None  # the call whose output this node is, if that module has parameters
    call: int | None = None  # the call whose output this node is (any module)
    param: str | None = None  # parameter name, for a parameter leaf


@dataclass
class _AddEvent:
    call: int
    key: AddKey
    a: int
    b: int
    out: int
    inplace: bool
    same_shape: bool
    shape: tuple[int, ...]
    alpha: Any
    order: int  # its place among all additions of the forward


class _Probe(TorchFunctionMode):
    """Builds the lineage graph of one forward (see the module docstring)."""

    def __init__(self, model: nn.Module, inputs: tuple[torch.Tensor, ...]) -> None:
        super().__init__()
        self.paths: dict[nn.Module, str] = {}
        for path, module in model.named_modules(remove_duplicate=True):
            self.paths.setdefault(module, path)
        self.weighted = {m: any(True for _ in m.parameters()) for m in self.paths}
        self.param_names = {id(p): name for name, p in model.named_parameters(remove_duplicate=True)}
        self.param_ndim = {name: p.ndim for name, p in model.named_parameters(remove_duplicate=True)}
        self.buffers = {id(b) for b in model.buffers()}
        self.nodes: list[_Node] = []
        self.node_of: dict[int, int] = {}
        self.keep: list[torch.Tensor] = []  # every tensor seen stays alive, so that ids are not reused
        self.calls: list[_Call] = []
        self.stack: list[int] = []
        self.numbers: dict[nn.Module, int] = {}
        self.events: list[_AddEvent] = []
        self.all_adds: list[int] = []  # the innermost call of every addition, in order
        self.additions = 0
        self.activation_bytes = 0
        self.inputs = {id(t) for t in inputs}

    def node(self, t: torch.Tensor) -> int:
        """The node of ``t``; a tensor first seen here is a leaf (input, parameter, buffer or constant)."""
        index = self.node_of.get(id(t))
        if index is None:
            param = self.param_names.get(id(t))
            self.nodes.append(_Node((), id(t) in self.inputs, param=param))
            index = self.node_of[id(t)] = len(self.nodes) - 1
            self.keep.append(t)
        return index

    def new_node(self, t: torch.Tensor, parents: tuple[int, ...], **kw: Any) -> int:
        from_input = any(self.nodes[p].from_input for p in parents)
        self.nodes.append(_Node(parents, from_input, **kw))
        index = self.node_of[id(t)] = len(self.nodes) - 1
        self.keep.append(t)
        return index

    # module calls
    def pre_hook(self, module: nn.Module, args: tuple, kwargs: dict) -> None:
        number = self.numbers[module] = self.numbers.get(module, 0) + 1
        first = next(leaves((args, kwargs)), None)
        with torch._C.DisableTorchFunction():
            input_node = None if first is None else self.node(first)
        self.calls.append(_Call(len(self.calls), self.paths.get(module, "?"), number,
                                self.stack[-1] if self.stack else None, module, input_node))
        self.stack.append(len(self.calls) - 1)

    def post_hook(self, module: nn.Module, args: tuple, kwargs: dict, output: Any) -> None:
        call = self.stack.pop()
        weighted = call if self.weighted.get(module, False) else None
        for t in leaves(output):
            self.new_node(t, (self.node(t),), weighted_call=weighted, call=call)

    # every torch call
    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        inputs = [self.node(t) for t in leaves((args, kwargs))]
        if func in ADD_FUNCTIONS and self.stack:
            self._add(func, args, kwargs, out, inputs)
        for t in leaves(out):
            if id(t) not in self.node_of and t._base is None:  # a view shares its base's memory
                self.activation_bytes += t.numel() * t.element_size()
            self.new_node(t, tuple(inputs))
        return out

    def _add(self, func, args, kwargs, out, inputs) -> None:
        a, b, alpha = _operands(func, args, kwargs)
        if not _counted(a, b) or not isinstance(out, torch.Tensor):
            return
        self.additions += 1
        call = self.calls[self.stack[-1]]
        key = (call.path, call.number, call.adds)  # where it is; the interceptor's key is made by _keys
        call.adds += 1
        self.all_adds.append(call.index)
        same = a.shape == b.shape == out.shape
        # The result's node is made after this returns; it will be the next node.
        self.events.append(_AddEvent(call.index, key, self.node_of[id(a)], self.node_of[id(b)], len(self.nodes),
                                     func in _INPLACE, same, tuple(out.shape), alpha, len(self.all_adds) - 1))


def _ancestors(nodes: list[_Node], start: int, floor: int = -1) -> list[int]:
    """``start`` and every node it descends from with an index above ``floor``, highest index first."""
    seen, todo = {start}, [start]
    while todo:
        for p in nodes[todo.pop()].parents:
            if p > floor and p not in seen:
                seen.add(p)
                todo.append(p)
    return sorted(seen, reverse=True)


def _depths(nodes: list[_Node], target: int, order: list[int]) -> dict[int, int]:
    """For each node n of ``order`` (ancestors of ``target``, highest index first): the largest number of
    outputs of parametrised module calls on a path n -> target, n itself not counted."""
    depth = {target: 0}
    for n in order:
        d = depth.get(n)
        if d is None:
            continue
        step = d + (nodes[n].weighted_call is not None)
        for p in nodes[n].parents:
            if depth.get(p, -1) < step:
                depth[p] = step
    return depth


def _between(nodes: list[_Node], start: int, targets: tuple[int, ...]) -> list[int]:
    """Nodes on a path from ``start`` to any of ``targets`` (both ends included)."""
    out = set()
    for t in targets:
        anc = set(_ancestors(nodes, t, floor=start - 1))
        if start not in anc:
            continue
        # descendants of start among the ancestors of t: walk forward by index order
        reach = {start}
        for n in sorted(anc):
            if n != start and any(p in reach for p in nodes[n].parents):
                reach.add(n)
        out |= reach
    return sorted(out)


def _same_tensor(nodes: list[_Node], n: int, x: int) -> bool:
    """Whether node ``n`` is x itself, or x handed on by parameter-free modules that returned their input as it
    was (nn.Identity): each of those made an output node whose one parent is the node before it."""
    while n != x and nodes[n].call is not None and nodes[n].weighted_call is None and len(nodes[n].parents) == 1:
        n = nodes[n].parents[0]
    return n == x


def _classify(probe: _Probe, event: _AddEvent) -> tuple[int, str, int] | None:
    """(branch operand 0 | 1, shortcut kind, node of x) when the addition is residual, else None."""
    nodes = probe.nodes
    if not event.same_shape or event.a == event.b:
        return None
    if not (nodes[event.a].from_input and nodes[event.b].from_input):
        return None
    anc_a, anc_b = _ancestors(nodes, event.a), _ancestors(nodes, event.b)
    common = set(anc_a) & set(anc_b)
    candidates = [n for n in common if nodes[n].from_input and nodes[n].param is None]
    if not candidates:
        return None
    x = max(candidates)  # the nearest common activation
    depth_a, depth_b = _depths(nodes, event.a, anc_a)[x], _depths(nodes, event.b, anc_b)[x]
    if depth_a == depth_b or max(depth_a, depth_b) < 1:
        return None  # parallel branches of equal depth, or no module call at all (e.g. inside GELU)
    branch = 0 if depth_a > depth_b else 1
    shortcut_node, shortcut_depth = (event.b, depth_b) if branch == 0 else (event.a, depth_a)
    kind = "identity" if _same_tensor(nodes, shortcut_node, x) else "functional" if shortcut_depth == 0 else "projection"
    return branch, kind, x


def _weights(probe: _Probe, event: _AddEvent, x: int) -> tuple[str, ...]:
    """Parameters (>= 2 dims) that the operands were computed from after x: the block's weight matrices."""
    names: list[str] = []
    todo = [n for n in (event.a, event.b) if n > x]
    seen = set(todo)
    while todo:
        for p in probe.nodes[todo.pop()].parents:
            if p in seen:
                continue
            seen.add(p)
            node = probe.nodes[p]
            if node.param is not None:
                names.append(node.param)
            elif p > x:
                todo.append(p)
    return tuple(dict.fromkeys(n for n in names if probe.param_ndim[n] >= 2))


def _input_at(probe: _Probe, event: _AddEvent, branch: int, x: int) -> tuple:
    """Where x can be read at training time (see :class:`ResidualAdd`)."""
    shortcut = event.b if branch == 0 else event.a
    if _same_tensor(probe.nodes, shortcut, x):
        return ("operand",)
    owner = probe.calls[event.call]
    if owner.input_node == x:
        return ("module", owner.path, owner.number)
    on_path = set(_between(probe.nodes, x, (event.a, event.b)))
    for call in probe.calls:
        if call.input_node == x and any(probe.nodes[n].call == call.index for n in on_path):
            return ("module", call.path, call.number)
    return ("none",)


def _branch_child(probe: _Probe, event: _AddEvent, branch: int, x: int) -> str | None:
    """The child of the addition's module that the branch runs through with the most parameters."""
    operand = event.a if branch == 0 else event.b
    on_path = _between(probe.nodes, x, (operand,))
    best, best_size = None, -1
    for n in on_path:
        call = probe.nodes[n].call
        if n == x:
            continue
        if call is None or probe.calls[call].parent != event.call:
            continue
        module = probe.calls[call].module
        size = sum(p.numel() for p in module.parameters())
        if size > best_size:
            best, best_size = probe.calls[call].path, size
    return best


def _glob_adds(probe: _Probe, pattern: str) -> list[tuple[_AddEvent, int, str, int, str, int]]:
    """(event, branch, kind, x, name, owner call) for each call of a module whose path matches ``pattern``."""
    found = []
    for call in probe.calls:
        if not fnmatch.fnmatchcase(call.path, pattern) or call.input_node is None:
            continue
        inside = [e for e in probe.events if _within(probe, e.call, call.index) and e.same_shape]
        chosen = None
        for e in inside:
            if call.input_node in (e.a, e.b) and e.a != e.b:
                chosen = (e, 1 if e.a == call.input_node else 0, "identity")
                break
        if chosen is None:
            for e in reversed(inside):
                anc_a, anc_b = _ancestors(probe.nodes, e.a), _ancestors(probe.nodes, e.b)
                if call.input_node in anc_a and call.input_node in anc_b:
                    da = _depths(probe.nodes, e.a, anc_a)[call.input_node]
                    db = _depths(probe.nodes, e.b, anc_b)[call.input_node]
                    chosen = (e, 0 if da >= db else 1, "projection" if min(da, db) else "functional")
                    break
        if chosen is not None:
            name = call.path if call.number == 1 else f"{call.path}#{call.number}"
            found.append((*chosen, call.input_node, name, call.index))
    return found


def _keys(probe: _Probe, found: list[tuple[int, int]]) -> list[AddKey]:
    """The interceptor's key of each (addition number, owner call): the owner's path and call number, and the
    addition's number among the additions made while that owner was the innermost owner on the call stack
    (owners: the modules whose calls hold the residual additions). The interceptor hooks owners only."""
    owners = {probe.calls[owner].module for _, owner in found}
    counts: dict[int, int] = {}
    number_of: dict[int, tuple[int, int]] = {}  # addition number -> (owner call, its number inside it)
    for order, call in enumerate(probe.all_adds):
        while call is not None and probe.calls[call].module not in owners:
            call = probe.calls[call].parent
        if call is not None:
            number_of[order] = (call, counts.get(call, 0))
            counts[call] = counts.get(call, 0) + 1
    keys = []
    for order, owner in found:
        call, number = number_of[order]
        if call != owner:  # a glob's block holding an inner owner's addition: counted there
            owner = call
        keys.append((probe.calls[owner].path, probe.calls[owner].number, number))
    return keys


def _within(probe: _Probe, call: int | None, ancestor: int) -> bool:
    while call is not None:
        if call == ancestor:
            return True
        call = probe.calls[call].parent
    return False


def find_residual_adds(model: nn.Module, inputs: tuple[torch.Tensor, ...], blocks: str = "",
                       call: Callable[[nn.Module, tuple], Any] | None = None) -> Discovery:
    """Run ``model(*inputs)`` once under the probe and return its residual additions in forward order.

    ``blocks``: a glob over module paths (``layer*.*``) that names the blocks instead of the automatic rule
    (see the module docstring). ``call(model, inputs)`` replaces ``model(*inputs)`` (e.g. a keyword call).
    The forward runs with gradients on, in whatever mode (train/eval) the model is in; the caller keeps its
    buffers and RNG state if it needs them unchanged. Raises whatever the forward raises, and
    :class:`NoResidualError` (one line: what was found, how to name blocks) when no addition is residual.
    """
    probe = _Probe(model, inputs)
    handles = []
    try:
        for module in probe.paths:
            handles.append(module.register_forward_pre_hook(probe.pre_hook, with_kwargs=True))
            handles.append(module.register_forward_hook(probe.post_hook, with_kwargs=True))
        for t in inputs:
            probe.node(t)
        with probe:
            output = call(model, inputs) if call else model(*inputs)
    finally:
        for handle in handles:
            handle.remove()
    found: list[tuple[_AddEvent, int, str, int, str | None, int]] = []
    if blocks:
        found = list(_glob_adds(probe, blocks))
    else:
        for event in probe.events:
            result = _classify(probe, event)
            if result is not None:
                found.append((event, *result, None, event.call))
    if not found:
        what = (f"no module path matching {blocks!r} with an addition of its input" if blocks
                else "no residual addition h = x + F(x)")
        detail = f"{what}: the forward pass made {probe.additions} addition(s) in {len(probe.calls)} module call(s)"
        error = NoResidualError(f"{detail}; name the blocks with a glob over module paths, e.g. "
                                "--set model.blocks='layer*.*'")
        error.detail = detail  # without the command line's hint: a library caller gives its own
        raise error
    per_call: dict[int, int] = {}
    for event, *_ in found:
        per_call[event.call] = per_call.get(event.call, 0) + 1
    keys = _keys(probe, [(event.order, owner) for event, *_, owner in found])
    adds, used = [], {}
    for (event, branch, kind, x, name, owner), key in zip(found, keys):
        if name is None:
            owner = probe.calls[event.call]
            name = owner.path
            if per_call[event.call] > 1 or not name:
                child = _branch_child(probe, event, branch, x)
                name = child or (f"{owner.path}.add{event.key[2]}" if owner.path else f"add{event.key[2]}")
        used[name] = used.get(name, 0) + 1
        if used[name] > 1:
            name = f"{name}#{used[name]}"
        adds.append(ResidualAdd(name, key, branch, kind, event.inplace, _input_at(probe, event, branch, x),
                                _weights(probe, event, x), event.shape))
    return Discovery(adds, probe.additions, len(probe.calls), probe.activation_bytes, output)


# -- training time: find the same additions by key ------------------------------------------------------

class Interceptor(TorchFunctionMode):
    """Finds the additions of :func:`find_residual_adds` in every forward of ``model`` while installed.

    ``plain=True`` makes each one return F(x) alone (the plain twin): ``a + b`` -> the branch operand;
    ``out += x`` with ``out`` the branch -> ``out`` unchanged; ``h += f(h)`` (the shortcut updated in place)
    -> ``h`` overwritten with f(h) (``copy_``, so that code ignoring the result sees F(x) too).
    When set, ``on_operands(index, x, branch, shortcut)`` is called at each one before the addition (so before
    an in-place ``+=`` changes an operand; ``x`` None where it cannot be read, ``shortcut`` None in the twin)
    and ``on_output(index, h)`` after it.

    :meth:`acquire` / :meth:`release` count users: hooks are added by the first and removed by the last.
    Hooks go on the owners only (the modules whose calls hold the additions, see :func:`_keys`), on the modules
    whose input is some block's x, and a pre-hook on ``model`` that starts each forward's call counts. The mode
    is entered when an owner's call starts with no other owner running and left when it ends (``always_call``:
    also when the forward raises), so only the blocks' forward passes are intercepted, never the stem, the
    head, backward or the loss.
    """

    def __init__(self, model: nn.Module, adds: list[ResidualAdd], plain: bool = False) -> None:
        super().__init__()
        self.model, self.plain = model, plain
        self.on_operands: Callable | None = None
        self.on_output: Callable | None = None
        self.by_key = {a.key: (i, a) for i, a in enumerate(adds)}
        paths = {}
        for path, module in model.named_modules(remove_duplicate=True):
            paths.setdefault(path, module)
        self.owners = {paths[a.key[0]]: a.key[0] for a in adds}
        self.watch: dict[tuple[str, int], list[int]] = {}
        for i, a in enumerate(adds):
            if a.input_at[0] == "module":
                self.watch.setdefault(a.input_at[1:], []).append(i)
        self.watched = {paths[path]: path for path, _ in self.watch}
        self.inputs: dict[int, torch.Tensor] = {}
        self.stack: list[list] = []
        self.numbers: dict[nn.Module, int] = {}
        self.handles: list[Any] = []
        self.users = 0
        self.inside = False

    # hooks
    def acquire(self) -> None:
        if self.users == 0:
            try:
                self.handles.append(self.model.register_forward_pre_hook(self._start))
                for module in self.owners:
                    self.handles.append(module.register_forward_pre_hook(self._pre, with_kwargs=True))
                    self.handles.append(module.register_forward_hook(self._post, always_call=True))
                for module in self.watched:
                    if module not in self.owners:
                        self.handles.append(module.register_forward_pre_hook(self._pre, with_kwargs=True))
            except BaseException:
                self._remove()
                raise
        self.users += 1

    def release(self) -> None:
        self.users = max(self.users - 1, 0)
        if self.users == 0:
            self._remove()

    def _remove(self) -> None:
        for handle in self.handles:
            handle.remove()
        self.handles.clear()
        self._leave()

    def _leave(self) -> None:
        if self.inside:
            self.inside = False
            self.__exit__(None, None, None)

    def _start(self, module: nn.Module, args: tuple) -> None:
        self._leave()  # a forward that raised inside a block (not expected: the post-hooks always run)
        self.stack.clear()
        self.numbers.clear()
        self.inputs = {}

    def _pre(self, module: nn.Module, args: tuple, kwargs: dict) -> None:
        number = self.numbers[module] = self.numbers.get(module, 0) + 1
        if self.on_operands is not None and module in self.watched:
            found = self.watch.get((self.watched[module], number))
            if found:
                first = next(leaves((args, kwargs)), None)
                for index in found:
                    self.inputs[index] = first
        path = self.owners.get(module)
        if path is not None:
            if not self.stack:
                self.__enter__()
                self.inside = True
            self.stack.append([path, number, 0])

    def _post(self, module: nn.Module, args: tuple, output: Any) -> None:
        if self.stack:
            self.stack.pop()
        if not self.stack:
            self._leave()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func not in ADD_FUNCTIONS or not self.stack:
            return func(*args, **kwargs)
        a, b, alpha = _operands(func, args, kwargs)
        if not _counted(a, b):
            return func(*args, **kwargs)
        top = self.stack[-1]
        key = (top[0], top[1], top[2])
        top[2] += 1
        found = self.by_key.get(key)
        if found is None:
            return func(*args, **kwargs)
        index, add = found
        branch, shortcut = (a, b) if add.branch == 0 else (b, a)
        if add.branch == 1 and not (isinstance(alpha, (int, float)) and alpha == 1):
            branch = branch * alpha  # h = a + alpha * b: F(x) is alpha * b
        if self.on_operands is not None:
            x = shortcut if add.input_at[0] == "operand" else self.inputs.get(index)
            self.on_operands(index, x, branch, None if self.plain else shortcut)
        if not self.plain:
            h = func(*args, **kwargs)
        elif add.inplace and add.branch == 1:  # h += f(h): h becomes f(h)
            h = a.copy_(branch)
        else:  # out += x with out the branch, or an out-of-place sum: F(x) alone
            h = branch
        if self.on_output is not None:
            self.on_output(index, h)
        return h
