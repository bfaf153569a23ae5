-- 0002_group_devices.sql — the devices a leak group has been seen on, kept apart from
-- occurrences so that retention (which deletes old occurrences) does not make a device
-- seen again count as new.
CREATE TABLE leak_group_devices (
    group_id    bigint NOT NULL REFERENCES leak_groups(id) ON DELETE CASCADE,
    install_id  text NOT NULL CHECK (install_id <> ''),
    first_seen  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (group_id, install_id)
);

INSERT INTO leak_group_devices (group_id, install_id, first_seen)
SELECT group_id, install_id, min(seen_at) FROM occurrences WHERE install_id <> '' GROUP BY group_id, install_id
ON CONFLICT DO NOTHING;
