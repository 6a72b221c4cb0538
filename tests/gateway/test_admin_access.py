"""Who may ask the admin listener what (issue 34), over real sockets: a Host that is not this listener's is refused
before anything else (DNS rebinding) while the probes answer any; where logins are required, everything but the
probes and the console's files needs HTTP Basic (a user's password, or SCRAM credential) or the access token; and
the ACLs decide the rest — metrics and rates need Describe on the cluster, lists show what may be described, the
message browser needs Read, the console's actions what their native request needs —, each refusal counted."""

from __future__ import annotations

import base64

import orjson

from logway.codecs import native as nv
from logway.codecs.records import Record

from ..conftest import AsyncNative, running_gateway
from .test_admin_http import Http

TOKEN = "ops-token"
LOGINS = ("auth.native_login=true", "auth.users.alice=alice-pw", "auth.users.root=root-pw",
          "auth.super_users=User:root", f"auth.native_token={TOKEN}", "auth.admin_hosts=console.example")


def basic(user: str, password: str) -> tuple[str, str]:
    return "Authorization", "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


async def ask(gw, path: str, *headers, host: str = "localhost", method: str = "GET", body: bytes = b""):
    http = await Http.open(gw)
    try:
        return await _request(http, path, method, list(headers), body, host)
    finally:
        await http.aclose()


async def _request(http: Http, path, method, headers, body, host):
    import h11  # (the Host is the point here: Http.request sends localhost)

    if http.conn.our_state is h11.DONE:
        http.conn.start_next_cycle()
    sized = [("Content-Length", str(len(body)))] if body or method == "POST" else []
    request = h11.Request(method=method, target=path, headers=[("Host", host), *headers, *sized])
    await http.stream.send_all(http.conn.send(request) + (http.conn.send(h11.Data(data=body)) if body else b"")
                               + http.conn.send(h11.EndOfMessage()))
    status, answer_headers, answer = None, {}, b""
    while True:
        event = http.conn.next_event()
        if event is h11.NEED_DATA:
            http.conn.receive_data(await http.stream.receive_some())
        elif type(event) is h11.Response:
            status = event.status_code
            answer_headers = {k.decode().lower(): v.decode() for k, v in event.headers}
        elif type(event) is h11.Data:
            answer += event.data
        elif type(event) is h11.EndOfMessage:
            return status, answer_headers, answer


async def test_a_host_that_is_not_this_listeners_is_refused_but_the_probes_answer_any(tmp_path):
    async with running_gateway(tmp_path / "data", "auth.admin_hosts=console.example, other.example") as gw:
        for path in ("/", "/api/topics", "/metrics", "/api/console"):
            status, _, body = await ask(gw, path, host="evil.example:9644")
            assert status == 421 and b"auth.admin_hosts" in body, path
        for path in ("/health", "/ready"):
            assert (await ask(gw, path, host="evil.example"))[0] == 200
        for host in ("localhost:9644", "127.0.0.1:9644", "[::1]:9644", "10.1.2.3", "CONSOLE.example:80",
                     "other.example"):
            assert (await ask(gw, "/api/topics", host=host))[0] == 200, host


async def test_logins_are_required_where_the_gateway_requires_them(tmp_path):
    async with running_gateway(tmp_path / "data", *LOGINS) as gw:
        status, headers, _ = await ask(gw, "/api/topics")
        assert status == 401 and headers["www-authenticate"].startswith('Basic realm="logway"')
        status, headers, _ = await ask(gw, "/api/topics", ("X-Logway-Console", "1"))
        assert status == 401 and "www-authenticate" not in headers  # (the console shows its own login form)
        for wrong in (basic("alice", "nope"), basic("nobody", "x"), ("Authorization", "Bearer nope"),
                      ("Authorization", "Basic !!"), ("Authorization", "Digest x")):
            assert (await ask(gw, "/api/topics", wrong))[0] == 401, wrong
        assert (await ask(gw, "/api/topics", basic("alice", "alice-pw")))[0] == 200
        assert (await ask(gw, "/metrics", ("Authorization", f"Bearer {TOKEN}")))[0] == 200
        for path in ("/", "/console.js", "/health"):  # no data: no login
            assert (await ask(gw, path))[0] == 200, path
        status, _, body = await ask(gw, "/ready")
        assert status == 200 and set(orjson.loads(body)) == {"ready", "state"}  # an anonymous prober: ready or not
        status, _, body = await ask(gw, "/ready", basic("root", "root-pw"))
        assert {"listeners", "memory"} <= set(orjson.loads(body))
        status, _, body = await ask(gw, "/api/console")
        assert (status, orjson.loads(body)["auth"], orjson.loads(body)["user"]) == (200, "login", None)


