"""Hostile jobs beyond the spec's list: odd artifact names, filling the job directory, and other
attempts to make the service fail (INTERNAL), hang or leave something behind. Both backends."""

from __future__ import annotations

import json

import pytest

from tests.sandbox.attacks.checks import assert_host_unchanged


@pytest.mark.parametrize("language,code", [
    ("python", "import os\nos.makedirs('artifacts', exist_ok=True)\n"
               "open(b'artifacts/\\xff\\xfe.txt', 'wb').write(b'bad name')\n"
               "open(b'artifacts/caf\\xc3.csv', 'wb').write(b'half a character')\n"
               "open('artifacts/ok.txt', 'w').write('ok')\nprint('written')"),
    ("nodejs", "const fs = require('fs');\nfs.mkdirSync('artifacts', {recursive: true});\n"
               "fs.writeFileSync(Buffer.from('artifacts/\\xff\\xfe.txt', 'latin1'), 'bad name');\n"
               "fs.writeFileSync('artifacts/ok.txt', 'ok');\nconsole.log('written');"),
], ids=["python", "nodejs"])
async def test_artifact_names_that_are_not_utf8_are_skipped_not_internal(sandbox, canary, language, code):
    outcome = await sandbox.run(code, language)
    assert outcome.reason == "EXIT_REASON_OK" and outcome.stdout == "written\n", outcome.stderr
    assert [(a.name, a.content) for a in outcome.artifacts] == [("ok.txt", b"ok")]
    await assert_host_unchanged(sandbox, canary, outcome)


FILL_WORK_DIR = {
    "python": """
import errno
written = 0
try:
    for i in range(10_000):
        with open(f'fill-{i}.bin', 'wb') as handle:
            for _ in range(4):
                handle.write(b'0' * (1 << 20))
                handle.flush()
                written += 1 << 20
except OSError as exc:
    print(errno.errorcode.get(exc.errno), written)
""",
    "nodejs": """
const fs = require('fs');
let written = 0;
try {
  for (let i = 0; i < 10000; i++) {
    const fd = fs.openSync(`fill-${i}.bin`, 'w');
    for (let k = 0; k < 4; k++) written += fs.writeSync(fd, Buffer.alloc(1 << 20, 48));
    fs.closeSync(fd);
  }
} catch (err) {
  console.log(err.code, written);
}
""",
}


@pytest.mark.parametrize("language", ["python", "nodejs"])
async def test_many_files_cannot_fill_the_host_disk_through_the_job_directory(sandbox, canary, language):
    """RLIMIT_FSIZE caps each file; the job directory as a whole is a size-capped tmpfs (local:
    work_dir_bytes, docker: docker.tmpfs_bytes), so the job runs out of space, not the host. The job
    leaves the directory full: on docker the status record shares that tmpfs, and it must still arrive."""
    settings = sandbox.backend.settings
    cap = settings.work_dir_bytes if sandbox.name == "local" else settings.docker.tmpfs_bytes
    outcome = await sandbox.run(FILL_WORK_DIR[language], language, wall_time_ms=60_000, memory_bytes=cap + (128 << 20))
    assert outcome.reason == "EXIT_REASON_OK", (outcome.exit, outcome.stderr[-1500:])
    code, written = outcome.stdout.split()
    assert code == "ENOSPC" and int(written) <= cap, outcome.stdout
    await assert_host_unchanged(sandbox, canary, outcome)


@pytest.mark.parametrize("target", ["/proc/self", "/dev", "/etc", "/work/.sbx"])
async def test_artifact_directory_replaced_by_a_symlink_is_not_followed(sandbox, canary, target):
    """On docker, archiving the path `job/artifacts` made the engine follow the job's symlink; to
    /proc/self that read stalled until the API client's 60 s timeout, holding the job's slot."""
    code = (
        "import os, shutil\n"
        "shutil.rmtree('artifacts', ignore_errors=True)\n"
        f"os.symlink({target!r}, 'artifacts')\n"
        "print('swapped')\n"
    )
    outcome = await sandbox.run(code)
    assert outcome.reason == "EXIT_REASON_OK" and outcome.stdout == "swapped\n", outcome.stderr
    assert outcome.artifacts == []
    assert outcome.exit.wall_time_ms < 30_000  # generous: a stalled read took 60 s
    await assert_host_unchanged(sandbox, canary, outcome)


