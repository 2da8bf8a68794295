"""`docker` backend: one single-use container per job, through the Docker API (Docker, or podman's
Docker-compatible socket), from a warm pool of already started containers.

Every container: network_mode="none" (never network_disabled, which podman ignores), mem_limit ==
memswap_limit, pids_limit, nano_cpus, read-only root, tmpfs /tmp and /work, cap_drop ALL,
no-new-privileges, user 65534, ulimits, an optional runtime (runsc), and labels for the reaper.
PID 1 is `sleep infinity` running as 65534: job processes (also 65534) cannot kill it (the kernel
protects a namespace's init), so after a job `kill -9 -1` stops every job process while the tmpfs
with the status record and the artifacts stays readable (get_archive: a tar, so no symlink is ever
followed on the host). Then the container is removed.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import logging
import os
import socket
import tarfile
import uuid
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import docker
import docker.errors
from docker.types import Ulimit

from services.common.errors import FailedPreconditionError
from services.sandbox.adapters.pool import WarmPool
from services.sandbox.adapters.seccomp import docker_profile
from services.sandbox.core.artifacts import OUTPUT_DIR_NAME, acceptable_name, mime_type
from services.sandbox.core.models import LANGUAGE_ALIASES, ArtifactFile, Collected, JobSpec, Limits, RawExit, RuntimeInfo
from services.sandbox.core.settings import SandboxSettings
from services.sandbox.core.status import MAX_STATUS_BYTES, StatusProblem, parse_status

logger = logging.getLogger(__name__)

SANDBOX_USER = "65534:65534"
LABEL = "dev.agentcanvas.sandbox"
OWNER_LABEL = "dev.agentcanvas.sandbox.owner"
RUNNER_SOURCE = Path(__file__).parent / "runner"
CONTROL_DIR = "/work/.sbx"
JOB_DIR = "/work/job"
PYTHON_PATH_MOUNT = "/opt/agentcanvas/python"
KILL_EXEC_TIMEOUT_S = 5.0
ARCHIVE_CHUNK = 1 << 20
STATUS_KEY = "\0status"  # not a file name: artifacts never collide with it
MAX_ARCHIVE_MEMBERS = 10_000
"""Entries of /work read after a job: the engine takes ~50 us per entry to archive, so a job that left a
million empty files would otherwise hold its slot for minutes after its wall time."""
DOCKER_API_ERRORS = (docker.errors.DockerException, OSError)


def _owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _tar(entries: list[tuple[str, bytes | None, int]]) -> bytes:
    """(path, content or None for a directory, mode) -> tar owned by 65534."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for path, content, mode in entries:
            info = tarfile.TarInfo(path)
            info.uid = info.gid = 65534
            info.mode = mode
            if content is None:
                info.type = tarfile.DIRTYPE
                archive.addfile(info)
            else:
                info.size = len(content)
                archive.addfile(info, io.BytesIO(content))
    return buffer.getvalue()


@dataclass
class WarmContainer:
    name: str
    container_id: str
    language: str
    key: tuple[int, int, tuple[int, int, int]]
    alive_flag: bool = True

    def alive(self) -> bool:
        return self.alive_flag


