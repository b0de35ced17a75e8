"""Training and recording of real plain and residual networks.

Only ``simulation.kinds.mlp``, ``simulation.models``, ``simulation.core.record`` and ``simulation.data``
import torch; ``config``, ``experiments``, ``trace`` and ``cache`` stay torch-free so that
scenes can read traces without loading torch.
"""

from . import runs  # noqa: E402,F401  registers the run kinds, whose trainers every config digest hashes
