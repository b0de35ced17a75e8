"""scenes/kit/encoder.py: a repeated frame converted once gives the very same video file as Manim's encoder."""

from __future__ import annotations

from fractions import Fraction

import av
import numpy as np
import pytest
from manim._config.video_encoder import _DEFAULT_OPTIONS, VideoEncoderSpec
from manim.scene import video_segment_encoder as segment

from scenes.kit import encoder

# mp4 as a render writes it, the transparent formats, and raw YUV: nut/rawvideo stores the very frames the encoder
# was handed (yuv420p, as libx264 gets them), so its bytes show what the held-frame path sends, pixel and timestamp.
PROFILES = [("mp4", "libx264", "yuv420p"), ("mov", "qtrle", "argb"), ("webm", "libvpx-vp9", "yuva420p"),
            ("nut", "rawvideo", "yuv420p")]


def _frames(seed: int, width: int, height: int) -> list[tuple[np.ndarray, int]]:
    """A scene-like run: a few drawn frames, each held for a random number of copies (1 = an animation frame)."""
    rng = np.random.default_rng(seed)
    out = []
    base = rng.integers(0, 256, size=(height, width, 4), dtype=np.uint8)
    base[..., 3] = 255
    for _ in range(6):
        frame = base.copy()
        y, x = rng.integers(0, height - 8), rng.integers(0, width - 8)
        frame[y:y + 8, x:x + 8, :3] = rng.integers(0, 256, size=3, dtype=np.uint8)
        out.append((frame, int(rng.choice([1, 1, 2, 5, 17]))))
    return out


def _encode(path, spec, frames, write) -> bytes:
    enc = segment.VideoSegmentEncoder(target=path, spec=spec)
    for pixels, repeat in frames:
        write(enc, pixels.copy(), repeat=repeat)
    enc.finish()
    return path.read_bytes()


# Both encoders' files written in a child of the Manim probe server (tests/forked.py): libx264 in a test worker
# that had run a few hundred tests wrote other bytes for the same frames and options, one thread, three times in a
# row (two local runs of the whole suite; never in a fresh process, with denormals flushed, or with a heap filled
# with garbage first). Its input is checked in this process too: the raw YUV profile.
ENCODE_BOTH = r"""
import json
from fractions import Fraction
from pathlib import Path

import numpy as np
from manim._config.video_encoder import VideoEncoderSpec
from manim.scene import video_segment_encoder as segment

from scenes.kit import encoder

args = json.loads(open("spec.json").read())
spec = VideoEncoderSpec(container_format=args["container"], codec=args["codec"], pixel_format=args["pix_fmt"],
                        width=args["width"], height=args["height"], frame_rate=Fraction(args["rate"]),
                        options=tuple(tuple(pair) for pair in args["options"]))
frames = np.load("frames.npz")
for name, write in (("manim", encoder._ORIGINAL), ("ours", encoder.write_frame)):
    enc = segment.VideoSegmentEncoder(target=Path(f"{name}.{args['container']}").resolve(), spec=spec)
    for pixels, repeat in zip(frames["pixels"], frames["repeats"]):
        write(enc, np.ascontiguousarray(pixels), repeat=int(repeat))
    enc.finish()
"""


def _encode_both_forked(folder, spec, frames) -> tuple[bytes, bytes]:
    """(Manim's file, ours) for ``frames``, both encoded in one fresh child (see ENCODE_BOTH)."""
    import json

    from forked import run_forked

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "spec.json").write_text(json.dumps({
        "container": spec.container_format, "codec": spec.codec, "pix_fmt": spec.pixel_format, "width": spec.width,
        "height": spec.height, "rate": str(spec.frame_rate), "options": [list(pair) for pair in spec.options]}))
    np.savez(folder / "frames.npz", pixels=np.stack([f for f, _ in frames]), repeats=[r for _, r in frames])
    done = run_forked(ENCODE_BOTH, cwd=folder, server="manim")
    assert done.returncode == 0, done.stderr
    return tuple((folder / f"{name}.{spec.container_format}").read_bytes() for name in ("manim", "ours"))


@pytest.mark.parametrize("container,codec,pix_fmt", [
    pytest.param(*profile, marks=[pytest.mark.xdist_group("manim-probes")] if profile[1] == "libx264" else [])
    for profile in PROFILES])
