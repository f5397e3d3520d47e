-- The W3C trace context (`traceparent`) of the span that inserted a job, when the
-- inserting process exports traces: each attempt of the job is then a span of that
-- trace, whichever process runs it and however much later. NULL otherwise (and for
-- every job inserted before this column). A nullable column without a default is
-- added without rewriting the table.
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS trace_context text;
