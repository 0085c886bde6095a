-- Issue 18: the outbox trigger finds a message's task subscriptions through their index. Joined
-- to the statement's messages as a table, they were read by a scan of every subscription on each
-- INSERT into events: the planner takes the transition table for about a hundred rows, where a
-- reply batch writes a thousand, and a scan looks cheaper than a hundred lookups; and per-task
-- subscriptions grow with the tasks. Seen with auto_explain: 10 of the trigger's 54 ms for 1,024
-- messages, beside 20,000 subscriptions. As a LATERAL subquery that cannot be flattened
-- (OFFSET 0), each message looks its task's subscriptions up by `subscriptions_task`. The rest of
-- the function is unchanged (read 0011_webhooks.sql's comments).
CREATE OR REPLACE FUNCTION outbox_from_events() RETURNS trigger LANGUAGE plpgsql AS $fn$
DECLARE
    written bigint;
BEGIN
    IF current_setting('shiftboss.outbox_muted', true) = 'on'
       OR NOT EXISTS (SELECT 1 FROM subscriptions WHERE state = 'active') THEN
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
          FROM m CROSS JOIN LATERAL (
               SELECT s.id FROM subscriptions s
                WHERE s.task_id = m.task_id AND s.state = 'active'
                  AND (s.kinds = '' OR position(',' || m.kind || ',' IN s.kinds) > 0)
               OFFSET 0
          ) s
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
