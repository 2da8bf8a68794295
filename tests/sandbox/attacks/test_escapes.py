"""Escape and information-leak attacks (spec §2.2), on both backends. Each asserts containment from
inside (what the job saw) and from outside (host unchanged, no secret out, nothing left running)."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import socket
import subprocess

import pytest

from tests.sandbox.attacks.checks import assert_host_unchanged
from tests.sandbox.harness import METADATA


def _host_ip() -> str:
    """This host's outbound address (a UDP connect sends nothing)."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect(("192.0.2.1", 9))
        return probe.getsockname()[0]
    finally:
        probe.close()


@pytest.fixture
async def listener():
    """A TCP listener on all host interfaces that records every connection it gets."""
    connections: list[str] = []

    async def accept(reader, writer):
        connections.append("connected")
        writer.close()

    server = await asyncio.start_server(accept, "0.0.0.0", 0)
    port = server.sockets[0].getsockname()[1]
    yield port, connections
    server.close()
    await server.wait_closed()


NETWORK_PROBE = """
import json, socket
def attempt(host, port):
    try:
        s = socket.create_connection((host, port), timeout=1.5)
        s.close()
        return 'connected'
    except OSError as exc:
        return 'blocked'
def resolve(name):
    try:
        socket.getaddrinfo(name, 80)
        return 'resolved'
    except OSError:
        return 'blocked'
def main(targets, names):
    return {'connect': [attempt(h, p) for h, p in targets], 'dns': [resolve(n) for n in names]}
"""


async def test_network_egress_is_blocked_everywhere(sandbox, canary, listener):
    port, connections = listener
    grpc_port = sandbox.running.port
    targets = [["127.0.0.1", port], ["127.0.0.1", grpc_port], [_host_ip(), port], [_host_ip(), grpc_port],
               ["1.1.1.1", 80], ["8.8.8.8", 53], ["169.254.169.254", 80], ["10.0.0.1", 443]]
    outcome = await sandbox.run(NETWORK_PROBE, arguments={"targets": targets, "names": ["example.com", "localhost.localdomain", "kubernetes.default.svc"]})
    assert outcome.reason == "EXIT_REASON_OK", outcome.stderr
    assert outcome.result == {"connect": ["blocked"] * len(targets), "dns": ["blocked"] * 3}
    assert connections == []
    interfaces = await sandbox.run("import socket\nprint(sorted(n for _, n in socket.if_nameindex()))")
    assert interfaces.stdout.strip() in ("['lo']", "[]")
    await assert_host_unchanged(sandbox, canary, outcome)


async def test_node_network_to_the_host_is_blocked(sandbox, canary, listener):
    port, connections = listener
    code = f"""
const net = require('net');
function tryConnect(host) {{
  return new Promise((resolve) => {{
    const s = net.connect({{host, port: {port}}}, () => {{ s.destroy(); resolve('connected'); }});
    s.on('error', () => resolve('blocked'));
    s.setTimeout(1500, () => {{ s.destroy(); resolve('blocked'); }});
  }});
}}
async function main() {{ return [await tryConnect('127.0.0.1'), await tryConnect('{_host_ip()}')]; }}
"""
    outcome = await sandbox.run(code, "nodejs")
    assert outcome.result == ["blocked", "blocked"] and connections == []
    await assert_host_unchanged(sandbox, canary, outcome)


HOST_FILES_PROBE = """
import json, os, pathlib
def attempt(path):
    try:
        with open(path, 'rb') as f:
            return 'read:' + f.read(200).decode('utf-8', 'replace')
    except OSError as exc:
        return type(exc).__name__
def listing(path):
    try:
        return sorted(os.listdir(path))
    except OSError as exc:
        return type(exc).__name__
def main(paths, dirs):
    out = {p: attempt(p) for p in paths}
    out.update({d: listing(d) for d in dirs})
    out['pathlib'] = attempt('/etc/shadow')
    return out
"""


