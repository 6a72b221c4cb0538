"""Each wire protocol in its own package (native, kafka, tank); the server loops over `REGISTRY`."""
