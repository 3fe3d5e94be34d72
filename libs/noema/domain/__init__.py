"""Pure domain logic: no I/O, no clock reads (``now`` is passed in)."""
