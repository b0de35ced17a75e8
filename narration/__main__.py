"""``python -m narration --voice NAME TEXT OUT.wav``: speak one line with a lecture voice into a WAV file.

Example::

    python -m narration --voice zh-espeak "残差块把输入 x 加到 F(x) 上。" line.wav
"""

from __future__ import annotations

import sys
from pathlib import Path

from narration.audio import write_wav
from narration.cache import speak
from narration.engines import VOICES, missing_voice


def main(argv: list[str] | None = None) -> int:
    """``python -m narration --voice NAME TEXT OUT.wav``: speak one line into a WAV file."""
    import argparse

    parser = argparse.ArgumentParser(description="Speak one line with a lecture voice.")
    parser.add_argument("--voice", default="en-piper", choices=list(VOICES))
    parser.add_argument("text")
    parser.add_argument("out", type=Path)
    args = parser.parse_args(argv)
    problem = missing_voice(args.voice)
    if problem:
        print(f"Error: {problem}", file=sys.stderr)
        return 1
    write_wav(args.out, speak(args.text, args.voice))
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
