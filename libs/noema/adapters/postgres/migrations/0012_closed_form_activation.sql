-- Activation is computed where it is read, in closed form, instead of being rewritten on every decay
-- tick. A memory keeps the activation of its last reinforcement (or creation, or a tick of an
-- earlier release) and the time it refers to (activation, activation_at), and now the half-life and
-- floor it decays with from then on: recorded by that event, set by the projector.
--
-- The defaults are not derived data: they are the values every event written before this migration
-- recorded or was upcast with (14 days, 1e-6), so the rows of an existing read model hold what a
-- replay of its stream projects and `noemactl replay` still matches, without a rebuild.
ALTER TABLE memories
    ADD COLUMN half_life_days float8 NOT NULL DEFAULT 14,
    ADD COLUMN activation_floor float8 NOT NULL DEFAULT 1e-6;

-- A memory's activation at a time: noema_decay/5 from the time its stored activation refers to.
-- Reads call it with their `now` (an as-of read with the point's time); the same formula as
-- noema.domain.dynamics.activation_at, so both read models give the same value.
CREATE FUNCTION noema_activation(activation float8, activation_at timestamptz, importance float8,
                                 half_life_days float8, activation_floor float8, at timestamptz)
RETURNS float8 LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT noema_decay(activation, noema_days(at, activation_at), importance, half_life_days, activation_floor)
$$;