@dataclass
class DockerRunningJob:
    backend: "DockerBackend"
    box: WarmContainer
    exec_id: str = ""
    _killed_by_us: bool = False
    _cleaned: bool = False
    _stream_done: asyncio.Event = field(default_factory=asyncio.Event)
    _queue: asyncio.Queue[tuple[str, bytes | None]] = field(default_factory=asyncio.Queue)

    def start_stream(self) -> None:
        loop = asyncio.get_running_loop()

        def pump() -> None:
            try:
                for stdout, stderr in self.backend.api.exec_start(self.exec_id, stream=True, demux=True):
                    if stdout:
                        loop.call_soon_threadsafe(self._queue.put_nowait, ("stdout", stdout))
                    if stderr:
                        loop.call_soon_threadsafe(self._queue.put_nowait, ("stderr", stderr))
            except DOCKER_API_ERRORS as exc:
                logger.debug("exec stream of %s ended: %s", self.box.container_id[:12], exc)
            finally:
                loop.call_soon_threadsafe(self._queue.put_nowait, ("", None))
                loop.call_soon_threadsafe(self._stream_done.set)

        loop.run_in_executor(self.backend.executor, pump)

    async def output(self) -> AsyncIterator[tuple[str, bytes]]:
        while True:
            name, chunk = await self._queue.get()
            if chunk is None:
                return
            yield name, chunk

    async def wait(self) -> RawExit:
        await self._stream_done.wait()
        info = await self.backend.call(self.backend.api.exec_inspect, self.exec_id)
        code = info.get("ExitCode")
        code = -1 if code is None else int(code)
        if 128 < code < 128 + 65:
            return RawExit(code, code - 128)
        return RawExit(code, 0)

    async def kill(self) -> None:
        """A job still running (timeout, output cap, cancel) gets its whole container killed at once: fast
        and certain, even when a fork bomb has used up the pids limit. After a normal exit, only the
        leftover processes are killed, so the status record and artifacts on the tmpfs survive."""
        self._killed_by_us = True
        if self._stream_done.is_set():
            await self.backend.kill_job_processes(self.box.container_id)
        else:
            await self.backend.kill_container(self.box.container_id)

    async def memory_exceeded(self) -> bool:
        return await self.backend.call(self.backend.oom_kills, self.box.container_id) > 0

    async def collect(self, max_artifacts: int, max_artifact_bytes: int) -> Collected:
        return await self.backend.call(self.backend.collect, self.box.container_id, max_artifacts, max_artifact_bytes)

    async def cleanup(self) -> None:
        if not self._cleaned:
            self._cleaned = True
            await self.backend.discard(self.box)
            pool = self.backend.pools.get(self.box.language)
            if pool is not None:
                pool.replenish()


