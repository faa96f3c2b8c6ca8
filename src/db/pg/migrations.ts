import type { Migration } from '../migrations'

/**
 * The schema of src/db/migrations.ts in PostgreSQL's dialect (#30), one migration per SQLite
 * migration, same version and name, so that a schema version means the same tables on both
 * databases (test/pg-migrate.test.ts compares them column by column). Append here whenever a
 * migration is appended there. Never edit one that has shipped.
 *
 * How SQLite's schema is carried over:
 * - Every TEXT column is COLLATE "C": byte order of UTF-8, as SQLite compares TEXT (BINARY), so
 *   keyset pages and S3 key order are the same on both, whatever the database's locale.
 * - INTEGER holding times (epoch ms) and byte counts is BIGINT (the bridge reads it back as a
 *   number); 0/1 flags and small counters stay INTEGER. BLOB is BYTEA.
 * - STRICT and WITHOUT ROWID have no equivalent and need none (PostgreSQL's types are strict;
 *   every table is a heap with its primary key index).
 * - A trigger is a plpgsql function plus the trigger; WHEN and UPDATE OF carry over as they are.
 *   An upsert names its conflict target, which PostgreSQL requires.
 * - A PostgreSQL database starts empty: its data comes from `coffer migrate-metadata` (to come),
 *   which copies a SQLite database at the same version. So the statements of SQLite's migrations
 *   that rewrote rows of older versions (5's name keys, 13's file names, 17's versions of
 *   existing objects) are left out; they would touch no row.
 */
const T = 'TEXT COLLATE "C"'

/** Bytes a file row holds against its quotas (migrations.ts `charge`). */
const charge = (row: 'NEW' | 'OLD') => `(CASE WHEN ${row}.deleted_at IS NULL AND ${row}.status <> 'failed' THEN ${row}.size_bytes ELSE 0 END)`

/** A row trigger running `body` (plpgsql statements) after `event`, optionally only WHEN `when`. */
const trigger = (name: string, event: string, table: string, body: string, when?: string) => `
CREATE FUNCTION ${name}() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
${body}
  RETURN NULL;
END
$fn$;
CREATE TRIGGER ${name} AFTER ${event} ON ${table} FOR EACH ROW${when ? ` WHEN (${when})` : ''} EXECUTE FUNCTION ${name}();
`