async def test_host_files_and_canaries_are_out_of_reach(sandbox, canary):
    paths = ["/etc/shadow", "/etc/sudoers", "/etc/ssh/sshd_config", str(canary.private_file), str(canary.public_file),
             "/root/.bash_history", "/proc/1/root/etc/shadow", "/var/run/docker.sock", "/run/podman/podman.sock",
             "/dev/kvm", "/sys/kernel/security/lsm"]
    dirs = ["/root", "/home", "/var/lib", "/run"]
    outcome = await sandbox.run(HOST_FILES_PROBE, arguments={"paths": paths, "dirs": dirs})
    assert outcome.reason == "EXIT_REASON_OK", outcome.stderr
    seen = outcome.result
    for path in paths:
        assert not seen[path].startswith("read:"), (path, seen[path])
    for directory in dirs:
        assert seen[directory] in ("FileNotFoundError", "PermissionError", []), (directory, seen[directory])
    host_passwd = open("/etc/passwd").read()
    probe = await sandbox.run("print(open('/etc/passwd').read() if __import__('os').path.exists('/etc/passwd') else '')")
    host_only = [line for line in host_passwd.splitlines() if line.split(":")[0] not in ("root", "nobody")]
    assert not any(line in probe.stdout for line in host_only)
    await assert_host_unchanged(sandbox, canary, outcome)


PROC_PROBE = """
import os
def main():
    visible = [p for p in os.listdir('/proc') if p.isdigit()]
    blobs = []
    for pid in visible:
        for name in ('environ', 'cmdline'):
            try:
                blobs.append(open(f'/proc/{pid}/{name}', 'rb').read().decode('utf-8', 'replace'))
            except OSError:
                pass
    return {'pids': len(visible), 'blob': '\\n'.join(blobs), 'env': dict(os.environ), 'uid': os.getuid(),
            'pid1': open('/proc/1/cmdline', 'rb').read().decode('utf-8', 'replace')}
"""


async def test_proc_and_environment_show_nothing_of_the_host(sandbox, canary):
    outcome = await sandbox.run(PROC_PROBE)
    assert outcome.reason == "EXIT_REASON_OK", outcome.stderr
    seen = outcome.result
    assert canary.secret not in seen["blob"] and canary.env_name not in json.dumps(seen)
    assert seen["pids"] < 10  # own pid namespace: the host's processes are invisible
    assert seen["uid"] == 65534
    assert "pytest" not in seen["blob"] and "services.sandbox" not in seen["blob"]
    allowed = {"PATH", "HOME", "TMPDIR", "LANG", "MPLBACKEND", "MPLCONFIGDIR", "OUTPUT_DIR", "LC_CTYPE", "PWD",
               "HOSTNAME", "TERM", "container"}
    assert set(seen["env"]) <= allowed, set(seen["env"]) - allowed
    if sandbox.name == "local":
        environ = await sandbox.run("print(repr(open('/proc/1/environ').read()))")
        assert environ.stdout.strip() == "''"  # bwrap's PID 1 was started with an empty environment
    await assert_host_unchanged(sandbox, canary, outcome)


async def test_writes_outside_the_job_directory_do_not_reach_the_host(sandbox, canary):
    token = "evil-" + secrets.token_hex(5)
    targets = [f"/usr/{token}", f"/etc/{token}", f"/{token}", f"/tmp/{token}", f"/work/../{token}", f"/root/{token}",
               f"/dev/shm/{token}", f"/opt/{token}", f"/usr/bin/{token}", str(canary.public_file)]
    code = (
        "import os\n"
        f"for path in {targets!r}:\n"
        "    try:\n"
        "        with open(path, 'w') as f: f.write('pwned')\n"
        "    except OSError as exc:\n"
        "        pass\n"
        f"os.symlink('/tmp', '{token}-link')\n"
        "print('done')\n"
    )
    outcome = await sandbox.run(code)
    assert outcome.reason == "EXIT_REASON_OK", outcome.stderr
    await assert_host_unchanged(sandbox, canary, outcome, token)


@pytest.mark.parametrize("language,code", [
    ("python", "import os, sys\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n        os.execv('/usr/bin/sleep', ['sleep', '300'])\n    os._exit(0)\nprint('parent done')"),
    ("python", "import subprocess\nsubprocess.Popen(['/usr/bin/sleep', '300'], start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\nprint('parent done')"),
    ("python", "import os\nos.system('nohup /usr/bin/sleep 300 >/dev/null 2>&1 &')\nprint('parent done')"),
    ("nodejs", "const cp = require('child_process');\nconst c = cp.spawn('/usr/bin/sleep', ['300'], {detached: true, stdio: 'ignore'});\nc.unref();\nconsole.log('parent done');"),
], ids=["double-fork-setsid", "popen-new-session", "nohup", "node-detached"])
async def test_background_processes_do_not_outlive_the_job(sandbox, canary, language, code):
    outcome = await sandbox.run(code, language)
    assert outcome.reason == "EXIT_REASON_OK" and "parent done" in outcome.stdout, outcome.stderr
    await assert_host_unchanged(sandbox, canary, outcome)  # includes: no process left behind


