"""Send a byte range of a file to a trio stream: `os.sendfile` straight from the page cache to the socket
when the stream is a plain TCP socket, a read-and-send fallback otherwise (e.g. TLS streams); and
`send_pieces`, which sends a codec's output of bytes and deferred file slices in order."""

from __future__ import annotations

import os

import trio

#: Bytes read per step on the fallback path.
FALLBACK_CHUNK = 1024 * 1024


async def send_file_range(stream: trio.abc.SendStream, fd: int, offset: int, count: int) -> None:
    if isinstance(stream, trio.SocketStream):
        sock = stream.socket
        out = sock.fileno()
        while count > 0:
            await trio.lowlevel.checkpoint_if_cancelled()
            try:
                sent = os.sendfile(out, fd, offset, count)
            except BlockingIOError:
                await trio.lowlevel.wait_writable(sock)
                continue
            except (BrokenPipeError, ConnectionResetError) as exc:
                raise trio.BrokenResourceError(str(exc)) from exc
            if sent == 0:  # the file is shorter than the range (truncated under us): fail loudly
                raise OSError(f"sendfile: file ended {count} bytes before the range did")
            offset += sent
            count -= sent
        return
    while count > 0:
        data = os.pread(fd, min(count, FALLBACK_CHUNK), offset)
        if not data:
            raise OSError(f"pread: file ended {count} bytes before the range did")
        await stream.send_all(data)
        offset += len(data)
        count -= len(data)


async def send_pieces(stream: trio.abc.SendStream, pieces) -> None:
    """Send a codec's output (`send(event)`): bytes as they are, or a list of bytes and file slices (objects with
    fileno/position/length) in order, the slices with sendfile."""
    if isinstance(pieces, (bytes, bytearray, memoryview)):
        if pieces:
            await stream.send_all(pieces)
        return
    for piece in pieces:
        if isinstance(piece, (bytes, bytearray, memoryview)):
            if piece:
                await stream.send_all(piece)
        else:
            await send_file_range(stream, piece.fileno(), piece.position, piece.length)