export const PG_MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: 'tenants, workspaces, blobs, files',
    sql: `
-- SQLite's name UNIQUE COLLATE NOCASE (ASCII case-folding) is subsumed by name_key (migration 5),
-- which folds every case and normalises: no pair of names it refuses is accepted by name_key.
CREATE TABLE tenants (
  id             ${T} PRIMARY KEY,
  name           ${T} NOT NULL,
  key_hash       BYTEA NOT NULL UNIQUE,
  key_kind       ${T} NOT NULL CHECK (key_kind IN ('live', 'test')),
  webhook_secret ${T} NOT NULL,
  quota_bytes    BIGINT NOT NULL CHECK (quota_bytes >= 0),
  used_bytes     BIGINT NOT NULL DEFAULT 0 CHECK (used_bytes >= 0),
  allowed_types  ${T} NOT NULL,
  created_at     BIGINT NOT NULL
);

CREATE TABLE workspaces (
  id          ${T} PRIMARY KEY,
  tenant_id   ${T} NOT NULL REFERENCES tenants(id),
  name        ${T} NOT NULL,
  slug        ${T} NOT NULL,
  quota_bytes BIGINT CHECK (quota_bytes IS NULL OR quota_bytes >= 0),
  used_bytes  BIGINT NOT NULL DEFAULT 0 CHECK (used_bytes >= 0),
  metadata    ${T},
  created_at  BIGINT NOT NULL,
  updated_at  BIGINT NOT NULL,
  deleted_at  BIGINT
);
CREATE UNIQUE INDEX workspaces_slug ON workspaces (tenant_id, slug) WHERE deleted_at IS NULL;

CREATE TABLE blobs (
  sha256     ${T} PRIMARY KEY,
  size_bytes BIGINT NOT NULL CHECK (size_bytes >= 0),
  created_at BIGINT NOT NULL
);

CREATE TABLE files (
  id                ${T} PRIMARY KEY,
  tenant_id         ${T} NOT NULL REFERENCES tenants(id),
  workspace_id      ${T} REFERENCES workspaces(id),
  original_name     ${T} NOT NULL,
  file_type         ${T} NOT NULL,
  status            ${T} NOT NULL CHECK (status IN ('pending', 'completed', 'failed')),
  size_bytes        BIGINT NOT NULL CHECK (size_bytes >= 0),
  declared_size     BIGINT,
  sha256            ${T} REFERENCES blobs(sha256),
  context           ${T} NOT NULL DEFAULT '',
  tags              ${T} NOT NULL DEFAULT '{}',
  metadata          ${T},
  webhook_url       ${T},
  upload_expires_at BIGINT NOT NULL,
  created_at        BIGINT NOT NULL,
  completed_at      BIGINT,
  deleted_at        BIGINT,
  CHECK ((status = 'completed') = (sha256 IS NOT NULL))
);
CREATE INDEX files_list ON files (tenant_id, created_at DESC, id DESC) WHERE deleted_at IS NULL;
CREATE INDEX files_by_workspace ON files (workspace_id, created_at DESC, id DESC) WHERE deleted_at IS NULL;
CREATE INDEX files_by_type ON files (tenant_id, file_type, created_at DESC, id DESC) WHERE deleted_at IS NULL;
CREATE INDEX files_by_context ON files (tenant_id, context, created_at DESC, id DESC) WHERE deleted_at IS NULL;
CREATE INDEX files_pending ON files (upload_expires_at) WHERE status = 'pending' AND deleted_at IS NULL;
CREATE INDEX files_deleted ON files (deleted_at) WHERE deleted_at IS NOT NULL;
CREATE INDEX files_sha256 ON files (sha256) WHERE sha256 IS NOT NULL;

CREATE TABLE file_counts (
  tenant_id    ${T} NOT NULL,
  workspace_id ${T} NOT NULL,
  file_type    ${T} NOT NULL,
  context      ${T} NOT NULL,
  n            BIGINT NOT NULL CHECK (n >= 0),
  PRIMARY KEY (tenant_id, workspace_id, file_type, context)
);
${trigger(
  'files_after_insert',
  'INSERT',
  'files',
  `  UPDATE tenants SET used_bytes = used_bytes + ${charge('NEW')} WHERE id = NEW.tenant_id;
  UPDATE workspaces SET used_bytes = used_bytes + ${charge('NEW')} WHERE id = NEW.workspace_id;
  IF NEW.deleted_at IS NULL THEN
    INSERT INTO file_counts (tenant_id, workspace_id, file_type, context, n)
      VALUES (NEW.tenant_id, coalesce(NEW.workspace_id, ''), NEW.file_type, NEW.context, 1)
      ON CONFLICT (tenant_id, workspace_id, file_type, context) DO UPDATE SET n = file_counts.n + 1;
  END IF;`,
)}
${trigger(
  'files_after_update',
  'UPDATE OF status, size_bytes, deleted_at',
  'files',
  `  UPDATE tenants SET used_bytes = used_bytes - ${charge('OLD')} + ${charge('NEW')} WHERE id = NEW.tenant_id;
  UPDATE workspaces SET used_bytes = used_bytes - ${charge('OLD')} + ${charge('NEW')} WHERE id = NEW.workspace_id;
  IF OLD.deleted_at IS NULL AND NEW.deleted_at IS NOT NULL THEN
    UPDATE file_counts SET n = n - 1
      WHERE tenant_id = OLD.tenant_id AND workspace_id = coalesce(OLD.workspace_id, '')
        AND file_type = OLD.file_type AND context = OLD.context;
  END IF;`,
)}
${trigger(
  'files_after_delete',
  'DELETE',
  'files',
  `  UPDATE tenants SET used_bytes = used_bytes - ${charge('OLD')} WHERE id = OLD.tenant_id;
  UPDATE workspaces SET used_bytes = used_bytes - ${charge('OLD')} WHERE id = OLD.workspace_id;
  IF OLD.deleted_at IS NULL THEN
    UPDATE file_counts SET n = n - 1
      WHERE tenant_id = OLD.tenant_id AND workspace_id = coalesce(OLD.workspace_id, '')
        AND file_type = OLD.file_type AND context = OLD.context;
  END IF;`,
)}
`,
  },
  {
    version: 2,
    name: 'webhook outbox',
    sql: `
CREATE TABLE outbox (
  id              ${T} PRIMARY KEY,
  tenant_id       ${T} NOT NULL REFERENCES tenants(id),
  file_id         ${T} NOT NULL,
  event           ${T} NOT NULL CONSTRAINT outbox_event_check CHECK (event IN ('file.uploaded', 'file.failed')),
  url             ${T} NOT NULL,
  payload         ${T} NOT NULL,
  status          ${T} NOT NULL CHECK (status IN ('pending', 'delivered', 'dead')),
  attempts        INTEGER NOT NULL DEFAULT 0,
  next_attempt_at BIGINT NOT NULL,
  last_error      ${T},
  created_at      BIGINT NOT NULL,
  updated_at      BIGINT NOT NULL,
  delivered_at    BIGINT
);
CREATE INDEX outbox_due ON outbox (next_attempt_at) WHERE status = 'pending';
CREATE INDEX outbox_by_status ON outbox (status, created_at);
`,
  },
  {
    version: 3,
    name: 'blob totals',
    sql: `
CREATE TABLE blob_totals (
  id    INTEGER PRIMARY KEY CHECK (id = 1),
  count BIGINT NOT NULL CHECK (count >= 0),
  bytes BIGINT NOT NULL CHECK (bytes >= 0)
);
INSERT INTO blob_totals (id, count, bytes) SELECT 1, count(*), coalesce(sum(size_bytes), 0) FROM blobs;
${trigger('blobs_after_insert', 'INSERT', 'blobs', '  UPDATE blob_totals SET count = count + 1, bytes = bytes + NEW.size_bytes WHERE id = 1;')}
${trigger('blobs_after_delete', 'DELETE', 'blobs', '  UPDATE blob_totals SET count = count - 1, bytes = bytes - OLD.size_bytes WHERE id = 1;')}
`,
  },
  {
    version: 4,
    name: 'tenant signing generation',
    sql: `ALTER TABLE tenants ADD COLUMN signing_generation INTEGER NOT NULL DEFAULT 0 CHECK (signing_generation >= 0);`,
  },
  {
    version: 5,
    name: 'tenant names compared case-folded and NFC-normalised',
    sql: `
ALTER TABLE tenants ADD COLUMN name_key ${T} NOT NULL DEFAULT '';
CREATE UNIQUE INDEX tenants_name_key ON tenants (name_key);
`,
  },
  {
    version: 6,
    name: 's3: object keys, credentials, multipart uploads',
    sql: `
ALTER TABLE files ADD COLUMN object_key ${T};
ALTER TABLE files ADD COLUMN object_info ${T};
CREATE UNIQUE INDEX files_object_key ON files (workspace_id, object_key) WHERE deleted_at IS NULL AND object_key IS NOT NULL;

CREATE TABLE s3_credentials (
  access_key_id ${T} PRIMARY KEY,
  tenant_id     ${T} NOT NULL REFERENCES tenants(id),
  secret_sealed BYTEA NOT NULL,
  created_at    BIGINT NOT NULL
);
CREATE INDEX s3_credentials_by_tenant ON s3_credentials (tenant_id, created_at);

CREATE TABLE s3_uploads (
  id           ${T} PRIMARY KEY,
  tenant_id    ${T} NOT NULL REFERENCES tenants(id),
  workspace_id ${T} NOT NULL REFERENCES workspaces(id),
  object_key   ${T} NOT NULL,
  object_info  ${T} NOT NULL,
  created_at   BIGINT NOT NULL,
  expires_at   BIGINT NOT NULL
);
CREATE INDEX s3_uploads_by_key ON s3_uploads (workspace_id, object_key, id);
CREATE INDEX s3_uploads_expiry ON s3_uploads (expires_at);

CREATE TABLE s3_parts (
  upload_id   ${T} NOT NULL REFERENCES s3_uploads(id),
  part_number INTEGER NOT NULL CHECK (part_number BETWEEN 1 AND 10000),
  size_bytes  BIGINT NOT NULL CHECK (size_bytes >= 0),
  md5         ${T} NOT NULL,
  sha256      ${T} NOT NULL REFERENCES blobs(sha256),
  created_at  BIGINT NOT NULL,
  PRIMARY KEY (upload_id, part_number)
);
CREATE INDEX s3_parts_sha256 ON s3_parts (sha256);
${trigger(
  's3_parts_after_insert',
  'INSERT',
  's3_parts',
  `  UPDATE tenants SET used_bytes = used_bytes + NEW.size_bytes WHERE id = (SELECT tenant_id FROM s3_uploads WHERE id = NEW.upload_id);
  UPDATE workspaces SET used_bytes = used_bytes + NEW.size_bytes WHERE id = (SELECT workspace_id FROM s3_uploads WHERE id = NEW.upload_id);`,
)}
${trigger(
  's3_parts_after_delete',
  'DELETE',
  's3_parts',
  `  UPDATE tenants SET used_bytes = used_bytes - OLD.size_bytes WHERE id = (SELECT tenant_id FROM s3_uploads WHERE id = OLD.upload_id);
  UPDATE workspaces SET used_bytes = used_bytes - OLD.size_bytes WHERE id = (SELECT workspace_id FROM s3_uploads WHERE id = OLD.upload_id);`,
)}
`,
  },
  {
    version: 7,
    name: 'blob leases and tombstones (remote stores)',
    sql: `
CREATE TABLE blob_leases (
  upload_id  ${T} PRIMARY KEY,
  sha256     ${T} NOT NULL,
  expires_at BIGINT NOT NULL
);
CREATE INDEX blob_leases_by_sha ON blob_leases (sha256);
CREATE TABLE blob_tombstones (
  sha256        ${T} PRIMARY KEY,
  created_at    BIGINT NOT NULL,
  claimed_until BIGINT NOT NULL
);
`,
  },
  {
    version: 8,
    name: 'tenant deletion',
    sql: `
ALTER TABLE tenants ADD COLUMN deleted_at BIGINT;
CREATE INDEX tenants_list ON tenants (created_at DESC, id DESC) WHERE deleted_at IS NULL;
CREATE INDEX files_deleted_by_tenant ON files (tenant_id) WHERE deleted_at IS NOT NULL;
`,
  },
  {
    version: 9,
    name: 'outbox by tenant',
    sql: `CREATE INDEX outbox_by_tenant ON outbox (tenant_id, created_at DESC, id DESC);`,
  },
  {
    version: 10,
    name: 'workspace webhooks: workspaces.webhook_url, file.deleted events',
    sql: `
ALTER TABLE workspaces ADD COLUMN webhook_url ${T};
-- PostgreSQL alters a CHECK in place, where SQLite rebuilt the table.
ALTER TABLE outbox DROP CONSTRAINT outbox_event_check,
  ADD CONSTRAINT outbox_event_check CHECK (event IN ('file.uploaded', 'file.failed', 'file.deleted'));
`,
  },
  {
    version: 11,
    name: 'blob_inline: small blobs stored in the database',
    sql: `
CREATE TABLE blob_inline (
  sha256     ${T} PRIMARY KEY,
  content    BYTEA NOT NULL,
  created_at BIGINT NOT NULL
);
`,
  },
  {
    version: 12,
    name: 's3 multipart: completed uploads remembered, deferred blob releases',
    sql: `
CREATE TABLE s3_completed_uploads (
  id           ${T} PRIMARY KEY,
  workspace_id ${T} NOT NULL,
  file_id      ${T} NOT NULL,
  expires_at   BIGINT NOT NULL
);
CREATE INDEX s3_completed_uploads_expiry ON s3_completed_uploads (expires_at);
CREATE TABLE blob_releases (
  sha256     ${T} PRIMARY KEY,
  created_at BIGINT NOT NULL
);
`,
  },
  {
    version: 13,
    name: 'file names the handshake would refuse are made safe',
    // SQLite's migration 13 rewrote rows written before it: a new database has none.
    sql: `SELECT 1;`,
  },
  {
    version: 14,
    name: 's3: part layout and checksums of multipart objects',
    sql: `
CREATE TABLE s3_object_parts (
  file_id     ${T} NOT NULL,
  part_number INTEGER NOT NULL CHECK (part_number BETWEEN 1 AND 10000),
  size_bytes  BIGINT NOT NULL CHECK (size_bytes >= 0),
  checksum    ${T},
  PRIMARY KEY (file_id, part_number)
);
${trigger('s3_object_parts_file_deleted', 'DELETE', 'files', '  DELETE FROM s3_object_parts WHERE file_id = OLD.id;')}
ALTER TABLE s3_parts ADD COLUMN checksum ${T};
`,
  },
  {
    version: 15,
    name: 's3: bucket configuration documents',
    sql: `
CREATE TABLE bucket_configs (
  workspace_id ${T} NOT NULL,
  name         ${T} NOT NULL,
  document     ${T} NOT NULL,
  updated_at   BIGINT NOT NULL,
  PRIMARY KEY (workspace_id, name)
);
${trigger(
  'bucket_configs_workspace_soft_deleted',
  'UPDATE OF deleted_at',
  'workspaces',
  '  DELETE FROM bucket_configs WHERE workspace_id = NEW.id;',
  'NEW.deleted_at IS NOT NULL',
)}
${trigger('bucket_configs_workspace_deleted', 'DELETE', 'workspaces', '  DELETE FROM bucket_configs WHERE workspace_id = OLD.id;')}
`,
  },
  {
    version: 16,
    name: 'encryption at rest: the wrapped data-dir key',
    sql: `
CREATE TABLE encryption (
  id              INTEGER PRIMARY KEY CHECK (id = 1),
  wrapped_key     BYTEA NOT NULL,
  key_id          BIGINT NOT NULL,
  plain_remaining INTEGER NOT NULL CHECK (plain_remaining IN (0, 1)),
  created_at      BIGINT NOT NULL
);
`,
  },
  {
    version: 17,
    name: 's3 versioning: object versions, bucket versioning state',
    sql: `
ALTER TABLE workspaces ADD COLUMN versioning ${T} CHECK (versioning IN ('Enabled', 'Suspended'));

CREATE TABLE object_versions (
  workspace_id  ${T} NOT NULL,
  object_key    ${T} NOT NULL,
  version_id    ${T} NOT NULL,
  seq           BIGINT NOT NULL CHECK (seq >= 1),
  tenant_id     ${T} NOT NULL,
  file_id       ${T},
  size_bytes    BIGINT NOT NULL CHECK (size_bytes >= 0),
  created_at    BIGINT NOT NULL,
  noncurrent_at BIGINT,
  PRIMARY KEY (workspace_id, object_key, version_id),
  CHECK (file_id IS NOT NULL OR size_bytes = 0)
);
CREATE UNIQUE INDEX object_versions_order ON object_versions (workspace_id, object_key, seq DESC);
CREATE UNIQUE INDEX object_versions_file ON object_versions (file_id) WHERE file_id IS NOT NULL;
CREATE INDEX object_versions_noncurrent ON object_versions (noncurrent_at) WHERE noncurrent_at IS NOT NULL;
CREATE INDEX object_versions_by_tenant ON object_versions (tenant_id);
${trigger(
  'object_versions_after_insert',
  'INSERT',
  'object_versions',
  `  UPDATE tenants SET used_bytes = used_bytes + NEW.size_bytes WHERE id = NEW.tenant_id;
  UPDATE workspaces SET used_bytes = used_bytes + NEW.size_bytes WHERE id = NEW.workspace_id;`,
  'NEW.noncurrent_at IS NOT NULL',
)}
${trigger(
  'object_versions_after_update',
  'UPDATE OF noncurrent_at, size_bytes',
  'object_versions',
  `  UPDATE tenants SET used_bytes = used_bytes
      - (CASE WHEN OLD.noncurrent_at IS NULL THEN 0 ELSE OLD.size_bytes END)
      + (CASE WHEN NEW.noncurrent_at IS NULL THEN 0 ELSE NEW.size_bytes END)
    WHERE id = NEW.tenant_id;
  UPDATE workspaces SET used_bytes = used_bytes
      - (CASE WHEN OLD.noncurrent_at IS NULL THEN 0 ELSE OLD.size_bytes END)
      + (CASE WHEN NEW.noncurrent_at IS NULL THEN 0 ELSE NEW.size_bytes END)
    WHERE id = NEW.workspace_id;`,
)}
${trigger(
  'object_versions_after_delete',
  'DELETE',
  'object_versions',
  `  UPDATE tenants SET used_bytes = used_bytes - OLD.size_bytes WHERE id = OLD.tenant_id;
  UPDATE workspaces SET used_bytes = used_bytes - OLD.size_bytes WHERE id = OLD.workspace_id;`,
  'OLD.noncurrent_at IS NOT NULL',
)}
${trigger(
  'files_after_undelete',
  'UPDATE OF deleted_at',
  'files',
  `  INSERT INTO file_counts (tenant_id, workspace_id, file_type, context, n)
    VALUES (NEW.tenant_id, coalesce(NEW.workspace_id, ''), NEW.file_type, NEW.context, 1)
    ON CONFLICT (tenant_id, workspace_id, file_type, context) DO UPDATE SET n = file_counts.n + 1;`,
  'OLD.deleted_at IS NOT NULL AND NEW.deleted_at IS NULL',
)}
${trigger(
  'workspaces_deleted_versions',
  'UPDATE OF deleted_at',
  'workspaces',
  '  DELETE FROM object_versions WHERE workspace_id = NEW.id;',
  'OLD.deleted_at IS NULL AND NEW.deleted_at IS NOT NULL',
)}
`,
  },
  {
    version: 18,
    name: 's3: live buckets by name across tenants',
    sql: `CREATE INDEX workspaces_live_slug ON workspaces (slug) WHERE deleted_at IS NULL;`,
  },
  {
    version: 19,
    name: 'leases: one holder at a time for background jobs and claims',
    sql: `
CREATE TABLE leases (
  name       ${T} PRIMARY KEY,
  holder     ${T} NOT NULL,
  expires_at BIGINT NOT NULL
);
`,
  },
  {
    version: 20,
    name: 's3 object lock: retention and legal hold of versions',
    sql: `
ALTER TABLE object_versions ADD COLUMN lock_mode ${T} CHECK (lock_mode IN ('GOVERNANCE', 'COMPLIANCE'));
ALTER TABLE object_versions ADD COLUMN lock_until BIGINT;
ALTER TABLE object_versions ADD COLUMN legal_hold INTEGER NOT NULL DEFAULT 0 CHECK (legal_hold IN (0, 1));
CREATE INDEX object_versions_locked ON object_versions (workspace_id) WHERE lock_until IS NOT NULL OR legal_hold = 1;

-- PostgreSQL only: what SQLite's PRAGMA data_version tells the authentication caches (a tenant's
-- key, settings or existence, or an S3 credential, changed by another connection), for every node
-- on the database: bumped in the transaction of the change, read on each request
-- (TenantsRepo.dataVersion), so a key revoked on one node is refused by the others on their next
-- request (#30). Statement triggers, and on tenants only for the columns authentication reads:
-- the usage the upload path updates on every commit leaves it alone.
CREATE TABLE auth_version (
  id      INTEGER PRIMARY KEY CHECK (id = 1),
  version BIGINT NOT NULL
);
INSERT INTO auth_version (id, version) VALUES (1, 0);
CREATE FUNCTION auth_version_bump() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
  UPDATE auth_version SET version = version + 1 WHERE id = 1;
  RETURN NULL;
END
$fn$;
CREATE TRIGGER tenants_auth_changed AFTER INSERT OR DELETE OR UPDATE OF
  name, name_key, key_hash, key_kind, webhook_secret, quota_bytes, allowed_types, signing_generation, deleted_at
  ON tenants FOR EACH STATEMENT EXECUTE FUNCTION auth_version_bump();
CREATE TRIGGER s3_credentials_auth_changed AFTER INSERT OR DELETE OR UPDATE
  ON s3_credentials FOR EACH STATEMENT EXECUTE FUNCTION auth_version_bump();
`,
  },
  {
    version: 21,
    name: 'versions: keys whose current version is a delete marker, newest deletion first',
    sql: `
-- As SQLite's migration 21 (#25): the API's list of deleted files that can be restored.
CREATE INDEX object_versions_deleted_keys ON object_versions (tenant_id, created_at, workspace_id, object_key)
  WHERE file_id IS NULL AND noncurrent_at IS NULL;
CREATE INDEX object_versions_deleted_keys_in_workspace ON object_versions (workspace_id, created_at, object_key)
  WHERE file_id IS NULL AND noncurrent_at IS NULL;
`,
  },
  {
    version: 22,
    name: 'tenants: whether a tenant manages its own S3 credentials',
    sql: `
-- As SQLite's migration 22 (#31). Not among the columns of tenants_auth_changed: authentication
-- never reads it; the tenant S3 credential routes read it from the row on each request.
ALTER TABLE tenants ADD COLUMN self_service_s3 INTEGER NOT NULL DEFAULT 1 CHECK (self_service_s3 IN (0, 1));
`,
  },
  {
    version: 23,
    name: 'encryption at rest: the SSE-S3 key',
    sql: `
-- As SQLite's migration 23 (#27): row 2 holds the SSE-S3 key, wrapped or not.
ALTER TABLE encryption DROP CONSTRAINT encryption_id_check;
ALTER TABLE encryption ADD CONSTRAINT encryption_id_check CHECK (id IN (1, 2));
ALTER TABLE encryption ADD COLUMN wrapped INTEGER NOT NULL DEFAULT 1 CHECK (wrapped IN (0, 1));
`,
  },
  {
    version: 24,
    name: 'webhook outbox: the node delivering an event',
    sql: `
-- As SQLite's migration 24 (#30): the node that claimed a due event (FOR UPDATE SKIP LOCKED).
ALTER TABLE outbox ADD COLUMN claimed_by ${T};
`,
  },
  {
    version: 25,
    name: 'the server secret every node of one database shares',
    sql: `
-- As SQLite's migration 25 (#30): the fingerprint of the secret the first node started with.
CREATE TABLE server_secret (
  id          INTEGER PRIMARY KEY CHECK (id = 1),
  fingerprint ${T} NOT NULL,
  created_at  BIGINT NOT NULL
);
`,
  },
]
