"""SCRAM (RFC 5802, RFC 7677): SCRAM-SHA-256 and SCRAM-SHA-512 exchanges, both roles, sans-I/O.

Kafka's SASL/SCRAM and the native protocol's SCRAM login carry the same four messages:

    client-first  n,,n=<user>,r=<client nonce>
    server-first  r=<client nonce><server nonce>,s=<base64 salt>,i=<iterations>
    client-final  c=biws,r=<nonce>,p=<base64 ClientProof>
    server-final  v=<base64 ServerSignature>          (or e=<error>)

What a server keeps of a password is a `ScramCredential`: the salt, the iteration count, StoredKey = H(ClientKey)
and ServerKey — never the password, nor the salted password (from which both keys derive). `ScramServer` checks a
client's proof against it (one exchange, two messages in, two out); `ScramClient` is the other side (the CLI and
the tests). An unknown user gets a server-first message like any other (its salt derived from the name and a
secret of the server), so the exchange fails at the proof whether the user or the password was wrong.

Passwords are used as their UTF-8 bytes, as Kafka's clients and brokers do (no SASLprep). Nonces come from the
caller (`new_nonce()` for real exchanges), so a test can replay fixed ones. Bounds: a message is at most
`MAX_MESSAGE_BYTES`; iterations are `MIN_ITERATIONS`..`MAX_ITERATIONS` (Kafka's range).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from dataclasses import dataclass

from .errors import RemoteProtocolError

__all__ = ["MECHANISMS", "MIN_ITERATIONS", "MAX_ITERATIONS", "MAX_MESSAGE_BYTES", "SALT_BYTES", "ScramCredential",
           "ScramClient", "ScramError", "ScramServer", "check_password", "make_credential", "credential_from_salted",
           "new_nonce", "salted_password"]

#: mechanism -> hashlib name (Kafka's ScramMechanism ids: 1 = SHA-256, 2 = SHA-512).
MECHANISMS = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
#: Kafka refuses fewer iterations (RFC 7677's minimum for SHA-256) and more than 16384 (a login would cost the
#: client, and a PLAIN check of a SCRAM credential the server, too long).
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384
#: The longest SCRAM message either side accepts: a user name (Kafka's principal names are short), two nonces,
#: a salt and a proof fit in far less.
MAX_MESSAGE_BYTES = 4096
#: Salts made here (`make_credential`): Kafka's ScramFormatter uses as many random bytes.
SALT_BYTES = 16
_GS2_HEADER = b"n,,"
_CHANNEL_BINDING = base64.b64encode(_GS2_HEADER)  # "biws": no channel binding, no authzid


class ScramError(RemoteProtocolError):
    """A SCRAM message that is malformed, out of order, or a proof that does not match (authentication failed)."""


@dataclass(frozen=True, slots=True)
class ScramCredential:
    """What a server keeps to check a SCRAM login (RFC 5802 §3)."""

    mechanism: str
    salt: bytes
    iterations: int
    stored_key: bytes
    server_key: bytes


def new_nonce() -> str:
    """A fresh nonce: 24 random bytes, base64 (printable, no comma)."""
    return base64.b64encode(secrets.token_bytes(24)).decode()


def _hash(mechanism: str) -> str:
    try:
        return MECHANISMS[mechanism]
    except KeyError:
        raise ValueError(f"unknown SCRAM mechanism {mechanism!r} (known: {', '.join(MECHANISMS)})") from None


def salted_password(mechanism: str, password: bytes, salt: bytes, iterations: int) -> bytes:
    """Hi(password, salt, i): PBKDF2 with the mechanism's HMAC."""
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise ValueError(f"iterations must be {MIN_ITERATIONS}..{MAX_ITERATIONS}, got {iterations}")
    return hashlib.pbkdf2_hmac(_hash(mechanism), password, salt, iterations)


def credential_from_salted(mechanism: str, salted: bytes, salt: bytes, iterations: int) -> ScramCredential:
    """The credential of a salted password (what Kafka's AlterUserScramCredentials sends)."""
    name = _hash(mechanism)
    client_key = hmac.digest(salted, b"Client Key", name)
    return ScramCredential(mechanism, salt, iterations, hashlib.new(name, client_key).digest(),
                           hmac.digest(salted, b"Server Key", name))


