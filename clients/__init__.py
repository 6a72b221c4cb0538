"""logway.clients — one client per protocol (native, Kafka, TANK), blocking and trio, on the codecs' client sides."""
