"""The console's actions: `POST /api/request`, whose body is one native request — the JSON a native client frames,
e.g. `{"CreateTopic": {"topic": "orders", "partitions": 3}}` — answered by the gateway's native handler as if a
native client had sent it: the same steps, checks and errors as `logway topics …`, `logway groups …` and
`logway produce` (with `workers: N`, the same relays to the worker that owns a partition or the offsets). The answer
is the native answer's JSON: 200, or 400 with `{"Error": {"message"}}` when the gateway refused.

`GET /api/console` tells the console what it may do: `{"actions": bool, "why": text | null, "auth": "none" |
"login", "user": the caller's principal}` — actions need the native listener enabled (they are native requests).

Guards, because a browser sends these requests:
- only the requests an operator's console needs (`CONSOLE_REQUESTS`: topics, their configs and records, groups and
  their offsets, a test message; no fetch, no commit, no `Auth`, nothing internal) — others are 400;
- `Content-Type: application/json` (415 otherwise) and, when the browser says where the page came from (`Origin`,
  `Sec-Fetch-Site`), the admin listener itself (403 otherwise): another site's page cannot make a visitor's browser
  act (a cross-site JSON request needs a CORS preflight, which is never answered);
- the caller the admin listener authenticated (`access.py`: a user, the token, or the listener's principal) is held
  to the ACLs as a native client would be (`protocols/native/authz.py`): a refusal is 403 with the native `Error`.

Each action is logged (INFO) with the client's address.
"""

from __future__ import annotations

import logging
import struct
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from logway.codecs.errors import RemoteProtocolError
from logway.codecs.native import (AlterTopicConfigRequest, CreatePartitionsRequest, CreateTopicRequest,
                                  DeleteGroupOffsetsRequest, DeleteRecordsRequest, DeleteTopicRequest,
                                  DescribeGroupRequest, DescribeTopicConfigRequest, DescribeTopicRequest,
                                  ErrorResponse, ListGroupsRequest, ListTopicsRequest, NativeConnection, PingRequest,
                                  ProduceRequest, RelayedResponse, ResetGroupOffsetsRequest)

from ..pump import HandOver
from .http import HttpAnswer, HttpRequest
from .http import json_answer as _json

if TYPE_CHECKING:  # pragma: no cover
    from ..context import GatewayView

log = logging.getLogger("logway.gateway.admin")

__all__ = ["CONSOLE_REQUESTS", "ConsoleActions", "refused_by_guards"]

#: The native requests the console sends: what `logway topics`, `logway groups` and `logway produce` send.
CONSOLE_REQUESTS = frozenset({
    CreateTopicRequest, DeleteTopicRequest, ListTopicsRequest, DescribeTopicRequest, CreatePartitionsRequest,
    DeleteRecordsRequest, AlterTopicConfigRequest, DescribeTopicConfigRequest, ProduceRequest, ListGroupsRequest,
    DescribeGroupRequest, ResetGroupOffsetsRequest, DeleteGroupOffsetsRequest, PingRequest,
})
_LENGTH = struct.Struct(">I")


def refused_by_guards(request: HttpRequest) -> HttpAnswer | None:
    """The browser guards (see the module docstring): an answer refusing `request`, or None."""
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media != "application/json":
        return _json(415, {"Error": {"message": "the console's requests are JSON (Content-Type: application/json)"}})
    origin = request.headers.get("origin")
    host = request.headers.get("host", "")
    site = request.headers.get("sec-fetch-site", "same-origin")
    if (origin is not None and urlsplit(origin).netloc != host) or site not in ("same-origin", "none"):
        return _json(403, {"Error": {"message": "refused: a request from another site's page"}})
    return None


class ConsoleActions:
    def __init__(self, gateway: GatewayView, access) -> None:
        self.gateway = gateway
        self.access = access

    def session(self, caller) -> dict[str, Any]:
        """What the console may do (`GET /api/console`), and as whom."""
        native = self.gateway.config.listeners.get("native")
        why = None if native is not None and native.enabled else \
            "the console's actions are native requests: enable listeners.native"
        return {"actions": why is None, "why": why, "auth": "login" if self.access.required else "none",
                "user": None if caller is None else caller.principal}

    async def request(self, request: HttpRequest, caller) -> HttpAnswer:
        """`POST /api/request`: one native request, authorized for `caller` and answered by the native handler."""
        refused = refused_by_guards(request)
        if refused is not None:
            return refused
        protocol = self.gateway.protocols.get("native")
        if protocol is None:
            why = self.session(caller)["why"] or "the gateway is starting or stopping"
            return _json(503, {"Error": {"message": why}})
        codec = NativeConnection("server", max_frame=self.gateway.config.limits.max_frame_bytes)
        codec.receive_data(_LENGTH.pack(len(request.body)) + request.body)
        try:
            event = codec.next_event()
        except RemoteProtocolError as exc:
            return _json(400, {"Error": {"message": exc.message}})
        name = type(event).__name__.removesuffix("Request")  # (the request's name on the wire)
        if type(event) not in CONSOLE_REQUESTS:
            return _json(400, {"Error": {"message": f"the console does not send {name} requests"}})
        log.info("admin: %s: console %s as %s%s", request.peer or "?", name, caller.principal, _subject(event))
        answer = await protocol.handle_as(event, caller)
        if type(answer) is HandOver:  # (workers: N) another worker's partition: its answer, relayed
            answer = await answer.relay()
        failed = type(answer) is ErrorResponse or (type(answer) is RelayedResponse and answer.error_code)
        status = 403 if failed and type(answer) is ErrorResponse and answer.message.startswith("not authorized") \
            else 400 if failed else 200
        return status, [("Content-Type", "application/json"), ("Cache-Control", "no-store")], \
            codec.send(answer)[_LENGTH.size:]


def _subject(event) -> str:
    """What an action is about, for the log: ` topic=orders partition=0`, ` group=billing`."""
    parts = [f"{name}={getattr(event, attr)}" for name, attr in (("topic", "topic"), ("partition", "partition"),
                                                                  ("group", "group_id")) if hasattr(event, attr)]
    return "".join(" " + p for p in parts)
