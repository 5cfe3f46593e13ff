"""Which kind of CPU a benchmark ran on: the vector extensions llama.cpp was built to use here.

Why it is recorded: llama.cpp is compiled for the machine it is installed on (``-march=native``,
the Makefile), and its kernels for AVX2 and for AVX-512 add the same numbers in different orders.
The logits differ in their last bits, a sampled answer now and then differs, and from there the
whole run: the same engine, model file, scenario and seed made one town on an AVX2 host and
another on an AVX-512 host (docs/behaviour.md, *A seed is a replicate on one kind of CPU*). Two
reports are paired replicates only when they ran on the same kind of CPU; ``agora bench compare``
says when they did not.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["WANTED", "cpu"]

WANTED = ("avx2", "fma", "f16c", "avx512f", "avx512_vnni", "avx512_bf16", "amx_int8")
"""The flags that change which kernels llama.cpp compiles (x86); others do not matter here."""


def cpu(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """The vector extensions of :data:`WANTED` this machine has ('unknown' where /proc/cpuinfo is not
    readable, as on macOS)."""
    try:
        flags = next(line for line in cpuinfo.read_text().splitlines() if line.startswith("flags"))
    except (OSError, StopIteration):
        return "unknown"
    have = set(flags.split(":", 1)[1].split())
    return " ".join(f for f in WANTED if f in have) or "none of AVX2/AVX-512/AMX"
