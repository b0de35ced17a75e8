"""The kit every scene uses: the base scene, widgets, style and theme, layout checks, beats, seeds, labels
and the frame-cost helpers; the lecture's scenes (one story per file) sit beside it in scenes/."""