def make_credential(mechanism: str, password: str, *, salt: bytes | None = None,
                    iterations: int = MIN_ITERATIONS) -> ScramCredential:
    """A new credential for `password` (a random salt unless given)."""
    salt = secrets.token_bytes(SALT_BYTES) if salt is None else salt
    return credential_from_salted(mechanism, salted_password(mechanism, password.encode(), salt, iterations), salt,
                                  iterations)


def check_password(credential: ScramCredential, password: str) -> bool:
    """Whether `password` is the one `credential` was made from (a PLAIN or HTTP Basic login checked against a
    SCRAM credential: one PBKDF2, in constant time for the comparison)."""
    salted = salted_password(credential.mechanism, password.encode(), credential.salt, credential.iterations)
    return hmac.compare_digest(credential_from_salted(credential.mechanism, salted, credential.salt,
                                                      credential.iterations).stored_key, credential.stored_key)


# ---------------------------------------------------------------------------------------------- messages

def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _unb64(text: str, what: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise ScramError(f"SCRAM: {what} is not base64") from None


def _escape(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


def _unescape(name: str) -> str:
    if "=" in name.replace("=3D", "").replace("=2C", ""):
        raise ScramError("SCRAM: a user name with a bad escape")
    return name.replace("=2C", ",").replace("=3D", "=")


def _attributes(message: bytes, what: str) -> list[tuple[str, str]]:
    """`a=value,b=value` as (name, value) pairs, in order."""
    if len(message) > MAX_MESSAGE_BYTES:
        raise ScramError(f"SCRAM: {what} over {MAX_MESSAGE_BYTES} bytes")
    try:
        text = message.decode("utf-8")
    except UnicodeDecodeError:
        raise ScramError(f"SCRAM: {what} is not UTF-8") from None
    out = []
    for part in text.split(","):
        name, sep, value = part.partition("=")
        if not sep or len(name) != 1:
            raise ScramError(f"SCRAM: malformed {what}")
        out.append((name, value))
    return out


def _xor(a: bytes, b: bytes) -> bytes:
    return bytes(x ^ y for x, y in zip(a, b))


class ScramServer:
    """One SCRAM exchange, the server's side: `first(client_first)` -> server-first, `final(client_final)` ->
    server-final; `user` is the authenticated name afterwards. `lookup(user)` gives a user's credential of this
    mechanism, or None; `secret` salts the fake credential of an unknown user."""

    def __init__(self, mechanism: str, lookup, nonce: str, secret: bytes) -> None:
        self.mechanism = mechanism
        self._hash = _hash(mechanism)
        self._lookup = lookup
        self._nonce = nonce
        self._secret = secret
        self.user: str | None = None
        self._name: str | None = None
        self._credential: ScramCredential | None = None
        self._gs2_header = b""
        self._auth_head = ""  # client-first-bare "," server-first
        self._full_nonce = ""

    @property
    def started(self) -> bool:
        """Whether the client-first message was taken (the next one is the client-final)."""
        return self._name is not None

    def first(self, client_first: bytes) -> bytes:
        if self._name is not None:
            raise ScramError("SCRAM: a second client-first message")
        if not client_first.startswith(b"n,"):  # "y" / "p": channel binding, which no Kafka client does
            raise ScramError("SCRAM: channel binding is not supported")
        header, sep, bare = client_first[2:].partition(b",")
        if not sep or (header and not header.startswith(b"a=")):
            raise ScramError("SCRAM: malformed client-first message")
        attrs = _attributes(bare, "client-first message")
        if len(attrs) < 2 or attrs[0][0] != "n" or attrs[1][0] != "r" or not attrs[1][1]:
            raise ScramError("SCRAM: the client-first message must start with n=<user>,r=<nonce>")
        if len(attrs) > 2:  # Kafka's extensions (tokenauth=true: delegation tokens) are not supported
            raise ScramError("SCRAM: extensions are not supported")
        name = _unescape(attrs[0][1])
        authzid = header[2:].decode("utf-8", "replace") if header else ""
        if authzid and _unescape(authzid) != name:
            raise ScramError("SCRAM: acting as another user is not supported")
        self._name = name
        self._gs2_header = client_first[:len(client_first) - len(bare)]
        credential = self._lookup(name)
        if credential is None or credential.mechanism != self.mechanism:  # the same answer as for a known user
            fake = hmac.digest(self._secret, name.encode(), self._hash)
            credential = ScramCredential(self.mechanism, fake[:SALT_BYTES], MIN_ITERATIONS, b"", b"")
        self._credential = credential
        self._full_nonce = attrs[1][1] + self._nonce
        server_first = f"r={self._full_nonce},s={_b64(credential.salt)},i={credential.iterations}"
        self._auth_head = bare.decode() + "," + server_first
        return server_first.encode()

    def final(self, client_final: bytes) -> bytes:
        credential = self._credential
        if credential is None or self.user is not None:
            raise ScramError("SCRAM: a client-final message out of order")
        attrs = _attributes(client_final, "client-final message")
        if len(attrs) != 3 or [n for n, _ in attrs] != ["c", "r", "p"]:
            raise ScramError("SCRAM: the client-final message must be c=…,r=…,p=…")
        if _unb64(attrs[0][1], "channel binding") != self._gs2_header:
            raise ScramError("SCRAM: the channel binding does not match the client-first message")
        if attrs[1][1] != self._full_nonce:
            raise ScramError("SCRAM: the nonce does not match")
        proof = _unb64(attrs[2][1], "proof")
        without_proof = client_final[:client_final.rindex(b",p=")].decode()
        auth_message = f"{self._auth_head},{without_proof}".encode()
        if not credential.stored_key or len(proof) != len(credential.stored_key):
            raise ScramError("SCRAM: authentication failed")
        signature = hmac.digest(credential.stored_key, auth_message, self._hash)
        client_key = _xor(proof, signature)
        if not hmac.compare_digest(hashlib.new(self._hash, client_key).digest(), credential.stored_key):
            raise ScramError("SCRAM: authentication failed")
        self.user = self._name
        return f"v={_b64(hmac.digest(credential.server_key, auth_message, self._hash))}".encode()


class ScramClient:
    """One SCRAM exchange, the client's side: `first()`, `final(server_first)`, `verify(server_final)` (raises
    ScramError when the server did not prove it knows the credential)."""

    def __init__(self, mechanism: str, user: str, password: str, nonce: str) -> None:
        self.mechanism = mechanism
        self._hash = _hash(mechanism)
        self._password = password.encode()
        self._bare = f"n={_escape(user)},r={nonce}"
        self._nonce = nonce
        self._server_signature = b""

    def first(self) -> bytes:
        return _GS2_HEADER + self._bare.encode()

    def final(self, server_first: bytes) -> bytes:
        attrs = dict(_attributes(server_first, "server-first message"))
        if "e" in attrs:
            raise ScramError(f"SCRAM: the server refused: {attrs['e']}")
        nonce, salt, iterations = attrs.get("r", ""), attrs.get("s"), attrs.get("i", "")
        if not nonce.startswith(self._nonce) or len(nonce) == len(self._nonce) or salt is None \
                or not iterations.isdigit():
            raise ScramError("SCRAM: malformed server-first message")
        salted = salted_password(self.mechanism, self._password, _unb64(salt, "salt"), int(iterations))
        without_proof = f"c={_CHANNEL_BINDING.decode()},r={nonce}"
        auth_message = f"{self._bare},{server_first.decode()},{without_proof}".encode()
        client_key = hmac.digest(salted, b"Client Key", self._hash)
        stored_key = hashlib.new(self._hash, client_key).digest()
        proof = _xor(client_key, hmac.digest(stored_key, auth_message, self._hash))
        self._server_signature = hmac.digest(hmac.digest(salted, b"Server Key", self._hash), auth_message,
                                             self._hash)
        return f"{without_proof},p={_b64(proof)}".encode()

    def verify(self, server_final: bytes) -> None:
        attrs = dict(_attributes(server_final, "server-final message"))
        if "e" in attrs:
            raise ScramError(f"SCRAM: the server refused: {attrs['e']}")
        if not hmac.compare_digest(_unb64(attrs.get("v", ""), "server signature"), self._server_signature):
            raise ScramError("SCRAM: the server's signature does not match")
