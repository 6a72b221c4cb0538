"""logway.codecs — sans-I/O protocol codecs and record formats: bytes in, events out, events in, bytes out.

No sockets, no clock, no files, no trio, no storage. Packages: `native` (RustLog-style JSON frames), `kafka`
(RecordBatch v2, legacy MessageSets, compression, the `kafka` storage-format adapter). Shared modules:
`errors` (errors split by blame), `records` (the protocol-neutral `Record`), `varint` (zigzag varints),
`stream` (the receive buffer and error state every framed codec shares).
"""
