"""The client side of the AirSim bridge: the RPC hit source, the wire of hits, recovery, settings.json."""
