"""A prebuilt matplotlib font cache for Python jobs.

matplotlib builds `fontlist-*.json` on its first import in a fresh MPLCONFIGDIR (about 0.3 s on the
CI machine), and every job starts fresh. At start-up the backend runs one trusted job (our code, in
an ordinary sandbox, so the font paths it records are the ones jobs see) that builds the list and
returns it as an artifact. Workers spawned afterwards get it read-only; the runner copies it into the
job's MPLCONFIGDIR. Jobs can never write to it, so no job can influence another through it.
"""

from __future__ import annotations

import json
import logging
import os
import re
from pathlib import Path

from services.sandbox.core.models import ExecMode, JobSpec, Limits
from services.sandbox.core.ports import SandboxBackend

logger = logging.getLogger(__name__)

MOUNT = "/opt/agentcanvas/mplcache"
_FONTLIST = re.compile(r"^fontlist-v[0-9.]+\.json$")
_BUILD_CODE = """
import glob, os, shutil
import matplotlib.font_manager
for path in glob.glob(os.path.join(os.environ['MPLCONFIGDIR'], 'fontlist-*.json')):
    shutil.copy(path, 'artifacts/')
"""


async def build_font_cache(backend: SandboxBackend, target: Path, limits: Limits) -> Path | None:
    """Runs the build job and stores the font list under `target`; None when matplotlib is absent."""
    job = JobSpec(job_id="font-cache", language="python", code=_BUILD_CODE, arguments={}, mode=ExecMode.SCRIPT,
                  limits=limits)
    running = await backend.launch(job)
    try:
        async for _ in running.output():
            pass
        raw = await running.wait()
        await running.kill()
        collected = await running.collect(4, 8 << 20)
    finally:
        await running.kill()
        await running.cleanup()
    files = [a for a in collected.artifacts if _FONTLIST.match(a.name) and not a.truncated]
    if raw.code != 0 or not files:
        logger.info("no matplotlib font cache (matplotlib not importable in the sandbox?)")
        return None
    target.mkdir(parents=True, exist_ok=True)
    os.chmod(target, 0o755)
    for artifact in files:
        json.loads(artifact.content)  # a font list is JSON; refuse anything else
        path = target / artifact.name
        path.write_bytes(artifact.content)
        os.chmod(path, 0o644)
    logger.info("matplotlib font cache ready in %s", target)
    return target
