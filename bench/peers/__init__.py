"""Peers measured like Ostinato (bench/peers/run.py)."""
