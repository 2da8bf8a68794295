"""The embedded model's speed with the llama.cpp build setup.sh chooses, beside the other option.

    python -m bench.llama_build [--tokens 128] [--runs 3] [--skip-other] [--cache DIR]

Builds compared (the same llama-cpp-python sdist, the version in requirements/lock.txt):
* portable (chosen): CMAKE_ARGS="-DGGML_NATIVE=OFF ...", exactly setup.sh's flags (scripts/setup.sh). The wheel
  is the one setup built or installed (the .venv's llama_cpp).
* dispatch (the other option): llama.cpp's runtime CPU-variant dispatch, -DGGML_BACKEND_DL=ON
  -DGGML_CPU_ALL_VARIANTS=ON: every x86-64 variant of the CPU backend is built and the best one for the CPU
  is loaded at run time. llama-cpp-python does not point ggml at its backend files, and ggml looks for them
  beside the executable and in the working directory, so the bench runs it from its library folder.
  Building it takes longer than the portable build (every variant is compiled); it is built once into
  --cache (default ~/.cache/agent-canvas/bench) and reused. --skip-other leaves it out.

Each build generates --tokens tokens (greedy, a fixed prompt, the bundled SmolLM2-135M GGUF) --runs times
in a child process; printed per build (one JSON object per line): the median tokens/s, the CPU variant ggml
loaded, and the build's wall time when this run built it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PORTABLE_ARGS = "-DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TESTS=OFF " \
                "-DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF"
DISPATCH_ARGS = "-DGGML_NATIVE=OFF -DGGML_BACKEND_DL=ON -DGGML_CPU_ALL_VARIANTS=ON -DLLAVA_BUILD=OFF " \
                "-DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF"

_MEASURE = """
import json, statistics, sys, time
from llama_cpp import Llama
model, tokens, runs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
llm = Llama(model_path=model, n_ctx=512, verbose=True)  # default threads, as the embedded server
rates = []
for _ in range(runs):
    llm.reset()
    started = time.perf_counter()
    out = llm.create_completion("Once upon a time, in a small village by the sea,", max_tokens=tokens,
                                temperature=0.0, logit_bias={llm.token_eos(): -100.0})
    rates.append(out["usage"]["completion_tokens"] / (time.perf_counter() - started))
print(json.dumps({"tokens_per_s": statistics.median(rates), "runs": [round(r, 1) for r in rates]}))
"""


def lock_version() -> tuple[str, str]:
    """(spec, sha256) of llama-cpp-python in the runtime lock."""
    lines = (ROOT / "requirements" / "lock.txt").read_text().splitlines()
    for i, line in enumerate(lines):
        if line.startswith("llama-cpp-python=="):
            spec = line.split()[0]
            digest = next(part for part in lines[i + 1].split() if part.startswith("--hash="))
            return spec, digest.removeprefix("--hash=")
    raise SystemExit("llama-cpp-python is not in requirements/lock.txt")


def build_dispatch(cache: Path) -> tuple[Path, float | None]:
    """A folder holding llama_cpp built with runtime CPU dispatch (built once, then reused)."""
    spec, digest = lock_version()
    target = cache / f"{spec.replace('==', '-')}-dispatch"
    if (target / "llama_cpp").is_dir():
        return target, None
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as work:
        requirement = Path(work) / "llama.txt"
        requirement.write_text(f"{spec} --hash={digest}\n")
        pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
        subprocess.run([*pip, "download", "-q", "--no-deps", "--no-binary", ":all:", "--require-hashes", "-r",
                        str(requirement), "-d", f"{work}/sdist"], check=True)
        sdist = next(Path(work, "sdist").glob("*.tar.gz"))
        env = {**os.environ, "CMAKE_ARGS": DISPATCH_ARGS, "CMAKE_BUILD_PARALLEL_LEVEL": str(os.cpu_count() or 2)}
        build = subprocess.Popen([*pip, "wheel", "-v", "--no-deps", str(sdist), "-w", f"{work}/wheel"], env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        progress = subprocess.run([sys.executable, str(ROOT / "scripts" / "build_progress.py"),
                                   f"{work}/build.log", "llama.cpp (dispatch)"], stdin=build.stdout)
        if build.wait() != 0 or progress.returncode != 0:
            raise SystemExit(f"building the dispatch variant failed; see {work}/build.log")
        wheel = next(Path(work, "wheel").glob("*.whl"))
        subprocess.run([*pip, "install", "-q", "--no-deps", "--target", str(target), str(wheel)], check=True)
    return target, time.monotonic() - started


def measure(label: str, site: Path | None, tokens: int, runs: int) -> dict:
    from services.llm_gateway.adapters.embedded import bundled_gguf

    env = dict(os.environ)
    cwd = None
    if site is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(site), env.get("PYTHONPATH", "")])
        # ggml looks for its CPU variants beside the executable and in the working directory; llama.cpp's own
        # install rule puts them in the wheel's bin/, not beside llama_cpp's libraries
        variants = sorted(site.rglob("libggml-cpu-*.so"))
        cwd = variants[0].parent if variants else site / "llama_cpp" / "lib"
    done = subprocess.run([sys.executable, "-c", _MEASURE, str(bundled_gguf()), str(tokens), str(runs)],
                          capture_output=True, text=True, env=env, cwd=cwd, timeout=900)
    if done.returncode != 0:
        return {"build": label, "error": f"exit {done.returncode}: {done.stderr.strip().splitlines()[-1:]}"}
    result = json.loads(done.stdout.strip().splitlines()[-1])
    loaded = [line.strip() for line in done.stderr.splitlines() if "load_backend" in line or "CPU :" in line]
    return {"build": label, **result, "cpu": " / ".join(loaded)[:300], "loadavg": round(os.getloadavg()[0], 2)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--skip-other", action="store_true", help="measure only the chosen (portable) build")
    parser.add_argument("--cache", type=Path, default=Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
                        / "agent-canvas" / "bench")
    args = parser.parse_args(argv)
    chosen = measure("portable (GGML_NATIVE=OFF, chosen)", None, args.tokens, args.runs)
    print(json.dumps({"bench": "llama_build", "metric": "tokens_per_s", **chosen, "cmake_args": PORTABLE_ARGS}), flush=True)
    if not args.skip_other:
        site, built_s = build_dispatch(args.cache)
        other = measure("dispatch (GGML_BACKEND_DL + GGML_CPU_ALL_VARIANTS)", site, args.tokens, args.runs)
        print(json.dumps({"bench": "llama_build", "metric": "tokens_per_s", **other, "cmake_args": DISPATCH_ARGS,
                          "build_seconds": round(built_s, 1) if built_s is not None else None,
                          "chosen_tokens_per_s": chosen.get("tokens_per_s")}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
