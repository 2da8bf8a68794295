"""The one authorisation policy of the store. Every RPC calls `authorize` before it reads or writes.

Tenancy model:
- The caller's tenant and user come from the bearer token (services.common.context.Identity).
- Tenant membership lives in the store. The first user seen for a tenant becomes its owner; a user
  whose id equals the tenant id (RAGFlow's personal tenant) is always an owner too. Owners add members
  with AddTenantMember. Authenticating with a tenant's token alone does not make a user a member.
- A canvas belongs to (tenant, owner). ME: only the owner sees it. TEAM: members of the tenant may
  read, run and edit it (title, description, avatar, tags, DSL, rollback). Only the owner may delete it,
  change its permission, or release it (the release flag and PublishCanvas): RAGFlow lets any team member
  do all of these, which is the mass-assignment weakness we fix.
- Sessions follow their canvas; deleting a session needs its creator or the canvas owner.
- Runs belong to the tenant and creator. Service principals (role "service" without on-behalf-of,
  i.e. orchestrator replicas) may act on every tenant's runs so that they can take over expired leases.

Denials (AIP-211): NOT_FOUND when the caller may not learn that the resource exists (other tenant, a ME
canvas of someone else, a TEAM canvas seen by a non-member), PERMISSION_DENIED when the caller may see
the resource but not perform the action.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field

from services.canvas_store.core.types import Permission, TenantRole
from services.common.errors import NotFoundError, PermissionDeniedError


class Action(enum.Enum):
    READ = "read"
    RUN = "run"
    EDIT = "edit"
    MANAGE = "manage"  # delete, change permission or release flag, publish
    DELETE_SESSION = "delete_session"
    READ_TENANT = "read_tenant"
    MANAGE_TENANT = "manage_tenant"
    READ_RUN = "read_run"
    CANCEL_RUN = "cancel_run"
    WRITE_RUN = "write_run"  # lease, commit, release: executing the run


class Kind(enum.Enum):
    CANVAS = "canvas"
    SESSION = "session"
    RUN = "run"
    TENANT = "tenant"


@dataclass
class Caller:
    """The authenticated caller; the tenant role is looked up lazily (most checks never need it)."""

    tenant_id: str
    user_id: str
    is_service: bool = False
    role_lookup: Callable[[], TenantRole | None] | None = None
    _role: TenantRole | None = field(default=None, init=False)
    _looked_up: bool = field(default=False, init=False)

    @property
    def role(self) -> TenantRole | None:
        if not self._looked_up:
            self._role = self.role_lookup() if self.role_lookup else None
            self._looked_up = True
        return self._role

    @property
    def is_member(self) -> bool:
        return self.role is not None


@dataclass(frozen=True)
class Target:
    """The facts about a resource the policy needs (read by the use case before deciding)."""

    kind: Kind
    tenant_id: str
    resource: str = ""
    owner_id: str = ""
    permission: Permission | None = None
    creator_id: str = ""


def _not_found(target: Target) -> NotFoundError:
    return NotFoundError(f"{target.kind.value} {target.resource!r} not found", resource_type=target.kind.value,
                         resource_name=target.resource)


def authorize(caller: Caller, action: Action, target: Target) -> None:
    """Raise NotFoundError or PermissionDeniedError unless `caller` may do `action` on `target`."""
    if target.kind is Kind.RUN:
        if caller.is_service:
            return
        if target.tenant_id != caller.tenant_id:
            raise _not_found(target)
        if target.creator_id == caller.user_id:
            return
        if caller.role is not TenantRole.OWNER:
            raise _not_found(target)
        # The tenant owner sees every run of the tenant and may stop one, but only its creator (or a service
        # acting for it) executes it: a lease or commit from the owner would write into someone else's run.
        if action is Action.WRITE_RUN:
            raise PermissionDeniedError("only the run's creator or a service principal may lease or commit it",
                                        reason="RUN_CREATOR_ONLY")
        return

    if target.tenant_id != caller.tenant_id:
        raise _not_found(target)

    if target.kind is Kind.TENANT:
        if action is Action.MANAGE_TENANT and caller.role is not TenantRole.OWNER:
            raise PermissionDeniedError("only an owner of the tenant may add members", reason="TENANT_OWNER_ONLY")
        if action is Action.READ_TENANT and not caller.is_member:
            raise PermissionDeniedError("only members of the tenant may list its members", reason="TENANT_MEMBERS_ONLY")
        return

    is_owner = target.owner_id == caller.user_id
    visible = is_owner or (target.permission is Permission.TEAM and caller.is_member)
    if not visible:
        raise _not_found(target)
    if action in (Action.READ, Action.RUN, Action.EDIT):
        return
    if action is Action.MANAGE and not is_owner:
        raise PermissionDeniedError("only the canvas owner may delete, publish or release it, or change its permission",
                                    reason="CANVAS_OWNER_ONLY")
    if action is Action.DELETE_SESSION and not (is_owner or target.creator_id == caller.user_id):
        raise PermissionDeniedError("only the session's creator or the canvas owner may delete it",
                                    reason="SESSION_OWNER_ONLY")



def permits(caller: Caller, action: Action, target: Target) -> bool:
    """Whether `authorize` would let `caller` do `action` on `target`, as a boolean.

    For answers that must not depend on why a check failed: an idempotent replay returns the recorded
    resource only when the caller could also Get it now, and otherwise behaves as if it were gone.
    """
    try:
        authorize(caller, action, target)
    except (NotFoundError, PermissionDeniedError):
        return False
    return True
