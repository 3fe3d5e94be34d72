-- An erased memory reads as erased on every surface (docs/privacy.md): its status is `erased`, set by
-- the projection of content.erased (so a replay gives it too), and no later status change undoes it.
ALTER TABLE memories DROP CONSTRAINT IF EXISTS memories_status_check;
ALTER TABLE memories ADD CONSTRAINT memories_status_check
    CHECK (status IN ('active', 'retracted', 'superseded', 'archived', 'erased'));
UPDATE memories SET status = 'erased' WHERE erased_at IS NOT NULL AND status <> 'erased';
