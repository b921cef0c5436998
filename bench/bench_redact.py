"""Redaction of hostile texts: 1 MB built to make one pattern try hard, redacted whole (tool output) and
streamed in 997-character pieces (a model's answer). Prints seconds per case; linear code stays near
a second, a quadratic walk took minutes. Then the common case: this repository's own source and prose with
no secret in it, as the tools read it (a file of 4 kB at a time) and as a model writes it (pieces of 40
characters), in microseconds per kB.

    python bench/bench_redact.py [--mb 1.0]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from zero.tools import Redactor, StreamRedactor


def cases(size: int) -> dict[str, str]:
    return {
        "assigned openers": "password = " * (size // 11),
        "bearer openers": "bearer " * (size // 7),
        "one endless word": "sk-" * (size // 3),
        "mixed triggers": "sk-ghp_AKIA://:@ password= Basic bearer -----BEGIN " * (size // 52),
        "key blocks": ("-----BEGIN RSA PRIVATE KEY-----" + "A" * 64 + "\n") * (size // 96),
        "aws key ids": ("AKIAABCDEFGHIJKLMNOP" + " " * 30) * (size // 50),
        "url credentials": ("a://b:" + "c" * 1023 + " ") * (size // 1030),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=1.0)
    size = int(parser.parse_args().mb * 1_000_000)
    redact = Redactor({})
    print(f"{'case':20} {'whole':>8} {'streamed':>9}")
    for name, text in cases(size).items():
        start = time.perf_counter()
        redact(text)
        whole = time.perf_counter() - start
        start = time.perf_counter()
        stream = StreamRedactor(redact)
        for i in range(0, len(text), 997):
            stream.feed(text[i : i + 997])
        stream.flush()
        print(f"{name:20} {whole:7.2f}s {time.perf_counter() - start:8.2f}s")
    root = Path(__file__).resolve().parents[1]
    ordinary = {
        "source code": "".join(p.read_text() for p in sorted(root.glob("*/*.py")))[:size],
        "prose": "".join(p.read_text() for p in sorted(root.glob("docs/*.md")))[:size],
    }
    print(f"{'ordinary text':20} {'4 kB files':>12} {'40-char pieces':>15}")
    for name, text in ordinary.items():
        kb = len(text) / 1000
        start = time.perf_counter()
        for i in range(0, len(text), 4096):
            Redactor({})(text[i : i + 4096])  # (a fresh one each: nothing remembered as clean)
        files = time.perf_counter() - start
        start = time.perf_counter()
        stream = StreamRedactor(Redactor({}))
        for i in range(0, len(text), 40):
            stream.feed(text[i : i + 40])
        stream.flush()
        print(f"{name:20} {files / kb * 1e6:9.0f} us/kB {(time.perf_counter() - start) / kb * 1e6:11.0f} us/kB")


if __name__ == "__main__":
    main()
