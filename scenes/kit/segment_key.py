"""The key of Manim's segment cache, computed in one pass over the objects Manim's own key reads.

Example::

    python render.py render IdentityHighway -q l      # LectureScene.setup installs it; nothing to call

Manim 0.22 names each ``play``'s video segment (its partial-movie cache, ``$RESIDUAL_CACHE/manim/segments``) by
``manim.utils.hashing.get_hash_from_play_call``: the camera, the animations and every mobject on screen are turned
into JSON (a cleaned copy of every object's ``__dict__``, a memo of the objects seen, ``json.dumps`` with a custom
encoder, one SHA-256 and one JSON dtype descriptor per array) and the JSON is hashed. Over the cold lecture's 416
plays at ``-q l`` that took 41.7 CPU s of the render workers' ~190 (docs/developers/speed.md); this key takes 11.4.

:func:`play_key` reads the same objects in the same order with one C pickler (protocol 5) whose output is hashed as
it is written: plain values, lists, dicts and tuples as pickle writes them; an array by its dtype and shape, its bytes
into a second SHA-256; any other object with a ``__dict__`` by its class and that dict (the keys Manim leaves out,
:data:`manim.utils.hashing.KEYS_TO_FILTER_OUT`, left out too: the camera's pixels and background, a copy's
``original_id``; animations and mobjects keep their pixel arrays, as in Manim); a function by its source (Manim's
``inspect.getsource``), defaults, closure values and the globals it names (modules left out, as Manim leaves them);
the scene by one marker (Manim's placeholder); a file path by its name only (a text's SVG lies in the render's private
folder); an object with no ``__dict__`` by its class (as Manim). Pickle's memo writes an object read before as the
position where it was first written. It reads more than Manim's key, never less: the class of every object, a bound
method's object, a ``functools.partial``'s function and arguments, numpy scalars, which earlier object a repeated
reference is (Manim writes one placeholder for all). Over the lecture's 416 plays it splits them exactly as Manim's
key does (415 keys each); tests/test_segment_key.py checks that every change Manim sees changes this key (with a
tamper twin that ignores array values), and that another process gives the same key, so a re-render (lone or pooled)
finds the segments cached before (tests/test_cli.py, tests/test_voice.py). Where pickle cannot write something, the
key is Manim's own.

:func:`install` puts :func:`play_key` in place of Manim's function in the Cairo renderer, only over the function it
was checked against (Manim 0.22's, by its code); segments cached under Manim's keys are rendered once more.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import pickle
import types
from pathlib import PurePath
from typing import Any, Iterable

import numpy as np

from manim.renderer import cairo_renderer as _renderer
from manim.utils import hashing as _hashing

from scenes.kit.encoder import function_fingerprint

__all__ = ["play_key", "install", "installed", "KEY_VERSION"]

KEY_VERSION = 1  # bump when the meaning of a key changes: every cached segment is rendered again once
_ORIGINAL = _hashing.get_hash_from_play_call
# co_code of Manim 0.22.0's get_hash_from_play_call (what this module was checked against: what it reads).
_KNOWN = {"9c9754e8240f45c8"}
_FILTERED = frozenset(_hashing.KEYS_TO_FILTER_OUT)  # original_id, background, pixel_array, pixel_array_to_cairo_context
_PIXELS = frozenset({"pixel_array"})  # of those, what animations and mobjects keep (Manim's include_pixel_array)
_PRIMITIVE_SET_ITEMS = (str, int, float, bool, type(None))


@functools.lru_cache(maxsize=None)
def _code_digest(code: types.CodeType) -> str:
    """Digest of a function body: its source text, as Manim reads it (the same however the module was compiled:
    pytest rewrites a test module's bytecode); its bytecode, constants and names where there is no source."""
    digest = hashlib.sha256(f"{code.co_qualname}\0".encode())
    try:
        digest.update(inspect.getsource(code).encode("utf-8", "surrogatepass"))
        return digest.hexdigest()[:32]
    except (OSError, TypeError):  # compiled from a string (python -c, exec): no file to read
        pass
    digest.update(f"{code.co_argcount}\0{code.co_kwonlyargcount}\0{code.co_flags}\0".encode())
    digest.update(code.co_code)
    for const in code.co_consts:
        digest.update(_const_text(const).encode("utf-8", "surrogatepass") + b"\0")
    digest.update(repr(code.co_names).encode())
    return digest.hexdigest()[:32]


def _const_text(const: Any) -> str:
    """A compiled constant as text, the same in every process (a frozenset's order follows string hashing, which
    differs between processes: its items are sorted)."""
    if isinstance(const, types.CodeType):
        return f"code:{_code_digest(const)}"
    if isinstance(const, tuple):
        return "(" + ",".join(_const_text(c) for c in const) + ")"
    if isinstance(const, frozenset):
        return "frozenset(" + ",".join(sorted(_const_text(c) for c in const)) + ")"
    return f"{type(const).__name__}:{const!r}"


def _global_names(code: types.CodeType) -> tuple[str, ...]:
    """Names a function body (nested functions' included) may read from its module's globals."""
    names = list(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names += _global_names(const)
    return tuple(dict.fromkeys(names))


def _scene() -> None:
    """Stands for the scene in a key (as Manim's placeholder does): never called."""


def _array(dtype: str, shape: tuple[int, ...]) -> None:
    """Stands for an array of this dtype and shape whose bytes are hashed beside the stream: never called."""


def _object(kind: str) -> None:
    """Stands for an object of class ``kind`` whose state (its ``__dict__``) follows in a key: never called."""


def _function(code: str) -> None:
    """Stands for a function with compiled body ``code`` whose defaults, closure and globals follow: never called."""


def _other(kind: str, *parts: Any) -> None:
    """Stands for a class, a module, a bound method, a partial, a set or an object with no state: never called."""


_MARKERS = frozenset(map(id, (_scene, _array, _object, _function, _other)))
_DTYPES: dict[np.dtype, str] = {}  # dtype -> its text: byte order, kind and size; a structured one by its fields


def _dtype_text(dtype: np.dtype) -> str:
    text = _DTYPES[dtype] = dtype.str if dtype.fields is None else repr(dtype.descr)
    return text
_TOKENS: dict[type, str] = {}  # class -> "module.qualname" (one string object per class: pickled once per key)


def _token(kind: type) -> str:
    token = _TOKENS.get(kind)
    if token is None:
        token = _TOKENS[kind] = f"{kind.__module__}.{kind.__qualname__}"
    return token


class _KeyPickler(pickle.Pickler):
    """A pickler whose output says everything the key reads (module docstring): plain values, arrays, lists, dicts
    and tuples as pickle writes them; every other object through :meth:`reducer_override`. Pickle's memo writes an
    object read before as the position where it was first written."""

    def __init__(self, file: Any, scene: Any) -> None:
        super().__init__(file, protocol=5)
        self.scene = scene
        self.drop = _FILTERED
        self.arrays = hashlib.sha256()  # the bytes of every array, in the order their dtypes and shapes are written

    def reducer_override(self, obj: Any) -> Any:
        kind = type(obj)
        if kind is np.ndarray:
            dtype = obj.dtype
            if dtype.hasobject:
                return NotImplemented  # numpy's own reduction: the items, each written like any object
            try:
                self.arrays.update(obj)
            except (BufferError, ValueError):  # not C-contiguous
                self.arrays.update(np.ascontiguousarray(obj))
            return _array, (_DTYPES.get(dtype) or _dtype_text(dtype), obj.shape)
        if kind is types.FunctionType:
            if id(obj) in _MARKERS:
                return NotImplemented  # the markers themselves: by name
            return _function, (_code_digest(obj.__code__),), _function_state(obj)
        if obj is self.scene:
            return _scene, ()
        if kind is types.MethodType:  # before __dict__: a bound method answers with its function's
            return _other, ("method",), (obj.__self__, obj.__func__)
        state = getattr(obj, "__dict__", None)
        if type(state) is dict and not isinstance(obj, (type, types.ModuleType, functools.partial, *_CONTAINERS)):
            if not state.keys().isdisjoint(self.drop):
                state = state.copy()
                for name in self.drop.intersection(state):
                    del state[name]
            return _object, (_TOKENS.get(kind) or _token(kind),), state
        return self.special(obj, kind)

    def special(self, obj: Any, kind: type) -> Any:
        if isinstance(obj, type):
            return _other, ("class", _token(obj))
        if isinstance(obj, types.ModuleType):
            return _other, ("module", obj.__name__)
        if isinstance(obj, functools.partial):
            return _other, ("partial",), (obj.func, obj.args, obj.keywords)
        if isinstance(obj, (set, frozenset)):  # sorted, so that the order of hashing strings does not matter
            if all(isinstance(item, _PRIMITIVE_SET_ITEMS) for item in obj):
                return _other, ("set", _token(kind), tuple(sorted(repr(item) for item in obj)))
            return _other, ("set", _token(kind), len(obj))  # Manim reads such a set as its type only
        if isinstance(obj, _CONTAINERS):  # a subclass of list, tuple or dict: its class, items and attributes
            items = dict(obj) if isinstance(obj, dict) else list(obj)
            return _other, ("container", _token(kind)), (items, getattr(obj, "__dict__", None))
        if isinstance(obj, (np.generic, np.ndarray, str, bytes, bytearray, complex, range, slice)):
            return NotImplemented
        if isinstance(obj, PurePath):  # where a file lies differs between renders (a private folder): its name only
            return _other, ("path", obj.name)
        # No __dict__ (a C object: a builtin function, a ufunc, a cairo surface): its class only, as Manim reads it.
        return _other, ("opaque", _token(kind), str(getattr(obj, "__qualname__", "")))


_CONTAINERS = (list, tuple, dict)


def _function_state(func: types.FunctionType) -> tuple:
    """What a function reads besides its body: defaults, closure values and the globals it names (no modules)."""
    cells = []
    for cell in func.__closure__ or ():
        try:
            cells.append(cell.cell_contents)
        except ValueError:  # a cell not filled yet
            cells.append(_scene)  # any fixed marker
    names = func.__globals__
    found = {name: names[name] for name in _global_names(func.__code__)
             if name in names and not isinstance(names[name], types.ModuleType)}
    return func.__defaults__, func.__kwdefaults__, cells, found


class _Digest:
    """A write-only file that hashes what is written."""

    __slots__ = ("write", "digest")

    def __init__(self) -> None:
        self.digest = hashlib.sha256()
        self.write = self.digest.update


def play_key(scene_object: Any, camera_object: Any, animations_list: Iterable[Any], current_mobjects_list: Iterable[Any],
             *, backend: str, encoder_fingerprint: str, renderer_state: Any) -> str:
    """The segment-cache key of one ``play``: Manim's ``get_hash_from_play_call`` with the same arguments, read in one
    pass (module docstring). Returns 64 hex characters; ValueError for a backend or fingerprint Manim refuses."""
    if backend not in {"cairo", "opengl"}:
        raise ValueError(f"Unsupported cache backend: {backend}")
    if not encoder_fingerprint:
        raise ValueError("An encoder fingerprint is required for cache identity.")
    animations = sorted(animations_list, key=str)
    mobjects = list(current_mobjects_list)
    out = _Digest()
    pickler = _KeyPickler(out, scene_object)
    try:
        pickler.dump((KEY_VERSION, backend, encoder_fingerprint))
        pickler.drop = _FILTERED  # the camera without its pixels and background
        pickler.dump(camera_object)
        pickler.drop = _FILTERED - _PIXELS  # animations and mobjects with theirs (an ImageMobject's pixels)
        pickler.dump(animations)
        pickler.dump(mobjects)
        pickler.dump(renderer_state)
    except Exception:  # something pickle cannot write: Manim's own key, as before
        return _ORIGINAL(scene_object, camera_object, animations, mobjects, backend=backend,
                         encoder_fingerprint=encoder_fingerprint, renderer_state=renderer_state)
    out.digest.update(pickler.arrays.digest())
    return out.digest.hexdigest()


def installed() -> bool:
    """Whether Manim's Cairo renderer keys its segments with :func:`play_key` now."""
    return _renderer.get_hash_from_play_call is play_key


def install() -> bool:
    """Key every segment with :func:`play_key` from now on (idempotent). Returns whether it is in use: False where
    this Manim's ``get_hash_from_play_call`` is not the one this module was checked against."""
    if installed():
        return True
    if _renderer.get_hash_from_play_call is not _ORIGINAL or function_fingerprint(_ORIGINAL) not in _KNOWN:
        return False
    _renderer.get_hash_from_play_call = play_key
    return True
