"""Bearer-token authentication: tokens map to a tenant, a user and a role.

Tokens come from the config (`auth.tokens`, each with `token`, `token_env` or `token_file`, plus
`tenant`, `user` and `role`) and, in embedded mode, from a local token generated once under the data
directory (`<data_dir>/token`, mode 0600). Only SHA-256 digests are kept in memory.

A principal with role "service" (the orchestrator calling the store on a user's behalf during a
takeover, say) may name the user it acts for in the `x-agentcanvas-on-behalf-of: tenant/user` header.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from services.common.context import Identity
from services.common.errors import InvalidArgumentError, UnauthenticatedError
from services.common.logging import register_secrets
from services.common.settings import Config

AUTHORIZATION = "authorization"
ON_BEHALF_OF = "x-agentcanvas-on-behalf-of"
LOCAL_TENANT = "local"
LOCAL_USER = "local"


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


def ensure_local_token(data_dir: Path) -> str:
    """Return the embedded-mode token, creating it (0600) on first use."""
    path = data_dir / "token"
    if path.exists():
        return path.read_text().strip()
    data_dir.mkdir(parents=True, exist_ok=True)
    token = "ac_" + secrets.token_urlsafe(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(token + "\n")
    return token


def client_token(config: Config, env: Mapping[str, str] | None = None) -> str | None:
    """The token a client (CLI or a service calling a peer) presents."""
    env = os.environ if env is None else env
    if env.get("AGENT_CANVAS_TOKEN"):
        return env["AGENT_CANVAS_TOKEN"]
    auth = config.section("auth")
    if auth.get("client_token"):
        return str(auth["client_token"])
    local = config.data_dir / "token"
    return local.read_text().strip() if local.exists() else None


@dataclass(frozen=True)
class TokenAuthenticator:
    """Maps a bearer token to an Identity in constant time per candidate."""

    entries: tuple[tuple[bytes, Identity], ...]

    @classmethod
    def from_config(cls, config: Config, env: Mapping[str, str] | None = None) -> "TokenAuthenticator":
        env = os.environ if env is None else env
        entries: list[tuple[bytes, Identity]] = []
        tokens: list[str] = []
        auth = config.section("auth")
        for index, item in enumerate(auth.get("tokens") or []):
            where = f"auth.tokens[{index}]"
            if not isinstance(item, Mapping):
                raise InvalidArgumentError.for_field(where, "must be a mapping")
            token = item.get("token")
            if not token and item.get("token_env"):
                token = env.get(str(item["token_env"]))
            if not token and item.get("token_file"):
                path = Path(str(item["token_file"])).expanduser()
                try:
                    token = path.read_text().strip()
                except (OSError, UnicodeDecodeError) as exc:  # never the file's content: it is a secret
                    reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
                    raise InvalidArgumentError.for_field(f"{where}.token_file", f"{path} cannot be read ({reason})") from None
            if not token:
                raise InvalidArgumentError.for_field(where, "needs token, token_env or token_file")
            identity = Identity(str(item.get("tenant", LOCAL_TENANT)), str(item.get("user", LOCAL_USER)), str(item.get("role", "user")))
            entries.append((_digest(str(token)), identity))
            tokens.append(str(token))
        if auth.get("embedded", True):
            token = ensure_local_token(config.data_dir)
            entries.append((_digest(token), Identity(LOCAL_TENANT, LOCAL_USER, "service")))
            tokens.append(token)
        register_secrets(tokens)  # a token_file's or the local token is not in the config to find
        return cls(tuple(entries))

    def authenticate(self, metadata: Iterable[tuple[str, str | bytes]]) -> tuple[Identity, str]:
        """Return (identity, raw token) or raise UnauthenticatedError."""
        headers = {key.lower(): value for key, value in metadata}
        raw = headers.get(AUTHORIZATION)
        if not isinstance(raw, str) or not raw.lower().startswith("bearer "):
            raise UnauthenticatedError("missing bearer token: send 'authorization: Bearer <token>'", reason="TOKEN_MISSING")
        token = raw[7:].strip()
        digest = _digest(token)
        found: Identity | None = None
        for candidate, identity in self.entries:
            if hmac.compare_digest(candidate, digest):
                found = identity
        if found is None:
            raise UnauthenticatedError("invalid bearer token", reason="TOKEN_INVALID")
        on_behalf = headers.get(ON_BEHALF_OF)
        if isinstance(on_behalf, str) and on_behalf:
            if not found.is_service:
                raise UnauthenticatedError(f"{ON_BEHALF_OF} is only accepted from service tokens", reason="ON_BEHALF_FORBIDDEN")
            tenant, _, user = on_behalf.partition("/")
            if not tenant or not user:
                raise UnauthenticatedError(f"{ON_BEHALF_OF} must be 'tenant/user'", reason="ON_BEHALF_MALFORMED")
            found = Identity(tenant, user, "user")
        return found, token
