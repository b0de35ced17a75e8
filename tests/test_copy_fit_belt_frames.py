"""Frame tests of the study note's scenes (issue 13), in English and Chinese, each trace-driven one with a twin
that tampers its trace and must fail.

Example::

    pytest tests/test_copy_fit_belt_frames.py
    pytest tests/test_copy_fit_belt_frames.py --set_test      # (re)write their control frames

The machinery (committed tiny traces, control frames under tests/control_data/scenes/, the cairo check) is
that of tests/test_frames.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from scenes.analogies import Analogies
from scenes.conveyor_belt import ConveyorBelt
from scenes.does_it_copy import DoesItOnlyCopy
from scenes.identity_fit import IdentityFit
from simulation.runkeys import RunKey

from dry_run import ZH_DEFAULT
from frame_checks import assert_fails_when_tampered, make_frame_test, same_cairo_as_control_data, twin_params  # noqa: F401

__module_test__ = "scenes"  # control data lives in tests/control_data/scenes/


def first_seed_only_halved(values: np.ndarray) -> np.ndarray:
    return values * 0.5


def lowered_after_step0(values: np.ndarray) -> np.ndarray:
    out = values.copy()
    out[1:] *= 0.25
    return out


# (scene, control name, run, array, tamper)
NOTE_SCENES = [
    (DoesItOnlyCopy, "does_it_copy", RunKey("residual", 0), "branch_norm", first_seed_only_halved),
    (IdentityFit, "identity_fit", RunKey("plain", 0), "loss_curve", lowered_after_step0),
    (ConveyorBelt, "conveyor_belt", RunKey("pre_ln", 0), "input_cos", first_seed_only_halved),
]
# The Chinese frames (and their twins) of the scenes outside dry_run.ZH_DEFAULT are slow (CI runs them).
ZH_SLOW = {name for scene, name, *_ in NOTE_SCENES if scene.__name__ not in ZH_DEFAULT}


def slow_in_zh(test, scene: type, lang: str):
    return pytest.mark.slow(test) if lang == "zh" and scene.__name__ not in ZH_DEFAULT else test


for _scene, _name, _run, _key, _tamper in NOTE_SCENES:
    for _lang in ("en", "zh"):
        globals()[f"test_{_name}_{_lang}"] = slow_in_zh(make_frame_test(_scene, f"{_name}_{_lang}", lang=_lang),
                                                        _scene, _lang)


test_analogies_en = make_frame_test(Analogies, "analogies_en", lang="en")  # not trace-driven: no tamper twin
test_analogies_zh = slow_in_zh(make_frame_test(Analogies, "analogies_zh", lang="zh"), Analogies, "zh")


TWIN_DEFAULT = {"en": {"conveyor_belt"}, "zh": set()}  # the other twins (and every Chinese one) run in CI's slow set


@pytest.mark.parametrize(("scene", "name", "run", "key", "tamper", "lang"),
                         [pytest.param(*p.values, lang, id=f"{p.id}-{lang}", marks=p.marks) for lang in ("en", "zh")
                          for p in twin_params(NOTE_SCENES, lang, slow={c[1] for c in NOTE_SCENES} - TWIN_DEFAULT[lang])])
def test_frame_fails_on_tampered_trace(request, tmp_path, scene, name, run, key, tamper, lang):
    assert_fails_when_tampered(request, tmp_path, scene, f"{name}_{lang}", run=run, key=key, tamper=tamper, lang=lang)
