"""The cluster seam: this gateway as one member of several — membership (`membership.py`: who the members are; today
the supervisor's workers, `workers.py`), ownership (`ownership.py`: who leads each partition and coordinates groups
and transactions) and routing (`seam.Cluster`: relays, hand-overs, catching up with the others' topics), plus the
sockets and requests between members (`relays.py`, `forwarding.py`, `handover.py`, `txn_peers.py`).

Nothing is imported here, so that a module needing one part (the listeners need `relays`) loads only that part.
With one process the server makes no `Cluster` and none of this runs on the request path.
"""
