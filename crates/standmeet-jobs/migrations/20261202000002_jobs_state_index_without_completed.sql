-- Completed jobs are nearly all of the table and need no entry by state: the Tasks
-- panel's `?state=completed` (newest first) and the cleaner (oldest first) find them
-- by id, where they are the rule, and the panel's count of them stops at 10,000 rows.
-- Every other state is the exception and keeps its index. A quick job so writes four
-- index entries as it completes instead of five.
DROP INDEX jobs_state_id_idx;
CREATE INDEX jobs_state_id_idx ON jobs (state, id) WHERE state <> 'completed';
