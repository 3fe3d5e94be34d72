"""The decay worker: periodic activation-decay ticks, one event per workspace per tick."""
