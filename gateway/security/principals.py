"""Principals: who a connection is, as Kafka names it (`User:alice`), and how a verified client certificate's
subject becomes one (`PrincipalMapper`, Kafka's `ssl.principal.mapping.rules`).

A connection's principal is, in order: the user it logged in as (Kafka SASL, the native protocol's Auth, HTTP Basic
on the admin listener), else the subject of the client certificate its TLS listener verified (mutual TLS), else the
principal its listener names (`listeners.<name>.principal`, `User:ANONYMOUS` by default — TANK has no
authentication request, so this and certificates are its only principals).

A certificate's subject is written as Kafka writes it (RFC 2253, as Java's `X500Principal.getName()`: the most
specific name first, `CN=alice,OU=eng,O=Acme,C=US`), then the rules map it to a name: `DEFAULT` (the whole subject),
or `RULE:<regex>/<replacement>/[L|U]` — the first rule whose regex matches the whole subject gives the name (the
replacement with `$1`… groups, lower- or upper-cased), as in Kafka. A subject no rule maps is refused (the
connection is closed), as Kafka refuses it.
"""

from __future__ import annotations

import functools
import re

__all__ = ["ANONYMOUS", "USER", "PrincipalMapper", "NoMatchingRule", "mapper", "parse_principal", "subject_name",
           "user_principal"]

USER = "User"
ANONYMOUS = "User:ANONYMOUS"

#: Python's `ssl` names of subject attributes -> the short names RFC 2253 (and Java) use.
_SHORT_NAMES = {"commonName": "CN", "countryName": "C", "localityName": "L", "stateOrProvinceName": "ST",
                "organizationName": "O", "organizationalUnitName": "OU", "streetAddress": "STREET",
                "domainComponent": "DC", "userId": "UID", "emailAddress": "EMAILADDRESS",
                "serialNumber": "SERIALNUMBER", "surname": "SURNAME", "givenName": "GIVENNAME", "title": "T"}
#: One rule of a mapping: DEFAULT, or RULE:pattern/replacement/ with an optional L or U (Kafka's grammar: `\` escapes
#: a `/` in the pattern or replacement).
_RULE = re.compile(r"\s*(?:(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?))\s*(?:,|$)")


class NoMatchingRule(ValueError):
    """No mapping rule gives a name for a certificate's subject."""


def user_principal(name: str) -> str:
    return f"{USER}:{name}"


def parse_principal(text: str) -> tuple[str, str]:
    """(type, name) of `Type:name`; ValueError when it is not one (Kafka: principal type and name, both non-empty)."""
    kind, sep, name = text.partition(":")
    if not sep or not kind or not name:
        raise ValueError(f"{text!r} is not a principal (expected Type:name, e.g. User:alice)")
    return kind, name


def _escape(value: str) -> str:
    out = re.sub(r'([,+"\\<>;=])', r"\\\1", value)
    if out.startswith((" ", "#")):
        out = "\\" + out
    if out.endswith(" ") and not out.endswith("\\ "):
        out = out[:-1] + "\\ "
    return out


def subject_name(subject) -> str:
    """The RFC 2253 form of a subject as `ssl.SSLSocket.getpeercert()` gives it (a tuple of RDNs, each a tuple of
    (attribute, value) pairs, in the certificate's order)."""
    rdns = []
    for rdn in reversed(subject):
        rdns.append("+".join(f"{_SHORT_NAMES.get(attr, attr)}={_escape(value)}" for attr, value in rdn))
    return ",".join(rdns)


class PrincipalMapper:
    """Kafka's `ssl.principal.mapping.rules`: `rules` is the setting's text (ValueError when it does not parse)."""

    def __init__(self, rules: str) -> None:
        self.rules: list[tuple[re.Pattern, str, str] | None] = []  # None: DEFAULT
        text = rules.strip() or "DEFAULT"
        position = 0
        while position < len(text):
            match = _RULE.match(text, position)
            if match is None or match.end() == position:
                raise ValueError(f"invalid principal mapping rule at {text[position:]!r} (expected DEFAULT or "
                                 "RULE:pattern/replacement/[L|U], separated by commas)")
            position = match.end()
            if match.group(1):
                self.rules.append(None)
                continue
            try:
                pattern = re.compile(match.group(2).replace("\\/", "/"))
            except re.error as exc:
                raise ValueError(f"invalid principal mapping rule {match.group(0).strip()!r}: {exc}") from None
            replacement = re.sub(r"\$(\d)", r"\\\1", match.group(3).replace("\\/", "/"))
            self.rules.append((pattern, replacement, match.group(4)))

    def name(self, subject: str) -> str:
        """The name the first rule that applies gives `subject` (NoMatchingRule when none does)."""
        for rule in self.rules:
            if rule is None:
                return subject
            pattern, replacement, case = rule
            if pattern.fullmatch(subject):
                try:
                    name = pattern.sub(replacement, subject)
                except (re.error, IndexError):  # a group the pattern does not have
                    continue
                return name.lower() if case == "L" else name.upper() if case == "U" else name
        raise NoMatchingRule(f"no principal mapping rule applies to {subject!r}")


@functools.lru_cache(maxsize=8)
def mapper(rules: str) -> PrincipalMapper:
    """The mapper of a rules setting, parsed once."""
    return PrincipalMapper(rules)
