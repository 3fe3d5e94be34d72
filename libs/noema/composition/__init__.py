"""The composition root: what builds the adapters and hands them to the application (the facade
:class:`~noema.composition.instance.Instance` the surfaces open), and the procedures that drive the
servers themselves: replay, versions of the read model, as-of states, erasure."""