@pytest.mark.parametrize("seed", [0, 1])
def test_converted_once_writes_the_same_file_as_manim(tmp_path, container, codec, pix_fmt, seed):
    width, height = 64, 48
    # One encoder thread: x264 with threads was seen once to write other bytes for the same input under load.
    options = {**_DEFAULT_OPTIONS.get(codec, {}), **({"threads": "1"} if codec in ("libx264", "libvpx-vp9") else {})}
    spec = VideoEncoderSpec(container_format=container, codec=codec, pixel_format=pix_fmt, width=width,
                            height=height, frame_rate=Fraction(15), options=tuple(sorted(options.items())))
    frames = _frames(seed, width, height)
    assert sum(r for _, r in frames) > len(frames)  # the case at hand: held frames
    if codec == "libx264":
        theirs, ours = _encode_both_forked(tmp_path, spec, frames)
    else:
        theirs = _encode(tmp_path / f"manim.{container}", spec, frames, encoder._ORIGINAL)
        ours = _encode(tmp_path / f"ours.{container}", spec, frames, encoder.write_frame)
    if container == "webm":  # Matroska writes a random segment UID: the same frames, other bytes
        assert theirs != _encode(tmp_path / "manim-again.webm", spec, frames, encoder._ORIGINAL)
        assert _decoded(tmp_path / "ours.webm") == _decoded(tmp_path / "manim.webm")
    else:
        assert ours == theirs
    assert len(_decoded(tmp_path / f"ours.{container}")) == sum(r for _, r in frames)


def _decoded(path) -> list[bytes]:
    with av.open(str(path)) as video:
        return [frame.to_ndarray(format="rgba").tobytes() for frame in video.decode(video=0)]


@pytest.mark.parametrize("container,codec,pix_fmt", [("mov", "qtrle", "argb"), ("nut", "rawvideo", "yuv420p")])
def test_a_changed_frame_changes_the_file(tmp_path, container, codec, pix_fmt):
    """The comparison above can fail: one pixel more in a held frame gives other bytes, and so does one copy
    fewer or one timestamp off."""
    spec = VideoEncoderSpec(container_format=container, codec=codec, pixel_format=pix_fmt, width=64, height=48,
                            frame_rate=Fraction(15), options=())
    frames = _frames(3, 64, 48)
    theirs = _encode(tmp_path / f"manim.{container}", spec, frames, encoder._ORIGINAL)
    assert _encode(tmp_path / f"same.{container}", spec, frames, encoder.write_frame) == theirs
    tampered = [(f.copy(), r) for f, r in frames]
    held = next(i for i, (_, r) in enumerate(tampered) if r > 1)
    tampered[held][0][0, 0, :3] ^= 0xFF
    assert _encode(tmp_path / f"ours.{container}", spec, tampered, encoder.write_frame) != theirs
    fewer = [(f, r - (i == held)) for i, (f, r) in enumerate(frames)]
    assert _encode(tmp_path / f"fewer.{container}", spec, fewer, encoder.write_frame) != theirs


def test_bad_frames_are_refused_as_manim_refuses_them(tmp_path):
    spec = VideoEncoderSpec(container_format="mp4", codec="libx264", pixel_format="yuv420p", width=64, height=48,
                            frame_rate=Fraction(15), options=tuple(sorted(_DEFAULT_OPTIONS["libx264"].items())))
    enc = segment.VideoSegmentEncoder(target=tmp_path / "x.mp4", spec=spec)
    with pytest.raises(ValueError, match="shape"):
        encoder.write_frame(enc, np.zeros((10, 10, 4), np.uint8), repeat=3)
    with pytest.raises(ValueError, match="positive"):
        encoder.write_frame(enc, np.zeros((48, 64, 4), np.uint8), repeat=0)
    enc.abort()


def test_install_is_idempotent_and_checks_the_method_it_replaces(monkeypatch):
    monkeypatch.setattr(segment.VideoSegmentEncoder, "write_frame", encoder._ORIGINAL)
    assert not encoder.installed()
    assert encoder.install() and encoder.install() and encoder.installed()
    monkeypatch.setattr(segment.VideoSegmentEncoder, "write_frame", encoder._ORIGINAL)
    monkeypatch.setattr(encoder, "_KNOWN", set())  # another Manim's method: left alone
    assert not encoder.install() and not encoder.installed()


