"""SCRAM (RFC 5802 / 7677): the RFC's SCRAM-SHA-256 exchange byte for byte, both mechanisms end to end, and every
way a client's message can be wrong (malformed, out of order, a proof that does not match, an unknown user — which
looks like any other until the proof)."""

from __future__ import annotations

import base64

import pytest

from logway.codecs.scram import (MAX_MESSAGE_BYTES, MECHANISMS, ScramClient, ScramError, ScramServer,
                                 check_password, credential_from_salted, make_credential, salted_password)

# RFC 7677 §3: user "user", password "pencil".
RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC_CLIENT_NONCE = "rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC_CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_FIRST = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
RFC_CLIENT_FINAL = (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
RFC_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def server(mechanism="SCRAM-SHA-256", users=None, nonce="server-nonce"):
    users = users if users is not None else {"user": make_credential(mechanism, "pencil")}
    return ScramServer(mechanism, users.get, nonce, b"secret")


def test_the_rfc_7677_exchange():
    credential = make_credential("SCRAM-SHA-256", "pencil", salt=RFC_SALT)
    srv = ScramServer("SCRAM-SHA-256", {"user": credential}.get, RFC_SERVER_NONCE, b"k")
    assert srv.first(RFC_CLIENT_FIRST) == RFC_SERVER_FIRST
    assert srv.final(RFC_CLIENT_FINAL) == RFC_SERVER_FINAL
    assert srv.user == "user"
    client = ScramClient("SCRAM-SHA-256", "user", "pencil", RFC_CLIENT_NONCE)
    assert client.first() == RFC_CLIENT_FIRST
    assert client.final(RFC_SERVER_FIRST) == RFC_CLIENT_FINAL
    client.verify(RFC_SERVER_FINAL)


@pytest.mark.parametrize("mechanism", sorted(MECHANISMS))
def test_both_mechanisms_end_to_end(mechanism):
    credential = make_credential(mechanism, "pä,ss=word", iterations=8192)
    srv = ScramServer(mechanism, {"a,b=c": credential}.get, "n2", b"k")
    client = ScramClient(mechanism, "a,b=c", "pä,ss=word", "n1")  # a name with the characters SCRAM escapes
    client.verify(srv.final(client.final(srv.first(client.first()))))
    assert srv.user == "a,b=c"
    assert check_password(credential, "pä,ss=word") and not check_password(credential, "password")


def test_a_credential_from_a_salted_password_is_the_same_as_from_the_password():
    made = make_credential("SCRAM-SHA-512", "pw", salt=b"salt" * 4, iterations=4096)
    salted = salted_password("SCRAM-SHA-512", b"pw", b"salt" * 4, 4096)
    assert credential_from_salted("SCRAM-SHA-512", salted, b"salt" * 4, 4096) == made


def test_a_wrong_password_fails_at_the_proof():
    srv = server()
    client = ScramClient("SCRAM-SHA-256", "user", "wrong", "n1")
    final = client.final(srv.first(client.first()))
    with pytest.raises(ScramError, match="authentication failed"):
        srv.final(final)
    assert srv.user is None


def test_an_unknown_user_looks_like_a_known_one_until_the_proof():
    srv = server()
    client = ScramClient("SCRAM-SHA-256", "nobody", "pencil", "n1")
    first = srv.first(client.first())
    assert first.startswith(b"r=n1server-nonce,s=") and first.endswith(b",i=4096")
    again = server().first(ScramClient("SCRAM-SHA-256", "nobody", "x", "n1").first())
    assert again == first  # the same fake salt every time: nothing tells it apart from a real one
    with pytest.raises(ScramError, match="authentication failed"):
        srv.final(client.final(first))


def test_a_credential_of_the_other_mechanism_does_not_log_in():
    srv = server("SCRAM-SHA-512", users={"user": make_credential("SCRAM-SHA-256", "pencil")})
    client = ScramClient("SCRAM-SHA-512", "user", "pencil", "n1")
    with pytest.raises(ScramError):
        srv.final(client.final(srv.first(client.first())))


@pytest.mark.parametrize("message, error", [
    (b"y,,n=user,r=abc", "channel binding"),
    (b"p=tls-unique,,n=user,r=abc", "channel binding"),
    (b"n,,r=abc,n=user", "must start with"),
    (b"n,,n=user", "must start with"),
    (b"n,,n=user,r=", "must start with"),
    (b"n,,n=user,r=abc,tokenauth=true", "malformed"),
    (b"n,,n=user,r=abc,x=1", "extensions"),
    (b"n,,n=us=er,r=abc", "bad escape"),
    (b"n,a=other,n=user,r=abc", "another user"),
    (b"n,,n=\xff,r=abc", "not UTF-8"),
    (b"n,,n=" + b"u" * MAX_MESSAGE_BYTES + b",r=abc", "over"),
    (b"garbage", "channel binding"),
])
def test_malformed_client_first_messages(message, error):
    with pytest.raises(ScramError, match=error):
        server().first(message)


def test_client_final_messages_out_of_order_or_malformed():
    with pytest.raises(ScramError, match="out of order"):
        server().final(b"c=biws,r=x,p=AAAA")
    srv = server()
    nonce = srv.first(b"n,,n=user,r=abc").split(b",")[0][2:]
    with pytest.raises(ScramError, match="a second client-first"):
        srv.first(b"n,,n=user,r=abc")
    for bad, error in [(b"c=biws,r=" + nonce, "must be"), (b"c=biws,r=other,p=AAAA", "nonce"),
                       (b"c=eSws,r=" + nonce + b",p=AAAA", "channel binding"),
                       (b"c=biws,r=" + nonce + b",p=!!", "base64"),
                       (b"c=biws,r=" + nonce + b",p=AAAA", "authentication failed")]:
        with pytest.raises(ScramError, match=error):
            fresh = server()
            fresh.first(b"n,,n=user,r=abc")
            fresh.final(bad)


def test_the_client_checks_the_server():
    client = ScramClient("SCRAM-SHA-256", "user", "pencil", RFC_CLIENT_NONCE)
    client.first()
    with pytest.raises(ScramError, match="malformed"):
        client.final(b"r=someone-elses-nonce,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    client.final(RFC_SERVER_FIRST)
    with pytest.raises(ScramError, match="does not match"):
        client.verify(b"v=" + base64.b64encode(b"\0" * 32))
    with pytest.raises(ScramError, match="refused"):
        client.verify(b"e=invalid-proof")


def test_iterations_are_bounded():
    for iterations in (4095, 16385):
        with pytest.raises(ValueError, match="iterations"):
            make_credential("SCRAM-SHA-256", "pw", iterations=iterations)
    with pytest.raises(ValueError, match="unknown SCRAM mechanism"):
        make_credential("SCRAM-MD5", "pw")
