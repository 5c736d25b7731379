"""The ``rt-lidar`` command line: one module per command group."""
