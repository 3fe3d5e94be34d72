"""Runtime plumbing: settings and locating a running instance, the worker loop and its stopping,
heartbeats, readiness and backlog, logging, the embedded servers, NATS identities and credentials,
and the stream topology. Nothing here decides what Noema believes."""
