-- Issue 21: set, start_workflow and fork_each steps. The check is replaced NOT VALID: the rows already there
-- hold the older kinds, which the new check allows, so there is nothing to scan for; new rows are
-- checked from here on. (The history table was made LIKE steps, without its checks.)
ALTER TABLE steps DROP CONSTRAINT steps_kind_check;
ALTER TABLE steps ADD CONSTRAINT steps_kind_check
    CHECK (kind IN ('agent', 'switch', 'fork', 'do_while', 'sub_workflow', 'wait', 'terminate', 'set', 'start_workflow', 'fork_each'))
    NOT VALID;
