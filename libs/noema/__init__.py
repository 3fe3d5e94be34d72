"""Noema core library: pure domain logic and the adapters (JetStream, PostgreSQL, embedders)."""

__all__: list[str] = []
__version__ = "0.1.0"
