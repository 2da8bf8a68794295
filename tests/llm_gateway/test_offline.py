"""litellm, tokenizers and the cost map work with every non-loopback connection forbidden."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent("""
    import socket, sys

    attempts = []  # recorded even when a library swallows the error

    def guard(event, args):
        if event == "socket.connect":
            address = args[1]
            host = address[0] if isinstance(address, tuple) else str(address)
            if host not in ("127.0.0.1", "::1", "localhost") and not str(host).startswith("/"):
                attempts.append(repr(address))
                raise RuntimeError(f"network access attempted: {address!r}")
        if event == "socket.getaddrinfo" and args[0] not in ("127.0.0.1", "localhost", "::1", None):
            attempts.append(repr(args[0]))
            raise RuntimeError(f"DNS lookup attempted: {args[0]!r}")

    sys.addaudithook(guard)
    from services.llm_gateway.adapters.litellm_provider import load_litellm
    from services.llm_gateway.core import context
    from services.llm_gateway.core.types import Usage
    from services.llm_gateway.adapters.litellm_provider import LitellmProvider

    litellm = load_litellm()
    for name in ("cl100k_base", "p50k_base", "claude", "deepseek"):
        encode = context.tokenizer(name)[0]
        assert len(encode("hello world")) > 0, name
    assert litellm.token_counter(model="meta-llama/Llama-3.1-8B-Instruct", text="hello world") > 0
    assert LitellmProvider().cost_usd("openai/gpt-4o", Usage(1000, 1000)) > 0
    print("OFFLINE-OK", attempts)
""")


def test_nothing_reaches_the_network():
    env = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{ROOT / 'gen' / 'python'}")
    env.pop("TIKTOKEN_CACHE_DIR", None)
    result = subprocess.run([sys.executable, "-c", SCRIPT], env=env, cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert "OFFLINE-OK []" in result.stdout, result.stdout[-2000:] + result.stderr[-3000:]
    assert "network access attempted" not in result.stderr and "DNS lookup attempted" not in result.stderr


def test_a_bad_config_file_is_one_clear_line_and_exit_code_2(tmp_path):
    config = tmp_path / "bad.yaml"
    config.write_text("gateway:\n  modles: {}\n")
    env = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{ROOT / 'gen' / 'python'}")
    result = subprocess.run([sys.executable, "-m", "services.llm_gateway", "--config", str(config)], env=env, cwd=ROOT,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert "unknown keys ['modles']" in result.stderr and "Traceback" not in result.stderr
