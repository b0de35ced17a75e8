"""The command line's helpers: parameters, render jobs and media (``render.py`` is the front door).

Modules here read rendered clips, traces and their records; they never train a network and never
draw a frame themselves (training runs in ``simulation``, drawing in ``scenes``).
"""
