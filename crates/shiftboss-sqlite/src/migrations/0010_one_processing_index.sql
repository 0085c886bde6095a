-- A claim added each step to two indexes of processing steps and its reply removed it from both:
-- steps_deadline (complete_by), read by the supervisor's sweep, and steps_processing (agent,
-- locked_by), read by a limited agent's running count and a restarted scheduler's release. One
-- index serves all three: its entries are the processing steps only (as many as the schedulers'
-- slots), so the sweep reads them all, complete-by included without a row lookup, at each of its
-- passes, where a claim and a reply now write two index entries fewer.
DROP INDEX steps_deadline;
DROP INDEX steps_processing;
CREATE INDEX steps_processing ON steps (agent, locked_by, complete_by) WHERE state = 'processing';
