"""logway.codecs — sans-I/O protocol codecs and record formats: bytes in, events out, events in, bytes out.

No sockets, no clock, no files, no trio, no storage. Packages: `native` (RustLog-style JSON frames), `kafka`
(the wire protocol, RecordBatch v2, legacy MessageSets, the `kafka` storage-format adapter), `tank` (TANK 4.0,
bundles, the `tank` storage-format adapter). Shared modules: `errors` (errors split by blame), `records` (the
protocol-neutral `Record`), `varint` (zigzag varints), `compression` (Kafka's codecs and TANK's snappy blocks),
`stream` (the receive buffer and error state every framed codec shares).

The codec contract
------------------
Every connection class — `native.NativeConnection`, `kafka.KafkaServerConnection`, `kafka.KafkaClientConnection`,
`tank.TankServerConnection`, `tank.TankClientConnection` — is one end of one byte stream, driven by its caller:

- `receive_data(data)`: bytes the peer sent (any bytes-like); `b""` means the peer closed its side (EOF).
  Data after EOF is a `LocalProtocolError`; after a fatal error, data is dropped unbuffered.
- `next_event()` -> an event, `NEED_DATA` (a frame is not complete yet: receive more) or `CLOSED` (EOF, and
  every complete frame has been returned). Raises `RemoteProtocolError` when the peer broke the protocol; with
  `fatal=True` the stream cannot be resynchronised and every later call raises a copy of the same error.
- `send(event)` -> the bytes of one outgoing event, never doing I/O: either `bytes`, or a `list` of pieces to
  write in order. A piece is a bytes-like object or a *deferred* range: any object that is not bytes-like and
  has an int `.length` attribute (e.g. a file slice the caller sends with `os.sendfile`), standing exactly
  where its `.length` bytes belong; frame lengths already count them. Raises `LocalProtocolError` for an event
  this end cannot send or a value the wire cannot carry (our bug, never the peer's).
- `trailing_data` (unconsumed bytes, EOF seen) and `buffered_bytes` (bytes waiting for the rest of a frame).
- `max_frame`: the largest frame accepted, checked as soon as a frame's header is in, before its body is
  buffered; it may be changed between frames (a server lowers it until the peer has authenticated).
  `next_frame_size()`: the whole size the next frame declares once its header is in (0 before), so a caller can
  budget for a frame before buffering it.

Each class's docstring names its event types; `NEED_DATA` and `CLOSED` are the same objects in every codec
(`stream.NEED_DATA`, `stream.CLOSED`).
"""
