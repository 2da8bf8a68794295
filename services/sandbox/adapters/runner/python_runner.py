"""Runs inside the sandbox under the system Python (-I -S -B -u), as uid 65534, with no network.

Started ahead of time by the warm pool, it blocks reading one job (JSON) until EOF, lowers its
rlimits to the job's, runs the code, and writes a status record to a separate channel (an inherited
fd or a file), never in-band on stdout. It runs exactly one job, then exits.

argv: --job (fd:N | file:PATH) --status (fd:N | file:PATH) [--path DIR ...]
"""

import errno
import json
import os
import resource
import sys
import traceback


def _parse_argv(argv):
    options = {"path": []}
    key = None
    for item in argv:
        if item.startswith("--"):
            key = item[2:]
        elif key == "path":
            options["path"].append(item)
        elif key:
            options[key] = item
            key = None
    return options


def _read_job(spec):
    kind, _, where = spec.partition(":")
    if kind == "fd":
        fd = int(where)
        chunks = []
        while True:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
        if fd != 0:
            os.close(fd)
        return json.loads(b"".join(chunks))
    with open(where, "rb") as handle:
        job = json.loads(handle.read())
    os.unlink(where)
    return job


DEFAULT_MAX_STATUS_BYTES = 16 << 20
STATUS_RESERVE_BYTES = 1024  # a page on tmpfs: stand-in records fit, and it is under the least file-size limit


