-- Issue 18: the outbox trigger's mute held for one message kind only. Its condition read
-- `kind = a OR ... OR kind = l AND NOT EXISTS (muted)`, and AND binds before OR, so the mute
-- (set while the archiver restores a task's rows from history) applied to 'task.terminated'
-- alone: a restored task's old events were written as messages again for every standing
-- subscription (conformance case `a_restored_task_sends_no_message_again_for_its_old_events`).
-- The kinds are now grouped; the body is 0014's, unchanged.
DROP TRIGGER events_outbox_task;

CREATE TRIGGER events_outbox_task AFTER INSERT ON events
WHEN (NEW.kind = 'task.received' OR NEW.kind = 'step.processed' OR NEW.kind = 'step.error'
   OR NEW.kind = 'task.paused' OR NEW.kind = 'task.resumed' OR NEW.kind = 'task.compensating'
   OR NEW.kind = 'task.completed' OR NEW.kind = 'task.failed' OR NEW.kind = 'task.compensation_failed'
   OR NEW.kind = 'task.compensated' OR NEW.kind = 'task.cancelled' OR NEW.kind = 'task.terminated')
  -- Events brought back from history (a job resubmitted from there) were messages once already.
  AND NOT EXISTS (SELECT 1 FROM outbox_muted)
BEGIN
    INSERT INTO deliveries (subscription_id, task_id, seq, event_id, kind, at, task_key, workflow, version,
                            task_state, step, output, error, state, due_at, created_at, updated_at)
    SELECT s.id, NEW.task_id,
           (SELECT count(*) FROM events e WHERE e.task_id = NEW.task_id AND e.id <= NEW.id
               AND (e.kind = 'task.received' OR e.kind = 'step.processed' OR e.kind = 'step.error'
                    OR e.kind = 'task.paused' OR e.kind = 'task.resumed' OR e.kind = 'task.compensating'
                    OR e.kind = 'task.completed' OR e.kind = 'task.failed' OR e.kind = 'task.compensation_failed'
                    OR e.kind = 'task.compensated' OR e.kind = 'task.cancelled' OR e.kind = 'task.terminated')),
           NEW.id, m.kind, NEW.at, t.task_key, t.workflow, t.workflow_version, t.state,
           CASE WHEN NEW.step_id IS NOT NULL THEN st.name END,
           CASE WHEN m.kind = 'step.completed' THEN st.output WHEN m.kind = 'task.completed' THEN t.output END,
           CASE WHEN m.kind = 'step.error' THEN coalesce(st.last_error, json_extract(NEW.detail, '$.error'))
                WHEN m.kind = 'task.failed' THEN coalesce(json_extract(NEW.detail, '$.reason'), 'a compensation failed')
           END,
           'pending', NEW.at, NEW.at, NEW.at
      FROM (SELECT CASE NEW.kind WHEN 'step.processed' THEN 'step.completed'
                                 WHEN 'task.compensation_failed' THEN 'task.failed'
                                 ELSE NEW.kind END AS kind) m
      JOIN tasks t ON t.id = NEW.task_id
      -- A task's own subscriptions, then the standing ones: two lookups by index, not an OR.
      JOIN (SELECT id, kinds FROM subscriptions WHERE task_id = NEW.task_id AND state = 'active'
            UNION ALL
            SELECT s.id, s.kinds FROM subscriptions s INDEXED BY subscriptions_standing
             WHERE s.task_id IS NULL AND s.state = 'active'
               AND (s.workflow IS NULL OR s.workflow = (SELECT workflow FROM tasks WHERE id = NEW.task_id))) s
        ON s.kinds = '' OR instr(s.kinds, ',' || m.kind || ',') > 0
      LEFT JOIN steps st ON st.id = NEW.step_id;
END;
