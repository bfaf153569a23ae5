-- 0014_app_admin_keys.sql — an admin key may belong to one app.
--
-- `leakd key create APP admin` (ARCHITECTURE.md) makes a key that may do everything on APP:
-- upload, read, and PATCH a group's status. An admin key with no app (`leakd key create
-- --admin`) still covers every app. Before this, only the latter existed, and a team that
-- needed to triage its own leaks had to be given a key to every app's.

ALTER TABLE api_keys DROP CONSTRAINT api_keys_check;
ALTER TABLE api_keys ADD CONSTRAINT api_keys_app_check CHECK (kind = 'admin' OR app_id IS NOT NULL);
COMMENT ON COLUMN api_keys.app_id IS 'the key''s app; NULL only for an admin key of every app';