CTYPES_PROBE = """
import ctypes, ctypes.util, errno, os
libc = ctypes.CDLL(None, use_errno=True)
def call(name, *args):
    result = getattr(libc, name)(*args)
    return 'ok' if result == 0 else errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))
def main():
    out = {
        'ptrace': call('ptrace', 0, 0, None, None),
        'unshare_user': call('unshare', 0x10000000),
        'unshare_net': call('unshare', 0x40000000),
        'mount': call('mount', b'none', b'/tmp', b'tmpfs', 0, None),
        'setuid0': call('setuid', 0),
        'chroot': call('chroot', b'/tmp'),
        'bpf': 'ok' if libc.syscall(321, 0, None, 0) == 0 else errno.errorcode.get(ctypes.get_errno(), '?'),
        'keyctl': 'ok' if libc.syscall(250, 0, 0, 0, 0, 0) >= 0 else errno.errorcode.get(ctypes.get_errno(), '?'),
        'perf_event_open': 'ok' if libc.syscall(298, None, 0, -1, -1, 0) >= 0 else errno.errorcode.get(ctypes.get_errno(), '?'),
        'userfaultfd': 'ok' if libc.syscall(323, 0) >= 0 else errno.errorcode.get(ctypes.get_errno(), '?'),
        'io_uring_setup': 'ok' if libc.syscall(425, 1, None) >= 0 else errno.errorcode.get(ctypes.get_errno(), '?'),
        'process_vm_readv': 'ok' if libc.syscall(310, 1, None, 0, None, 0, 0) >= 0 else errno.errorcode.get(ctypes.get_errno(), '?'),
        'uid': os.getuid(),
    }
    return out
"""


async def test_ctypes_syscalls_are_denied(sandbox, canary):
    outcome = await sandbox.run(CTYPES_PROBE)
    assert outcome.reason == "EXIT_REASON_OK", outcome.stderr
    seen = outcome.result
    assert seen.pop("uid") == 65534
    assert all(value != "ok" for value in seen.values()), seen
    await assert_host_unchanged(sandbox, canary, outcome)


@pytest.mark.parametrize("code", [
    "import os\nos.system(f'id -u; cat {CANARY} || echo unreadable')",
    "import subprocess\nprint(subprocess.run(['id', '-u'], capture_output=True, text=True).stdout)\nprint(subprocess.run(['cat', CANARY], capture_output=True, text=True).returncode)",
    "import importlib\nsp = importlib.import_module('subprocess')\nprint(sp.check_output(['id', '-u']).decode())",
    "import importlib\nos_ = importlib.import_module(''.join(['o', 's']))\nprint(os_.getuid())",
    "subs = ().__class__.__base__.__subclasses__()\nimport os\nprint(os.getuid(), len(subs) > 0)",
    "import posix\npid = posix.fork()\nif pid == 0:\n    posix._exit(0)\nposix.waitpid(pid, 0)\nprint(posix.getuid())",
    "import urllib.request\ntry:\n    urllib.request.urlopen('http://example.com', timeout=2)\nexcept Exception as exc:\n    print('blocked', type(exc).__name__)\nimport os\nprint(os.getuid())",
    "import subprocess\nprint(subprocess.run(['su', '-c', 'id -u'], capture_output=True, text=True, input='').returncode != 0)\nimport os\nprint(os.getuid())",
], ids=["os-system", "subprocess", "importlib-subprocess", "importlib-joined", "subclasses", "posix-fork", "urllib", "setuid-binary"])
async def test_process_spawning_runs_only_as_nobody_inside(sandbox, canary, code):
    outcome = await sandbox.run(f"CANARY = {str(canary.public_file)!r}\n" + code)
    assert outcome.reason == "EXIT_REASON_OK", outcome.stderr
    assert "65534" in outcome.stdout
    await assert_host_unchanged(sandbox, canary, outcome)


