import path from 'node:path'
import { Type, type Static, type TSchema } from '@sinclair/typebox'
import { Value } from '@sinclair/typebox/value'
import { ANY_TYPE, MIME_TYPE } from './lib/file-types'
import { parseSize } from './lib/sizes'

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const

/**
 * Every setting, with its env name, optional flag, default, schema, one line of help for `--help`, and
 * the reference's description (`doc`, Markdown; `docDefault` when the default is not a literal value):
 * src/docs/configuration.md is generated from this table (`npm run docs`).
 */
const OPTIONS = {
  port: {
    env: 'COFFER_PORT',
    flag: 'port',
    def: '8080',
    schema: Type.Integer({ minimum: 0, maximum: 65535 }),
    hint: 'an integer from 0 to 65535',
    help: 'TCP port to listen on (0 picks a free one, as --ephemeral does unless a port is given)',
    doc: 'TCP port to listen on (`0` picks a free one, as `--ephemeral` does unless a port is given)',
  },
  host: {
    env: 'COFFER_HOST',
    flag: 'host',
    def: '127.0.0.1',
    schema: Type.String({ minLength: 1, maxLength: 255 }),
    hint: 'a host name or IP address',
    help: 'Address to bind',
  },
  dataDir: {
    env: 'COFFER_DATA_DIR',
    flag: 'data-dir',
    def: './data',
    schema: Type.String({ minLength: 1 }),
    hint: 'a directory path',
    help: 'Where the database, blobs and secret live',
  },
  adminApiKey: {
    env: 'COFFER_ADMIN_API_KEY',
    flag: 'admin-api-key',
    def: undefined,
    schema: Type.String({ minLength: 16, maxLength: 512 }),
    hint: 'at least 16 characters',
    help: 'Admin API key; admin routes answer 401 while unset',
    doc: 'Admin API key (at least 16 characters); while unset, admin routes answer 401 saying how to enable them',
  },
  publicUrl: {
    env: 'COFFER_PUBLIC_URL',
    flag: undefined,
    def: undefined,
    schema: Type.String({ pattern: '^https?://[^\\s/?#]+(/[^\\s?#]*)?$' }),
    hint: 'an absolute http(s) URL without query',
    help: "Base of signed download URLs (default: the request's scheme and Host)",
    docDefault: "request's scheme and Host",
    doc: 'Base URL of signed download URLs',
  },
  secret: {
    env: 'COFFER_SECRET',
    flag: undefined,
    def: undefined,
    schema: Type.String({ minLength: 32 }),
    hint: 'at least 32 characters',
    help: 'Server secret for signed tokens (default: generated once into <data-dir>/secret)',
    docDefault: 'generated into `<data-dir>/secret`',
    doc: 'Server secret (≥ 32 characters) from which signing keys are derived; with `COFFER_DATABASE_URL`, the same on every node of the database (a node with another refuses to start)',
  },
  logLevel: {
    env: 'COFFER_LOG_LEVEL',
    flag: 'log-level',
    def: 'info',
    schema: Type.Union(LOG_LEVELS.map((l) => Type.Literal(l))),
    hint: LOG_LEVELS.join('|'),
    help: 'pino log level',
    doc: '`fatal`, `error`, `warn`, `info`, `debug`, `trace` or `silent`',
  },
  logFormat: {
    env: 'COFFER_LOG_FORMAT',
    flag: 'log-format',
    def: 'auto',
    schema: Type.Union([Type.Literal('auto'), Type.Literal('json'), Type.Literal('pretty')]),
    hint: 'auto|json|pretty',
    help: 'Log lines as JSON, or readable (pretty); auto: readable on a terminal, JSON when piped or under systemd',
    doc: "`json` (pino's JSON lines), `pretty` (one readable line each: time, level, message, fields) or `auto`: readable on a terminal, JSON when piped, in a file or under systemd",
  },
  webhookAllowPrivate: {
    env: 'COFFER_WEBHOOK_ALLOW_PRIVATE',
    flag: undefined,
    def: 'false',
    schema: Type.Boolean(),
    hint: 'true or false',
    help: 'Allow webhooks to loopback/private/link-local addresses',
    doc: 'Allow webhooks to loopback, private and link-local addresses (on in `--ephemeral` mode)',
  },
  uploadUrlTtlSeconds: {
    env: 'COFFER_UPLOAD_URL_TTL_SECONDS',
    flag: undefined,
    def: '900',
    schema: Type.Integer({ minimum: 60, maximum: 86400 }),
    hint: 'an integer from 60 to 86400',
    help: 'Lifetime of presigned upload URLs',
    doc: 'Lifetime of presigned upload URLs (60–86400)',
  },
  deletedRetentionSeconds: {
    env: 'COFFER_DELETED_RETENTION_SECONDS',
    flag: undefined,
    def: '604800',
    schema: Type.Integer({ minimum: 0 }),
    hint: 'a non-negative integer',
    help: 'How long soft-deleted files are kept before garbage collection',
  },
  diskReserveBytes: {
    env: 'COFFER_DISK_RESERVE_BYTES',
    flag: undefined,
    def: String(4 * 1024 * 1024),
    schema: Type.Integer({ minimum: 0, maximum: 1024 * 1024 * 1024 }),
    hint: 'an integer from 0 to 1073741824',
    help: 'Disk space kept in <data-dir>/reserve for deletes on a full disk (0 turns it off)',
    docDefault: '`4194304`',
    doc: 'Disk space (4 MiB by default) held in `<data-dir>/reserve` so that deletes and garbage collection still work on a full disk ([Durability](durability.md#durability-what-is-synced-when)); `0` turns it off',
  },
  rateLimitMax: {
    env: 'COFFER_RATE_LIMIT_MAX',
    flag: undefined,
    def: '0',
    schema: Type.Integer({ minimum: 0, maximum: 1_000_000_000 }),
    hint: 'a non-negative integer',
    help: 'Requests per window per tenant (per client address when no tenant is proven); 0 turns rate limiting off',
    doc: 'Requests per window per tenant (per client address when no tenant is proven); `0` turns rate limiting off',
  },
  rateLimitWindowSeconds: {
    env: 'COFFER_RATE_LIMIT_WINDOW_SECONDS',
    flag: undefined,
    def: '60',
    schema: Type.Integer({ minimum: 1, maximum: 86400 }),
    hint: 'an integer from 1 to 86400',
    help: 'Rate-limit window in seconds',
    doc: 'The rate-limit window',
  },
  trustProxy: {
    env: 'COFFER_TRUST_PROXY',
    flag: undefined,
    def: 'false',
    schema: Type.Boolean(),
    hint: 'true or false',
    help: 'Trust X-Forwarded-* headers (behind a reverse proxy)',
    doc: 'Trust `X-Forwarded-*` headers (only behind a reverse proxy)',
  },
  shutdownTimeoutSeconds: {
    env: 'COFFER_SHUTDOWN_TIMEOUT_SECONDS',
    flag: undefined,
    def: '10',
    schema: Type.Integer({ minimum: 1, maximum: 3600 }),
    hint: 'an integer from 1 to 3600',
    help: 'How long shutdown lets in-flight requests finish before cutting them off',
    doc: 'How long a shutdown lets in-flight requests finish before cutting them off (1–3600)',
  },
  workers: {
    env: 'COFFER_WORKERS',
    flag: 'workers',
    def: undefined,
    schema: Type.Integer({ minimum: 1, maximum: 256 }),
    hint: 'an integer from 1 to 256',
    help: 'Processes serving the same ports and data dir (coffer serve; unset: 1, one process)',
    docDefault: '`1`',
    doc: 'Processes serving the same ports and data dir (1–256; [Workers](operations.md#workers-coffer-serve---workers-n))',
  },
  leaseSeconds: {
    env: 'COFFER_LEASE_SECONDS',
    flag: undefined,
    def: '15',
    schema: Type.Integer({ minimum: 1, maximum: 3600 }),
    hint: 'an integer from 1 to 3600',
    help: "How long a worker's hold on a background job lasts unrenewed: another worker takes the job over after it",
    doc: "How long a worker's hold on a background job lasts unrenewed; another worker takes the job over after it (1–3600)",
  },
  s3Port: {
    env: 'COFFER_S3_PORT',
    flag: 's3-port',
    def: '9000',
    schema: Type.Union([Type.Integer({ minimum: 0, maximum: 65535 }), Type.Literal('off')]),
    hint: 'an integer from 0 to 65535, or off',
    help: 'TCP port of the S3 listener (0 picks a free one, as --ephemeral does unless a port is given; off disables it)',
    doc: 'TCP port of the S3 listener (`0` picks a free one, as `--ephemeral` does unless a port is given; `off` disables it); same host as the API',
  },
  s3Region: {
    env: 'COFFER_S3_REGION',
    flag: undefined,
    def: 'us-east-1',
    schema: Type.String({ pattern: '^[a-z0-9-]{1,64}$' }),
    hint: 'a region name like us-east-1',
    help: 'Region S3 clients must sign for',
  },
  s3Domain: {
    env: 'COFFER_S3_DOMAIN',
    flag: undefined,
    def: undefined,
    schema: Type.String({ pattern: '^[a-z0-9.-]{1,253}(:\\d{1,5})?$' }),
    hint: 'a host name',
    help: 'Enables virtual-hosted-style S3 addressing (<bucket>.<domain>)',
    doc: 'Enables virtual-hosted-style addressing (`<bucket>.<domain>`) beside path style',
  },
  s3Sigv2: {
    env: 'COFFER_S3_SIGV2',
    flag: 's3-sigv2',
    def: 'on',
    schema: Type.Boolean(),
    hint: 'on or off',
    help: 'Accept S3 Signature Version 2 (AWS CLI v1 presign, s3cmd signature_v2), header and presigned; off answers it as SigV4-only AWS regions do',
    doc: "Accept S3 Signature Version 2, header and presigned (AWS CLI v1's `s3 presign`, s3cmd `signature_v2`); `off` answers it as AWS regions without it do",
  },
  s3BlockPublicAccess: {
    env: 'COFFER_S3_BLOCK_PUBLIC_ACCESS',
    flag: undefined,
    def: 'false',
    schema: Type.Boolean(),
    hint: 'true or false',
    help: 'Block public access to every bucket (all four public access block settings on, whatever a bucket says)',
    doc: '`true` blocks public access on every bucket: all four public access block settings on, whatever a bucket says ([Public objects](s3-behaviour.md#public-objects-acls-and-bucket-policies))',
  },
  s3AnonymousBucketNames: {
    env: 'COFFER_S3_ANONYMOUS_BUCKET_NAMES',
    flag: undefined,
    def: 'qualified',
    schema: Type.Union([Type.Literal('qualified'), Type.Literal('unique')]),
    hint: 'qualified or unique',
    help: 'How anonymous and cross-tenant S3 requests name a bucket: <tenant-id>:<bucket> only, or also a plain name held by exactly one tenant',
    doc: 'How anonymous and cross-tenant S3 requests name a bucket: `qualified` (`<tenant-id>:<bucket>` only) or `unique` (also a plain name the requester has no bucket of, while one tenant alone has a bucket of that name)',
  },
  s3MaxObjectBytes: {
    env: 'COFFER_S3_MAX_OBJECT_BYTES',
    flag: undefined,
    def: String(5 * 1024 ** 3),
    schema: Type.Integer({ minimum: 1, maximum: 5 * 1024 ** 4 }),
    hint: 'a positive integer',
    help: 'Largest object one S3 PutObject may write',
    docDefault: '`5368709120`',
    doc: 'Largest object one S3 `PutObject` may write (multipart: up to 10,000 parts of 5 GiB)',
  },
  s3MultipartTtlSeconds: {
    env: 'COFFER_S3_MULTIPART_TTL_SECONDS',
    flag: undefined,
    def: '604800',
    schema: Type.Integer({ minimum: 60 }),
    hint: 'an integer of at least 60',
    help: 'S3 multipart uploads neither completed nor aborted are reclaimed after this long',
  },
  s3LifecycleDaySeconds: {
    env: 'COFFER_S3_LIFECYCLE_DAY_SECONDS',
    flag: undefined,
    def: '86400',
    schema: Type.Integer({ minimum: 1, maximum: 86400 }),
    hint: 'an integer from 1 to 86400',
    help: "How long a lifecycle rule's day is (shorter to try rules, as RGW's rgw_lc_debug_interval)",
  },
  s3LifecycleIntervalSeconds: {
    env: 'COFFER_S3_LIFECYCLE_INTERVAL_SECONDS',
    flag: undefined,
    def: '3600',
    schema: Type.Integer({ minimum: 1 }),
    hint: 'a positive integer',
    help: "How often the lifecycle pass applies buckets' lifecycle rules",
  },
  s3LoggingRollSeconds: {
    env: 'COFFER_S3_LOGGING_ROLL_SECONDS',
    flag: undefined,
    def: '300',
    schema: Type.Integer({ minimum: 1, maximum: 86400 }),
    hint: 'an integer from 1 to 86400',
    help: 'How long S3 server access log records are gathered before they are delivered as one object to the target bucket',
  },
  metricsToken: {
    env: 'COFFER_METRICS_TOKEN',
    flag: undefined,
    def: undefined,
    schema: Type.String({ minLength: 16, maxLength: 512 }),
    hint: 'at least 16 characters',
    help: 'Bearer token GET /metrics requires (default: /metrics is open, like /health)',
    doc: 'Bearer token `GET /metrics` requires (at least 16 characters); while unset `/metrics` is open, like `/health`',
  },
  // What a newcomer stores: file types beyond the spec's six, and the quota of new tenants.
  fileTypes: {
    env: 'COFFER_FILE_TYPES',
    flag: 'file-types',
    def: undefined,
    schema: Type.Array(Type.String({ pattern: `^(\\${ANY_TYPE}|${MIME_TYPE.source.slice(1, -1)})$` }), { minItems: 1, maxItems: 1000 }),
    parse: (raw: string) =>
      raw
        .split(',')
        .map((s) => s.trim().toLowerCase())
        .filter((s) => s !== ''),
    hint: 'lower-case MIME types separated by commas (text/plain,application/zip), or * for any type',
    help: "MIME types the API accepts besides the spec's six (image/jpeg, image/png, image/webp, image/gif, image/avif, application/pdf), or * for any type",
    docDefault: "the spec's six",
    doc: 'MIME types the API accepts besides `image/jpeg`, `image/png`, `image/webp`, `image/gif`, `image/avif`, `application/pdf`, comma-separated (`text/plain,application/zip`), or `*` for any type ([File types](api-guide.md#file-types))',
  },
  defaultQuotaBytes: {
    env: 'COFFER_DEFAULT_QUOTA_BYTES',
    flag: 'default-quota-bytes',
    def: undefined,
    schema: Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER }),
    parse: (raw: string) => parseSize(raw, { unlimited: true }) ?? raw,
    hint: 'a number of bytes (1048576, 500MiB, 10GiB) or unlimited',
    help: "Quota of a tenant created without one (default 524288000, the spec's; the --ephemeral fixture's tenant and a fixed-credentials first start: unlimited)",
    docDefault: '`524288000`',
    doc: "Quota of a tenant created without one: bytes (`10GiB`) or `unlimited`; the `--ephemeral` fixture's tenant, and the tenant of a fixed-credentials first start, are unlimited unless this is set",
  },
  // Fixed credentials and seeded buckets of a CI fixture (#28): see src/cli/fixture.ts.
  tenantApiKey: {
    env: 'COFFER_TENANT_API_KEY',
    flag: 'tenant-api-key',
    def: undefined,
    schema: Type.String({ pattern: '^sk_(live|test)_[A-Za-z0-9_-]{20,100}$' }),
    hint: 'sk_live_ or sk_test_ and 20 to 100 characters A-Z a-z 0-9 _ -',
    help: "The tenant's API key at the first start of a new data dir or with --ephemeral (default: generated)",
    docDefault: 'generated',
    doc: "A CI fixture's tenant key, at the first start of a new data dir or with `--ephemeral` ([CI fixture](ci-fixture.md#ci-fixture-coffer-serve---ephemeral))",
  },
  s3AccessKeyId: {
    env: 'COFFER_S3_ACCESS_KEY_ID',
    flag: 's3-access-key-id',
    def: undefined,
    // MinIO's minimum (3) to IAM's maximum (128); no '/' (it ends the id in SigV4's Credential
    // scope), ',' '=' ':' or whitespace (they split the Authorization header of SigV4 and SigV2).
    schema: Type.String({ pattern: '^[A-Za-z0-9._-]{3,128}$' }),
    hint: '3 to 128 characters A-Z a-z 0-9 . _ -',
    help: "The tenant's S3 access key id at the first start of a new data dir or with --ephemeral (default: generated)",
    docDefault: 'generated',
    doc: "That tenant's S3 access key id (3–128 of `A-Z a-z 0-9 . _ -`)",
  },
  s3SecretAccessKey: {
    env: 'COFFER_S3_SECRET_ACCESS_KEY',
    flag: 's3-secret-access-key',
    def: undefined,
    // AWS's base64 alphabet plus . _ -, from LocalStack's `test` up: every character stands
    // unquoted in a GitHub env file and in a shell assignment (--write-env).
    schema: Type.String({ pattern: '^[A-Za-z0-9+/=._-]{4,128}$' }),
    hint: '4 to 128 characters A-Z a-z 0-9 + / = . _ -',
    help: 'Its secret access key; set together with COFFER_S3_ACCESS_KEY_ID',
    docDefault: 'generated',
    doc: 'Its secret (4–128 of `A-Z a-z 0-9 + / = . _ -`); set with the id',
  },
  s3Buckets: {
    env: 'COFFER_S3_BUCKETS',
    flag: undefined,
    def: undefined,
    schema: Type.String({ minLength: 1, maxLength: 65536 }),
    hint: 'bucket names separated by commas, each optionally NAME=DIR',
    help: 'Buckets the tenant gets at start, comma-separated; NAME=DIR seeds one from a directory (flag: --bucket, repeatable)',
    docDefault: 'none',
    doc: 'Buckets that tenant gets at start, comma-separated; `NAME=DIR` seeds one from a directory',
  },
  // `serve --ephemeral --in-memory` (#28): src/cli/ephemeral.ts, src/blobs/memory-budget.ts.
  inMemoryMaxBytes: {
    env: 'COFFER_IN_MEMORY_MAX_BYTES',
    flag: 'in-memory-max-bytes',
    def: undefined,
    schema: Type.Integer({ minimum: 1024 * 1024, maximum: 2 ** 53 - 1 }),
    hint: 'an integer of at least 1048576',
    help: 'With --in-memory: the most bytes (content, database) it holds; writes past it answer 507 (default: a quarter of the memory, at most what the tmpfs has free)',
    docDefault: 'a quarter of the memory',
    doc: 'With `--ephemeral --in-memory`: the most it holds (content and database); writes past it answer 507 ([CI fixture](ci-fixture.md#ci-fixture-coffer-serve---ephemeral))',
  },
  inMemoryDir: {
    env: 'COFFER_IN_MEMORY_DIR',
    flag: undefined,
    def: '/dev/shm',
    schema: Type.String({ minLength: 1 }),
    hint: 'a directory on a tmpfs',
    help: 'With --in-memory: the tmpfs under which its data dir is made',
    doc: 'With `--in-memory`: the tmpfs its data dir goes on',
  },
  blobStore: {
    env: 'COFFER_BLOB_STORE',
    flag: 'blob-store',
    def: 'disk',
    schema: Type.Union([Type.Literal('disk'), Type.Literal('s3')]),
    hint: 'disk or s3',
    help: 'Where file content lives: the data dir (disk) or an S3-compatible object store (s3)',
    doc: 'Where file content lives: `disk` (the data dir) or `s3` ([S3-compatible object storage](blob-storage.md#storing-content-in-s3-compatible-object-storage))',
  },
  blobS3Endpoint: {
    env: 'COFFER_BLOB_S3_ENDPOINT',
    flag: 'blob-s3-endpoint',
    def: undefined,
    schema: Type.String({ pattern: '^https?://[^\\s/?#]+/?$', maxLength: 2048 }),
    hint: 'an http(s) URL of the store, without path or query',
    help: "S3 endpoint (default: AWS S3 for the region), e.g. http://127.0.0.1:7480 for Ceph's gateway",
    docDefault: 'AWS S3',
    doc: 'URL of the store, e.g. `http://127.0.0.1:7480` (Ceph RGW), no path',
  },
  blobS3Bucket: {
    env: 'COFFER_BLOB_S3_BUCKET',
    flag: 'blob-s3-bucket',
    def: undefined,
    schema: Type.String({ pattern: '^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$' }),
    hint: 'an S3 bucket name (3-63 characters: a-z, 0-9, dot, hyphen)',
    help: 'Bucket holding the content (must exist); required with COFFER_BLOB_STORE=s3',
    doc: 'The bucket (must exist); required with `s3`',
  },
  blobS3Region: {
    env: 'COFFER_BLOB_S3_REGION',
    flag: 'blob-s3-region',
    def: 'us-east-1',
    schema: Type.String({ pattern: '^[a-z0-9-]{1,64}$' }),
    hint: 'a region name such as us-east-1',
    help: 'Region the requests are signed for',
  },
  blobS3AccessKeyId: {
    env: 'COFFER_BLOB_S3_ACCESS_KEY_ID',
    flag: undefined,
    def: undefined,
    schema: Type.String({ minLength: 1, maxLength: 256 }),
    hint: 'an access key id',
    help: "Access key id (default: the AWS SDK's credential chain: AWS_* env, profile, instance role)",
    docDefault: 'SDK credential chain',
    doc: 'Access key id; set with the secret, or neither (then `AWS_*` env, profile or instance role)',
  },
  blobS3SecretAccessKey: {
    env: 'COFFER_BLOB_S3_SECRET_ACCESS_KEY',
    flag: undefined,
    def: undefined,
    schema: Type.String({ minLength: 1, maxLength: 512 }),
    hint: 'a secret access key',
    help: 'Secret access key; set together with COFFER_BLOB_S3_ACCESS_KEY_ID',
    docDefault: 'SDK credential chain',
    doc: 'Secret access key (env only: flags show in `ps`)',
  },
  blobS3Prefix: {
    env: 'COFFER_BLOB_S3_PREFIX',
    flag: 'blob-s3-prefix',
    def: undefined,
    schema: Type.String({ pattern: "^([A-Za-z0-9!_.*'()-]+/)*$", maxLength: 512 }),
    hint: "empty, or path segments each ending in / (letters, digits, !_.*'()-)",
    help: 'Key prefix inside the bucket, e.g. coffer/ (objects are <prefix>sha256/aa/bb/<hex>); default none',
    docDefault: 'none',
    doc: 'Key prefix, path segments ending in `/` (e.g. `coffer/`)',
  },
  blobS3ForcePathStyle: {
    env: 'COFFER_BLOB_S3_FORCE_PATH_STYLE',
    flag: undefined,
    def: 'true',
    schema: Type.Boolean(),
    hint: 'true or false',
    help: 'Address the bucket in the path (http://host/bucket/key) rather than as a host name',
    doc: 'Bucket in the path (`http://host/bucket/key`), as Ceph, Garage, SeaweedFS and MinIO want; `false` for virtual-host style',
  },
  blobS3TimeoutSeconds: {
    env: 'COFFER_BLOB_S3_TIMEOUT_SECONDS',
    flag: undefined,
    def: '15',
    schema: Type.Integer({ minimum: 1, maximum: 600 }),
    hint: 'an integer from 1 to 600',
    help: 'Longest wait for the store to answer or to move data on one call (per part for large uploads); then 503 STORE_UNAVAILABLE',
    doc: 'Longest wait on one store call (per part for large uploads) before `503 STORE_UNAVAILABLE` (1–600)',
  },
  blobS3RedirectDownloads: {
    env: 'COFFER_BLOB_S3_REDIRECT_DOWNLOADS',
    flag: undefined,
    def: 'false',
    schema: Type.Boolean(),
    hint: 'true or false',
    help: 'Answer signed-URL downloads with a 302 to a short-lived presigned URL of the store (bytes bypass Coffer; see README)',
    doc: 'Answer signed-URL downloads with a `302` to a presigned URL of the store (see the trade-off below)',
  },
  encryptionKeyFile: {
    env: 'COFFER_ENCRYPTION_KEY_FILE',
    flag: 'encryption-key-file',
    def: undefined,
    schema: Type.String({ minLength: 1 }),
    hint: 'a file path',
    help: 'Encrypt every blob at rest under the master key in this file (64 hex digits or base64 of 32 bytes), kept outside the data dir',
    doc: 'Encrypt every blob at rest under the master key in this file (64 hex digits or the base64 of 32 bytes), which must be outside the data dir ([Encryption at rest](encryption.md#encryption-at-rest))',
  },
  encryptionKey: {
    env: 'COFFER_ENCRYPTION_KEY',
    flag: undefined,
    def: undefined,
    schema: Type.String({ minLength: 1, maxLength: 256 }),
    hint: '64 hex digits or the base64 of 32 bytes',
    help: 'The master key itself instead of a file (env only: flags show in `ps`)',
  },
  kmsKeysFile: {
    env: 'COFFER_KMS_KEYS_FILE',
    flag: 'kms-keys-file',
    def: undefined,
    schema: Type.String({ minLength: 1 }),
    hint: 'a file path',
    help: 'SSE-KMS key ring: a file of name=key lines, each optionally limited to tenants=id,id (or a JSON object), each key 64 hex digits or base64 of 32 bytes, kept outside the data dir',
    doc: 'SSE-KMS key ring: a file of name=key lines, each optionally limited to tenants=id,id (or a JSON object), each key 64 hex digits or base64 of 32 bytes, kept outside the data dir ([Encryption at rest](encryption.md#encryption-at-rest))',
  },
  kmsDefaultKey: {
    env: 'COFFER_KMS_DEFAULT_KEY',
    flag: 'kms-default-key',
    def: undefined,
    schema: Type.String({ minLength: 1, maxLength: 256 }),
    hint: 'a key name of COFFER_KMS_KEYS_FILE',
    help: "The key of an aws:kms write that names none (as AWS's aws/s3 key)",
  },
  // Metadata in PostgreSQL (#30): src/db/pg/, README "Metadata in PostgreSQL".
  databaseUrl: {
    env: 'COFFER_DATABASE_URL',
    flag: 'database-url',
    def: undefined,
    schema: Type.String({ pattern: '^postgres(ql)?://[^\\s]*$', maxLength: 4096 }),
    hint: 'a postgres:// or postgresql:// URL',
    help: 'Keep the metadata in this PostgreSQL database instead of <data-dir>/coffer.db (several nodes may share it)',
    docDefault: 'unset (SQLite: `<data-dir>/coffer.db`)',
    doc: 'Keep the metadata in this PostgreSQL database (`postgres://user@host:port/db`; the password in `PGPASSWORD` or `~/.pgpass`, since a flag shows in `ps`); several nodes may share it ([Metadata in PostgreSQL](postgresql.md#metadata-in-postgresql))',
  },
} satisfies Record<
  string,
  {
    env: string
    flag: string | undefined
    def: string | undefined
    schema: TSchema
    parse?: (raw: string) => unknown
    hint: string
    help: string
    doc?: string
    docDefault?: string
  }
