"""README's loop: a short looping GIF cut from a rendered clip.

Example::

    python render.py render GradientFlowOverTraining -q l --output /tmp/loop
    python docs/loop_gif.py /tmp/loop/480p15/en/GradientFlowOverTraining.mp4 docs/gradient-flow.gif 5.2 15.0 2 640

Arguments: the clip, the GIF, then seconds [t0, t1), every k-th frame, w px wide, one palette; pixels that
changed by less than a threshold kept from the previous frame (so the GIF stores only what moves)."""
import sys
import av
import numpy as np
from PIL import Image
src, dst, t0, t1, k, w = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
frames, fps = [], None
with av.open(src) as c:
    st = c.streams.video[0]
    fps = float(st.average_rate)
    for i, f in enumerate(c.decode(st)):
        t = f.time
        if t0 <= t < t1 and i % k == 0:
            frames.append(f.to_image())
h = round(frames[0].height * w / frames[0].width)
arrs = [np.asarray(f.resize((w, h), Image.LANCZOS)).astype(np.int16) for f in frames]
out = [arrs[0]]
for a in arrs[1:]:
    prev = out[-1]
    keep = np.abs(a - prev).sum(-1, keepdims=True) < 36
    out.append(np.where(keep, prev, a))
imgs = [Image.fromarray(a.astype(np.uint8)) for a in out]
pal = imgs[len(imgs) // 2].quantize(colors=64, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
imgs = [im.quantize(palette=pal, dither=Image.Dither.NONE) for im in imgs]
imgs[0].save(dst, save_all=True, append_images=imgs[1:], loop=0, duration=round(1000 * k / fps), optimize=True)
print(len(imgs), "frames", round(1000 * k / fps), "ms each", fps, "fps")
