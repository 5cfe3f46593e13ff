"""Benchmarks run from the command line (`agora bench ...`): each runs real runs and reports measured numbers."""
