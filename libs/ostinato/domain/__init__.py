"""The pure core: identities, the run state machine, the event catalogue and the error taxonomy.

Nothing here performs I/O or reads the clock; every other package builds on it.
"""
