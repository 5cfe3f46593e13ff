"""Does this machine's llama.cpp build answer? Exit 0 if the bundled model decodes a token, else 1.

    python tools/check_llama.py        (make install runs it after installing)

A llama-cpp-python wheel built elsewhere, or cached from a build with other flags, can fault on
this CPU at its first decode: ggml's AMX kernel on a machine whose virtual CPU advertises AMX
without giving processes its tile state dies on ``ldtilecfg`` with a general protection fault,
taking the interpreter with it. So the check runs in a child process and only reports whether
it survived; the Makefile then rebuilds llama-cpp-python from source with AMX left out.

The probe must reach the kernels a run reaches: ggml sends a matrix product to AMX only when the
batch has enough rows, so a one-token prompt ("Hello") decodes fine on a wheel that faults at a
run's first real prompt. It evaluates a prompt of a few hundred tokens, on every core, as a run does.
"""

from __future__ import annotations

import subprocess
import sys

PROBE = """
from llama_cpp import Llama
from simulation.llm.llamacpp import bundled_model_path
llm = Llama(model_path=str(bundled_model_path()), n_ctx=1024, verbose=False)
prompt = "Isabella runs Hobbs Cafe, a cosy corner cafe between Maple Row and the town square. " * 12
llm.create_completion(prompt, max_tokens=4)
"""


def main() -> int:
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=600)
    if done.returncode == 0:
        print("llama.cpp: the bundled model answers on this machine")
        return 0
    print(f"llama.cpp: the bundled model does not answer here (exit {done.returncode}): "
          f"{(done.stderr or '').strip().splitlines()[-1:] or 'killed by a signal'}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