async def test_node_process_tricks_are_contained(sandbox, canary):
    code = f"""
const out = {{}};
out.binding = (() => {{ try {{ return typeof process['binding']; }} catch (e) {{ return 'error'; }} }})();
out.nodecp = require('node:child_process').execSync('id -u').toString().trim();
out.fspromises = typeof require('fs/promises').readFile;
out.ctor = this.constructor.constructor('return process')().getuid();
out.worker = typeof require('worker_threads').Worker;
out.vm = require('vm').runInNewContext('this.constructor.constructor("return process")().getuid()');
try {{ require('fs').readFileSync('{canary.public_file}'); out.canary = 'read'; }} catch (e) {{ out.canary = e.code; }}
out.env = Object.keys(process.env).sort();
console.log(JSON.stringify(out));
"""
    outcome = await sandbox.run(code, "nodejs")
    assert outcome.reason == "EXIT_REASON_OK", outcome.stderr
    seen = json.loads(outcome.stdout)
    assert seen["nodecp"] == "65534" and seen["ctor"] == 65534 and seen["vm"] == 65534
    assert seen["canary"] == "ENOENT"
    await assert_host_unchanged(sandbox, canary, outcome)


async def test_signal_abuse_stays_inside(sandbox, canary):
    sentinel = subprocess.Popen(["/usr/bin/sleep", "300"], user=65534, group=65534, extra_groups=[])
    try:
        code = (
            "import os, signal\n"
            "for target in (-1, 1, os.getppid()):\n"
            "    try:\n"
            "        os.kill(target, signal.SIGKILL)\n"
            "    except OSError as exc:\n"
            "        print(target, type(exc).__name__)\n"
            f"try:\n    os.kill({sentinel.pid}, signal.SIGKILL)\nexcept OSError as exc:\n    print('sentinel', type(exc).__name__)\n"
            "print('still here')\n"
        )
        outcome = await sandbox.run(code)
        assert outcome.of("exit"), "the job must end with an Exit event"
        assert sentinel.poll() is None, "a host process of the same uid was killed"
        reply = await sandbox.stub.ListRuntimes(__import__("agentcanvas.v1.sandbox_pb2", fromlist=["x"]).ListRuntimesRequest(),
                                                metadata=METADATA)
        assert reply.runtimes  # the server is unaffected
        await assert_host_unchanged(sandbox, canary, outcome)
        follow_up = await sandbox.run("print('next job fine')")
        assert follow_up.stdout == "next job fine\n"
    finally:
        sentinel.kill()
        sentinel.wait()


async def test_no_server_file_descriptors_leak_into_the_job(sandbox, canary):
    code = (
        "import os\n"
        "links = []\n"
        "for fd in os.listdir('/proc/self/fd'):\n"
        "    try:\n"
        "        links.append(os.readlink(f'/proc/self/fd/{fd}'))\n"
        "    except OSError:\n"
        "        pass  # the fd listdir itself used\n"
        "print(links)\n"
    )
    outcome = await sandbox.run(code)
    assert outcome.reason == "EXIT_REASON_OK", outcome.stderr
    assert "socket:" not in outcome.stdout and "anon_inode" not in outcome.stdout
    await assert_host_unchanged(sandbox, canary, outcome)


async def test_faked_classification_on_stderr_is_ignored(sandbox):
    outcome = await sandbox.run("import sys\nsys.stderr.write('MemoryError\\nPermission denied\\nOperation not permitted\\nKilled\\n')")
    assert outcome.reason == "EXIT_REASON_OK"


async def test_state_does_not_carry_over_to_the_next_job(sandbox, canary):
    token = secrets.token_hex(4)
    first = await sandbox.run(
        f"import os, subprocess\nopen('/tmp/state-{token}', 'w').write('x')\nopen('state-{token}', 'w').write('x')\n"
        "subprocess.Popen(['/usr/bin/sleep', '300'], start_new_session=True)\nprint('planted')")
    assert first.stdout == "planted\n"
    probes = await asyncio.gather(*[sandbox.run(
        f"import os\nprint(os.path.exists('/tmp/state-{token}'), os.path.exists('state-{token}'), "
        "len([p for p in os.listdir('/proc') if p.isdigit()]))") for _ in range(3)])
    for probe in probes:
        tmp_exists, cwd_exists, _ = probe.stdout.split()
        assert (tmp_exists, cwd_exists) == ("False", "False")
    await assert_host_unchanged(sandbox, canary, first, token)
