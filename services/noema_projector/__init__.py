"""The projector: builds the PostgreSQL read model from the event stream."""
