"""The agent service: every agent tool, plus ``observe``, as NATS request/reply endpoints (NATS micro)."""
