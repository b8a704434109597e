-- tokenbench DuckDB schema, version 16: images (workload.images). `images` is how many the
-- request carried (0 for none), `image_bytes` and `image_pixels` their encoded bytes and
-- pixels, `image_digest` a digest of their bytes in order (equal for byte-identical
-- images), `image_prompt_tokens` the image tokens the server reported
-- (usage.prompt_tokens_details.image_tokens; NULL where it reports none). NULL on rows
-- recorded before v16.
ALTER TABLE request_records ADD COLUMN IF NOT EXISTS images INTEGER;
ALTER TABLE request_records ADD COLUMN IF NOT EXISTS image_bytes BIGINT;
ALTER TABLE request_records ADD COLUMN IF NOT EXISTS image_pixels BIGINT;
ALTER TABLE request_records ADD COLUMN IF NOT EXISTS image_digest VARCHAR;
ALTER TABLE request_records ADD COLUMN IF NOT EXISTS image_prompt_tokens INTEGER;
