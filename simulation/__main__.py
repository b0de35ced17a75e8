"""A config's run kind, trainer, memory estimate and work; with ``--measure``, its measured peak memory.

Example::

    python -m simulation '{"kind": "transformer", "depth": 4}'
    python -m simulation --measure '{"depth": 20}'          # trains it (twice: a warm-up run first); Linux only
"""

from __future__ import annotations

import json
import sys

from .config import ConfigError, config_from_dict
from .memory import measure_peak
from .runs import estimate, kind_of, work


def main(argv: list[str]) -> int:
    """``python -m simulation [--measure] CONFIG_JSON ...``: each config's kind, label, memory estimate and
    work; with ``--measure`` its estimate and measured peak in bytes, as JSON (imports torch). A bad config
    prints one line and returns 1."""
    measure = argv[:1] == ["--measure"]
    for arg in argv[measure:]:
        try:
            config = config_from_dict(json.loads(arg))
            kind = kind_of(config)
            if measure:
                peak = measure_peak(kind.load_trainer(), config)
                print(json.dumps({"estimate": estimate(config).total, "peak": peak}))
            else:
                print(f"{kind.name} ({kind.label}), trainer {kind.trainer}: {estimate(config).describe()}, "
                      f"work {work(config)} block-steps")
        except (ConfigError, json.JSONDecodeError) as exc:  # a bad config, or a kind that cannot estimate it
            print(f"error: {exc}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
