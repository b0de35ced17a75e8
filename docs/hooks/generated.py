"""MkDocs hook: the reference pages' tables of scenes and experiments, generated from ``render.py list --json``.

A page asks for a table with a marker line (``<!-- generated: scenes -->``, ``model-scenes``, ``experiments``,
``voices``, ``trace-arrays``, ``trace-meta``); the hook replaces it at build time, so the reference cannot fall behind the code. It also puts the
checkout's root on ``sys.path`` so that mkdocs-click can import ``render`` for the command reference, and tidies
what mkdocs-click leaves on that page (:func:`tidy_command_reference`).
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
# An option without a default: mkdocs-click 0.9 prints click's UNSET sentinel (click >= 8.3) or "None" in the table.
NO_DEFAULT = re.compile(r"<td>(?:<code>Sentinel\.UNSET</code>|None)</td>")
PLACEHOLDER = re.compile(r"<([a-z][a-z0-9_-]*)>")
# Elements the page itself is made of: a help text's placeholder must not share a name with one.
PAGE_ELEMENTS = frozenset("a abbr b body br code div em h1 h2 h3 h4 h5 h6 head hr html i img label li link meta nav "
                          "ol p pre script section small span strong style sub sup table tbody td th thead title tr "
                          "ul".split())


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


def help_placeholders(command=None) -> set[str]:
    """The ``<name>`` placeholders in the help texts of ``command`` and its subcommands (default: render.py's
    ``cli``), e.g. ``lang`` of ``OUTPUT/<480p15>/<lang>/``."""
    import click

    if command is None:
        from render import cli as command
    texts = [command.help or ""] + [getattr(p, "help", None) or "" for p in command.params]
    found = {name for text in texts for name in PLACEHOLDER.findall(text)}
    for sub in getattr(command, "commands", {}).values():
        if isinstance(sub, click.Command):
            found |= help_placeholders(sub)
    if found & PAGE_ELEMENTS:
        raise ValueError(f"a help text of render.py writes <{min(found & PAGE_ELEMENTS)}>, which is also an HTML "
                         "element of the command reference: name the placeholder otherwise")
    return found


def tidy_command_reference(html: str, placeholders: set[str]) -> str:
    """The command reference as a reader should see it: an option without a default says "—" (not click's
    ``Sentinel.UNSET`` or Python's ``None``), and a placeholder of the help texts (``<lang>``), which Markdown
    passes through as an HTML tag the browser hides, is shown as written."""
    html = NO_DEFAULT.sub("<td>—</td>", html)
    return PLACEHOLDER.sub(lambda m: f"&lt;{m[1]}&gt;" if m[1] in placeholders else m[0], html)


def on_page_content(html, page, config, files):
    if page.file.src_uri == "reference/commands.md":
        return tidy_command_reference(html, help_placeholders())
    return html


def on_page_markdown(markdown, page, config, files):
    return MARKER.sub(lambda m: render_marker(m.group(1)), markdown)