>

/** Settings whose values are credentials: never echoed in an error message. */
const SECRET_KEYS: ReadonlySet<string> = new Set([
  'adminApiKey',
  'tenantApiKey',
  's3SecretAccessKey',
  'secret',
  'metricsToken',
  'blobS3AccessKeyId',
  'blobS3SecretAccessKey',
  'encryptionKey',
  // A URL may carry a password.
  'databaseUrl',
])

type Options = typeof OPTIONS
type Key = keyof Options
type Required_<K extends Key> = Options[K]['def'] extends string ? K : never
type RequiredKeys = { [K in Key]: Required_<K> }[Key]

/** The validated, frozen configuration. Read once at the edge (main.ts) and passed down. */
export type Config = Readonly<
  { [K in RequiredKeys]: Static<Options[K]['schema']> } & {
    [K in Exclude<Key, RequiredKeys>]?: Static<Options[K]['schema']>
  }
>

export class ConfigError extends Error {
  override name = 'ConfigError'
}

function convert(schema: TSchema, raw: string): unknown {
  // An integer or a keyword (`--s3-port off`).
  if (Array.isArray(schema.anyOf) && schema.anyOf.some((s: TSchema) => s.type === 'integer') && /^\d+$/.test(raw.trim())) return Number(raw.trim())
  if (schema.type === 'integer') return /^-?\d+$/.test(raw.trim()) ? Number(raw.trim()) : raw
  if (schema.type === 'boolean') {
    const v = raw.trim().toLowerCase()
    if (['true', '1', 'yes', 'on'].includes(v)) return true
    if (['false', '0', 'no', 'off', ''].includes(v)) return false
    return raw
  }
  return raw
}