class DockerBackend:
    """Containers through the Docker API. Needs access to a Docker or podman socket, and the image."""

    name = "docker"

    def __init__(self, settings: SandboxSettings, client: docker.DockerClient | None = None) -> None:
        self.settings = settings
        self.docker = settings.docker
        self.executor = ThreadPoolExecutor(max_workers=2 * settings.max_concurrent + 4, thread_name_prefix="sandbox-docker")
        self._client = client
        self.pools: dict[str, WarmPool[WarmContainer]] = {}
        self._versions: dict[str, str] = {}
        self._live: set[str] = set()
        self._reaper: asyncio.Task[None] | None = None
        self._seccomp_option = ""
        self._background: set[asyncio.Future[None]] = set()
        self._creating: set[asyncio.Future[str]] = set()
        self._runner_files = {p.name: p.read_bytes() for p in RUNNER_SOURCE.iterdir() if p.suffix in {".py", ".js"} and p.name != "__init__.py"}

    @property
    def client(self) -> docker.DockerClient:
        if self._client is None:
            self._client = docker.DockerClient(base_url=self.docker.base_url, version="auto", timeout=60)
        return self._client

    @property
    def api(self) -> Any:
        return self.client.api

    async def call(self, function: Any, *args: Any, **kwargs: Any) -> Any:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.executor, lambda: function(*args, **kwargs))

    # ---- lifecycle -------------------------------------------------------------------------------

    async def start(self) -> None:
        try:
            await self.call(self.client.ping)
            await self.call(self.client.images.get, self.docker.image)
        except docker.errors.ImageNotFound as exc:
            raise FailedPreconditionError(
                f"sandbox image {self.docker.image} is missing; build it with "
                f"`python -m services.sandbox.adapters.docker_image --base-url {self.docker.base_url}`") from exc
        except DOCKER_API_ERRORS as exc:
            raise FailedPreconditionError(f"docker sandbox: cannot reach {self.docker.base_url}: {exc}") from exc
        self._seccomp_option = await self.call(self._seccomp_security_opt)
        await self.reap()
        self._versions = await self.call(self._probe_versions)
        for language, size in self.settings.pool.items():
            if language in self._versions:
                key = self._key(language, self.settings.defaults)
                pool = WarmPool(f"docker-{language}", size, lambda lang=language, k=key: self._create(lang, k),
                                self.discard, WarmContainer.alive)
                self.pools[language] = pool
                pool.start()
        self._reaper = asyncio.create_task(self._reap_forever())
        logger.info("docker sandbox ready at %s: runtimes %s", self.docker.base_url, self._versions)

    async def stop(self) -> None:
        if self._reaper is not None:
            self._reaper.cancel()
        for pool in self.pools.values():
            await pool.close()
        # Containers still being created when their spawn was cancelled are removed once they exist.
        await asyncio.gather(*list(self._creating), return_exceptions=True)
        await asyncio.sleep(0)  # let their done-callbacks schedule the removals
        while self._background:
            await asyncio.gather(*list(self._background), return_exceptions=True)
        await self.reap()
        self.executor.shutdown(wait=False, cancel_futures=True)

    def runtimes(self) -> list[RuntimeInfo]:
        return [RuntimeInfo(language, LANGUAGE_ALIASES[language], version, self.name)
                for language, version in sorted(self._versions.items())]

    def _seccomp_security_opt(self) -> str:
        """Our seccomp deny-list (no user namespaces, no ptrace, ...) for every container.

        Docker Engine takes the profile inline; podman's compat API takes a path on its own host, so the
        profile is written under work_root (the podman service runs on this machine). `seccomp: default`
        keeps the engine's own profile; runsc ignores seccomp profiles and filters in its Sentry.
        """
        mode = self.docker.seccomp
        if mode == "default":
            return ""
        profile = json.dumps(docker_profile())
        components = [str(c.get("Name", "")) for c in self.client.version().get("Components") or []]
        if mode == "path" or (mode == "auto" and any("podman" in name.lower() for name in components)):
            path = self.settings.work_root_path / "seccomp-docker.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(profile)
            os.chmod(path, 0o644)
            return f"seccomp={path}"
        return f"seccomp={profile}"

    def _probe_versions(self) -> dict[str, str]:
        script = (f"{self.docker.python} -I -S -c 'import platform; print(\"python\", platform.python_version())'; "
                  f"{self.docker.node} -e 'console.log(\"nodejs\", process.versions.node)'")
        output = self.client.containers.run(
            self.docker.image, ["/bin/sh", "-c", script], remove=True, **self._hardening(self.settings.defaults, "python"),
        )
        versions = {}
        for line in output.decode().splitlines():
            language, _, version = line.partition(" ")
            if language in LANGUAGE_ALIASES and version:
                versions[language] = version.strip()
        return versions

    # ---- containers ------------------------------------------------------------------------------

    def _key(self, language: str, limits: Limits) -> tuple[int, int, tuple[int, int, int]]:
        """What a container is created with and cannot change later: memory, pids, rlimits."""
        rlimit_source = self.settings.caps if language == "python" else limits  # the Python runner lowers its own
        cpu = max(1, -(-rlimit_source.cpu_time_ms // 1000))
        return (limits.memory_bytes, limits.pids, (cpu, rlimit_source.file_size_bytes, rlimit_source.open_files))

    def _hardening(self, limits: Limits, language: str) -> dict[str, Any]:
        memory, pids, (cpu, fsize, nofile) = self._key(language, limits)
        options: dict[str, Any] = dict(
            network_mode="none", mem_limit=memory, memswap_limit=memory, pids_limit=pids,
            nano_cpus=self.docker.nano_cpus, read_only=True, user=SANDBOX_USER, cap_drop=["ALL"],
            security_opt=["no-new-privileges", *([self._seccomp_option] if self._seccomp_option else [])],
            environment={}, working_dir="/work",
            tmpfs={"/tmp": f"rw,nosuid,nodev,size={self.docker.tmpfs_bytes},mode=1777",
                   "/work": f"rw,nosuid,nodev,size={self.docker.tmpfs_bytes},mode=1777"},
            ulimits=[Ulimit(name="cpu", soft=cpu, hard=cpu + 1), Ulimit(name="fsize", soft=fsize, hard=fsize),
                     Ulimit(name="nofile", soft=nofile, hard=nofile), Ulimit(name="core", soft=0, hard=0),
                     Ulimit(name="nproc", soft=4096, hard=4096)],
            labels={LABEL: "1", OWNER_LABEL: _owner()}, stop_signal="SIGKILL",
        )
        volumes: dict[str, dict[str, str]] = {}
        if self.docker.bind_host_usr:
            volumes["/usr"] = {"bind": "/usr", "mode": "ro"}
            if Path("/etc/fonts").is_dir():
                volumes["/etc/fonts"] = {"bind": "/etc/fonts", "mode": "ro"}  # matplotlib runs fc-list
            for index, path in enumerate(self.settings.python_paths):
                if Path(path).is_dir():
                    volumes[path] = {"bind": f"{PYTHON_PATH_MOUNT}/{index}", "mode": "ro"}
        if volumes:
            options["volumes"] = volumes
        if self.docker.runtime:
            options["runtime"] = self.docker.runtime
        return options

    async def _create(self, language: str, key: tuple[int, int, tuple[int, int, int]], limits: Limits | None = None) -> WarmContainer:
        limits = limits or self.settings.defaults
        name = f"sbx-{os.getpid()}-{uuid.uuid4().hex[:12]}"
        self._live.add(name)

        def create() -> str:
            container = self.client.containers.run(
                self.docker.image, ["/usr/bin/sleep", "infinity"], name=name, detach=True, **self._hardening(limits, language)
            )
            return container.id

        creating = asyncio.ensure_future(self.call(create))
        self._creating.add(creating)
        creating.add_done_callback(self._creating.discard)
        try:
            container_id = await asyncio.shield(creating)
        except DOCKER_API_ERRORS as exc:
            self._live.discard(name)
            raise RuntimeError(f"could not start a sandbox container: {exc}") from exc
        except asyncio.CancelledError:
            # The caller went away while the engine was still creating it: remove it once it exists.
            creating.add_done_callback(lambda done: self._forget_created(done, name, language, key))
            raise
        return WarmContainer(name, container_id, language, key)

    def _forget_created(self, done: asyncio.Future[str], name: str, language: str,
                        key: tuple[int, int, tuple[int, int, int]]) -> None:
        if done.cancelled() or done.exception() is not None:
            self._live.discard(name)
            return
        removal = asyncio.ensure_future(self.discard(WarmContainer(name, done.result(), language, key)))
        self._background.add(removal)
        removal.add_done_callback(self._background.discard)

    async def discard(self, box: WarmContainer) -> None:
        box.alive_flag = False
        with contextlib.suppress(*DOCKER_API_ERRORS):
            await self.call(self.api.remove_container, box.container_id, force=True, v=True)
            self._live.discard(box.name)

    async def kill_container(self, container_id: str) -> None:
        with contextlib.suppress(*DOCKER_API_ERRORS):
            await self.call(self.api.kill, container_id)

    async def kill_job_processes(self, container_id: str) -> None:
        """kill -9 -1 as 65534: every job process dies, PID 1 (and so the tmpfs) survives. If that does
        not finish promptly (e.g. the pids limit is exhausted), the whole container is killed."""
        def kill() -> None:
            exec_id = self.api.exec_create(container_id, ["/usr/bin/kill", "-9", "-1"], user=SANDBOX_USER)["Id"]
            self.api.exec_start(exec_id)

        try:
            await asyncio.wait_for(self.call(kill), timeout=KILL_EXEC_TIMEOUT_S)
        except (asyncio.TimeoutError, *DOCKER_API_ERRORS) as exc:
            logger.info("in-container kill failed (%r); killing container %s", exc, container_id[:12])
            await self.kill_container(container_id)

    def oom_kills(self, container_id: str) -> int:
        """OOM kills from the container's memory cgroup when the engine runs on this host."""
        roots = [Path("/sys/fs/cgroup/memory"), Path("/sys/fs/cgroup")]
        for root in roots:
            for pattern in (f"*/*{container_id}*", f"*/*/*{container_id}*", f"*{container_id}*"):
                for directory in root.glob(pattern):
                    for name in ("memory.oom_control", "memory.events"):
                        with contextlib.suppress(OSError):
                            for line in (directory / name).read_text().splitlines():
                                key, _, value = line.partition(" ")
                                if key == "oom_kill":
                                    return int(value)
        with contextlib.suppress(*DOCKER_API_ERRORS):
            if self.api.inspect_container(container_id)["State"].get("OOMKilled"):
                return 1
        return 0

    def collect(self, container_id: str, max_artifacts: int, max_artifact_bytes: int) -> Collected:
        """One archive of /work (a tmpfs mount point, so the job cannot swap it for a symlink): the status
        record and the artifacts are picked from it by member name. Archiving `.sbx/status.json` or
        `job/artifacts` by path would make the engine follow a symlink the job put there (to /proc/self,
        that read stalls until the client's timeout)."""

        def select(parts: list[str]) -> tuple[str, int] | None:
            if parts == ["work", ".sbx", "status.json"]:
                return STATUS_KEY, MAX_STATUS_BYTES
            if len(parts) == 4 and parts[:3] == ["work", "job", OUTPUT_DIR_NAME]:
                return parts[3], max_artifact_bytes
            return None

        raw: bytes | None = None
        size: int | None = None
        complete = True
        try:
            files = self._archive_files(container_id, "/work", max_artifact_bytes, select)
        except _TooManyMembers as exc:
            logger.warning("job in %s left more than %d files under /work; stopped reading them",
                           container_id[:12], MAX_ARCHIVE_MEMBERS)
            files, complete = exc.found, False
        except (*DOCKER_API_ERRORS, tarfile.TarError) as exc:
            logger.warning("status record and artifacts of %s not readable: %r", container_id[:12], exc)
            files = {}
        if STATUS_KEY in files:
            size, raw = files.pop(STATUS_KEY)
            status = parse_status(raw, size=size)
        elif complete:
            status = parse_status(None)
        else:
            status = StatusProblem("invalid", f"the job left more than {MAX_ARCHIVE_MEMBERS} files under /work; "
                                              "its status record was not read")
        artifacts: list[ArtifactFile] = []
        for name in sorted(files):
            if len(artifacts) >= max_artifacts:
                break
            size, content = files[name]
            if not acceptable_name(name):
                continue
            if size > max_artifact_bytes:
                artifacts.append(ArtifactFile(name, mime_type(name, content[:16]), size, b"", True))
            else:
                artifacts.append(ArtifactFile(name, mime_type(name, content[:16]), size, content))
        return Collected(status=status, artifacts=artifacts)

    def _archive_files(self, container_id: str, path: str, max_bytes: int,
                       select: Any = None) -> dict[str, tuple[int, bytes]]:
        """Regular files of the archive of `path`: key -> (size from the tar header, content). `select(parts)`
        maps a member's path components to (key, byte cap) or None to skip it; by default, the files
        directly under `path` (or `path` itself), capped at max_bytes. Content is the whole file when it
        is within its cap, else its first cap + 1 bytes (so a caller sees that it is over). The archive
        is read as a stream: memory stays bounded by the caps, not by what the job wrote. Past
        MAX_ARCHIVE_MEMBERS entries reading stops: _TooManyMembers carries what was found until then."""

        def default(parts: list[str]) -> tuple[str, int] | None:
            return (parts[-1], max_bytes) if len(parts) <= 2 else None

        select = select or default
        try:
            stream, _ = self.api.get_archive(container_id, path, chunk_size=ARCHIVE_CHUNK)
        except docker.errors.NotFound:
            return {}
        found: dict[str, tuple[int, bytes]] = {}
        try:
            with tarfile.open(fileobj=io.BufferedReader(_ChunkReader(stream), ARCHIVE_CHUNK), mode="r|") as archive:
                for count, member in enumerate(archive, 1):
                    if count > MAX_ARCHIVE_MEMBERS:
                        raise _TooManyMembers(found)
                    if not member.isreg():
                        continue  # symlinks, devices, FIFOs, directories: never followed, never returned
                    wanted = select(member.name.strip("/").split("/"))
                    if wanted is None:
                        continue
                    key, cap = wanted
                    handle = archive.extractfile(member)
                    found[key] = (member.size, _read_up_to(handle, cap + 1) if handle else b"")
        finally:
            close = getattr(stream, "close", None)
            if close is not None:
                close()
        return found

    # ---- jobs ------------------------------------------------------------------------------------

    async def launch(self, job: JobSpec) -> DockerRunningJob:
        key = self._key(job.language, job.limits)
        pool = self.pools.get(job.language)
        if pool is not None and key == self._key(job.language, self.settings.defaults):
            box = await pool.take()
        else:
            box = await self._create(job.language, key, job.limits)  # limits fixed at creation: a fresh container
        running = DockerRunningJob(self, box)
        try:
            payload = json.dumps({
                "code": job.code, "arguments": job.arguments, "mode": job.mode.value,
                "limits": {"cpu_time_ms": job.limits.cpu_time_ms, "file_size_bytes": job.limits.file_size_bytes,
                           "open_files": job.limits.open_files},
                "output_dir": OUTPUT_DIR_NAME, "max_status_bytes": MAX_STATUS_BYTES,
            }).encode()
            archive = _tar([(".sbx", None, 0o700), ("job", None, 0o700), (".sbx/job.json", payload, 0o600),
                            *[(f".sbx/{name}", data, 0o600) for name, data in self._runner_files.items()]])
            if job.language == "python":
                paths = [f"{PYTHON_PATH_MOUNT}/{i}" for i, p in enumerate(self.settings.python_paths) if Path(p).is_dir()]
                command = [self.docker.python, "-I", "-S", "-B", "-u", f"{CONTROL_DIR}/python_runner.py",
                           "--job", f"file:{CONTROL_DIR}/job.json", "--status", f"file:{CONTROL_DIR}/status.json",
                           "--path", *paths]
            else:
                heap_mb = max(64, self.settings.caps.memory_bytes >> 20)
                command = [self.docker.node, f"--max-old-space-size={heap_mb}", f"{CONTROL_DIR}/node_runner.js",
                           "--job", f"file:{CONTROL_DIR}/job.json", "--status", f"file:{CONTROL_DIR}/status.json"]
            environment = {"PATH": "/usr/bin:/bin", "HOME": JOB_DIR, "TMPDIR": "/tmp", "LANG": "C.UTF-8",
                           "MPLBACKEND": "Agg", "MPLCONFIGDIR": "/tmp/.matplotlib", "OUTPUT_DIR": f"{JOB_DIR}/{OUTPUT_DIR_NAME}"}

            def prepare() -> str:
                self.api.put_archive(box.container_id, "/work", archive)
                return self.api.exec_create(box.container_id, command, stdout=True, stderr=True, user=SANDBOX_USER,
                                            environment=environment, workdir=JOB_DIR)["Id"]

            running.exec_id = await self.call(prepare)
            running.start_stream()
        except BaseException:
            await running.cleanup()
            raise
        return running

    # ---- reaping ---------------------------------------------------------------------------------

    async def reap(self) -> int:
        return await self.call(self._reap_once)

    def _reap_once(self) -> int:
        removed = 0
        host, _, _ = _owner().partition(":")
        try:
            containers = self.api.containers(all=True, filters={"label": LABEL})
        except DOCKER_API_ERRORS as exc:
            logger.warning("sandbox reaper could not list containers: %s", exc)
            return 0
        for summary in containers:
            labels = summary.get("Labels") or {}
            names = [n.lstrip("/") for n in summary.get("Names") or []]
            owner_host, _, owner_pid = str(labels.get(OWNER_LABEL, "")).partition(":")
            if owner_host != host:
                continue  # another machine's container
            if any(name in self._live for name in names):
                continue
            if owner_pid != str(os.getpid()) and owner_pid.isdigit() and _pid_alive(int(owner_pid)):
                continue  # a live sibling server on this host
            with contextlib.suppress(*DOCKER_API_ERRORS):
                self.api.remove_container(summary["Id"], force=True, v=True)
                removed += 1
        if removed:
            logger.info("sandbox reaper removed %d stale containers", removed)
        return removed

    async def _reap_forever(self) -> None:
        while True:
            await asyncio.sleep(self.settings.reap_interval_s)
            try:
                await self.reap()
            except Exception:  # a failed sweep must not end the sweeping: the next one may succeed
                logger.exception("sandbox reaper failed; retrying in %s s", self.settings.reap_interval_s)


class _TooManyMembers(Exception):
    """The archive has more than MAX_ARCHIVE_MEMBERS entries; `found` holds the files read before them."""

    def __init__(self, found: dict[str, tuple[int, bytes]]) -> None:
        super().__init__(f"more than {MAX_ARCHIVE_MEMBERS} archive entries")
        self.found = found


class _ChunkReader(io.RawIOBase):
    """A readable file over an iterator of byte chunks (the engine's archive stream)."""

    def __init__(self, chunks: Any) -> None:
        self._chunks = iter(chunks)
        self._pending = b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self._pending:
            try:
                self._pending = next(self._chunks)
            except StopIteration:
                return 0
        count = min(len(buffer), len(self._pending))
        buffer[:count] = self._pending[:count]
        self._pending = self._pending[count:]
        return count


def _read_up_to(handle: Any, limit: int) -> bytes:
    """Reads until EOF or `limit` bytes, in pieces: one read of a stream may return less than asked."""
    chunks: list[bytes] = []
    total = 0
    while total < limit:
        chunk = handle.read(min(ARCHIVE_CHUNK, limit - total))
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    return b"".join(chunks)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
