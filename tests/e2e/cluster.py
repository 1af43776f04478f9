"""Moved to ostinato.testing.cluster (shared with bench/); kept for imports in flight."""

from ostinato.testing.cluster import ROOT, SERVICES, Cluster, free_port

__all__ = ["ROOT", "SERVICES", "Cluster", "free_port"]
