"""The recording core: the recorder (:mod:`.record`), the residual-addition finder (:mod:`.residual_adds`) and
the watch API (:mod:`.watch`). Imports only torch, numpy, the standard library and the torch-free trace module
(simulation.trace), nothing of cli/, scenes/, narration/, Manim or click (tests/test_imports.py checks, also in a
fresh interpreter)."""
