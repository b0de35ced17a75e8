"""The one value parser: ``--set`` strings, TOML values and experiment parameters, typed by a default.

Example::

    python -c "from simulation.values import convert_value; print(convert_value('depths', (8, 20), '4,6'))"

Every parameter of the project (a run config field, an experiment's own parameter, a scene's class
attribute) has a default of a simple type, bool, int, float or str, or a tuple of one of them; a value
from the command line (a string) or from a TOML file (typed already) becomes that type here, or a
:class:`ConfigError` with a one-line message says why not. Torch-free and
manim-free: the command line, the trainers and the scenes share it.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["ConfigError", "convert_value", "type_name", "a_type", "SIMPLE_TYPES", "TRUE_WORDS", "FALSE_WORDS"]

SIMPLE_TYPES = (bool, int, float, str)
TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("0", "false", "no", "off")
_SHOWN = 60  # characters of a bad value quoted in a message: a 10,000-character value stays one short line


class ConfigError(ValueError):
    """A parameter has a wrong name, type or value; the message is one line for the user (also
    ``simulation.config.ConfigError``)."""


def a_type(value: Any) -> str:
    """``value``'s type name after its article, for messages: "an int", "a list", "a NoneType"."""
    name = type(value).__name__
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"


def _error(message: str) -> Exception:
    return ConfigError(message)


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 5] + "...'" + f" ({len(text)} characters)"


def type_name(default: Any) -> str | None:
    """``"int"``, ``"tuple[float]"`` ... for a default of a supported type; None for any other default."""
    if type(default) in SIMPLE_TYPES:
        return type(default).__name__
    if isinstance(default, tuple) and default and all(type(v) is type(default[0]) for v in default) \
            and type(default[0]) in SIMPLE_TYPES:
        return f"tuple[{type(default[0]).__name__}]"
    return None


def convert_value(label: str, default: Any, value: Any, finite: bool = False) -> Any:
    """``value`` as the type of ``default``.

    ``value``: a command-line string (``"3"``, ``"0.5"``, ``"yes"``, ``"8,20"``) or a TOML / Python value
    (``3``, ``[8, 20]``; an int where a float is expected is widened). A tuple default takes a
    comma-separated string or a list, at least one item. ``finite=True`` also refuses NaN and inf floats
    (for parameters without a range check of their own, such as scene attributes). Raises ConfigError
    naming ``label``; never another exception.
    """
    if isinstance(default, tuple):
        if not default:
            raise _error(f"{label} has an empty default; it cannot be set")
        if isinstance(value, (list, tuple)):
            items = list(value)
        elif isinstance(value, str):
            parts = value.split(",")
            items = [v for v in parts if v.strip()]
            if items and len(items) < len(parts):  # "8,,20" or "8,20,": a value left out?
                raise _error(f"{label} has an empty item in {_show(value)}")
        else:
            items = [value]
        kind = type(default[0])
        if not items:
            raise _error(f"{label} must hold at least one value; got {_show(value)}")
        try:
            return tuple(convert_value(label, default[0], item, finite) for item in items)
        except Exception:
            raise _error(f"{label} must be list[{kind.__name__}] (comma-separated), got {_show(value)}") from None
    kind = type(default)
    if kind not in SIMPLE_TYPES:
        raise _error(f"{label} cannot be set (its default is {a_type(default)})")
    if isinstance(value, str) and kind is not str:
        text = value.strip()
        try:
            if kind is bool:
                if text.lower() not in TRUE_WORDS + FALSE_WORDS:
                    raise ValueError
                value = text.lower() in TRUE_WORDS
            elif not text.isascii() or "_" in text:  # int() also reads "１２", "٣" and "1_0"
                raise ValueError
            else:
                value = kind(text)  # int("4300 digits and more") raises ValueError too
        except (ValueError, OverflowError):
            if kind in (int, float) and "," in text:  # a list where one number belongs
                raise _error(f"{label} must be one {kind.__name__}; got {_show(text)}") from None
            raise _error(f"{label} must be {kind.__name__}, got {_show(text)}") from None
    elif isinstance(value, str):
        value = value.strip()
    if kind is float and type(value) is int:
        try:
            value = float(value)
        except OverflowError:
            raise _error(f"{label} must be a float, got an integer too large for one") from None
    if type(value) is not kind:
        raise _error(f"{label} must be {kind.__name__}, got {_show(value)}")
    if finite and kind is float and not math.isfinite(value):
        raise _error(f"{label} must be a finite number; got {value}")
    return value
