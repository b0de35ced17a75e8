"""MkDocs hook: the reference pages' tables of scenes and experiments, generated from ``render.py list --json``.

A page asks for a table with a marker line (``<!-- generated: scenes -->``, ``model-scenes``, ``experiments``,
``voices``, ``trace-arrays``, ``trace-meta``); the hook replaces it at build time, so the reference cannot fall behind the code. It also puts the
checkout's root on ``sys.path`` so that mkdocs-click can import ``render`` for the command reference.
"""

from __future__ import annotations

import functools
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MARKER = re.compile(r"^<!-- generated: ([a-z-]+) -->$", re.MULTILINE)


def on_config(config):
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    return config


@functools.lru_cache(maxsize=1)
def listing() -> dict:
    """``render.py list --json`` of this checkout (scenes, model scenes, experiments, voices)."""
    out = subprocess.run([sys.executable, str(ROOT / "render.py"), "list", "--json"], cwd=ROOT, check=True,
                         capture_output=True, text=True)
    return json.loads(out.stdout)


def _params(params: dict) -> str:
    if not params:
        return "—"
    return "<br>".join(f"`{name}={p['default'] if p['default'] not in (None, '', []) else '…'}` ({p['type']})"
                       for name, p in params.items())


def _cell(text) -> str:
    return str(text if text not in (None, "") else "—").replace("|", "\\|").replace("\n", " ")


def scenes_table(rows: list[dict], variant: bool = False) -> str:
    head = ["scene", "what it shows and measures", "experiment" if not variant else "replaces", "parameters"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for s in rows:
        third = f"`{s['experiment']}`" if s.get("experiment") and not variant else (
            f"`{s['variant_of']}`" if variant else "—")
        if s.get("chapter"):
            third += f" (optional chapter `{s['chapter']}`)"
        lines.append(f"| `{s['name']}` | {_cell(s['description'])} | {third} | {_params(s['params'])} |")
    return "\n".join(lines)


def experiments_section(experiments: dict) -> str:
    parts = []
    for name, e in experiments.items():
        parts.append(f"### `{name}`\n\n{_cell(e['description'])}\n\nSource: {_cell(e.get('source'))}\n\n"
                     "| parameter | type | default |\n|---|---|---|\n" +
                     "\n".join(f"| `{k}` | {p['type']} | `{_cell(p['default'])}` |" for k, p in e["params"].items()))
    return "\n\n".join(parts)


def voices_table(voices: dict) -> str:
    lines = ["| voice | language | engine | licence |", "|---|---|---|---|"]
    for name, v in voices.items():
        lines.append(f"| `{name}` | {v['lang']} | {_cell(v['description'])} | {_cell(v['licence'])} |")
    return "\n".join(lines)


def trace_arrays() -> str:
    """Every array a trace may hold, with its axes (simulation.trace.ARRAY_AXES)."""
    from simulation.trace import ARRAY_AXES
    lines = ["| array | axes |", "|---|---|"]
    for name, axes in ARRAY_AXES.items():
        lines.append(f"| `{name}` | {' × '.join(str(a) for a in axes) or 'scalar'} |")
    return "\n".join(lines)


def trace_meta() -> str:
    """The metadata fields of a trace with their source comments (simulation.trace.TraceMeta)."""
    import inspect

    from simulation.trace import TraceMeta
    lines = ["| field | type | meaning |", "|---|---|---|"]
    field_line = re.compile(r"^    (\w+): ([^=]+?) = [^#]*(?:#\s*(.*))?$")
    for line in inspect.getsource(TraceMeta).splitlines():
        m = field_line.match(line)
        if m:
            lines.append(f"| `{m[1]}` | `{m[2].strip()}` | {_cell(m[3])} |")
    return "\n".join(lines)


def render_marker(kind: str) -> str:
    if kind == "trace-arrays":
        return trace_arrays()
    if kind == "trace-meta":
        return trace_meta()
    data = listing()
    if kind == "scenes":
        return scenes_table(data["scenes"])
    if kind == "model-scenes":
        return scenes_table(data["model_scenes"], variant=True)
    if kind == "experiments":
        return experiments_section(data["experiments"])
    if kind == "voices":
        return voices_table(data["voices"])
    raise ValueError(f"unknown generated table {kind!r} (scenes, model-scenes, experiments, voices, trace-arrays, "
                     "trace-meta)")


def on_page_markdown(markdown, page, config, files):
    return MARKER.sub(lambda m: render_marker(m.group(1)), markdown)
