"""Opaque, tamper-proof keyset page tokens (AIP-158).

A token is base64url(JSON payload) "." base64url(HMAC-SHA256(secret, payload)[:16]). The payload holds
the keyset position (last sort value and id), an expiry, and a digest of everything the page depends
on (method, caller, filter, order). A changed filter, another caller, an edited or truncated token, or
an expired one gets INVALID_ARGUMENT on page_token. Tokens grant nothing: every page re-applies the
caller's visibility rules.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import time
from typing import Any

from services.common.errors import InvalidArgumentError

DEFAULT_TTL_S = 3 * 24 * 3600


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class PageTokenCodec:
    def __init__(self, secret: bytes, ttl_s: int = DEFAULT_TTL_S):
        self._secret = secret
        self._ttl_s = ttl_s

    @staticmethod
    def binding(*parts: Any) -> str:
        return hashlib.sha256(json.dumps(parts, default=str, separators=(",", ":")).encode()).hexdigest()[:32]

    def _sign(self, payload: bytes) -> bytes:
        return hmac.new(self._secret, payload, hashlib.sha256).digest()[:16]

    def encode(self, binding: str, position: list[Any]) -> str:
        payload = json.dumps({"b": binding, "p": position, "e": int(time.time()) + self._ttl_s},
                             separators=(",", ":")).encode()
        return f"{_b64(payload)}.{_b64(self._sign(payload))}"

    def decode(self, token: str, binding: str, field: str = "page_token") -> list[Any] | None:
        """The keyset position, or None for an empty token."""
        if not token:
            return None
        invalid = InvalidArgumentError.for_field(field, "is malformed, tampered with or expired; start again without it")
        body, _, signature = token.partition(".")
        try:
            payload = _unb64(body)
            expected = _unb64(signature)
        except (binascii.Error, ValueError):
            raise invalid from None
        if not hmac.compare_digest(self._sign(payload), expected):
            raise invalid
        try:
            data = json.loads(payload)
        except ValueError:
            raise invalid from None
        if not isinstance(data, dict) or data.get("e", 0) < time.time() or not isinstance(data.get("p"), list):
            raise invalid
        if data.get("b") != binding:
            raise InvalidArgumentError.for_field(field, "was issued for a different request (filter, order_by or caller changed)")
        return data["p"]
