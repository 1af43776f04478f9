"""The pure core: identities, durations, the run state machine (`states`) and lifecycle
(`lifecycle`: which event makes which move, and `fold`), the event catalogue and the error
taxonomy.

Nothing here performs I/O or reads the clock; every other package builds on it.
"""
