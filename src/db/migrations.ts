/**
 * Ordered, embedded schema migrations. Never edit one that has shipped: append a new one.
 * The SQL lives here rather than in .sql files because the single executable carries no files.
 */
export interface Migration {
  version: number
  name: string
  sql: string
}

/** Bytes a file row holds against its quotas: pending and completed files count, failed and deleted ones do not. */
const charge = (row: 'NEW' | 'OLD') => `(CASE WHEN ${row}.deleted_at IS NULL AND ${row}.status != 'failed' THEN ${row}.size_bytes ELSE 0 END)`

export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: 'tenants, workspaces, blobs, files',
    sql: `
CREATE TABLE tenants (
  id             TEXT PRIMARY KEY,
  name           TEXT NOT NULL UNIQUE COLLATE NOCASE,
  key_hash       BLOB NOT NULL UNIQUE,
  key_kind       TEXT NOT NULL CHECK (key_kind IN ('live', 'test')),
  webhook_secret TEXT NOT NULL,
  quota_bytes    INTEGER NOT NULL CHECK (quota_bytes >= 0),
  used_bytes     INTEGER NOT NULL DEFAULT 0 CHECK (used_bytes >= 0),
  allowed_types  TEXT NOT NULL,
  created_at     INTEGER NOT NULL
) STRICT;

CREATE TABLE workspaces (
  id          TEXT PRIMARY KEY,
  tenant_id   TEXT NOT NULL REFERENCES tenants(id),
  name        TEXT NOT NULL,
  slug        TEXT NOT NULL,
  quota_bytes INTEGER CHECK (quota_bytes IS NULL OR quota_bytes >= 0),
  used_bytes  INTEGER NOT NULL DEFAULT 0 CHECK (used_bytes >= 0),
  metadata    TEXT,
  created_at  INTEGER NOT NULL,
  updated_at  INTEGER NOT NULL,
  deleted_at  INTEGER
) STRICT;
-- A deleted workspace keeps its row (its files still point at it) but frees its slug.
CREATE UNIQUE INDEX workspaces_slug ON workspaces (tenant_id, slug) WHERE deleted_at IS NULL;

-- One row per stored content; a blob may be removed only when no file row references it.
CREATE TABLE blobs (
  sha256     TEXT PRIMARY KEY,
  size_bytes INTEGER NOT NULL CHECK (size_bytes >= 0),
  created_at INTEGER NOT NULL
) STRICT, WITHOUT ROWID;

CREATE TABLE files (
  id                TEXT PRIMARY KEY,
  tenant_id         TEXT NOT NULL REFERENCES tenants(id),
  workspace_id      TEXT REFERENCES workspaces(id),
  original_name     TEXT NOT NULL,
  file_type         TEXT NOT NULL,
  status            TEXT NOT NULL CHECK (status IN ('pending', 'completed', 'failed')),
  size_bytes        INTEGER NOT NULL CHECK (size_bytes >= 0),
  declared_size     INTEGER,
  sha256            TEXT REFERENCES blobs(sha256),
  context           TEXT NOT NULL DEFAULT '',
  tags              TEXT NOT NULL DEFAULT '{}',
  metadata          TEXT,
  webhook_url       TEXT,
  upload_expires_at INTEGER NOT NULL,
  created_at        INTEGER NOT NULL,
  completed_at      INTEGER,
  deleted_at        INTEGER,
  CHECK ((status = 'completed') = (sha256 IS NOT NULL))
) STRICT;
-- Keyset listing, newest first, one index per filter so no page scans more than it returns.
CREATE INDEX files_list ON files (tenant_id, created_at DESC, id DESC) WHERE deleted_at IS NULL;
CREATE INDEX files_by_workspace ON files (workspace_id, created_at DESC, id DESC) WHERE deleted_at IS NULL;
CREATE INDEX files_by_type ON files (tenant_id, file_type, created_at DESC, id DESC) WHERE deleted_at IS NULL;
CREATE INDEX files_by_context ON files (tenant_id, context, created_at DESC, id DESC) WHERE deleted_at IS NULL;
CREATE INDEX files_pending ON files (upload_expires_at) WHERE status = 'pending' AND deleted_at IS NULL;
CREATE INDEX files_deleted ON files (deleted_at) WHERE deleted_at IS NOT NULL;
CREATE INDEX files_sha256 ON files (sha256) WHERE sha256 IS NOT NULL;

-- Live-file counts per filter combination, so a listing's total costs the same with 1M files as with 1k.
CREATE TABLE file_counts (
  tenant_id    TEXT NOT NULL,
  workspace_id TEXT NOT NULL,
  file_type    TEXT NOT NULL,
  context      TEXT NOT NULL,
  n            INTEGER NOT NULL CHECK (n >= 0),
  PRIMARY KEY (tenant_id, workspace_id, file_type, context)
) STRICT, WITHOUT ROWID;

-- Quota usage and counts are maintained here, in the same statement as every change to a file row,
-- so no code path can forget to charge or release bytes, or release them twice.
CREATE TRIGGER files_after_insert AFTER INSERT ON files BEGIN
  UPDATE tenants SET used_bytes = used_bytes + ${charge('NEW')} WHERE id = NEW.tenant_id;
  UPDATE workspaces SET used_bytes = used_bytes + ${charge('NEW')} WHERE id = NEW.workspace_id;
  INSERT INTO file_counts (tenant_id, workspace_id, file_type, context, n)
    SELECT NEW.tenant_id, coalesce(NEW.workspace_id, ''), NEW.file_type, NEW.context, 1
    WHERE NEW.deleted_at IS NULL
    ON CONFLICT DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER files_after_update AFTER UPDATE OF status, size_bytes, deleted_at ON files BEGIN
  UPDATE tenants SET used_bytes = used_bytes - ${charge('OLD')} + ${charge('NEW')} WHERE id = NEW.tenant_id;
  UPDATE workspaces SET used_bytes = used_bytes - ${charge('OLD')} + ${charge('NEW')} WHERE id = NEW.workspace_id;
  UPDATE file_counts SET n = n - 1
    WHERE OLD.deleted_at IS NULL AND NEW.deleted_at IS NOT NULL
      AND tenant_id = OLD.tenant_id AND workspace_id = coalesce(OLD.workspace_id, '')
      AND file_type = OLD.file_type AND context = OLD.context;
END;

CREATE TRIGGER files_after_delete AFTER DELETE ON files BEGIN
  UPDATE tenants SET used_bytes = used_bytes - ${charge('OLD')} WHERE id = OLD.tenant_id;
  UPDATE workspaces SET used_bytes = used_bytes - ${charge('OLD')} WHERE id = OLD.workspace_id;
  UPDATE file_counts SET n = n - 1
    WHERE OLD.deleted_at IS NULL
      AND tenant_id = OLD.tenant_id AND workspace_id = coalesce(OLD.workspace_id, '')
      AND file_type = OLD.file_type AND context = OLD.context;
END;
`,
  },
  {
    version: 2,
    name: 'webhook outbox',
    sql: `
-- Events are written here in the same transaction as the change they report (completed or failed
-- upload); the in-process scheduler delivers them. A row ends delivered or dead, never deleted by
-- delivery, so the CLI can list and re-drive it.
CREATE TABLE outbox (
  id              TEXT PRIMARY KEY,
  tenant_id       TEXT NOT NULL REFERENCES tenants(id),
  file_id         TEXT NOT NULL,
  event           TEXT NOT NULL CHECK (event IN ('file.uploaded', 'file.failed')),
  url             TEXT NOT NULL,
  payload         TEXT NOT NULL,
  status          TEXT NOT NULL CHECK (status IN ('pending', 'delivered', 'dead')),
  attempts        INTEGER NOT NULL DEFAULT 0,
  next_attempt_at INTEGER NOT NULL,
  last_error      TEXT,
  created_at      INTEGER NOT NULL,
  updated_at      INTEGER NOT NULL,
  delivered_at    INTEGER
) STRICT;
CREATE INDEX outbox_due ON outbox (next_attempt_at) WHERE status = 'pending';
CREATE INDEX outbox_by_status ON outbox (status, created_at);
`,
  },
  {
    version: 3,
    name: 'blob totals',
    sql: `
-- Content on disk, kept by triggers so the metrics read one row instead of summing every blob.
CREATE TABLE blob_totals (
  id    INTEGER PRIMARY KEY CHECK (id = 1),
  count INTEGER NOT NULL CHECK (count >= 0),
  bytes INTEGER NOT NULL CHECK (bytes >= 0)
) STRICT;
INSERT INTO blob_totals (id, count, bytes) SELECT 1, count(*), coalesce(sum(size_bytes), 0) FROM blobs;
CREATE TRIGGER blobs_after_insert AFTER INSERT ON blobs BEGIN
  UPDATE blob_totals SET count = count + 1, bytes = bytes + NEW.size_bytes WHERE id = 1;
END;
CREATE TRIGGER blobs_after_delete AFTER DELETE ON blobs BEGIN
  UPDATE blob_totals SET count = count - 1, bytes = bytes - OLD.size_bytes WHERE id = 1;
END;
`,
  },
  {
    version: 4,
    name: 'tenant signing generation',
    sql: `
-- Part of the HKDF info of a tenant's URL-signing key: regenerating the tenant's key bumps it, so
-- every signed download URL and presigned upload path made with the old key stops verifying (#12).
ALTER TABLE tenants ADD COLUMN signing_generation INTEGER NOT NULL DEFAULT 0 CHECK (signing_generation >= 0);
`,
  },
  {
    version: 5,
    name: 'tenant names compared case-folded and NFC-normalised',
    sql: `
-- name_key is lib/text.ts nameKey(name), written with every name; coffer_name_key is that function,
-- registered on the connection (db/database.ts) for this migration. Tenants created before names
-- were compared this way may collide: the oldest keeps the key, the others get one that no new
-- name can take (NUL is refused in names), so they keep working under their names and no new
-- tenant can take a name that collides with any of them.
ALTER TABLE tenants ADD COLUMN name_key TEXT NOT NULL DEFAULT '';
UPDATE tenants SET name_key = coffer_name_key(name);
UPDATE tenants SET name_key = name_key || char(0) || id
  WHERE EXISTS (SELECT 1 FROM tenants o WHERE o.name_key = tenants.name_key AND (o.created_at, o.id) < (tenants.created_at, tenants.id));
CREATE UNIQUE INDEX tenants_name_key ON tenants (name_key);
`,
  },
  {
    version: 6,
    name: 's3: object keys, credentials, multipart uploads',
    sql: `
-- A file may carry an S3 object key, unique among the live files of its workspace (the bucket).
-- object_info holds what S3 writes store beside the bytes (ETag, Content-Type, user metadata, …), as JSON.
ALTER TABLE files ADD COLUMN object_key TEXT;
ALTER TABLE files ADD COLUMN object_info TEXT;
-- Files uploaded through the API into a workspace are objects too: key <fileId>/<fileName>.
UPDATE files SET object_key = id || '/' || original_name WHERE workspace_id IS NOT NULL;
-- Unique per workspace and the keyset of S3 listings: TEXT compares as memcmp of UTF-8, which is
-- S3's binary key order.
CREATE UNIQUE INDEX files_object_key ON files (workspace_id, object_key) WHERE deleted_at IS NULL AND object_key IS NOT NULL;

-- S3 credential pairs of a tenant. The secret is needed to verify SigV4, so it is stored encrypted
-- (AES-256-GCM under a key derived from the server secret), never in the clear.
CREATE TABLE s3_credentials (
  access_key_id TEXT PRIMARY KEY,
  tenant_id     TEXT NOT NULL REFERENCES tenants(id),
  secret_sealed BLOB NOT NULL,
  created_at    INTEGER NOT NULL
) STRICT;
CREATE INDEX s3_credentials_by_tenant ON s3_credentials (tenant_id, created_at);

-- Multipart uploads in progress. Their parts are blobs (durable once acknowledged) and are charged
-- to the tenant and workspace quotas by the triggers below until the upload completes or is aborted.
CREATE TABLE s3_uploads (
  id           TEXT PRIMARY KEY,
  tenant_id    TEXT NOT NULL REFERENCES tenants(id),
  workspace_id TEXT NOT NULL REFERENCES workspaces(id),
  object_key   TEXT NOT NULL,
  object_info  TEXT NOT NULL,
  created_at   INTEGER NOT NULL,
  expires_at   INTEGER NOT NULL
) STRICT;
CREATE INDEX s3_uploads_by_key ON s3_uploads (workspace_id, object_key, id);
CREATE INDEX s3_uploads_expiry ON s3_uploads (expires_at);

CREATE TABLE s3_parts (
  upload_id   TEXT NOT NULL REFERENCES s3_uploads(id),
  part_number INTEGER NOT NULL CHECK (part_number BETWEEN 1 AND 10000),
  size_bytes  INTEGER NOT NULL CHECK (size_bytes >= 0),
  md5         TEXT NOT NULL,
  sha256      TEXT NOT NULL REFERENCES blobs(sha256),
  created_at  INTEGER NOT NULL,
  PRIMARY KEY (upload_id, part_number)
) STRICT, WITHOUT ROWID;
CREATE INDEX s3_parts_sha256 ON s3_parts (sha256);

CREATE TRIGGER s3_parts_after_insert AFTER INSERT ON s3_parts BEGIN
  UPDATE tenants SET used_bytes = used_bytes + NEW.size_bytes WHERE id = (SELECT tenant_id FROM s3_uploads WHERE id = NEW.upload_id);
  UPDATE workspaces SET used_bytes = used_bytes + NEW.size_bytes WHERE id = (SELECT workspace_id FROM s3_uploads WHERE id = NEW.upload_id);
END;
CREATE TRIGGER s3_parts_after_delete AFTER DELETE ON s3_parts BEGIN
  UPDATE tenants SET used_bytes = used_bytes - OLD.size_bytes WHERE id = (SELECT tenant_id FROM s3_uploads WHERE id = OLD.upload_id);
  UPDATE workspaces SET used_bytes = used_bytes - OLD.size_bytes WHERE id = (SELECT workspace_id FROM s3_uploads WHERE id = OLD.upload_id);
END;
`,
  },
  {
    version: 7,
    name: 'blob leases and tombstones (remote stores)',
    sql: `
-- A remote blob store (S3) cannot delete inside a SQLite transaction, so deletions and uploads of
-- the same content are ordered through these rows instead (services/remote-blobs.ts, issue #16).
-- An upload leases its hash before writing the object; the collector skips leased hashes.
CREATE TABLE blob_leases (
  upload_id  TEXT PRIMARY KEY,
  sha256     TEXT NOT NULL,
  expires_at INTEGER NOT NULL
) STRICT;
CREATE INDEX blob_leases_by_sha ON blob_leases (sha256);
-- A hash whose object is being deleted: no upload writes it until the row is gone. The deleter
-- claims the row for a bounded time, so a crashed deleter's work is taken over, never raced.
CREATE TABLE blob_tombstones (
  sha256        TEXT PRIMARY KEY,
  created_at    INTEGER NOT NULL,
  claimed_until INTEGER NOT NULL
) STRICT;
`,
  },
  {
    version: 8,
    name: 'tenant deletion',
    sql: `
-- A deleted tenant keeps its row while its soft-deleted files wait out the retention (they point
-- at it); the garbage collector removes the row once the last of them is purged (#13).
ALTER TABLE tenants ADD COLUMN deleted_at INTEGER;
-- Keyset listing of the admin API, newest first, over live tenants only.
CREATE INDEX tenants_list ON tenants (created_at DESC, id DESC) WHERE deleted_at IS NULL;
-- Whether a deleted tenant still has files waiting for the collector, without a scan (files_list
-- covers its live files). Soft deletes maintain it; inserts of live rows do not touch it.
CREATE INDEX files_deleted_by_tenant ON files (tenant_id) WHERE deleted_at IS NOT NULL;
`,
  },
  {
    version: 9,
    name: 'outbox by tenant',
    sql: `
-- A tenant's recent webhook deliveries (GET /api/v1/webhooks/deliveries), newest first.
CREATE INDEX outbox_by_tenant ON outbox (tenant_id, created_at DESC, id DESC);
`,
  },
  {
    version: 10,
    name: 'workspace webhooks: workspaces.webhook_url, file.deleted events',
    sql: `
-- A workspace may name a URL notified of every upload completed into it and every deletion from it,
-- through either front (an S3 write is an upload like any other).
ALTER TABLE workspaces ADD COLUMN webhook_url TEXT;
-- SQLite cannot alter a CHECK: the outbox is rebuilt to accept file.deleted, rows and indexes kept.
CREATE TABLE outbox_new (
  id              TEXT PRIMARY KEY,
  tenant_id       TEXT NOT NULL REFERENCES tenants(id),
  file_id         TEXT NOT NULL,
  event           TEXT NOT NULL CHECK (event IN ('file.uploaded', 'file.failed', 'file.deleted')),
  url             TEXT NOT NULL,
  payload         TEXT NOT NULL,
  status          TEXT NOT NULL CHECK (status IN ('pending', 'delivered', 'dead')),
  attempts        INTEGER NOT NULL DEFAULT 0,
  next_attempt_at INTEGER NOT NULL,
  last_error      TEXT,
  created_at      INTEGER NOT NULL,
  updated_at      INTEGER NOT NULL,
  delivered_at    INTEGER
) STRICT;
INSERT INTO outbox_new SELECT id, tenant_id, file_id, event, url, payload, status, attempts, next_attempt_at, last_error, created_at, updated_at, delivered_at FROM outbox;
DROP TABLE outbox;
ALTER TABLE outbox_new RENAME TO outbox;
CREATE INDEX outbox_due ON outbox (next_attempt_at) WHERE status = 'pending';
CREATE INDEX outbox_by_status ON outbox (status, created_at);
CREATE INDEX outbox_by_tenant ON outbox (tenant_id, created_at DESC, id DESC);
`,
  },
  {
    version: 11,
    name: 'blob_inline: small blobs stored in the database',
    sql: `
-- The content of small blobs (up to the disk store's INLINE_MAX_BYTES), written in the transaction
-- that commits their first reference: one shared WAL flush instead of a file, its directory and
-- the directory entry, each with an fsync of its own (#15). Disk store only. A hash is stored
-- either here or as a file, never both; its blobs row is the same either way.
CREATE TABLE blob_inline (
  sha256     TEXT PRIMARY KEY,
  content    BLOB NOT NULL,
  created_at INTEGER NOT NULL
) STRICT;
`,
  },
  {
    version: 12,
    name: 's3 multipart: completed uploads remembered, deferred blob releases',
    sql: `
-- A completed multipart upload, remembered so that a Complete retried after its answer was lost
-- answers 200 with the same ETag, as AWS and RGW do (#24): until expires_at (the multipart TTL
-- after completion), and only while the object it made is still its key's current one.
CREATE TABLE s3_completed_uploads (
  id           TEXT PRIMARY KEY,
  workspace_id TEXT NOT NULL,
  file_id      TEXT NOT NULL,
  expires_at   INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
CREATE INDEX s3_completed_uploads_expiry ON s3_completed_uploads (expires_at);

-- Blobs a commit released whose content may only go once that commit is durable (the parts of a
-- completed multipart upload): recorded in the commit's transaction, removed by a later one. A
-- crash between the two leaves the row, which the server finishes at start and in its periodic
-- collection, where the unreferenced blobs used to wait for an operator's coffer gc (#24).
CREATE TABLE blob_releases (
  sha256     TEXT PRIMARY KEY,
  created_at INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
`,
  },
  {
    version: 13,
    name: 'file names the handshake would refuse are made safe',
    sql: `
-- An S3 object's name was its key's last segment as it came, so keys such as 'x<ESC>[31m',
-- 'a/.' or 'invoice<U+202E>fdp.exe' gave names the handshake refuses, which the API returned and
-- the CLI printed and wrote to disk as they were (#24). Such rows get the name an S3 write gives
-- now (s3/objects.ts nameOfKey, lib/text.ts toFileName: the key's last segment made safe, else
-- the file's id); files with no key (API uploads older than #12's rules) get their own name made
-- safe the same way. coffer_is_file_name and coffer_file_name are those functions, registered on
-- the connection (db/database.ts) for this migration. Keys are not touched.
UPDATE files SET original_name = coffer_file_name(coalesce(object_key, original_name), id)
  WHERE NOT coffer_is_file_name(original_name);
`,
  },
  {
    version: 14,
    name: 's3: part layout and checksums of multipart objects',
    sql: `
-- The parts a completed multipart object was assembled from, in order (#24): GetObject/HeadObject
-- with partNumber serve one part's bytes, GetObjectAttributes lists them. A table, not JSON in
-- files.object_info, because object_info is parsed on every GET and listing row, and an object may
-- have 10,000 parts. checksum: the part's base64 checksum when the upload had a checksum algorithm.
CREATE TABLE s3_object_parts (
  file_id     TEXT NOT NULL,
  part_number INTEGER NOT NULL CHECK (part_number BETWEEN 1 AND 10000),
  size_bytes  INTEGER NOT NULL CHECK (size_bytes >= 0),
  checksum    TEXT,
  PRIMARY KEY (file_id, part_number)
) STRICT, WITHOUT ROWID;
-- The layout goes with its file whichever path purges it (GC, tenant deletion).
CREATE TRIGGER s3_object_parts_file_deleted AFTER DELETE ON files BEGIN
  DELETE FROM s3_object_parts WHERE file_id = OLD.id;
END;
-- A part's checksum (x-amz-checksum-<algorithm>, base64), for uploads created with ChecksumAlgorithm.
ALTER TABLE s3_parts ADD COLUMN checksum TEXT;
`,
  },
  {
    version: 15,
    name: 's3: bucket configuration documents',
    sql: `
-- A bucket's configurations, one document per family (one table, not one per family):
-- name is the family ('cors', 'policy', 'public-access-block', 'tagging', 'lifecycle',
-- 'encryption', 'object-lock', 'acl', …), document its JSON as the family's service validated it.
-- Read by primary key on the requests that need one (a CORS preflight, an anonymous GET).
CREATE TABLE bucket_configs (
  workspace_id TEXT NOT NULL,
  name         TEXT NOT NULL,
  document     TEXT NOT NULL,
  updated_at   INTEGER NOT NULL,
  PRIMARY KEY (workspace_id, name)
) STRICT, WITHOUT ROWID;
-- A deleted bucket's configuration goes with it: a new bucket of the same name starts bare.
CREATE TRIGGER bucket_configs_workspace_soft_deleted AFTER UPDATE OF deleted_at ON workspaces
  WHEN NEW.deleted_at IS NOT NULL BEGIN
  DELETE FROM bucket_configs WHERE workspace_id = NEW.id;
END;
CREATE TRIGGER bucket_configs_workspace_deleted AFTER DELETE ON workspaces BEGIN
  DELETE FROM bucket_configs WHERE workspace_id = OLD.id;
END;
`,
  },
  {
    version: 16,
    name: 'encryption at rest: the wrapped data-dir key',
    sql: `
-- An encrypted data dir (#27, lib/encryption-keys.ts): the random data-dir key every blob key
-- derives from, wrapped (AES-256-GCM) by the master key the operator holds outside the data dir.
-- Its GCM tag is the key check value: a wrong master key is refused at start. One row, or none
-- (not encrypted). plain_remaining: blobs written before encryption was turned on may still be
-- stored in the clear (read as they are) until \`coffer encrypt-blobs\` has sealed them all.
CREATE TABLE encryption (
  id              INTEGER PRIMARY KEY CHECK (id = 1),
  wrapped_key     BLOB NOT NULL,
  key_id          INTEGER NOT NULL,
  plain_remaining INTEGER NOT NULL CHECK (plain_remaining IN (0, 1)),
  created_at      INTEGER NOT NULL
) STRICT;
`,
  },
  {
    version: 17,
    name: 's3 versioning: object versions, bucket versioning state',
    sql: `
-- A bucket's versioning state (#25): NULL never enabled ("unversioned"), else as S3 names it. Once
-- enabled it can be suspended, never returned to NULL, as AWS.
ALTER TABLE workspaces ADD COLUMN versioning TEXT CHECK (versioning IN ('Enabled', 'Suspended'));

-- Every version of every object key, whatever the bucket's state (an unversioned bucket's objects
-- are each their key's one 'null' version), so ListObjectVersions reads one table in one order.
-- The current version of a key is the row with noncurrent_at NULL: a content version whose file is
-- the key's live file (files.deleted_at NULL), or a delete marker (file_id NULL). A noncurrent
-- version keeps its file row, soft-deleted (hidden from the API, uncounted by file_counts) but
-- retained: the collector purges no file a version row references, so its content, object_info
-- and part layout stay, and its blob stays referenced (blobs.sizeIfUnreferenced sees the file row).
-- Quotas count every stored version (what AWS bills): a current version's bytes through its live
-- file (migration 1's triggers), a noncurrent one's through the triggers below.
--   seq: order among the key's versions, newest highest (max + 1 in the writing transaction).
--   version_id: S3's versionId, 'null' for the null version (at most one per key).
--   noncurrent_at: when a newer version replaced it (lifecycle's NoncurrentDays counts from here).
-- Object lock (retention mode/until, legal hold) attaches to a version: columns of this row.
CREATE TABLE object_versions (
  workspace_id  TEXT NOT NULL,
  object_key    TEXT NOT NULL,
  version_id    TEXT NOT NULL,
  seq           INTEGER NOT NULL CHECK (seq >= 1),
  tenant_id     TEXT NOT NULL,
  file_id       TEXT,
  size_bytes    INTEGER NOT NULL CHECK (size_bytes >= 0),
  created_at    INTEGER NOT NULL,
  noncurrent_at INTEGER,
  PRIMARY KEY (workspace_id, object_key, version_id),
  CHECK (file_id IS NOT NULL OR size_bytes = 0)
) STRICT;
-- ListObjectVersions' keyset: keys in binary order, each key's versions newest first.
CREATE UNIQUE INDEX object_versions_order ON object_versions (workspace_id, object_key, seq DESC);
CREATE UNIQUE INDEX object_versions_file ON object_versions (file_id) WHERE file_id IS NOT NULL;
-- Lifecycle's noncurrent expiry, oldest first.
CREATE INDEX object_versions_noncurrent ON object_versions (noncurrent_at) WHERE noncurrent_at IS NOT NULL;
CREATE INDEX object_versions_by_tenant ON object_versions (tenant_id);

CREATE TRIGGER object_versions_after_insert AFTER INSERT ON object_versions WHEN NEW.noncurrent_at IS NOT NULL BEGIN
  UPDATE tenants SET used_bytes = used_bytes + NEW.size_bytes WHERE id = NEW.tenant_id;
  UPDATE workspaces SET used_bytes = used_bytes + NEW.size_bytes WHERE id = NEW.workspace_id;
END;
CREATE TRIGGER object_versions_after_update AFTER UPDATE OF noncurrent_at, size_bytes ON object_versions BEGIN
  UPDATE tenants SET used_bytes = used_bytes
      - (CASE WHEN OLD.noncurrent_at IS NULL THEN 0 ELSE OLD.size_bytes END)
      + (CASE WHEN NEW.noncurrent_at IS NULL THEN 0 ELSE NEW.size_bytes END)
    WHERE id = NEW.tenant_id;
  UPDATE workspaces SET used_bytes = used_bytes
      - (CASE WHEN OLD.noncurrent_at IS NULL THEN 0 ELSE OLD.size_bytes END)
      + (CASE WHEN NEW.noncurrent_at IS NULL THEN 0 ELSE NEW.size_bytes END)
    WHERE id = NEW.workspace_id;
END;
CREATE TRIGGER object_versions_after_delete AFTER DELETE ON object_versions WHEN OLD.noncurrent_at IS NOT NULL BEGIN
  UPDATE tenants SET used_bytes = used_bytes - OLD.size_bytes WHERE id = OLD.tenant_id;
  UPDATE workspaces SET used_bytes = used_bytes - OLD.size_bytes WHERE id = OLD.workspace_id;
END;

-- A noncurrent version made current again (its newer versions deleted) is a live file again: it
-- counts again (migration 1 only counts files going the other way).
CREATE TRIGGER files_after_undelete AFTER UPDATE OF deleted_at ON files
  WHEN OLD.deleted_at IS NOT NULL AND NEW.deleted_at IS NULL BEGIN
  INSERT INTO file_counts (tenant_id, workspace_id, file_type, context, n)
    VALUES (NEW.tenant_id, coalesce(NEW.workspace_id, ''), NEW.file_type, NEW.context, 1)
    ON CONFLICT DO UPDATE SET n = n + 1;
END;

-- A deleted workspace (API delete, DeleteBucket, tenant deletion) takes its versions with it: their
-- files are soft-deleted in the same transaction and purged by the collector like any other.
CREATE TRIGGER workspaces_deleted_versions AFTER UPDATE OF deleted_at ON workspaces
  WHEN OLD.deleted_at IS NULL AND NEW.deleted_at IS NOT NULL BEGIN
  DELETE FROM object_versions WHERE workspace_id = NEW.id;
END;

-- The objects that exist now are their keys' null versions.
INSERT INTO object_versions (workspace_id, object_key, version_id, seq, tenant_id, file_id, size_bytes, created_at)
  SELECT workspace_id, object_key, 'null', 1, tenant_id, id, size_bytes, completed_at FROM files
  WHERE deleted_at IS NULL AND status = 'completed' AND workspace_id IS NOT NULL AND object_key IS NOT NULL;
`,
  },
  {
    version: 18,
    name: 's3: live buckets by name across tenants',
    sql: `
-- Anonymous S3 requests with COFFER_S3_ANONYMOUS_BUCKET_NAMES=unique name a bucket without its
-- tenant: it resolves only when exactly one tenant has a live bucket of that name (#26). Read
-- with LIMIT 2 on every such request, so by index, never by scanning every workspace.
CREATE INDEX workspaces_live_slug ON workspaces (slug) WHERE deleted_at IS NULL;
`,
  },
  {
    version: 19,
    name: 'leases: one holder at a time for background jobs and claims',
    sql: `
-- A named lease held by one process until expires_at (epoch ms), renewed by its holder while it
-- works (#29): the background jobs of coffer serve --workers N (GC, webhook delivery, the sweeps)
-- run in the one worker holding their lease, and another worker takes a lease over once it has
-- expired because its holder died. A CompleteMultipartUpload claims its upload with one too, so
-- that two workers completing it behave as one process does. A row, not a file lock, so that the
-- same lease serves several nodes on PostgreSQL (#30): the take-over is one
-- INSERT … ON CONFLICT … DO UPDATE … WHERE, which both databases run as written.
CREATE TABLE leases (
  name       TEXT PRIMARY KEY,
  holder     TEXT NOT NULL,
  expires_at INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
`,
  },
  {
    version: 20,
    name: 's3 object lock: retention and legal hold of versions',
    sql: `
-- Object lock (#25): a retention and a legal hold belong to one VERSION (S3 API reference,
-- "Object Lock"), so they are columns of its row and go nowhere else. lock_until is epoch ms,
-- compared with the server clock; legal_hold 1 is ON.
ALTER TABLE object_versions ADD COLUMN lock_mode TEXT CHECK (lock_mode IN ('GOVERNANCE', 'COMPLIANCE'));
ALTER TABLE object_versions ADD COLUMN lock_until INTEGER;
ALTER TABLE object_versions ADD COLUMN legal_hold INTEGER NOT NULL DEFAULT 0 CHECK (legal_hold IN (0, 1));
CREATE INDEX object_versions_locked ON object_versions (workspace_id) WHERE lock_until IS NOT NULL OR legal_hold = 1;
`,
  },
  {
    version: 21,
    name: 'versions: keys whose current version is a delete marker, newest deletion first',
    sql: `
-- The API's list of deleted files that can be restored (GET /api/v1/files/deleted, #25): keys
-- whose current version is a delete marker, newest deletion first, by tenant or by workspace. Both
-- partial: only current markers are indexed, so the index stays as small as the list.
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
-- Self-service S3 credentials (#31): 1 lets the tenant create, list and revoke its own pairs through
-- the tenant API (and the console), 0 leaves that to the admin. On by default: a tenant key can
-- already read and write everything an S3 pair of the tenant can, so a pair grants nothing more
-- (README, Web console).
ALTER TABLE tenants ADD COLUMN self_service_s3 INTEGER NOT NULL DEFAULT 1 CHECK (self_service_s3 IN (0, 1));
`,
  },
  {
    version: 23,
    name: 'encryption at rest: the SSE-S3 key',
    sql: `
-- SSE-S3 without an encrypted data dir (#27): objects asking for AES256 are sealed one by one
-- under Coffer's own random SSE-S3 key, made on first need and kept as row 2 of this table,
-- beside the data-dir key (row 1). Stored as it is (wrapped = 0) while no master key is
-- configured: it protects the blob store against whoever has the blobs but not this database.
-- The first start with a master key wraps it (wrapped = 1) like the data-dir key, and
-- \`coffer rotate-key\` re-wraps both. SQLite cannot change a CHECK in place: the table (one row
-- at most until now) is rebuilt, its columns in the order PostgreSQL's ALTER TABLE leaves them.
CREATE TABLE encryption_next (
  id              INTEGER PRIMARY KEY CHECK (id IN (1, 2)),
  wrapped_key     BLOB NOT NULL,
  key_id          INTEGER NOT NULL,
  plain_remaining INTEGER NOT NULL CHECK (plain_remaining IN (0, 1)),
  created_at      INTEGER NOT NULL,
  wrapped         INTEGER NOT NULL DEFAULT 1 CHECK (wrapped IN (0, 1))
) STRICT;
INSERT INTO encryption_next (id, wrapped_key, key_id, plain_remaining, created_at)
  SELECT id, wrapped_key, key_id, plain_remaining, created_at FROM encryption;
DROP TABLE encryption;
ALTER TABLE encryption_next RENAME TO encryption;
`,
  },
  {
    version: 24,
    name: 'webhook outbox: the node delivering an event',
    sql: `
-- Several nodes deliver from one outbox (#30): a node claims a due event before it sends it, in
-- one conditional UPDATE that writes its name here and moves next_attempt_at to when the claim
-- lapses, so the event is no longer due for any other node. The outcome clears it; a node that
-- dies mid-delivery leaves the claim to lapse, and the event is due again (at-least-once).
ALTER TABLE outbox ADD COLUMN claimed_by TEXT;
`,
  },
  {
    version: 25,
    name: 'the server secret every node of one database shares',
    sql: `
-- Several nodes on one PostgreSQL database (#30) must hold one server secret: a URL one signs is
-- checked by another, an S3 secret one seals is opened by another. The first node stores a
-- fingerprint of its secret here (an HMAC of a fixed label under it, never the secret); a node
-- whose secret gives another fingerprint refuses to start (services/server-secret.ts). A SQLite
-- data dir has one secret file and no other node: the table stays empty there, and exists so that
-- both databases have the same tables at a version (coffer migrate-metadata copies every table).
CREATE TABLE server_secret (
  id          INTEGER PRIMARY KEY CHECK (id = 1),
  fingerprint TEXT NOT NULL,
  created_at  INTEGER NOT NULL
) STRICT;
`,
  },
]
