-- Decay with every parameter given by the caller. The projector passes the half-life and the floor
-- that each event recorded where the decision was made, so no value of a replayed decay comes from
-- the code of the release that replays it. The same formula as noema_decay/4 of migration 0002
-- (which wrote the floor in, 1e-6): with floor 1e-6 both give the same float8, bit for bit. That one
-- stays for projectors of earlier releases still running during an upgrade.
CREATE FUNCTION noema_decay(activation float8, dt_days float8, importance float8, half_life_days float8,
                            activation_floor float8)
RETURNS float8 LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN dt_days <= 0 THEN activation
                -- the exponent is bounded so power() cannot underflow (the floor applies long before)
                ELSE greatest(activation_floor, activation * power(2::float8,
                         greatest(-1000::float8, -dt_days / (half_life_days * (1 + importance)))))
           END
$$;
