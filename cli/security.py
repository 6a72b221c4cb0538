"""`logway acls list|add|remove`, `logway users list|set|delete` and `logway quotas list|set|delete`: who may do
what, and how much, on a running gateway, over the native protocol (its ACL, user and quota requests), as a
principal allowed to (a super user, or Describe / Alter on the cluster; DescribeConfigs / AlterConfigs for quotas).

- `acls list` prints `resource_type name pattern principal host operation permission` per binding — every one, or
  those the options match (`--pattern match --topic T`: the bindings that apply to T). `acls add` adds one binding
  per `--operation`; `acls remove` removes every binding its options match (it needs at least one).
- `users list` prints `user mechanism iterations` per stored credential (users of the configuration's
  `auth.users` have none); `users set USER` makes a SCRAM credential of each mechanism (both by default) from a
  password salted here — read from stdin with `--password-stdin`, else `$LOGWAY_NEW_PASSWORD`, else asked twice on
  the terminal — so it never crosses the connection; `users delete USER` deletes its credentials.
- `quotas list` prints `user client_id quota value` per quota of each entity (Kafka's client quotas: a user, a
  client id, both, or a default, written `<default>` as kafka-configs writes it; `-` where the entity has no such
  part) — every entity, or those the `--for-…` options match; `quotas set` sets the quotas given of one entity,
  `quotas delete` deletes its quotas (all, or the `--quota` ones).
"""

from __future__ import annotations

import argparse
import getpass
import os
import sys

from logway.clients.native import NativeClient
from logway.codecs import native as nv
from logway.codecs.scram import MAX_ITERATIONS, MIN_ITERATIONS

from . import connect
from .connect import Usage
from .main import QUOTA_KEYS
from .output import Output

__all__ = ["acls", "quotas", "users"]

NEW_PASSWORD_ENV = "LOGWAY_NEW_PASSWORD"
_COLUMNS = ("resource_type", "name", "pattern", "principal", "host", "operation", "permission")
_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
#: How kafka-configs writes a default entity (the default user, the default client id).
DEFAULT_ENTITY = "<default>"


def acls(args: argparse.Namespace) -> int:
    return connect.run(args, _check_acls, _run_acls)


def users(args: argparse.Namespace) -> int:
    return connect.run(args, _check_users, _run_users)


def quotas(args: argparse.Namespace) -> int:
    return connect.run(args, _check_quotas, _run_quotas)


# -- ACLs --------------------------------------------------------------------------------------------------------

def _resource(args: argparse.Namespace) -> tuple[str | None, str | None]:
    for option, rtype in (("topic", "Topic"), ("group", "Group"), ("transactional_id", "TransactionalId")):
        name = getattr(args, option)
        if name is not None:
            if not name:
                raise Usage(f"--{option.replace('_', '-')} needs a name")
            return rtype, name
    return ("Cluster", "kafka-cluster") if args.cluster else (None, None)


def _check_acls(args: argparse.Namespace):
    rtype, name = _resource(args)
    if args.principal is not None and ":" not in args.principal:
        raise Usage(f"--principal expects TYPE:NAME (e.g. User:alice), got {args.principal!r}")
    if args.action == "add":
        pattern = "PREFIXED" if args.prefixed else "LITERAL"
        permission = "Deny" if args.deny else "Allow"
        return [nv.AclEntry(rtype, name, pattern, args.principal, args.host, op, permission)
                for op in dict.fromkeys(args.operation)]
    if len(args.operation) > 1:
        raise Usage("list and remove take one --operation at most")
    flt = nv.AclEntry(rtype, name, None if args.pattern == "any" else args.pattern.upper(), args.principal,
                      args.host, args.operation[0] if args.operation else None,
                      args.permission.capitalize() if args.permission else None)
    if args.action == "remove" and flt == nv.AclEntry():
        raise Usage("acls remove needs at least one of --topic, --group, --transactional-id, --cluster, --principal, "
                    "--host, --operation, --permission (to remove every ACL: --principal of each, or --topic '*' …)")
    return flt


def _run_acls(client: NativeClient, args: argparse.Namespace, checked, out: Output) -> int:
    if args.action == "add":
        client.create_acls(checked)
        for acl in checked:
            out.result(f"added: {_sentence(acl)}", **_fields(acl), added=True)
        return 0
    found = client.describe_acls(checked) if args.action == "list" else client.delete_acls(checked)
    if args.action == "list":
        out.table(_COLUMNS, ([getattr(a, c) for c in _COLUMNS] for a in found))
        return 0
    for acl in found:
        out.result(f"removed: {_sentence(acl)}", **_fields(acl), removed=True)
    if not found:
        out.result("no ACL matched: nothing removed", removed=False)
    return 0


def _fields(acl: nv.AclEntry) -> dict:
    return {c: getattr(acl, c) for c in _COLUMNS}


def _sentence(acl: nv.AclEntry) -> str:
    pattern = "starting with " if acl.pattern == "PREFIXED" else ""
    host = "" if acl.host == "*" else f" from {acl.host}"
    return (f"{acl.permission} {acl.principal}{host} {acl.operation} on {acl.resource_type} {pattern}"
            f"{acl.name!r}")