async def test_status_record_swapped_for_a_symlink_is_not_followed(sandbox, canary):
    """The job owns its control files on docker; a symlinked record reads as missing, never as the target."""
    code = (
        "import os\n"
        "for path in ('/work/.sbx/status.json', '/work/job/status.json'):\n"
        "    try:\n"
        "        os.unlink(path)\n"
        "        os.symlink('/proc/self/environ', path)\n"
        "    except OSError:\n"
        "        pass\n"
        "os.makedirs('artifacts', exist_ok=True)\n"
        "open('artifacts/kept.txt', 'w').write('kept')\n"
        "def main():\n"
        "    return 1\n"
    )
    outcome = await sandbox.run(code)
    assert outcome.of("exit") and outcome.exit.wall_time_ms < 30_000
    assert [a.name for a in outcome.artifacts] == ["kept.txt"]
    await assert_host_unchanged(sandbox, canary, outcome)


@pytest.mark.parametrize("language,code,reason", [
    ("python", "def main():\n    return {'\\udcff': 'a\\ud800b'}", "EXIT_REASON_OK"),
    ("python", "raise ValueError('bad \\udcff')", "EXIT_REASON_ERROR"),
    ("python", "class E(Exception):\n    pass\nE.__name__ = 'E\\udcff'\nraise E('x\\ud800')", "EXIT_REASON_ERROR"),
    ("nodejs", "function main() { return {'\\udcff': 'a\\ud800b'}; }", "EXIT_REASON_OK"),
    ("nodejs", "throw new Error('bad \\udcff');", "EXIT_REASON_ERROR"),
], ids=["py-result", "py-error", "py-error-type", "node-result", "node-error"])
async def test_lone_surrogates_in_result_or_error_are_not_internal(sandbox, language, code, reason):
    """JSON may escape lone surrogates; UTF-8 cannot carry them, so unsanitised they failed the whole RPC."""
    outcome = await sandbox.run(code, language)
    assert outcome.reason == reason, (outcome.exit, outcome.stderr[-1000:])
    if reason == "EXIT_REASON_OK":
        assert outcome.result == {"?": "a?b"}
        assert json.loads(outcome.of("result")[0].json) == {"\udcff": "a\ud800b"}  # the exact value, escaped
    else:
        assert outcome.exit.message.startswith(("Error: bad ?", "ValueError: bad ?", "E?: x?", "UnicodeEncodeError")), \
            outcome.exit.message


MANY_FILES = """
import os
os.makedirs('artifacts', exist_ok=True)
open('artifacts/kept.txt', 'w').write('kept')
os.mkdir('/work/!many')  # sorts before everything else in /work, also before docker's /work/.sbx
for i in range({count}):
    open(f'/work/!many/{{i}}', 'w').close()
def main():
    return 'done'
"""


async def test_many_files_left_behind_do_not_stretch_the_job_past_its_limits(sandbox, canary):
    """On docker the engine archived every file the job left in /work after the job had ended (about 15 s
    per 300,000 empty files, more than a 4 s job can create), holding the slot long past the wall time.
    Past 10,000 entries it now stops reading; the status record was not among them here."""
    from services.sandbox.adapters.docker_backend import MAX_ARCHIVE_MEMBERS

    outcome = await sandbox.run(MANY_FILES.format(count=MAX_ARCHIVE_MEMBERS + 100), wall_time_ms=60_000)
    if sandbox.name == "docker":
        assert outcome.reason == "EXIT_REASON_ERROR", (outcome.exit, outcome.stderr[-1500:])
        assert f"more than {MAX_ARCHIVE_MEMBERS} files" in outcome.exit.message and outcome.of("result") == []
    else:  # reads only the status pipe and the artifacts directory
        assert outcome.reason == "EXIT_REASON_OK" and outcome.result == "done", (outcome.exit, outcome.stderr[-1500:])
        assert [a.name for a in outcome.artifacts] == ["kept.txt"]
    await assert_host_unchanged(sandbox, canary, outcome)
    follow_up = await sandbox.run(MANY_FILES.format(count=100))
    assert follow_up.reason == "EXIT_REASON_OK" and follow_up.result == "done" and len(follow_up.artifacts) == 1
