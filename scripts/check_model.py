"""setup.sh's last step: ask the embedded model one short question through llama_cpp and check for an answer.

The question runs in a child process, so a library that crashes on this CPU (SIGSEGV on the first completion,
as a llama.cpp built for another machine's CPU does) is reported as one line instead of killing setup without
a word. Prints the answer; exits 1 with one `error:` line naming what failed and what to do.
"""

from __future__ import annotations

import signal
import subprocess
import sys

QUESTION = "What is the capital of France?"
SYSTEM = "You are a helpful assistant. Answer in one short sentence."
TIMEOUT_S = 300

_ASK = """
import sys
from llama_cpp import Llama
from services.llm_gateway.adapters.embedded import bundled_gguf
llm = Llama(model_path=str(bundled_gguf()), n_ctx=512, verbose=False)
reply = llm.create_chat_completion(messages=[{"role": "system", "content": sys.argv[1]},
                                             {"role": "user", "content": sys.argv[2]}],
                                   max_tokens=24, temperature=0.1)
print(reply["choices"][0]["message"]["content"].strip())
"""

REBUILD = ("rebuild it portably: rm .venv/.llama-cpp-python and rerun scripts/setup.sh "
           "(set AGENT_CANVAS_REBUILD_LLAMA=1 to ignore a cached wheel)")


def main() -> int:
    try:
        done = subprocess.run([sys.executable, "-c", _ASK, SYSTEM, QUESTION], capture_output=True, text=True,
                              timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        print(f"error: the embedded model did not answer a test question within {TIMEOUT_S} s "
              "(llama-cpp-python in .venv); the machine may be overloaded, rerun scripts/setup.sh", file=sys.stderr)
        return 1
    answer = done.stdout.strip()
    if done.returncode < 0:
        name = signal.Signals(-done.returncode).name if -done.returncode in signal.valid_signals() else -done.returncode
        print(f"error: the embedded model crashed ({name}) answering a test question: the llama-cpp-python "
              f"library in .venv does not run on this CPU; {REBUILD}", file=sys.stderr)
        return 1
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1][:300]
        print(f"error: the embedded model could not answer a test question (exit code {done.returncode}: {last}); "
              f"{REBUILD}", file=sys.stderr)
        return 1
    if not answer:
        print(f"error: the embedded model gave an empty answer to a test question; {REBUILD}", file=sys.stderr)
        return 1
    print(f"    the embedded model answers {QUESTION!r}: {answer}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
