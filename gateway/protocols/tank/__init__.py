"""The TANK 4.0 protocol: its session handler and registry entry."""
