-- noema_activation (migration 0012) in one expression PostgreSQL inlines into the statement that
-- reads it. As written there it called noema_decay with noema_days(...) as an argument that
-- noema_decay reads twice: PostgreSQL does not inline a function whose argument it would have to
-- compute twice, nor noema_days (its extract() from a timestamptz is only stable), so every row a
-- read returned ran two SQL functions through the function executor — about 12 microseconds a row,
-- 1.2 ms of a recall's 100 candidates against 0.06 ms inlined (docs/benchmarks.md, issue 33).
--
-- The same value to the bit: the difference of the two times as an interval holds the same
-- microseconds as the difference of their epochs (asserted against migration 0012's form on
-- 113,200 inputs, and by tests/integration/test_memory_model.py against the Python formula).
CREATE OR REPLACE FUNCTION noema_activation(activation float8, activation_at timestamptz, importance float8,
                                            half_life_days float8, activation_floor float8, at timestamptz)
RETURNS float8 LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN at <= activation_at THEN activation
                -- as noema_decay: the exponent is bounded so power() cannot underflow
                ELSE greatest(activation_floor, activation * power(2::float8,
                         greatest(-1000::float8, -(extract(epoch FROM at - activation_at)::float8 / 86400::float8)
                                                 / (half_life_days * (1 + importance)))))
           END
$$;
