"""The Kafka wire protocol: its session handler, group coordinator, producer state and SASL."""
