"""Resource attacks (spec §2.2): every one ends with a typed reason inside its limits, on both
backends, and leaves nothing behind on the host."""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.sandbox.attacks.checks import assert_host_unchanged
from tests.sandbox.harness import host_uid_processes

NOT_OK = {"EXIT_REASON_TIMEOUT", "EXIT_REASON_ERROR", "EXIT_REASON_KILLED", "EXIT_REASON_MEMORY"}

CASES = [
    # id, language, code, limits, allowed reasons
    ("cpu-loop", "python", "while True: pass", {}, {"EXIT_REASON_TIMEOUT"}),
    ("sleep-wall", "python", "import time\ntime.sleep(60)", {}, {"EXIT_REASON_TIMEOUT"}),
    ("cpu-all-threads", "python",
     "import threading\ndef burn():\n    while True: pass\nfor _ in range(4): threading.Thread(target=burn).start()\nburn()",
     {}, {"EXIT_REASON_TIMEOUT"}),
    ("memory-bytearray", "python", "x = bytearray(1 << 30)", {}, {"EXIT_REASON_MEMORY"}),
    ("memory-numpy", "python", "import numpy as np\na = np.ones(1 << 28)\nprint(a.sum())", {}, {"EXIT_REASON_MEMORY"}),
    ("memory-mmap-sparse", "python",
     "import mmap\nm = mmap.mmap(-1, 1 << 31)\nfor i in range(0, 1 << 31, 4096): m[i] = 1", {}, {"EXIT_REASON_MEMORY"}),
    ("fork-bomb", "python", "import os\nwhile True:\n    try: os.fork()\n    except OSError: pass", {}, {"EXIT_REASON_TIMEOUT"}),
    ("fork-bomb-naive", "python", "import os\nwhile True: os.fork()", {}, NOT_OK),
    ("thread-bomb", "python",
     "import threading, time\nts = []\nwhile True:\n    t = threading.Thread(target=time.sleep, args=(100,)); t.start(); ts.append(t)",
     {}, {"EXIT_REASON_ERROR", "EXIT_REASON_TIMEOUT"}),  # non-daemon threads keep it alive until the wall clock
    ("disk-one-big-file", "python", "with open('big', 'wb') as f:\n    while True: f.write(b'0' * (1 << 20))",
     {}, {"EXIT_REASON_ERROR"}),
    ("disk-many-tmp-files", "python",
     "i = 0\nwhile True:\n    open(f'/tmp/f{i}', 'wb').write(b'0' * (4 << 20)); i += 1", {}, {"EXIT_REASON_MEMORY", "EXIT_REASON_ERROR"}),
    ("inode-exhaustion", "python",
     "import os\nfor i in range(20000): open(f'/tmp/e{i}', 'w').close()\nprint(len(os.listdir('/tmp')))",
     {}, {"EXIT_REASON_OK", "EXIT_REASON_ERROR", "EXIT_REASON_MEMORY", "EXIT_REASON_TIMEOUT"}),
    ("slow-drip", "python", "import time\nwhile True:\n    print('.', flush=True); time.sleep(0.05)", {}, {"EXIT_REASON_TIMEOUT"}),
    ("node-cpu-loop", "nodejs", "while (true) {}", {}, {"EXIT_REASON_TIMEOUT"}),
    ("node-microtask-loop", "nodejs", "function spin() { return Promise.resolve().then(spin); }\nspin();",
     {}, {"EXIT_REASON_TIMEOUT", "EXIT_REASON_MEMORY"}),
    ("node-setinterval", "nodejs", "setInterval(() => {}, 1000);", {}, {"EXIT_REASON_TIMEOUT"}),
    ("node-heap-bomb", "nodejs", "const a = []; for (;;) a.push(new Array(1e6).fill(1.5));", {}, {"EXIT_REASON_MEMORY"}),
    ("node-buffer-bomb", "nodejs", "const b = []; for (;;) b.push(Buffer.alloc(1 << 24, 1));", {}, {"EXIT_REASON_MEMORY"}),
    ("node-wasm-memory", "nodejs",
     "const m = new WebAssembly.Memory({initial: 1, maximum: 65536});\nfor (;;) { m.grow(256); new Uint8Array(m.buffer).fill(1); }",
     {}, {"EXIT_REASON_MEMORY", "EXIT_REASON_ERROR"}),
    ("node-fork-bomb", "nodejs",
     "const cp = require('child_process');\nfor (;;) { try { cp.spawn('/usr/bin/sleep', ['100']); } catch (e) {} }",
     {}, NOT_OK),
]


@pytest.mark.parametrize("case_id,language,code,limits,reasons", CASES, ids=[c[0] for c in CASES])
async def test_resource_attack_is_contained(sandbox, canary, case_id, language, code, limits, reasons):
    before = len(host_uid_processes())
    outcome = await sandbox.run(code, language, **{"wall_time_ms": 2000, **limits})
    assert outcome.reason in reasons, (case_id, outcome.exit, outcome.stderr[-1500:])
    assert outcome.exit.wall_time_ms < 30_000
    if case_id == "thread-bomb":
        assert "can't start new thread" in outcome.stderr  # the pids limit stopped it
    if case_id == "disk-one-big-file":
        assert "File too large" in outcome.stderr
    await assert_host_unchanged(sandbox, canary, outcome)
    # pool workers come and go, but no stray 65534 processes accumulate (dead containers' processes
    # are reaped by the engine a moment after removal: poll with a deadline)
    deadline = time.monotonic() + 30
    while len(host_uid_processes()) > before + 10:
        assert time.monotonic() < deadline, f"{len(host_uid_processes())} uid-65534 processes, {before} before"
        await asyncio.sleep(0.1)


@pytest.mark.parametrize("code,language", [
    ("while True: print('x' * 4096)", "python"),
    ("import sys\nwhile True: sys.stderr.write('e' * 4096)", "python"),
    ("import sys\nsys.stdout.write('z' * (10 << 20))", "python"),
    ("import os\nwhile True: os.write(1, os.urandom(4096))", "python"),
    ("for (;;) process.stderr.write('e'.repeat(100000));", "nodejs"),
], ids=["stdout-flood", "stderr-flood", "one-giant-line", "binary", "node-stderr"])
async def test_huge_output_is_truncated_at_the_cap_and_flagged(sandbox, canary, code, language):
    outcome = await sandbox.run(code, language, output_bytes=32 << 10)
    assert outcome.reason == "EXIT_REASON_OUTPUT_LIMIT" and outcome.exit.output_truncated
    total = sum(len(c.data) for c in outcome.of("stdout")) + sum(len(c.data) for c in outcome.of("stderr"))
    assert total == 32 << 10
    await assert_host_unchanged(sandbox, canary, outcome)


async def test_request_limits_above_the_caps_are_lowered(sandbox):
    caps = sandbox.backend.settings.caps
    outcome = await sandbox.run("import resource\nprint(resource.getrlimit(resource.RLIMIT_NOFILE)[1])",
                                open_files=caps.open_files * 100)
    assert outcome.stdout.strip() == str(caps.open_files)
