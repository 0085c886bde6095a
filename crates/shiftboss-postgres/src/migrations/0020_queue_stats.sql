-- The queue statistics (`/metrics`, the console, Conductor's queue sizes) count the live agent
-- steps by state. Asked as one query over the three states, they were a scan of the whole steps
-- table, finished steps included (47 ms a scrape beside 60,000 steps on PostgreSQL; the hot table
-- holds an hour of finished work by default). Each state is now counted through its own partial
-- index; steps in Error had none. Only a step entering Error writes an entry.
CREATE INDEX steps_error ON steps (agent) WHERE state = 'error';
