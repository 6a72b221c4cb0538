"""The native (RustLog-style JSON) protocol: its session handler and registry entry."""
