"""The sensor physics: the echo model, returns and waveforms, sunlight, weather."""
