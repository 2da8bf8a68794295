"""Runs inside the sandbox under the system Python (-I -S -B -u), as uid 65534, with no network.

Started ahead of time by the warm pool, it blocks reading one job (JSON) until EOF, lowers its
rlimits to the job's, runs the code, and writes a status record to a separate channel (an inherited
fd or a file), never in-band on stdout. It runs exactly one job, then exits.

argv: --job (fd:N | file:PATH) --status (fd:N | file:PATH) [--path DIR ...]
"""

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


def _status_writer(spec):
    kind, _, where = spec.partition(":")
    if kind == "fd":
        fd = int(where)
        os.write(fd, b"READY\n")  # the pool's signal that this interpreter is up and waiting
    else:
        fd = os.open(where, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.set_inheritable(fd, False)  # children of the job do not get the channel

    def write(record):
        data = json.dumps(record).encode()
        try:
            while data:
                data = data[os.write(fd, data):]
            os.close(fd)
        except OSError:
            pass

    return write


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


def _jsonable_result(value):
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError):
        return json.dumps(value, ensure_ascii=False, default=str, allow_nan=False) if _plain(value) else json.dumps(str(value))


def _plain(value):
    try:
        json.dumps(value, default=str, allow_nan=False)
        return True
    except (TypeError, ValueError):
        return False


def main():
    options = _parse_argv(sys.argv[1:])
    write_status = _status_writer(options["status"])
    job = _read_job(options["job"])
    devnull = os.open("/dev/null", os.O_RDONLY)
    if devnull != 0:
        os.dup2(devnull, 0)  # code that reads stdin gets EOF
        os.close(devnull)
    _apply_limits(job["limits"])
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
            record["result"] = _jsonable_result(entry(**job.get("arguments", {})))
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
    write_status(record)
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
