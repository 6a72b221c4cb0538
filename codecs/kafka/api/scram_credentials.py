"""SCRAM credential APIs (KIP-554): DescribeUserScramCredentials (50) and AlterUserScramCredentials (51), v0 only
(flexible).

Mechanisms are Kafka's `ScramMechanism` codes: 1 = SCRAM-SHA-256, 2 = SCRAM-SHA-512 (0 unknown). An upsertion
carries the salt and the salted password (the client salts: the password never reaches the broker), from which
the broker keeps StoredKey and ServerKey (`codecs.scram`). A null user list describes every user.

Quirk: librdkafka (2.x) ends its AlterUserScramCredentials request with one more empty tagged-field section than
the layout has (it writes the body's own, then its request finalizer writes another); Kafka's brokers ignore bytes
left after a flexible body, and so does the codec (`connection.py`).

Bounds: every array, string and bytes field is bounded by the frame (`primitives`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..message import message, struct
from ..primitives import EMPTY_TAGGED_FIELDS, Array, Bytes, Int8, Int16, Int32, NullableArray, NullableString, String

__all__ = ["DESCRIBE_USER_SCRAM_CREDENTIALS_KEY", "ALTER_USER_SCRAM_CREDENTIALS_KEY", "MECHANISM_CODES",
           "AlterUserScramCredentialsRequest", "AlterUserScramCredentialsResponse", "AlterUserScramCredentialsResult",
           "CredentialInfo", "DescribeUserScramCredentialsRequest", "DescribeUserScramCredentialsResponse",
           "DescribeUserScramCredentialsResult", "ScramCredentialDeletion", "ScramCredentialUpsertion", "UserName",
           "SCHEMAS", "TRAILER"]

DESCRIBE_USER_SCRAM_CREDENTIALS_KEY, ALTER_USER_SCRAM_CREDENTIALS_KEY = 50, 51
#: Kafka's ScramMechanism code -> mechanism name.
MECHANISM_CODES = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}


@dataclass(slots=True)
class UserName:
    name: str = ""


@dataclass(slots=True)
class DescribeUserScramCredentialsRequest:
    users: list[UserName] | None = None


@dataclass(slots=True)
class CredentialInfo:
    mechanism: int = 0
    iterations: int = 0


@dataclass(slots=True)
class DescribeUserScramCredentialsResult:
    user: str = ""
    error_code: int = 0
    error_message: str | None = None
    credential_infos: list[CredentialInfo] = field(default_factory=list)


@dataclass(slots=True)
class DescribeUserScramCredentialsResponse:
    throttle_time_ms: int = 0
    error_code: int = 0
    error_message: str | None = None
    results: list[DescribeUserScramCredentialsResult] = field(default_factory=list)


@dataclass(slots=True)
class ScramCredentialDeletion:
    name: str = ""
    mechanism: int = 0


@dataclass(slots=True)
class ScramCredentialUpsertion:
    name: str = ""
    mechanism: int = 0
    iterations: int = 0
    salt: bytes = b""
    salted_password: bytes = b""


@dataclass(slots=True)
class AlterUserScramCredentialsRequest:
    deletions: list[ScramCredentialDeletion] = field(default_factory=list)
    upsertions: list[ScramCredentialUpsertion] = field(default_factory=list)



@dataclass(slots=True)
class AlterUserScramCredentialsResult:
    user: str = ""
    error_code: int = 0
    error_message: str | None = None


@dataclass(slots=True)
class AlterUserScramCredentialsResponse:
    throttle_time_ms: int = 0
    results: list[AlterUserScramCredentialsResult] = field(default_factory=list)


def _v0(cls: type, **fields):
    return message(cls, 0, flexible_since=0, **fields)


SCHEMAS = {
    DESCRIBE_USER_SCRAM_CREDENTIALS_KEY: (
        _v0(DescribeUserScramCredentialsRequest, users=NullableArray(struct(UserName, name=String))),
        _v0(DescribeUserScramCredentialsResponse, throttle_time_ms=Int32, error_code=Int16,
            error_message=NullableString, results=Array(struct(
                DescribeUserScramCredentialsResult, user=String, error_code=Int16, error_message=NullableString,
                credential_infos=Array(struct(CredentialInfo, mechanism=Int8, iterations=Int32)))))),
    ALTER_USER_SCRAM_CREDENTIALS_KEY: (
        _v0(AlterUserScramCredentialsRequest,
            deletions=Array(struct(ScramCredentialDeletion, name=String, mechanism=Int8)),
            upsertions=Array(struct(ScramCredentialUpsertion, name=String, mechanism=Int8, iterations=Int32,
                                    salt=Bytes, salted_password=Bytes))),
        _v0(AlterUserScramCredentialsResponse, throttle_time_ms=Int32, results=Array(struct(
            AlterUserScramCredentialsResult, user=String, error_code=Int16, error_message=NullableString)))),
}