/**
 * Flags override `COFFER_*` environment variables, which override defaults. Throws ConfigError
 * with one line naming the offending setting when a value is invalid.
 */
export function loadConfig(env: Record<string, string | undefined>, flags: Record<string, string | undefined> = {}): Config {
  const out: Record<string, unknown> = {}
  for (const [key, opt] of Object.entries(OPTIONS) as [Key, Options[Key]][]) {
    const fromFlag = opt.flag === undefined ? undefined : flags[opt.flag]
    const fromEnv = env[opt.env] === '' ? undefined : env[opt.env]
    const raw = fromFlag ?? fromEnv ?? opt.def
    if (raw === undefined) continue
    const value = 'parse' in opt ? opt.parse(raw) : convert(opt.schema, raw)
    if (!Value.Check(opt.schema, value)) {
      const source = fromFlag !== undefined ? `--${opt.flag}` : fromEnv !== undefined ? opt.env : `default of ${opt.env}`
      const shown = SECRET_KEYS.has(key) ? '(hidden)' : JSON.stringify(raw)
      throw new ConfigError(`invalid configuration: ${source}=${shown} must be ${opt.hint}`)
    }
    out[key] = value
  }
  out.dataDir = path.resolve(out.dataDir as string)
  if (typeof out.publicUrl === 'string') out.publicUrl = out.publicUrl.replace(/\/+$/, '')
  checkS3(out)
  checkFixtureCredentials(out)
  checkEncryption(out)
  return Object.freeze(out) as Config
}

