"""The embedded world behind an AirSim-compatible server: the sim backend, the server process, the vehicle."""
