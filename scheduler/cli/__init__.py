"""Command-line wiring: the only layer that assembles the pure core with real I/O."""
