-- Queues an operator paused (`/admin/queues`, MCP `queues.pause`). Every process's
-- producer leaves a paused queue's jobs `available` (its fetch finds nothing while the
-- row is here), so a pause holds in every copy of StandMeet and across restarts; a
-- resume deletes the row and notifies the queue so that its jobs run at once.
CREATE TABLE job_queue_pauses (
    queue     text        PRIMARY KEY CHECK (char_length(queue) BETWEEN 1 AND 64),
    paused_at timestamptz NOT NULL DEFAULT now()
);