/** The S3 settings that only make sense together. */
function checkS3(out: Record<string, unknown>): void {
  if (out.blobStore !== 's3') return
  if (out.blobS3Bucket === undefined) throw new ConfigError('invalid configuration: COFFER_BLOB_STORE=s3 needs COFFER_BLOB_S3_BUCKET')
  if ((out.blobS3AccessKeyId === undefined) !== (out.blobS3SecretAccessKey === undefined)) {
    throw new ConfigError('invalid configuration: set both COFFER_BLOB_S3_ACCESS_KEY_ID and COFFER_BLOB_S3_SECRET_ACCESS_KEY, or neither')
  }
  if (typeof out.blobS3Endpoint === 'string') out.blobS3Endpoint = out.blobS3Endpoint.replace(/\/+$/, '')
}

/**
 * One master key (#27), and not a file inside the data dir: a key stored beside what it encrypts
 * protects nothing from whoever gets a copy of the data dir (a backup, a disk).
 */
function checkEncryption(out: Record<string, unknown>): void {
  if (out.encryptionKeyFile !== undefined && out.encryptionKey !== undefined) {
    throw new ConfigError('invalid configuration: set COFFER_ENCRYPTION_KEY_FILE or COFFER_ENCRYPTION_KEY, not both')
  }
  if (typeof out.kmsKeysFile === 'string') {
    out.kmsKeysFile = path.resolve(out.kmsKeysFile)
    const rel = path.relative(out.dataDir as string, out.kmsKeysFile as string)
    if (!rel.startsWith('..') && !path.isAbsolute(rel)) {
      throw new ConfigError('invalid configuration: COFFER_KMS_KEYS_FILE must be outside the data dir (a key beside what it encrypts protects nothing)')
    }
  }
  if (out.kmsDefaultKey !== undefined && out.kmsKeysFile === undefined) {
    throw new ConfigError('invalid configuration: COFFER_KMS_DEFAULT_KEY needs COFFER_KMS_KEYS_FILE')
  }
  if (typeof out.encryptionKeyFile !== 'string') return
  out.encryptionKeyFile = path.resolve(out.encryptionKeyFile)
  const rel = path.relative(out.dataDir as string, out.encryptionKeyFile as string)
  if (!rel.startsWith('..') && !path.isAbsolute(rel)) {
    throw new ConfigError('invalid configuration: COFFER_ENCRYPTION_KEY_FILE must be outside the data dir (a key beside what it encrypts protects nothing)')
  }
}

