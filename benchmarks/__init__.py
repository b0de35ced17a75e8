"""The speed and memory benchmarks, run from the checkout's root as modules (no ``sys.path`` edits).

Example::

    python -m benchmarks.run_all --quick --only recorder-mlp
    python -m benchmarks.tree_rss -- python render.py render IdentityHighway -q l -o /tmp/m

Every benchmark that looks at a command's processes walks them with :mod:`benchmarks.process_tree`.
"""
