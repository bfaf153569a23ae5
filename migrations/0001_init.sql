-- 0001_init.sql — apps, keys, reports (and their analysis queue), leak groups, occurrences.
-- Applied by `leakd migrate` in one transaction and recorded in schema_migrations.

CREATE TABLE apps (
    id          bigserial PRIMARY KEY,
    slug        text NOT NULL UNIQUE CHECK (slug ~ '^[a-z0-9][a-z0-9._-]{0,63}$'),
    created_at  timestamptz NOT NULL DEFAULT now()
);

-- Keys are printed once as lw_<kind>_<id>_<secret>; only the SHA-256 of the whole key is kept.
CREATE TABLE api_keys (
    id          bigserial PRIMARY KEY,
    app_id      bigint REFERENCES apps(id) ON DELETE CASCADE,   -- NULL for admin keys
    kind        text NOT NULL CHECK (kind IN ('ingest', 'read', 'admin')),
    key_hash    bytea NOT NULL UNIQUE CHECK (length(key_hash) = 32),
    created_at  timestamptz NOT NULL DEFAULT now(),
    revoked_at  timestamptz,
    CHECK ((kind = 'admin') = (app_id IS NULL))
);

-- A report is also its analysis job: status queued -> analyzing -> done | failed.
CREATE TABLE reports (
    id              uuid NOT NULL,                 -- the device's report_id
    app_id          bigint NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
    received_at     timestamptz NOT NULL DEFAULT now(),
    mode            text NOT NULL CHECK (mode IN ('heap', 'traces')),
    status          text NOT NULL CHECK (status IN ('queued', 'analyzing', 'done', 'failed')),
    error           text,
    app_version     text NOT NULL DEFAULT '',
    build           bigint NOT NULL DEFAULT 0,
    install_id      text NOT NULL DEFAULT '',
    meta            jsonb NOT NULL,
    blob_path       text,                          -- relative to LEAKD_DATA_DIR; NULL for traces reports
    blob_bytes      bigint NOT NULL DEFAULT 0,
    attempts        int NOT NULL DEFAULT 0,
    lease_owner     text,                          -- "host:pid" of the worker holding it
    lease_until     timestamptz,
    analyzed_at     timestamptz,
    leaks_found     int,
    result          jsonb,                         -- the trace JSON (format 1)
    PRIMARY KEY (app_id, id)
);
CREATE UNIQUE INDEX reports_id ON reports (id);
CREATE INDEX reports_queue ON reports (received_at) WHERE status IN ('queued', 'analyzing');
CREATE INDEX reports_received ON reports (received_at);

CREATE TABLE leak_groups (
    id                  bigserial PRIMARY KEY,
    app_id              bigint NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
    signature           text NOT NULL CHECK (signature ~ '^[0-9a-f]{40}$'),
    grouping_version    int NOT NULL DEFAULT 1,
    kind                text NOT NULL CHECK (kind IN ('application', 'library')),
    short_description   text NOT NULL,
    leaking_class       text NOT NULL,
    library_pattern     text,
    status              text NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'ignored', 'fixed', 'regressed')),
    fixed_in_build      bigint,                    -- the highest build seen when marked fixed
    occurrences         bigint NOT NULL DEFAULT 0,
    leaked_objects      bigint NOT NULL DEFAULT 0,
    devices             bigint NOT NULL DEFAULT 0,
    first_seen          timestamptz NOT NULL,
    last_seen           timestamptz NOT NULL,
    first_version       text NOT NULL,
    last_version        text NOT NULL,
    first_build         bigint NOT NULL,
    last_build          bigint NOT NULL,
    representative      jsonb NOT NULL,            -- one trace (trace JSON "traces" element)
    UNIQUE (app_id, signature)
);
CREATE INDEX leak_groups_last_seen ON leak_groups (app_id, last_seen DESC, id DESC);
CREATE INDEX leak_groups_occurrences ON leak_groups (app_id, occurrences DESC, id DESC);
CREATE INDEX leak_groups_first_version ON leak_groups (app_id, first_version);

-- One row per (report, group): a retried report never counts twice.
CREATE TABLE occurrences (
    report_id       uuid NOT NULL,
    group_id        bigint NOT NULL REFERENCES leak_groups(id) ON DELETE CASCADE,
    app_id          bigint NOT NULL,
    leaked_objects  bigint NOT NULL,
    app_version     text NOT NULL,
    build           bigint NOT NULL,
    install_id      text NOT NULL,
    seen_at         timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (report_id, group_id),
    FOREIGN KEY (app_id, report_id) REFERENCES reports(app_id, id) ON DELETE CASCADE
);
CREATE INDEX occurrences_group_seen ON occurrences (group_id, seen_at DESC);
CREATE INDEX occurrences_group_device ON occurrences (group_id, install_id);
CREATE INDEX occurrences_seen ON occurrences (seen_at);
