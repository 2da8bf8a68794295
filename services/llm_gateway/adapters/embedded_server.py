"""The embedded model server's entry point: `python -m services.llm_gateway.adapters.embedded_server ARGS`.

ARGS are llama_cpp.server's own command-line flags. Before handing over to `llama_cpp.server`'s main this
module makes the child safe to run inside the gateway's environment:

* **Parent death.** On Linux it sets PR_SET_PDEATHSIG (SIGTERM), so the child is stopped when the gateway
  dies, even by SIGKILL. The gateway passes its pid in AGENT_CANVAS_GATEWAY_PID; if the parent is already
  gone when prctl runs (the child was reparented), the child exits at once. A watchdog thread also polls the
  parent pid (for platforms without prctl, and to hard-exit if a SIGTERM-ed server does not stop in time).
* **Environment.** llama_cpp.server reads its settings (pydantic-settings, case-insensitive, no prefix) from
  the environment too, and its main even passes `os.getenv("HOST")`/`os.getenv("PORT")` to uvicorn over the
  `--host`/`--port` flags. The gateway itself runs with PORT (and HOST, MODEL, API_KEY, ...) set in
  containers and Kubernetes, so every variable that names a llama_cpp.server setting (and CONFIG_FILE) is
  removed from os.environ first: only the flags the gateway passes configure the child.

Nothing here imports grpc or the gateway; the module is kept light so prctl runs as early as possible.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Iterable, MutableMapping

PARENT_PID_ENV = "AGENT_CANVAS_GATEWAY_PID"
PR_SET_PDEATHSIG = 1
EXIT_PARENT_GONE = 75
"""Exit code when the gateway was already gone before the child could arm its parent-death signal."""
WATCHDOG_INTERVAL_S = 1.0
WATCHDOG_GRACE_S = 10.0
"""After the parent is gone and SIGTERM was delivered, the child is hard-exited after this long."""

# Read by llama_cpp.server.__main__ directly (not a settings field) and loads a whole config file.
_EXTRA_VARIABLES = ("CONFIG_FILE",)


def settings_variables() -> set[str]:
    """Upper-cased names of every environment variable llama_cpp.server's settings would read."""
    from llama_cpp.server import settings as llama_settings

    names: set[str] = {name.upper() for name in _EXTRA_VARIABLES}
    for model in (llama_settings.Settings, llama_settings.ServerSettings, llama_settings.ModelSettings,
                  llama_settings.ConfigFileSettings):
        config = getattr(model, "model_config", {}) or {}
        prefix = str(config.get("env_prefix", "") or "")
        for name, field in model.model_fields.items():
            names.add(f"{prefix}{name}".upper())
            names.update(alias.upper() for alias in _aliases(field))  # pydantic-settings applies no prefix to aliases
    return names


def _aliases(field: object) -> Iterable[str]:
    for attribute in ("alias", "validation_alias"):
        value = getattr(field, attribute, None)
        if isinstance(value, str):
            yield value
        elif value is not None and hasattr(value, "choices"):  # pydantic AliasChoices
            yield from (choice for choice in value.choices if isinstance(choice, str))


def scrub_environment(environ: MutableMapping[str, str], names: set[str]) -> list[str]:
    """Remove the variables in `names` (compared case-insensitively) from `environ`; returns what was removed."""
    removed = [key for key in list(environ) if key.upper() in names]
    for key in removed:
        del environ[key]
    return sorted(removed)


def _prctl_pdeathsig(sig: int) -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _parent_gone(expected: int | None) -> bool:
    # Without the gateway's pid (run by hand) there is nothing to compare with: the gateway may itself be
    # pid 1 in a container, and a dead parent may be replaced by a subreaper rather than by init.
    return expected is not None and os.getppid() != expected


def arm_parent_death(environ: MutableMapping[str, str]) -> int | None:
    """Arm PR_SET_PDEATHSIG and exit if the parent is already gone; returns the expected parent pid."""
    raw = environ.pop(PARENT_PID_ENV, "")
    expected = int(raw) if raw.isdigit() else None
    _prctl_pdeathsig(signal.SIGTERM)
    # prctl only covers a parent death *after* it ran; a parent that died before has already reparented us.
    if _parent_gone(expected):
        os._exit(EXIT_PARENT_GONE)
    return expected


def _watchdog(expected: int | None) -> None:
    if expected is None:
        return
    while not _parent_gone(expected):
        time.sleep(WATCHDOG_INTERVAL_S)
    # The parent is gone: SIGTERM ourselves (the kernel already did if prctl worked; a second one is harmless
    # for uvicorn), then make sure we do not outlive it by more than the grace period.
    try:
        os.kill(os.getpid(), signal.SIGTERM)
    except OSError:
        pass
    time.sleep(WATCHDOG_GRACE_S)
    os._exit(1)


def main(argv: list[str] | None = None) -> None:
    expected = arm_parent_death(os.environ)
    threading.Thread(target=_watchdog, args=(expected,), name="parent-watchdog", daemon=True).start()
    scrub_environment(os.environ, settings_variables())
    from llama_cpp.server.__main__ import main as llama_main

    sys.argv = ["llama_cpp.server", *(sys.argv[1:] if argv is None else argv)]
    llama_main()


if __name__ == "__main__":
    main()
