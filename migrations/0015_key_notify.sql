-- 0015_key_notify.sql — every change to api_keys is announced on the channel leakd_keys.
--
-- Each `leakd serve` checks API keys against a cache of their hashes, which it reloaded only
-- every 10 s: a key revoked (`leakd key revoke`, or an UPDATE by hand) went on working for up
-- to 10 s on every instance. Each instance now LISTENs on leakd_keys and reloads within about
-- a second of the change; the 10 s reload stays as the net for a notification missed while its
-- connection was down. One notification a statement: NOTIFY folds duplicates within a
-- transaction, and the payload is empty because the whole cache is reloaded anyway.

CREATE FUNCTION leakd_keys_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('leakd_keys', '');
    RETURN NULL;
END
$$;

CREATE TRIGGER api_keys_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON api_keys
    FOR EACH STATEMENT EXECUTE FUNCTION leakd_keys_changed();
