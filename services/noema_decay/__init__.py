"""The decay worker: periodic decay ticks, one event per workspace per tick, listing the memories
that faded below the threshold or passed their ``valid_until`` since the previous tick."""
