"""The sandbox facade used by the gRPC adapter: validates a request, admits it, supervises the job."""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import AsyncIterator
from typing import Any

from services.common.errors import InvalidArgumentError, UnavailableError
from services.sandbox.core import observe, static_checks
from services.sandbox.core.admission import Admission
from services.sandbox.core.models import Event, ExecMode, JobSpec, Limits, Output, RuntimeInfo, canonical_language
from services.sandbox.core.ports import SandboxBackend
from services.sandbox.core.settings import FLOOR_LIMITS, SandboxSettings
from services.sandbox.core.supervisor import supervise

MAX_REQUEST_ID = 128

logger = logging.getLogger(__name__)


class Sandbox:
    """Runs jobs on one backend within the server's caps."""

    def __init__(self, backend: SandboxBackend, settings: SandboxSettings) -> None:
        self.backend = backend
        self.settings = settings
        self.admission = Admission(settings.max_concurrent, settings.max_queue)
        observe.track_admission(lambda: self.admission.running, lambda: self.admission.waiting)

    def runtimes(self) -> list[RuntimeInfo]:
        return self.backend.runtimes()

    def _version(self, language: str) -> str:
        for runtime in self.backend.runtimes():
            if runtime.language == language:
                return runtime.version
        raise UnavailableError(f"runtime {language!r} is not available on the {self.backend.name} backend")

    def prepare(
        self, *, language: str, code: str, arguments: dict[str, Any], mode: ExecMode, limits: Limits, request_id: str
    ) -> JobSpec:
        """Validates everything before a worker is taken."""
        canonical = canonical_language(language)
        encoded = code.encode("utf-8", "surrogatepass")
        if not code.strip():
            raise InvalidArgumentError.for_field("code", "must not be empty")
        if len(encoded) > self.settings.max_code_bytes:
            raise InvalidArgumentError.for_field("code", f"is {len(encoded)} bytes; the limit is {self.settings.max_code_bytes}")
        if len(request_id) > MAX_REQUEST_ID:  # echoed in Started and in every log line of the job
            raise InvalidArgumentError.for_field("request_id", f"is {len(request_id)} characters; the limit is {MAX_REQUEST_ID}")
        if len(json.dumps(arguments)) > self.settings.max_arguments_bytes:
            raise InvalidArgumentError.for_field("arguments", f"exceed {self.settings.max_arguments_bytes} bytes as JSON")
        resolved = limits.resolve(self.settings.defaults, self.settings.caps, FLOOR_LIMITS)
        return JobSpec(
            job_id=uuid.uuid4().hex[:16], language=canonical, code=code, arguments=arguments,
            mode=mode, limits=resolved, request_id=request_id,
        )

    async def execute(self, job: JobSpec) -> AsyncIterator[Event]:
        version = self._version(job.language)
        async with self.admission.slot():
            logger.info("job %s start", job.job_id, extra={"job_id": job.job_id, "language": job.language,
                                                             "request_id": job.request_id})
            events = observe.observed(
                supervise(self.backend, job, version, max_artifacts=self.settings.max_artifacts,
                          max_artifact_bytes=self.settings.max_artifact_bytes),
                job_id=job.job_id, language=job.language, backend=self.backend.name)
            try:
                first = True
                async for event in events:
                    yield event
                    if first and self.settings.static_checks == "warn":
                        for note in static_checks.findings(job.language, job.code):
                            yield Output("stderr", f"[sandbox advisory] {note}\n".encode())
                    first = False
            finally:
                await events.aclose()
