-- Issue 18: the outbox trigger's first look was "is any subscription active?", and a task's own
-- channel stays active after the task ends (a failed task may be retried, and notify again), so
-- once any task had one, every statement that wrote events ran the whole statement below: with 200
-- finished tasks' channels in the store, a no-op drain on PostgreSQL went from 11,800 to 2,900
-- tasks/s (bench notify). The look is now whether a standing subscription is active, or a task of
-- this statement has a channel.
CREATE OR REPLACE FUNCTION outbox_from_events() RETURNS trigger LANGUAGE plpgsql AS $fn$
DECLARE
    written bigint;
BEGIN
    IF current_setting('shiftboss.outbox_muted', true) = 'on' THEN
        RETURN NULL;
    END IF;
    -- No standing subscription (its partial index answers), and no task of the statement with a
    -- channel of its own: nothing to write, before the large statement below is even planned.
    IF NOT EXISTS (SELECT 1 FROM subscriptions WHERE task_id IS NULL AND state = 'active')
       AND NOT EXISTS (SELECT 1 FROM new_events n JOIN subscriptions s ON s.task_id = n.task_id AND s.state = 'active')
    THEN
        RETURN NULL;
    END IF;
    WITH m AS (
        SELECT n.id, n.task_id, n.step_id, n.at, n.detail,
               CASE n.kind WHEN 'step.processed' THEN 'step.completed'
                           WHEN 'task.compensation_failed' THEN 'task.failed'
                           ELSE n.kind END AS kind
          FROM new_events n
         WHERE n.kind IN ('task.received', 'step.processed', 'step.error', 'task.paused', 'task.resumed',
                          'task.compensating', 'task.completed', 'task.failed', 'task.compensation_failed',
                          'task.compensated', 'task.cancelled', 'task.terminated')
    ), targets AS (
        SELECT m.*, s.id AS subscription_id
          FROM m JOIN subscriptions s ON s.task_id = m.task_id AND s.state = 'active'
                  AND (s.kinds = '' OR position(',' || m.kind || ',' IN s.kinds) > 0)
        UNION ALL
        SELECT m.*, s.id
          FROM m JOIN tasks t ON t.id = m.task_id
                 JOIN subscriptions s ON s.task_id IS NULL AND s.state = 'active'
                  AND (s.workflow IS NULL OR s.workflow = t.workflow)
                  AND (s.kinds = '' OR position(',' || m.kind || ',' IN s.kinds) > 0)
    ), written AS (
        INSERT INTO deliveries (subscription_id, task_id, seq, event_id, kind, at, task_key, workflow, version,
                                task_state, step, output, error, state, due_at, created_at, updated_at)
        SELECT g.subscription_id, g.task_id,
               (SELECT count(*) FROM events e
                 WHERE e.task_id = g.task_id AND e.id <= g.id
                   AND e.kind IN ('task.received', 'step.processed', 'step.error', 'task.paused', 'task.resumed',
                                  'task.compensating', 'task.completed', 'task.failed', 'task.compensation_failed',
                                  'task.compensated', 'task.cancelled', 'task.terminated')),
               g.id, g.kind, g.at, t.task_key, t.workflow, t.workflow_version, t.state,
               st.name,
               CASE WHEN g.kind = 'step.completed' THEN st.output WHEN g.kind = 'task.completed' THEN t.output END,
               CASE WHEN g.kind = 'step.error' THEN coalesce(st.last_error, g.detail::jsonb ->> 'error')
                    WHEN g.kind = 'task.failed' THEN coalesce(g.detail::jsonb ->> 'reason', 'a compensation failed')
               END,
               'pending', g.at, g.at, g.at
          FROM targets g JOIN tasks t ON t.id = g.task_id
          LEFT JOIN steps st ON st.id = g.step_id
        RETURNING 1
    )
    SELECT count(*) INTO written FROM written;
    IF written > 0 THEN
        -- A channel name is at most 63 bytes; longer ones are refused, so it is cut (webhooks.rs too).
        PERFORM pg_notify(left('shiftboss_outbox_' || current_schema(), 63), '');
    END IF;
    RETURN NULL;
END
$fn$;
