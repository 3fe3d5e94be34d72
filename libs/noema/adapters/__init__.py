"""Adapters named after their technology, behind small Protocols (see :mod:`noema.ports`)."""
