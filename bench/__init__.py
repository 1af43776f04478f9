"""Benchmarks: one module per scenario (see bench/README.md)."""
