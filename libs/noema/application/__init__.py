"""The application layer: what Noema does, behind the ports (noema.ports) and above the domain.

The facade (:class:`noema.application.facade.Noema`) is what every surface calls; beside it the
services it is made of — search, knowledge, access, preamble, reads, upkeep (decay, embedding,
relations), curation (an operator's retract, archive, correct), dead letters, replay, the agent
tools and the views they answer with.
"""
