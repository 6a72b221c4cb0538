"""`logway acls list|add|remove` and `logway users list|set|delete`: who may do what on a running gateway, over the
native protocol (its ACL and user requests), as a principal allowed to (a super user, or Describe / Alter on the
cluster).

- `acls list` prints `resource_type name pattern principal host operation permission` per binding — every one, or
  those the options match (`--pattern match --topic T`: the bindings that apply to T). `acls add` adds one binding
  per `--operation`; `acls remove` removes every binding its options match (it needs at least one).
- `users list` prints `user mechanism iterations` per stored credential (users of the configuration's
  `auth.users` have none); `users set USER` makes a SCRAM credential of each mechanism (both by default) from a
  password salted here — read from stdin with `--password-stdin`, else `$LOGWAY_NEW_PASSWORD`, else asked twice on
  the terminal — so it never crosses the connection; `users delete USER` deletes its credentials.
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
from .output import Output

__all__ = ["acls", "users"]

NEW_PASSWORD_ENV = "LOGWAY_NEW_PASSWORD"
_COLUMNS = ("resource_type", "name", "pattern", "principal", "host", "operation", "permission")
_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")


def acls(args: argparse.Namespace) -> int:
    return connect.run(args, _check_acls, _run_acls)


def users(args: argparse.Namespace) -> int:
    return connect.run(args, _check_users, _run_users)


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