/** A fixed S3 pair (#28) is given whole or not at all. */
function checkFixtureCredentials(out: Record<string, unknown>): void {
  if ((out.s3AccessKeyId === undefined) !== (out.s3SecretAccessKey === undefined)) {
    throw new ConfigError(
      'invalid configuration: set both --s3-access-key-id and --s3-secret-access-key (COFFER_S3_ACCESS_KEY_ID, COFFER_S3_SECRET_ACCESS_KEY), or neither',
    )
  }
}

/** One setting as `--help` and the configuration reference (src/docs/configuration.md) show it. */
export interface SettingHelp {
  env: string
  flag?: string
  def?: string
  /** One line for `--help`. */
  help: string
  /** The reference's Markdown: what the setting does, with links to the pages that explain it (else `help`). */
  doc?: string
  /** The reference's Markdown for the default when it is not a literal value (`generated`, `AWS S3`). */
  docDefault?: string
}

/** Rows for `--help` and the configuration reference (src/docs/reference.ts). */
export function configHelp(): SettingHelp[] {
  return Object.values(OPTIONS).map((o) => ({
    env: o.env,
    ...(o.flag ? { flag: `--${o.flag}` } : {}),
    ...(o.def !== undefined ? { def: o.def } : {}),
    help: o.help,
    ...('doc' in o ? { doc: o.doc } : {}),
    ...('docDefault' in o ? { docDefault: o.docDefault } : {}),
  }))
}