# -- users -------------------------------------------------------------------------------------------------------

def _check_users(args: argparse.Namespace):
    if args.action != "set":
        return None
    if not MIN_ITERATIONS <= args.iterations <= MAX_ITERATIONS:
        raise Usage(f"--iterations must be {MIN_ITERATIONS}..{MAX_ITERATIONS}, got {args.iterations}")
    return _new_password(args)


def _new_password(args: argparse.Namespace) -> str:
    if args.password_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
    elif os.environ.get(NEW_PASSWORD_ENV) is not None:
        password = os.environ[NEW_PASSWORD_ENV]
    elif sys.stdin.isatty():
        password = getpass.getpass(f"new password of {args.name}: ")
        if getpass.getpass("again: ") != password:
            raise Usage("the passwords differ")
    else:
        raise Usage(f"users set: give the password on stdin with --password-stdin, or in ${NEW_PASSWORD_ENV}")
    if not password:
        raise Usage("the password is empty")
    return password


def _run_users(client: NativeClient, args: argparse.Namespace, password, out: Output) -> int:
    if args.action == "list":
        out.table(("user", "mechanism", "iterations"),
                  ((u.user, m, i) for u in client.describe_users(args.names or None) for m, i in u.credentials))
        return 0
    mechanisms = args.scram or _MECHANISMS
    if args.action == "set":
        for mechanism in mechanisms:
            client.set_password(args.name, password, mechanism, args.iterations)
        out.result(f"set the password of {args.name} ({', '.join(mechanisms)}, {args.iterations} iterations)",
                   user=args.name, mechanisms=list(mechanisms), iterations=args.iterations)
    else:
        have = {m for u in client.describe_users([args.name]) for m, _ in u.credentials}
        gone = [m for m in mechanisms if m in have]
        for mechanism in gone:
            client.delete_credential(args.name, mechanism)
        out.result(f"deleted the credentials of {args.name}: {', '.join(gone) or 'none'}", user=args.name,
                   mechanisms=gone)
    return 0


# -- quotas ------------------------------------------------------------------------------------------------------

def _entity(args: argparse.Namespace) -> list[tuple[str, str | None]]:
    """The entity the `--for-…` options name: (type, name or None for the default) pairs."""
    entity = []
    for entity_type, name, default in (("user", args.for_user, args.for_default_user),
                                       ("client-id", args.for_client_id, args.for_default_client_id)):
        if name is not None or default:
            entity.append((entity_type, name))
    return entity


def _check_quotas(args: argparse.Namespace):
    entity = _entity(args)
    if args.action == "list":
        return entity
    if not entity:
        raise Usage(f"quotas {args.action} needs an entity: --for-user, --for-default-user, --for-client-id or "
                    "--for-default-client-id")
    if args.action == "set":
        values = {key: getattr(args, key) for key in QUOTA_KEYS if getattr(args, key) is not None}
        if not values:
            raise Usage("quotas set needs a quota: " + ", ".join("--" + k.replace("_", "-") for k in QUOTA_KEYS))
        return entity, values
    return entity, list(dict.fromkeys(args.quota))


def _run_quotas(client: NativeClient, args: argparse.Namespace, checked, out: Output) -> int:
    if args.action == "list":
        found = client.describe_quotas([nv.QuotaComponent(t, n, n is None) for t, n in checked], args.strict)
        out.table(("user", "client_id", "quota", "value"),
                  ((*_parts(q.entity), key, _number(value)) for q in found for key, value in sorted(q.values.items())))
        return 0
    entity, what = checked
    user, client_id = _parts(entity)
    if args.action == "set":
        client.alter_quotas(entity, set=what)
        out.result(f"set the quotas of {_described(entity)}: "
                   + ", ".join(f"{k}={_number(v)}" for k, v in what.items()),
                   user=user, client_id=client_id, quotas={k: _number(v) for k, v in what.items()})
        return 0
    if not what:  # every quota the entity has
        what = [key for q in client.describe_quotas([nv.QuotaComponent(t, n, n is None) for t, n in entity], True)
                if sorted(q.entity) == sorted(entity) for key in sorted(q.values)]
    if what:
        client.alter_quotas(entity, delete=what)
    out.result(f"deleted the quotas of {_described(entity)}: {', '.join(what) or 'none'}", user=user,
               client_id=client_id, deleted=what)
    return 0


def _parts(entity) -> tuple[str | None, str | None]:
    """(user, client id) of an entity for a table: a name, `<default>`, or None where it has no such part."""
    names = dict(entity)
    return tuple(DEFAULT_ENTITY if t in names and names[t] is None else names.get(t) for t in ("user", "client-id"))


def _described(entity) -> str:
    return ", ".join(f"the default {t}" if n is None else f"{t} {n!r}" for t, n in entity)


def _number(value: float) -> int | float:
    return int(value) if float(value).is_integer() else value