async def test_users_with_stored_credentials_log_in_with_their_password(tmp_path):
    async with running_gateway(tmp_path / "data", *LOGINS) as gw:
        client = await AsyncNative.connect(gw)
        await client.authenticate(TOKEN)
        from logway.codecs.scram import salted_password

        answer = await client.request(nv.AlterUserRequest("carol", "SCRAM-SHA-512", 4096, b"s" * 16,
                                                          salted_password("SCRAM-SHA-512", b"c-pw", b"s" * 16, 4096)))
        assert answer == nv.AlterUserResponse(True)
        await client.aclose()
        assert (await ask(gw, "/api/topics", basic("carol", "c-pw")))[0] == 200
        assert (await ask(gw, "/api/topics", basic("carol", "c-px")))[0] == 401


async def test_the_acls_decide_what_a_caller_sees_and_does(tmp_path):
    async with running_gateway(tmp_path / "data", *LOGINS) as gw:
        root = await AsyncNative.connect(gw)
        await root.authenticate(TOKEN)
        for name in ("alice-topic", "secret"):
            await root.request(nv.CreateTopicRequest(name, 1))
            await root.request(nv.ProduceRequest(name, 0, [Record(f"in {name}".encode())]))
        await root.request(nv.OffsetCommitRequest("secret", 0, "secret-group", 1))
        await root.request(nv.CreateAclsRequest([nv.AclEntry("Topic", "alice-topic", "LITERAL", "User:alice", "*",
                                                             "Read", "Allow")]))
        await root.aclose()
        alice = basic("alice", "alice-pw")
        status, _, body = await ask(gw, "/api/topics", alice)
        assert [t["name"] for t in orjson.loads(body)["topics"]] == ["alice-topic"]
        assert orjson.loads((await ask(gw, "/api/groups", alice))[2])["groups"] == []
        status, _, body = await ask(gw, "/api/topics/alice-topic/partitions/0/messages", alice)
        assert status == 200 and orjson.loads(body)["messages"][0]["value"]["text"] == "in alice-topic"
        status, _, body = await ask(gw, "/api/topics/secret/partitions/0/messages", alice)
        assert status == 403 and "may not READ TOPIC 'secret'" in orjson.loads(body)["error"]
        for path in ("/metrics", "/api/rates"):
            assert (await ask(gw, path, alice))[0] == 403, path
        json_ = ("Content-Type", "application/json")
        status, _, body = await ask(gw, "/api/request", alice, json_, method="POST",
                                    body=b'{"DeleteTopic": {"topic": "secret"}}')
        assert status == 403 and orjson.loads(body) == {"Error": {"message": (
            "not authorized: User:alice may not DELETE TOPIC 'secret'")}}
        status, _, body = await ask(gw, "/api/request", alice, json_, method="POST", body=b'{"ListTopics": {}}')
        assert orjson.loads(body) == {"ListTopics": {"topics": [{"name": "alice-topic", "partitions": 1}]}}
        status, _, body = await ask(gw, "/api/topics", basic("root", "root-pw"))
        assert sorted(t["name"] for t in orjson.loads(body)["topics"]) == ["alice-topic", "secret"]
        status, _, body = await ask(gw, "/metrics", basic("root", "root-pw"))
        assert b'logway_authorization_denied_total{operation="READ",protocol="admin",resource_type="TOPIC"} 1.0' \
            in body
        assert b'operation="DELETE",protocol="admin",resource_type="TOPIC"} 1.0' in body
