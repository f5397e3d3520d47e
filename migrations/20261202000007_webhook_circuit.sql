-- A circuit breaker per webhook endpoint (src/domain/webhooks/circuit.rs): the attempts
-- that failed in a row (of any delivery; one that gets through sets it back to 0) and,
-- once they reach five, until when the endpoint gets no attempt but one trial.
-- Deliveries to it wait meanwhile without spending their attempts, so an endpoint that
-- is down takes no worker from the others, and delivers everything when it is back.
ALTER TABLE webhook_endpoints
    ADD COLUMN attempts_failed_in_a_row integer NOT NULL DEFAULT 0,
    ADD COLUMN circuit_open_until timestamptz;
