-- Deleting several memories that share a word in one statement corrects each of the word's marks
-- after them by all of them (migration 0017's trigger joined the mark to one deleted memory per
-- word and creation sequence, and UPDATE ... FROM applies one joined row per target row, so a mark
-- after two such memories lost one). The projector deletes no memory today (erasure blanks words by
-- UPDATE); an operator's repair or a future deletion would have left wrong as-of word counts.
CREATE OR REPLACE FUNCTION noema_terms_removed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE memory_terms t SET memories = t.memories - d.n
    FROM (SELECT o.workspace, u.lexeme, count(*) AS n FROM old_rows o, unnest(o.search) u
          GROUP BY 1, 2 ORDER BY 1, 2) d
    WHERE t.workspace = d.workspace AND t.lexeme = d.lexeme;
    UPDATE memory_term_marks k SET memories = k.memories - d.n
    FROM (SELECT m.workspace, m.lexeme, m.seq, sum(g.n) AS n
          FROM (SELECT o.workspace, u.lexeme, o.origin_seq, count(*) AS n
                FROM old_rows o, unnest(o.search) u GROUP BY 1, 2, 3) g
          JOIN memory_term_marks m
            ON m.workspace = g.workspace AND m.lexeme = g.lexeme AND m.seq >= g.origin_seq
          GROUP BY 1, 2, 3) d
    WHERE k.workspace = d.workspace AND k.lexeme = d.lexeme AND k.seq = d.seq;
    RETURN NULL;
END
$$;
