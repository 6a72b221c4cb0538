"""Who may connect and what they may do, for every protocol: principals (`principals`), logins (`users`: passwords
and SCRAM credentials), Kafka's ACL model (`acls`) and the one place that answers (`authorizer`), and client quotas
(`quotas`), and their administration (`admin`). `Security` bundles them for a gateway; each protocol's thin layer
asks it and answers in its own way (`protocols/kafka/authz.py`, `protocols/native/authz.py`,
`protocols/tank/authz.py`, the admin listener's `admin/access.py`).

Authentication is *required* on a listener when its clients must log in or show a client certificate: Kafka with
`auth.kafka_sasl_plain` or `auth.kafka_sasl_scram`, native with `auth.native_login` or `auth.native_token`, and
any listener with `tls_client_auth: required`. Once one listener requires it, `allow_everyone_if_no_acl_found` is
off for all, and the admin listener asks who you are too.

The native protocol's legacy token logs in as `TOKEN_PRINCIPAL`, a super user (whoever had the token could do
everything before ACLs existed; it still can); its type is not `User`, so no user's login can become it.
"""

from __future__ import annotations

import logging

from .admin import SecurityAdmin
from .acls import Acl, AclFilter, AclInvalid, Operation, PatternType, Permission, ResourceType
from .authorizer import CLUSTER, Authorizer
from .principals import ANONYMOUS, user_principal
from .quotas import Quotas
from .users import Users

log = logging.getLogger("logway.gateway.security")

__all__ = ["ANONYMOUS", "Acl", "AclFilter", "AclInvalid", "Authorizer", "CLUSTER", "Operation", "PatternType",
           "Permission", "ResourceType", "Security", "TOKEN_PRINCIPAL", "Users", "listener_requires_login",
           "authentication_required", "user_principal"]

#: The principal of a native login with the shared token (`auth.native_token`).
TOKEN_PRINCIPAL = "Token:native"


def listener_requires_login(config, name: str) -> bool:
    """Whether clients of listener `name` must log in (a login request: SASL, native Auth) before anything else."""
    auth = config.auth
    if name == "kafka":
        return auth.kafka_sasl_plain or auth.kafka_sasl_scram
    if name == "native":
        return auth.native_login or bool(auth.native_token)
    return False


def authentication_required(config) -> bool:
    """Whether some enabled listener requires its clients to authenticate (a login or a client certificate)."""
    return any(lc.enabled and (listener_requires_login(config, name) or lc.tls_client_auth == "required")
               for name, lc in config.listeners.items() if name != "admin")


def super_users(config) -> frozenset[str]:
    """`auth.super_users`, and the native token's principal when a token is set."""
    names = {item.strip() for item in config.auth.super_users.split(";") if item.strip()}
    if config.auth.native_token:
        names.add(TOKEN_PRINCIPAL)
    return frozenset(names)


class Security:
    """A gateway's users, authorizer, quotas and their administration, over the storage backend's `SecurityState`
    (`state`; None: a gateway without one, e.g. a supervisor's)."""

    def __init__(self, config, state, in_thread) -> None:
        """`in_thread(fn, *args)`: runs blocking work (durable changes) off the event loop."""
        self.config = config
        self.state = state
        self.required = authentication_required(config)
        self.users = Users(config.auth.users, state)
        allow = config.auth.allow_everyone_if_no_acl_found and not self.required
        self.authorizer = Authorizer(state, super_users(config), allow)
        self.quotas = Quotas(state)
        self.admin = SecurityAdmin(self, in_thread)

    async def follow(self, interval: float, in_thread) -> None:
        """(workers: N, not worker 0) Read the security store again every `interval` seconds when its writer changed
        it, forever: the ACLs, users and quotas worker 0 changed are served here too."""
        import trio

        while True:
            await trio.sleep(interval)
            if await in_thread(self.state.reload):
                self.authorizer.reload()  # (users and quotas see the store's version move by themselves)

    def notes(self) -> list[str]:
        """What to log at start about who may do what."""
        if not self.required:
            return []
        count = len(self.authorizer.acls())
        return [f"authorization: {count} ACL(s); a resource no ACL applies to is open to none but the super users "
                f"({', '.join(sorted(self.authorizer.super_users)) or 'none'})"]
