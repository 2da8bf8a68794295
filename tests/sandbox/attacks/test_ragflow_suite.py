"""Every case of RAGFlow's sandbox suites (spec §2.1), on both backends. RAGFlow rejected many of these
with a static filter; here they RUN (static checks are off) and the isolation contains them."""

from __future__ import annotations

import asyncio
import shutil
import secrets
import tempfile
from pathlib import Path

import pytest

from tests.sandbox.attacks.checks import assert_host_unchanged


async def test_cases_1_to_6_six_infinite_loops_saturating_the_pool_all_time_out(sandbox, canary):
    outcomes = await asyncio.gather(*[sandbox.run("while True: pass", wall_time_ms=1500) for _ in range(6)])
    assert [o.reason for o in outcomes] == ["EXIT_REASON_TIMEOUT"] * 6
    for outcome in outcomes:
        await assert_host_unchanged(sandbox, canary, outcome)


async def test_case_7_plain_python_returning_a_dict(sandbox, canary):
    outcome = await sandbox.run("def main():\n    return {'status': 'ok', 'n': 7}\n")
    assert outcome.reason == "EXIT_REASON_OK" and outcome.result == {"status": "ok", "n": 7}


async def test_case_9_node_https_to_the_internet_is_blocked(sandbox, canary):
    code = """
const https = require('https');
function main() {
  return new Promise((resolve) => {
    const req = https.get('https://example.com/', (res) => resolve('connected ' + res.statusCode));
    req.on('error', (err) => resolve('blocked ' + err.code));
    setTimeout(() => resolve('blocked timeout'), 2000);
  });
}
"""
    outcome = await sandbox.run(code, "nodejs")
    assert outcome.reason == "EXIT_REASON_OK" and str(outcome.result).startswith("blocked"), outcome.result
    await assert_host_unchanged(sandbox, canary, outcome)


async def test_case_10_node_http_client_fetch_is_blocked(sandbox, canary):
    # axios is not installed; Node's built-in fetch is the same request with another client.
    code = """
async function main() {
  let axios = 'absent';
  try { require('axios'); axios = 'present'; } catch (err) { axios = err.code; }
  try { const r = await fetch('https://example.com/'); return {axios, fetch: 'connected ' + r.status}; }
  catch (err) { return {axios, fetch: 'blocked'}; }
}
"""
    outcome = await sandbox.run(code, "nodejs")
    assert outcome.result == {"axios": "MODULE_NOT_FOUND", "fetch": "blocked"}, outcome.stderr


@pytest.mark.parametrize("code", [
    "import os\nprint(os.getuid())",
    "from subprocess import Popen, PIPE\nprint(Popen(['id', '-u'], stdout=PIPE).communicate()[0].decode().strip())",
    "import os\neval('os.system(\"echo hello; id -u\")')",
    "import os\nname = 'os.' + 'system'\neval(name + '(\"id -u\")')",
    "import os\ndef helper(expr):\n    return eval(expr)\nhelper('os.system(\"id -u\")')",
    "import builtins\nbuiltins.exec('import os; print(os.getuid())')",
], ids=["import-os", "popen", "eval-os-system", "concat-eval", "helper-eval", "builtins-exec"])
async def test_cases_11_to_16_and_analyzer_cases_run_but_as_nobody(sandbox, canary, code):
    outcome = await sandbox.run(code)
    assert outcome.reason == "EXIT_REASON_OK", outcome.stderr
    assert "65534" in outcome.stdout and "\n0\n" not in f"\n{outcome.stdout}"
    await assert_host_unchanged(sandbox, canary, outcome)


async def test_case_14_shutil_rmtree_of_a_host_path_leaves_the_host_alone(sandbox, canary):
    victim = Path(tempfile.mkdtemp(prefix="agentcanvas-victim-"))
    (victim / "keep.txt").write_text("still here")
    victim.chmod(0o777)
    try:
        outcome = await sandbox.run(f"import shutil\nshutil.rmtree({str(victim)!r}, ignore_errors=True)\nprint('done')")
        assert outcome.reason == "EXIT_REASON_OK"
        assert (victim / "keep.txt").read_text() == "still here"
        await assert_host_unchanged(sandbox, canary, outcome)
    finally:
        shutil.rmtree(victim)


async def test_case_17_memory_exhaustion(sandbox, canary):
    small = await sandbox.run("x = ['a' * 1024 * 1024] * 300\nprint(len(x))")  # RAGFlow's case: only 1 MB
    assert small.reason == "EXIT_REASON_OK" and small.stdout == "300\n"
    real = await sandbox.run("x = [bytearray(1024 * 1024) for _ in range(300)]\nprint('survived')")
    assert real.reason == "EXIT_REASON_MEMORY" and "survived" not in real.stdout
    await assert_host_unchanged(sandbox, canary, real)


@pytest.mark.parametrize("code", [
    "const cp = require('child_process'); console.log(cp.execSync('id -u').toString().trim());",
    "console.log(eval('require(\"child_process\").execSync(\"id -u\").toString().trim()'));",
    "const m = 'child_' + 'process'; console.log(require(m).execSync('id -u').toString().trim());",
    "const fs = require(`fs`); try { fs.readFileSync('/etc/shadow'); console.log('read'); } catch (e) { console.log(e.code); } console.log(process.getuid());",
], ids=["child_process", "eval", "template-require", "fs"])
async def test_js_analyzer_cases_run_contained(sandbox, canary, code):
    outcome = await sandbox.run(code, "nodejs")
    assert outcome.reason == "EXIT_REASON_OK", outcome.stderr
    assert "65534" in outcome.stdout and "read\n" not in outcome.stdout
    await assert_host_unchanged(sandbox, canary, outcome)


async def test_harmless_js_main_runs(sandbox):
    outcome = await sandbox.run("function main(args) { return {greeting: 'hi ' + args.name}; }", "javascript",
                                arguments={"name": "ada"})
    assert outcome.result == {"greeting": "hi ada"}


async def test_local_provider_cases_result_artifact_timeout(sandbox, canary):
    token = secrets.token_hex(4)
    outcome = await sandbox.run(
        f"def main():\n    open('artifacts/r-{token}.json', 'w').write('{{}}')\n    return 1\n")
    assert outcome.result == 1 and [a.name for a in outcome.artifacts] == [f"r-{token}.json"]
    timeout = await sandbox.run("import time\ntime.sleep(60)", wall_time_ms=1000)
    assert timeout.reason == "EXIT_REASON_TIMEOUT"
    await assert_host_unchanged(sandbox, canary, timeout, token)
