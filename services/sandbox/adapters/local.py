"""`local` backend: bubblewrap + cgroups + rlimits + seccomp, with warm single-use worker pools.

One worker = one process chain, all started with an EMPTY environment (so nothing of the server's
environment is visible, not even through /proc/1/environ):

    sh (as root: joins the worker's cgroups, then exec)
      -> prlimit (rlimits; hard limits at the caps for Python, at the job's values for Node)
      -> setpriv (uid/gid 65534, no groups, no_new_privs, no capabilities)
      -> bwrap (unprivileged: new user, pid, net, ipc, uts, cgroup and mount namespaces; /usr and the
                runner read-only; tmpfs /tmp; the worker's own directory at /work; seccomp from an fd)
      -> python3 -I -S -B -u python_runner.py  |  node node_runner.js   (blocks reading the job)

The job arrives on stdin (closed after the job, so job code sees EOF), stdout/stderr are pipes
streamed as they are written, and the runner's status record comes back on a separate pipe (fd).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import errno
import json
import logging
import os
import shutil
import signal
import stat
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

from services.common.errors import FailedPreconditionError
from services.sandbox.adapters.artifact_files import read_output_dir
from services.sandbox.adapters import font_cache
from services.sandbox.adapters.cgroups import CgroupLayout, CgroupUnavailableError, JobCgroup, owner_alive
from services.sandbox.adapters.pool import WarmPool
from services.sandbox.adapters.seccomp import build_filter_bpf
from services.sandbox.core.artifacts import OUTPUT_DIR_NAME
from services.sandbox.core.models import Collected, JobSpec, Limits, RawExit, RuntimeInfo, LANGUAGE_ALIASES
from services.sandbox.core.settings import SandboxSettings
from services.sandbox.core.status import MAX_STATUS_BYTES, parse_status

logger = logging.getLogger(__name__)

SANDBOX_UID = 65534
RUNNER_SOURCE = Path(__file__).parent / "runner"
RUNNER_MOUNT = "/opt/agentcanvas/runner"
PYTHON_PATH_MOUNT = "/opt/agentcanvas/python"
READY = b"READY\n"
SPAWN_TIMEOUT_S = 60.0
READ_CHUNK = 1 << 16
MS_NOSUID, MS_NODEV = 2, 4
MNT_DETACH, UMOUNT_NOFOLLOW = 2, 8
_LIBC = ctypes.CDLL(None, use_errno=True)
# sh joins the cgroups named before "--" and execs the rest; no environment, absolute paths only.
JOIN_CGROUPS = 'unset PWD OLDPWD; for f in "$@"; do if [ "$f" = "--" ]; then break; fi; echo $$ > "$f" || exit 125; shift; done; shift; exec "$@"'


def _traversable_by_others(path: Path, readable: bool = True) -> bool:
    """Can uid 65534 reach `path` (o+x on it and every ancestor, plus o+r on it when `readable`)?"""
    current = path.resolve()
    for part in [current, *current.parents]:
        mode = part.stat().st_mode
        if not mode & stat.S_IXOTH:
            return False
    return not readable or bool(current.stat().st_mode & stat.S_IROTH)


def mount_work_tmpfs(path: Path, size: int) -> None:
    """A size-capped tmpfs owned by 65534 on a job directory: RLIMIT_FSIZE caps one file, this caps them
    all (a job writing many files could otherwise fill the host's disk). Its pages are charged to the
    job's memory cgroup like /tmp's."""
    options = f"size={size},mode=0700,uid={SANDBOX_UID},gid={SANDBOX_UID}".encode()
    if _LIBC.mount(b"tmpfs", os.fsencode(path), b"tmpfs", MS_NOSUID | MS_NODEV, options) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), str(path))


def unmount_work_tmpfs(path: Path) -> None:
    """Detaches the tmpfs on `path` (its memory is freed); nothing when `path` is not a mount point."""
    if _LIBC.umount2(os.fsencode(path), MNT_DETACH | UMOUNT_NOFOLLOW) != 0:
        code = ctypes.get_errno()
        if code not in (errno.EINVAL, errno.ENOENT):
            logger.warning("could not unmount %s: %s", path, os.strerror(code))


def _remove_job_dir(directory: Path) -> None:
    unmount_work_tmpfs(directory)
    shutil.rmtree(directory, ignore_errors=True)


@dataclass
class LocalWorker:
    name: str
    language: str
    rlimits: tuple[int, int, int]
    process: asyncio.subprocess.Process
    cgroup: JobCgroup
    directory: Path
    status: "StatusChannel"

    def alive(self) -> bool:
        return self.process.returncode is None


@dataclass
class LocalRunningJob:
    worker: LocalWorker
    backend: "LocalBackend"
    status_task: asyncio.Task[bytes] | None = None
    _killed: bool = False
    _cleaned: bool = False
    _readers: list[asyncio.Task[None]] = field(default_factory=list)

    async def output(self) -> AsyncIterator[tuple[str, bytes]]:
        queue: asyncio.Queue[tuple[str, bytes | None]] = asyncio.Queue()

        async def read(name: str, stream: asyncio.StreamReader) -> None:
            try:
                while chunk := await stream.read(READ_CHUNK):
                    queue.put_nowait((name, chunk))
            finally:
                queue.put_nowait((name, None))

        process = self.worker.process
        assert process.stdout is not None and process.stderr is not None
        self._readers = [asyncio.create_task(read("stdout", process.stdout)),
                         asyncio.create_task(read("stderr", process.stderr))]
        open_streams = 2
        try:
            while open_streams:
                name, chunk = await queue.get()
                if chunk is None:
                    open_streams -= 1
                else:
                    yield name, chunk
        finally:
            for reader in self._readers:
                reader.cancel()
            # Keep reading (and dropping) until EOF: asyncio only reports the process as exited once
            # its pipes are closed, and it stops reading a pipe whose buffer is full.
            self._readers = [asyncio.create_task(_discard_until_eof(process.stdout)),
                             asyncio.create_task(_discard_until_eof(process.stderr))]

    async def wait(self) -> RawExit:
        code = await self.worker.process.wait()
        if code < 0:
            return RawExit(code, -code)
        if 128 < code < 128 + 65:  # bwrap reports a signalled child as 128 + signal
            return RawExit(code, code - 128)
        return RawExit(code, 0)

    async def kill(self) -> None:
        self._killed = True
        with contextlib.suppress(ProcessLookupError):
            self.worker.process.send_signal(signal.SIGKILL)
        self.worker.cgroup.kill_all()

    async def memory_exceeded(self) -> bool:
        return self.worker.cgroup.oom_kills() > 0

    async def collect(self, max_artifacts: int, max_artifact_bytes: int) -> Collected:
        raw = await self.status_task if self.status_task is not None else None
        status = parse_status(raw)
        artifacts = await asyncio.to_thread(
            read_output_dir, self.worker.directory / OUTPUT_DIR_NAME, max_artifacts, max_artifact_bytes
        )
        return Collected(status=status, artifacts=artifacts)

    async def cleanup(self) -> None:
        if self._cleaned:
            return
        self._cleaned = True
        if self.status_task is not None:
            self.status_task.cancel()
        await self.backend.discard(self.worker)
        pool = self.backend.pools.get(self.worker.language)
        if pool is not None:
            pool.replenish()


class LocalBackend:
    """bubblewrap sandboxes on this host. Needs root (cgroups) and unprivileged user namespaces."""

    name = "local"

    def __init__(self, settings: SandboxSettings) -> None:
        self.settings = settings
        self.work_root = settings.work_root_path
        self.jobs_dir = self.work_root / "jobs"
        self.runner_dir = self.work_root / "runner"
        self.cache_dir = self.work_root / "cache"
        self._font_cache: Path | None = None
        self._font_cache_task: asyncio.Task[None] | None = None
        self.layout: CgroupLayout | None = None
        self.pools: dict[str, WarmPool[LocalWorker]] = {}
        self._versions: dict[str, str] = {}
        self._bpf = b""
        self._python_paths: list[str] = []
        self._live: set[str] = set()
        self._reaper: asyncio.Task[None] | None = None
        self._bwrap = shutil.which("bwrap") or "/usr/bin/bwrap"
        self._mount_work = True

    # ---- lifecycle -------------------------------------------------------------------------------

    async def start(self) -> None:
        for tool in (self._bwrap, "/usr/bin/setpriv", "/usr/bin/prlimit", "/bin/sh"):
            if not os.access(tool, os.X_OK):
                raise FailedPreconditionError(f"local sandbox needs {tool} (apt-get install -y bubblewrap util-linux)")
        if os.geteuid() != 0:
            raise FailedPreconditionError("the local sandbox backend must run as root (it creates cgroups)")
        try:
            self.layout = await asyncio.to_thread(CgroupLayout.detect)
        except CgroupUnavailableError as exc:
            raise FailedPreconditionError(f"local sandbox: {exc}") from exc
        self._bpf = build_filter_bpf()
        await asyncio.to_thread(self._prepare_dirs)
        self._mount_work = await asyncio.to_thread(self._can_mount_work)
        self._versions = await self._probe_versions()
        await self.reap()
        for language, size in self.settings.pool.items():
            if language in self._versions:
                pool = WarmPool(f"local-{language}", size, lambda lang=language: self._spawn(lang),
                                self.discard, LocalWorker.alive)
                self.pools[language] = pool
                pool.start()
        self._reaper = asyncio.create_task(self._reap_forever())
        if "python" in self._versions and any((Path(p) / "matplotlib").is_dir() for p in self._python_paths):
            self._font_cache_task = asyncio.create_task(self._build_font_cache())
        logger.info("local sandbox ready: cgroup v%d, runtimes %s", self.layout.version, self._versions)

    async def stop(self) -> None:
        if self._reaper is not None:
            self._reaper.cancel()
        if self._font_cache_task is not None and not self._font_cache_task.done():
            self._font_cache_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._font_cache_task
        for pool in self.pools.values():
            await pool.close()
        if self._font_cache is not None:
            shutil.rmtree(self._font_cache, ignore_errors=True)

    async def _build_font_cache(self) -> None:
        limits = Limits(wall_time_ms=120_000, cpu_time_ms=120_000, memory_bytes=512 << 20, pids=64,
                        output_bytes=1 << 20, file_size_bytes=64 << 20, open_files=256)
        target = self.cache_dir / f"sbx-{os.getpid()}-matplotlib"
        try:
            self._font_cache = await font_cache.build_font_cache(self, target, limits)
        except (OSError, RuntimeError, ValueError) as exc:
            logger.warning("matplotlib font cache not built: %s", exc)

    def _prepare_dirs(self) -> None:
        for directory in (self.work_root, self.jobs_dir, self.cache_dir):
            directory.mkdir(parents=True, exist_ok=True)
            os.chmod(directory, 0o711)  # uid 65534 may pass through, not list
        if not _traversable_by_others(self.jobs_dir, readable=False):
            raise FailedPreconditionError(f"sandbox.work_root {self.work_root} must be reachable by uid {SANDBOX_UID}")
        staging = self.work_root / f".runner-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        shutil.copytree(RUNNER_SOURCE, staging, ignore=shutil.ignore_patterns("__pycache__", "__init__.py"))
        for path in [staging, *staging.iterdir()]:
            os.chmod(path, 0o755 if path.is_dir() else 0o644)
        if self.runner_dir.exists():
            shutil.rmtree(self.runner_dir, ignore_errors=True)
        with contextlib.suppress(OSError):
            staging.rename(self.runner_dir)
        if not self.runner_dir.exists():
            raise FailedPreconditionError(f"could not install the sandbox runner under {self.runner_dir}")
        self._python_paths = []
        for raw in self.settings.python_paths:
            path = Path(raw)
            if path.is_dir() and _traversable_by_others(path):
                self._python_paths.append(str(path.resolve()))
            else:
                logger.warning("sandbox.python_paths entry %s is not readable by uid %d; not mounted", raw, SANDBOX_UID)

    def _can_mount_work(self) -> bool:
        probe = self.jobs_dir / f".mount-probe-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        probe.mkdir(mode=0o700)
        try:
            mount_work_tmpfs(probe, 1 << 20)
        except OSError as exc:
            logger.warning("local sandbox: cannot mount a tmpfs on job directories (%s); /work is then only "
                           "bounded per file by file_size_bytes, not in total", exc)
            return False
        finally:
            _remove_job_dir(probe)
        return True

    async def _probe_versions(self) -> dict[str, str]:
        probes = {
            "python": [self.settings.python, "-I", "-S", "-c", "import platform; print(platform.python_version())"],
            "nodejs": [self.settings.node, "--version"],
        }
        versions: dict[str, str] = {}
        for language, argv in probes.items():
            if not Path(argv[0]).resolve().is_relative_to("/usr"):
                logger.warning("%s interpreter %s is outside /usr, which is all a job sees; disabled", language, argv[0])
                continue
            try:
                process = await asyncio.create_subprocess_exec(*argv, env={}, stdout=asyncio.subprocess.PIPE,
                                                               stderr=asyncio.subprocess.DEVNULL)
            except OSError as exc:
                logger.warning("%s runtime unavailable: %s", language, exc)
                continue
            out, _ = await process.communicate()
            if process.returncode == 0:
                versions[language] = out.decode().strip().lstrip("v")
        return versions

    def runtimes(self) -> list[RuntimeInfo]:
        return [RuntimeInfo(language, LANGUAGE_ALIASES[language], version, self.name)
                for language, version in sorted(self._versions.items())]

    # ---- workers ---------------------------------------------------------------------------------

    def _rlimits(self, language: str, limits: Limits) -> tuple[int, int, int]:
        """(cpu seconds, file size, open files) the launcher sets as HARD limits."""
        if language == "python":
            limits = self.settings.caps  # the Python runner lowers them to the job's own values
        return (max(1, -(-limits.cpu_time_ms // 1000)), limits.file_size_bytes, limits.open_files)

    def _argv(self, worker_name: str, language: str, rlimits: tuple[int, int, int], cgroup: JobCgroup,
              directory: Path, seccomp_fd: int, status_fd: int) -> list[str]:
        cpu, fsize, nofile = rlimits
        bwrap = [
            self._bwrap, "--unshare-all", "--die-with-parent", "--new-session", "--clearenv",
            "--setenv", "PATH", "/usr/bin:/bin", "--setenv", "HOME", "/work", "--setenv", "TMPDIR", "/tmp",
            "--setenv", "LANG", "C.UTF-8", "--setenv", "MPLBACKEND", "Agg", "--setenv", "MPLCONFIGDIR", "/tmp/.matplotlib",
            "--setenv", "OUTPUT_DIR", f"/work/{OUTPUT_DIR_NAME}",
            "--ro-bind", "/usr", "/usr", "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
            "--symlink", "usr/bin", "/bin", "--symlink", "usr/sbin", "/sbin",
            "--ro-bind", str(self.runner_dir), RUNNER_MOUNT,
            "--ro-bind-try", "/etc/fonts", "/etc/fonts",  # matplotlib runs fc-list
            "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--bind", str(directory), "/work", "--chdir", "/work",
            "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID), "--hostname", "sandbox", "--cap-drop", "ALL",
            "--seccomp", str(seccomp_fd),
        ]
        mounted_paths: list[str] = []
        for index, path in enumerate(self._python_paths if language == "python" else []):
            target = f"{PYTHON_PATH_MOUNT}/{index}"
            bwrap += ["--ro-bind", path, target]
            mounted_paths.append(target)
        if language == "python":
            cache = []
            if self._font_cache is not None:
                bwrap += ["--ro-bind", str(self._font_cache), font_cache.MOUNT]
                cache = ["--mplcache", font_cache.MOUNT]
            program = [self.settings.python, "-I", "-S", "-B", "-u", f"{RUNNER_MOUNT}/python_runner.py",
                       "--job", "fd:0", "--status", f"fd:{status_fd}", *cache, "--path", *mounted_paths]
        else:
            heap_mb = max(64, self.settings.caps.memory_bytes >> 20)  # above any cgroup limit: the cgroup OOM-kills first
            program = [self.settings.node, f"--max-old-space-size={heap_mb}", f"{RUNNER_MOUNT}/node_runner.js",
                       "--job", "fd:0", "--status", f"fd:{status_fd}"]
        return [
            "/bin/sh", "-c", JOIN_CGROUPS, "sh", *cgroup.procs_files(), "--",
            "/usr/bin/prlimit", f"--cpu={cpu}:{cpu + 1}", f"--fsize={fsize}", f"--nofile={nofile}", "--core=0",
            "/usr/bin/setpriv", f"--reuid={SANDBOX_UID}", f"--regid={SANDBOX_UID}", "--clear-groups",
            "--no-new-privs", "--inh-caps=-all",
            *bwrap, "--", *program,
        ]

    async def _spawn(self, language: str, limits: Limits | None = None) -> LocalWorker:
        assert self.layout is not None
        name = f"sbx-{os.getpid()}-{uuid.uuid4().hex[:12]}"
        self._live.add(name)  # before anything exists, so a concurrent reaper never takes it
        rlimits = self._rlimits(language, limits or self.settings.defaults)
        directory = self.jobs_dir / name
        directory.mkdir(mode=0o700)
        try:
            os.chown(directory, SANDBOX_UID, SANDBOX_UID)
            if self._mount_work:
                mount_work_tmpfs(directory, self.settings.work_dir_bytes)
            cgroup = self.layout.create(name)
            defaults = self.settings.defaults
            cgroup.set_limits(defaults.memory_bytes, defaults.pids, self.settings.cpu_quota_cores)
        except BaseException:
            self._remove_worker_files(self.layout.attach(name), directory)
            self._live.discard(name)
            raise
        seccomp_read, seccomp_write = os.pipe()
        os.write(seccomp_write, self._bpf)
        os.close(seccomp_write)
        status_read, status_write = os.pipe()
        try:
            process = await asyncio.create_subprocess_exec(
                *self._argv(name, language, rlimits, cgroup, directory, seccomp_read, status_write),
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                pass_fds=(seccomp_read, status_write), env={}, cwd="/", start_new_session=True,
            )
        except BaseException:  # also a cancelled spawn (pool closing): no directory, mount or cgroup stays
            os.close(status_read)
            self._remove_worker_files(cgroup, directory)
            self._live.discard(name)
            raise
        finally:
            os.close(seccomp_read)
            os.close(status_write)
        channel = StatusChannel(status_read)
        worker = LocalWorker(name, language, rlimits, process, cgroup, directory, channel)
        try:
            await channel.open()
            # Ready = the interpreter has started and blocks reading its job; only then is it "warm".
            await asyncio.wait_for(channel.wait_ready(), timeout=SPAWN_TIMEOUT_S)
        except (asyncio.TimeoutError, asyncio.IncompleteReadError, OSError) as exc:
            stderr = b""
            await self.discard(worker)
            if process.stderr is not None:
                stderr = await process.stderr.read(2000)
            raise RuntimeError(f"sandbox worker did not start: {exc!r} {stderr.decode(errors='replace')}") from exc
        except asyncio.CancelledError:
            # The caller went away mid-spawn: the half-made worker must not outlive it.
            await asyncio.shield(asyncio.ensure_future(self.discard(worker)))
            raise
        return worker

    async def discard(self, worker: LocalWorker) -> None:
        with contextlib.suppress(ProcessLookupError):
            worker.process.send_signal(signal.SIGKILL)
        worker.status.close()
        await worker.process.wait()
        removed = await asyncio.to_thread(self._remove_worker_files, worker.cgroup, worker.directory)
        if not removed:
            logger.warning("worker %s: cgroup still busy; the reaper will remove it", worker.name)
        self._live.discard(worker.name)  # no longer live either way: the periodic reaper retries

    @staticmethod
    def _remove_worker_files(cgroup: JobCgroup, directory: Path) -> bool:
        _remove_job_dir(directory)  # before the cgroup goes: the tmpfs pages are charged to it
        return cgroup.remove()

    # ---- jobs ------------------------------------------------------------------------------------

    async def launch(self, job: JobSpec) -> LocalRunningJob:
        language = job.language
        pool = self.pools.get(language)
        if language == "python" or self._rlimits(language, job.limits) == self._rlimits(language, self.settings.defaults):
            worker = await pool.take() if pool is not None else await self._spawn(language)
        else:
            worker = await self._spawn(language, job.limits)  # Node cannot lower its own rlimits: cold start
        running = LocalRunningJob(worker, self)
        try:
            worker.cgroup.set_limits(job.limits.memory_bytes, job.limits.pids, self.settings.cpu_quota_cores)
            running.status_task = asyncio.create_task(worker.status.read_rest())
            payload = json.dumps({
                "code": job.code, "arguments": job.arguments, "mode": job.mode.value,
                "limits": {"cpu_time_ms": job.limits.cpu_time_ms, "file_size_bytes": job.limits.file_size_bytes,
                           "open_files": job.limits.open_files},
                "output_dir": OUTPUT_DIR_NAME, "max_status_bytes": MAX_STATUS_BYTES,
            }).encode()
            stdin = worker.process.stdin
            assert stdin is not None
            stdin.write(payload)
            with contextlib.suppress(ConnectionError):
                await stdin.drain()
            stdin.close()
        except BaseException:
            await running.kill()
            await running.cleanup()
            raise
        return running

    # ---- reaping ---------------------------------------------------------------------------------

    async def reap(self) -> int:
        return await asyncio.to_thread(self._reap_once)

    def _reap_once(self) -> int:
        assert self.layout is not None
        removed = 0
        for name in self.layout.children():
            if self._stale(name) and self.layout.attach(name).remove(attempts=5):
                removed += 1
        for entry in self._entries(self.jobs_dir):
            if self._stale(entry.name):
                _remove_job_dir(entry)
                removed += 1
        for entry in self._entries(self.cache_dir):
            if not owner_alive(entry.name):  # caches live as long as their server
                shutil.rmtree(entry, ignore_errors=True)
                removed += 1
        if removed:
            logger.info("sandbox reaper removed %d stale cgroups/directories", removed)
        return removed

    def _stale(self, name: str) -> bool:
        """Not a live worker of ours, and not a worker of another live server."""
        if name in self._live:
            return False
        return not owner_alive(name) or name.split("-")[1] == str(os.getpid())

    @staticmethod
    def _entries(directory: Path) -> list[Path]:
        return list(directory.iterdir()) if directory.is_dir() else []

    async def _reap_forever(self) -> None:
        while True:
            await asyncio.sleep(self.settings.reap_interval_s)
            try:
                await self.reap()
            except Exception:  # a failed sweep must not end the sweeping: the next one may succeed
                logger.exception("sandbox reaper failed; retrying in %s s", self.settings.reap_interval_s)


async def _discard_until_eof(stream: asyncio.StreamReader) -> None:
    while await stream.read(READ_CHUNK):
        pass


class StatusChannel:
    """The host end of the runner's status pipe: first READY, later one JSON status record."""

    def __init__(self, fd: int) -> None:
        self._fd: int | None = fd
        self._reader = asyncio.StreamReader(limit=MAX_STATUS_BYTES)
        self._transport: asyncio.BaseTransport | None = None

    async def open(self) -> None:
        fd, self._fd = self._fd, None
        assert fd is not None
        loop = asyncio.get_running_loop()
        protocol = asyncio.StreamReaderProtocol(self._reader)
        self._transport, _ = await loop.connect_read_pipe(lambda: protocol, os.fdopen(fd, "rb", buffering=0))

    async def wait_ready(self) -> None:
        if await self._reader.readexactly(len(READY)) != READY:
            raise OSError("unexpected first bytes on the status channel")

    async def read_rest(self) -> bytes:
        """Everything up to EOF (all writers gone), keeping at most MAX_STATUS_BYTES + 1 bytes: past that
        the rest is read and dropped, so a writer never blocks on a full pipe, and parse_status sees
        that the record is over the limit."""
        chunks: list[bytes] = []
        total = 0
        while chunk := await self._reader.read(READ_CHUNK):
            room = MAX_STATUS_BYTES + 1 - total
            if room > 0:
                chunks.append(chunk[:room])
                total += min(len(chunk), room)
        return b"".join(chunks)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if self._transport is not None:
            self._transport.close()
