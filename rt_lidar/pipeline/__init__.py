"""The frame loop: hit sources, the physics step, the scan assembler, the scan loop, building a pipeline."""