class _StatusWriter:
    """Writes the one status record. A record over `limit` (the host's MAX_STATUS_BYTES, and on a file
    channel also the job's file-size limit) is replaced by a small StatusTooLarge record; a record that
    cannot be written (e.g. a full disk) by a StatusWriteError one. write() returns False whenever the
    record was replaced: the runner then exits 1."""

    def __init__(self, spec):
        kind, _, where = spec.partition(":")
        self.is_file = kind != "fd"
        if self.is_file:
            self.fd = os.open(where, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            # Room taken now: a job that fills the directory's tmpfs must still get its record out, and the
            # stand-in records always fit here. The record overwrites it; a shorter one is truncated to size.
            try:
                self._write_all(b" " * STATUS_RESERVE_BYTES)
            except OSError:
                pass
        else:
            self.fd = int(where)
            os.write(self.fd, b"READY\n")  # the pool's signal that this interpreter is up and waiting
        os.set_inheritable(self.fd, False)  # children of the job do not get the channel
        self.limit = DEFAULT_MAX_STATUS_BYTES
        self.done = False

    def configure(self, job):
        limit = int(job.get("max_status_bytes") or DEFAULT_MAX_STATUS_BYTES)
        if self.is_file:
            limit = min(limit, int(job["limits"]["file_size_bytes"]))
        self.limit = limit

    def __call__(self, record):
        if self.done:
            return True
        self.done = True
        delivered = True
        data = json.dumps(record).encode()
        if len(data) > self.limit:
            data = self._too_large(len(data), self.limit)
            delivered = False
        try:
            self._write_record(data)
        except OSError as exc:
            delivered = False
            if exc.errno == errno.EFBIG:
                replacement = self._too_large(len(data), resource.getrlimit(resource.RLIMIT_FSIZE)[0])
            else:
                replacement = json.dumps({"ok": False, "error": {
                    "type": "StatusWriteError", "message": "could not write the status record: %s" % exc}}).encode()
            try:
                self._write_record(replacement)
            except OSError:
                pass
        try:
            os.close(self.fd)
        except OSError:
            pass
        return delivered

    def _write_record(self, data):
        if self.is_file:  # from the start of the reserved room, then cut to size (shrinking needs no room)
            os.lseek(self.fd, 0, os.SEEK_SET)
            self._write_all(data)
            os.ftruncate(self.fd, len(data))
        else:
            self._write_all(data)

    def _write_all(self, data):
        view = memoryview(data)
        while view:
            view = view[os.write(self.fd, view):]

    @staticmethod
    def _too_large(size, limit):
        return json.dumps({"ok": False, "error": {
            "type": "StatusTooLarge", "size": size, "limit": limit,
            "message": "main()'s return value makes a status record of %d bytes; the limit is %d" % (size, limit)}}).encode()


def _apply_limits(limits):
    def lower(kind, soft, hard):
        current_soft, current_hard = resource.getrlimit(kind)
        if current_hard != resource.RLIM_INFINITY:
            hard = min(hard, current_hard)
        resource.setrlimit(kind, (min(soft, hard), hard))

    cpu_s = max(1, -(-int(limits["cpu_time_ms"]) // 1000))
    lower(resource.RLIMIT_CPU, cpu_s, cpu_s + 1)  # SIGXCPU at the soft limit, SIGKILL one second later
    lower(resource.RLIMIT_FSIZE, int(limits["file_size_bytes"]), int(limits["file_size_bytes"]))
    lower(resource.RLIMIT_NOFILE, int(limits["open_files"]), int(limits["open_files"]))
    lower(resource.RLIMIT_CORE, 0, 0)


def _install_font_cache(source):
    """Copies the prebuilt matplotlib font list into this job's (empty) MPLCONFIGDIR."""
    target = os.environ.get("MPLCONFIGDIR")
    if not source or not target or not os.path.isdir(source):
        return
    os.makedirs(target, exist_ok=True)
    for name in os.listdir(source):
        with open(os.path.join(source, name), "rb") as src, open(os.path.join(target, name), "wb") as dst:
            dst.write(src.read())


def _jsonable_result(value):
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError):
        return json.dumps(value, ensure_ascii=False, default=str, allow_nan=False) if _plain(value) else json.dumps(str(value))


def _settled(value):
    """An `async def main` returns a coroutine: run it to its value, as the Node runner awaits a promise."""
    if type(value).__name__ != "coroutine":  # checked by name: asyncio costs ~10 ms to import in every job
        return value
    import asyncio

    return asyncio.run(value)


def _plain(value):
    try:
        json.dumps(value, default=str, allow_nan=False)
        return True
    except (TypeError, ValueError):
        return False


def main():
    options = _parse_argv(sys.argv[1:])
    write_status = _StatusWriter(options["status"])
    job = _read_job(options["job"])
    write_status.configure(job)
    devnull = os.open("/dev/null", os.O_RDONLY)
    if devnull != 0:
        os.dup2(devnull, 0)  # code that reads stdin gets EOF
        os.close(devnull)
    _apply_limits(job["limits"])
    _install_font_cache(options.get("mplcache"))
    sys.path[:0] = [p for p in options["path"] if os.path.isdir(p)]
    os.makedirs(job.get("output_dir", "artifacts"), exist_ok=True)
    mode = job.get("mode", "auto")
    namespace = {"__name__": "__main__" if mode == "script" else "__sandbox__", "__builtins__": __builtins__}
    try:
        code = compile(job["code"], "main.py", "exec")
        exec(code, namespace)
        record = {"ok": True}
        entry = namespace.get("main")
        if mode == "main" and not callable(entry):
            raise NameError("the code must define main(**arguments) in MAIN_FUNCTION mode")
        if mode != "script" and callable(entry):
            record["result"] = _jsonable_result(_settled(entry(**job.get("arguments", {}))))
    except SystemExit as exc:
        sys.stdout.flush()
        ok = exc.code in (None, 0)
        write_status({"ok": True} if ok else {"ok": False, "error": {"type": "SystemExit", "message": str(exc.code)}})
        raise
    except BaseException as exc:  # the job's own failure: report it, exit 1
        tb = exc.__traceback__.tb_next if exc.__traceback__ else None  # hide this runner's frame
        traceback.print_exception(type(exc), exc, tb)
        sys.stderr.flush()
        error = {"type": type(exc).__name__, "message": str(exc)[:2000], "memory": isinstance(exc, MemoryError)}
        write_status({"ok": False, "error": error})
        sys.exit(1)
    sys.stdout.flush()
    if not write_status(record):
        sys.stderr.flush()
        os._exit(1)  # the record was replaced by an error record: not a success
    _finish()


def _finish():
    """Skips interpreter finalization (a few ms per job) when nothing could observe the difference:
    no other threads and no atexit handlers. Otherwise exit normally, so threads are joined."""
    import atexit
    import threading

    if threading.active_count() == 1 and atexit._ncallbacks() == 0:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


if __name__ == "__main__":
    main()
