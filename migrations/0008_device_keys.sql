-- 0008_device_keys.sql — a group's devices as one 16-byte key per (signature, install_id)
-- instead of the two strings.
--
-- leak_group_devices exists to tell whether a device is new to a group; nothing reads an
-- install_id back from it. Keyed by (app_id, signature, install_id) its index entries were
-- 80-100 bytes, and every traces report inserts one at a random place in it: under sustained
-- load it outgrew shared_buffers (13,000 pages after ~1 million pairs), and in the first
-- second or two after each checkpoint started, nearly every one of its pages went to the WAL
-- as a full-page image (9,500 of the 11,500 images in 4 s at 5,000 reports/s). The key is now
-- the first 16 bytes of sha256(signature || install_id) (the signature is always 40
-- characters, so the concatenation is unambiguous), as a uuid: index entries of 36 bytes. Two
-- pairs would share a key with a probability of about n^2 / 2^129 for n pairs.
--
-- The table is rewritten: on a server with millions of pairs this takes a while, during which
-- reports wait (docs/operations.md).

CREATE TABLE leak_group_device_keys (
    app_id      bigint NOT NULL,
    device_key  uuid NOT NULL,
    first_seen  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (app_id, device_key)
);

INSERT INTO leak_group_device_keys (app_id, device_key, first_seen)
SELECT app_id, encode(substring(sha256(convert_to(signature || install_id, 'UTF8')) FOR 16), 'hex')::uuid,
       min(first_seen)
FROM leak_group_devices
GROUP BY 1, 2;

DROP TABLE leak_group_devices;
ALTER TABLE leak_group_device_keys RENAME TO leak_group_devices;
ALTER INDEX leak_group_device_keys_pkey RENAME TO leak_group_devices_pkey;
