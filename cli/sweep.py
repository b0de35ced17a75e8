"""One experiment's missing runs trained as one sweep into the trace cache, without the command line's summary.

Example::

    python -m cli.sweep depth_sweep --set seeds=0,1 --scheduler tcp://10.0.0.5:8786

The ``--set`` values are parsed like ``render.py``'s (:func:`cli.params.build_runs`); the runs go to
:func:`simulation.cache.run_sweep`. A bad value prints ``error: <one line>`` and exits with status 1, before any work.
"""

from __future__ import annotations

import argparse
import logging
import sys

__all__ = ["main"]


def main(argv: list[str] | None = None) -> None:
    """``python -m cli.sweep EXPERIMENT [--set k=v ...] [--scheduler ADDRESS] [--workers N]``: train an
    experiment's missing runs as one sweep (:func:`simulation.cache.run_sweep`) into the trace cache."""
    from cli.params import build_runs
    from simulation.cache import run_sweep
    from simulation.config import ConfigError
    from simulation.sweep import SweepError

    parser = argparse.ArgumentParser(prog="python -m cli.sweep", description=main.__doc__)
    parser.add_argument("experiment")
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--scheduler", default=None, help="tcp://HOST:PORT of a running `dask scheduler`")
    parser.add_argument("--workers", type=int, default=None, help="local cluster size (default: cores)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        overrides = {}
        for pair in args.sets:
            key, sep, value = pair.partition("=")
            if not sep:
                raise ConfigError(f"expected key=value, got {pair!r}")
            overrides[key.strip()] = value.strip()
        runs = build_runs(args.experiment, overrides)
        run_sweep(list(runs.values()), scheduler=args.scheduler, workers=args.workers)
    except (ValueError, SweepError) as exc:  # ConfigError, a --set without '=', or a sweep that failed
        sys.exit(f"error: {exc}")


if __name__ == "__main__":
    main()
