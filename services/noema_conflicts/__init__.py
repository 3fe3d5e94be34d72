"""The conflicts worker: decides contradictions between facts of one domain and topic."""