def test_video_options_shorten_the_look_ahead_from_720p_and_set_threads():
    assert encoder.video_options("l") == {}
    for quality in "mhk":
        assert encoder.video_options(quality) == {"rc-lookahead": str(encoder.LOOKAHEAD)}
    assert encoder.video_options("h", 1) == {"rc-lookahead": str(encoder.LOOKAHEAD), "threads": "1"}
    assert encoder.video_options("l", 2) == {"threads": "2"}
    for bad in ("x", "H", ""):
        with pytest.raises(ValueError, match="quality"):
            encoder.video_options(bad)
    for bad in (0, -1, True, 1.5):
        with pytest.raises(ValueError, match="threads"):
            encoder.video_options("h", bad)


@pytest.mark.xdist_group("manim-probes")  # the worker that holds the Manim probe server (tests/forked.py)
@pytest.mark.parametrize("seed", [0, 1])
def test_with_the_render_options_ours_still_writes_manims_bytes_and_a_browser_mp4(tmp_path, seed):
    """The options a 1080p render passes (short look-ahead, one thread): our held-frame path still gives
    Manim's bytes, and the file is H.264 High, yuv420p, every frame there."""
    width, height = 64, 48
    options = {**_DEFAULT_OPTIONS["libx264"], **encoder.video_options("h", 1)}
    spec = VideoEncoderSpec(container_format="mp4", codec="libx264", pixel_format="yuv420p", width=width,
                            height=height, frame_rate=Fraction(60), options=tuple(sorted(options.items())))
    frames = _frames(seed, width, height)
    theirs, ours = _encode_both_forked(tmp_path, spec, frames)
    assert ours == theirs
    with av.open(str(tmp_path / "ours.mp4")) as video:
        stream = video.streams.video[0]
        assert (stream.codec_context.name, stream.format.name) == ("h264", "yuv420p")
    assert len(_decoded(tmp_path / "ours.mp4")) == sum(r for _, r in frames)


def test_finish_closes_the_segment_as_manims_does(tmp_path):
    """encoder.finish (Manim's finish, then malloc_trim) leaves the same file as Manim's own finish."""
    spec = VideoEncoderSpec(container_format="mp4", codec="libx264", pixel_format="yuv420p", width=64, height=48,
                            frame_rate=Fraction(15), options=(("crf", "23"), ("threads", "1")))
    frames = _frames(5, 64, 48)
    files = []
    for name, finish in (("manim", encoder._FINISH), ("ours", encoder.finish)):
        enc = segment.VideoSegmentEncoder(target=tmp_path / f"{name}.mp4", spec=spec)
        for pixels, repeat in frames:
            encoder._ORIGINAL(enc, pixels.copy(), repeat=repeat)
        finish(enc)
        files.append((tmp_path / f"{name}.mp4").read_bytes())
    assert files[0] == files[1] and len(files[0]) > 0
    encoder.install()
    assert segment.VideoSegmentEncoder.finish is encoder.finish and encoder.installed()


def test_queue_size_is_short_from_720p_and_manims_at_preview():
    assert encoder.queue_size("l") is None
    assert [encoder.queue_size(q) for q in "mhk"] == [encoder.QUEUE] * 3 and 1 <= encoder.QUEUE < 8
    with pytest.raises(ValueError, match="quality"):
        encoder.queue_size("x")


class _Stop(Exception):
    pass


@pytest.mark.parametrize("quality,fmt,options,queue", [
    ("h", "mp4", {"rc-lookahead": str(encoder.LOOKAHEAD), "threads": "1"}, encoder.QUEUE),
    ("l", "mp4", {}, None),  # -q l: Manim's own encoder options
    ("h", "webm", None, encoder.QUEUE),  # libvpx: Manim's options
])
def test_a_render_passes_the_encoder_settings_to_manim(tmp_path, monkeypatch, quality, fmt, options, queue):
    """Every render, alone or in a pool, passes the same encoder options: Manim keys its segment cache on them."""
    from contextlib import contextmanager

    from cli import media

    seen = {}

    @contextmanager
    def recording(settings):
        seen.update(settings)
        raise _Stop
        yield

    monkeypatch.setattr(media, "scene_config", recording)
    monkeypatch.setenv("RESIDUAL_CACHE", str(tmp_path / "cache"))
    job = media.RenderJob(scene="S", module="m", params={}, attrs={}, traces={}, source="s", quality=quality,
                          lang="en", format=fmt, transparent=False, output=str(tmp_path / "out"))
    with pytest.raises(_Stop):
        media.render_job(job, object)
    assert seen.get("video_encoder_options") == options
    assert seen.get("encoder_queue_size") == queue
