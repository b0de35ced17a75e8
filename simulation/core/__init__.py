"""The core that records a training run: the recorder (:mod:`.record`) and the residual-addition finder
(:mod:`.residual_adds`). Imports only torch, numpy and the standard library, nothing of cli/, scenes/ or Manim
(tests/test_imports.py checks in a fresh interpreter)."""
