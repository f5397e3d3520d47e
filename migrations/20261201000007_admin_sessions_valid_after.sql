-- A changed password ends the admin's other sessions: a session signed in before this
-- moment is over (the request guard ends it). NULL: no change since the admin was made.
ALTER TABLE admins ADD COLUMN sessions_valid_after timestamptz;
