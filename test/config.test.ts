// @suites: sqlite
import t from 'tap'
import path from 'node:path'
import fs from 'node:fs'
import { loadConfig, ConfigError, configHelp } from '../src/config'

t.test('defaults', async (t) => {
  const c = loadConfig({})
  t.equal(c.port, 8080)
  t.equal(c.host, '127.0.0.1')
  t.equal(c.dataDir, path.resolve('./data'))
  t.equal(c.adminApiKey, undefined)
  t.equal(c.logLevel, 'info')
  t.equal(c.uploadUrlTtlSeconds, 900)
  t.equal(c.deletedRetentionSeconds, 604800)
  t.ok(Object.isFrozen(c))
})

t.test('flags override env, env overrides defaults', async (t) => {
  const env = { COFFER_PORT: '9000', COFFER_HOST: '0.0.0.0', COFFER_DATA_DIR: '/srv/coffer', COFFER_PUBLIC_URL: 'https://files.example.com/' }
  const fromEnv = loadConfig(env)
  t.equal(fromEnv.port, 9000)
  t.equal(fromEnv.host, '0.0.0.0')
  t.equal(fromEnv.dataDir, '/srv/coffer')
  t.equal(fromEnv.publicUrl, 'https://files.example.com', 'trailing slash dropped')
  const fromFlags = loadConfig(env, { port: '9100', host: '::1', 'data-dir': 'rel/dir' })
  t.equal(fromFlags.port, 9100)
  t.equal(fromFlags.host, '::1')
  t.equal(fromFlags.dataDir, path.resolve('rel/dir'))
  t.equal(loadConfig({ COFFER_PORT: '' }).port, 8080, 'an empty variable counts as unset')
})

t.test('invalid values throw one clear line naming the setting', async (t) => {
  const cases: [Record<string, string>, Record<string, string>, RegExp][] = [
    [{ COFFER_PORT: 'abc' }, {}, /COFFER_PORT="abc" must be an integer from 0 to 65535/],
    [{}, { port: '70000' }, /--port="70000" must be an integer from 0 to 65535/],
    [{ COFFER_ADMIN_API_KEY: 'short' }, {}, /COFFER_ADMIN_API_KEY=\(hidden\) must be at least 16 characters/],
    [{ COFFER_LOG_LEVEL: 'loud' }, {}, /COFFER_LOG_LEVEL="loud" must be fatal\|error/],
    [{ COFFER_TRUST_PROXY: 'maybe' }, {}, /COFFER_TRUST_PROXY="maybe" must be true or false/],
    [{ COFFER_PUBLIC_URL: 'ftp://x' }, {}, /COFFER_PUBLIC_URL/],
    [{ COFFER_UPLOAD_URL_TTL_SECONDS: '10' }, {}, /COFFER_UPLOAD_URL_TTL_SECONDS="10" must be an integer from 60 to 86400/],
    [{ COFFER_SECRET: 'too-short' }, {}, /COFFER_SECRET=\(hidden\)/],
  ]
  for (const [env, flags, re] of cases) {
    t.throws(() => loadConfig(env, flags), re)
    try {
      loadConfig(env, flags)
    } catch (err) {
      t.type(err, ConfigError)
      t.notMatch((err as Error).message, /\n/, 'one line')
      t.notMatch((err as Error).message, /short|too-short/, 'secrets are not echoed')
    }
  }
})

t.test('operations settings: shutdown bound, private webhooks, metrics token', async (t) => {
  const c = loadConfig({})
  t.equal(c.shutdownTimeoutSeconds, 10)
  t.equal(c.webhookAllowPrivate, false)
  t.equal(c.metricsToken, undefined)
  const set = loadConfig({ COFFER_SHUTDOWN_TIMEOUT_SECONDS: '3600', COFFER_WEBHOOK_ALLOW_PRIVATE: 'true', COFFER_METRICS_TOKEN: 'scrape-token-0123456789' })
  t.equal(set.shutdownTimeoutSeconds, 3600)
  t.equal(set.webhookAllowPrivate, true)
  t.equal(set.metricsToken, 'scrape-token-0123456789')
  t.throws(() => loadConfig({ COFFER_SHUTDOWN_TIMEOUT_SECONDS: '0' }), /COFFER_SHUTDOWN_TIMEOUT_SECONDS="0" must be an integer from 1 to 3600/)
  t.throws(() => loadConfig({ COFFER_SHUTDOWN_TIMEOUT_SECONDS: '3601' }), /from 1 to 3600/)
  t.throws(() => loadConfig({ COFFER_WEBHOOK_ALLOW_PRIVATE: 'sometimes' }), /COFFER_WEBHOOK_ALLOW_PRIVATE="sometimes" must be true or false/)
  t.throws(() => loadConfig({ COFFER_METRICS_TOKEN: 'short-token' }), /^invalid configuration: COFFER_METRICS_TOKEN=\(hidden\) must be at least 16 characters$/)
})

t.test('the configuration reference (src/docs/configuration.md) lists every setting with its default', async (t) => {
  const page = fs.readFileSync(path.join(__dirname, '..', 'src', 'docs', 'configuration.md'), 'utf8')
  for (const o of configHelp()) {
    const row = page.split('\n').find((l) => l.startsWith(`| \`${o.env}\` |`))
    t.ok(row, `${o.env} has a row`)
    if (o.def !== undefined) t.ok(row?.includes(`| \`${o.def}\` |`), `${o.env} shows its default ${o.def}`)
  }
})

t.test('blob store settings: s3 needs a bucket, both keys or neither, and never echoes a key', async (t) => {
  t.equal(loadConfig({}).blobStore, 'disk')
  const s3 = { COFFER_BLOB_STORE: 's3', COFFER_BLOB_S3_BUCKET: 'coffer' }
  // The S3 front works on the S3 store too (its writes take leases like the API's).
  t.match(loadConfig({ ...s3, COFFER_S3_PORT: '9100' }), { blobStore: 's3', s3Port: 9100 })
  const c = loadConfig({ ...s3, COFFER_BLOB_S3_ENDPOINT: 'http://127.0.0.1:7480/' }, { 'blob-s3-prefix': 'tenant-data/' })
  t.match(c, { blobStore: 's3', blobS3Bucket: 'coffer', blobS3Endpoint: 'http://127.0.0.1:7480', blobS3Region: 'us-east-1', blobS3Prefix: 'tenant-data/' })
  t.equal(c.blobS3ForcePathStyle, true)
  t.equal(c.blobS3TimeoutSeconds, 15)
  t.equal(c.blobS3RedirectDownloads, false)
  t.throws(() => loadConfig({ COFFER_BLOB_STORE: 's3' }), new ConfigError('invalid configuration: COFFER_BLOB_STORE=s3 needs COFFER_BLOB_S3_BUCKET'))
  t.throws(() => loadConfig({ COFFER_BLOB_STORE: 'nfs' }), new ConfigError('invalid configuration: COFFER_BLOB_STORE="nfs" must be disk or s3'))
  t.throws(
    () => loadConfig({ ...s3, COFFER_BLOB_S3_ACCESS_KEY_ID: 'AKIA0000' }),
    new ConfigError('invalid configuration: set both COFFER_BLOB_S3_ACCESS_KEY_ID and COFFER_BLOB_S3_SECRET_ACCESS_KEY, or neither'),
  )
  t.throws(() => loadConfig({ ...s3, COFFER_BLOB_S3_PREFIX: '/abs' }), /COFFER_BLOB_S3_PREFIX="\/abs" must be empty, or path segments/)
  t.throws(() => loadConfig({ ...s3, COFFER_BLOB_S3_BUCKET: 'No_Such' }), /COFFER_BLOB_S3_BUCKET="No_Such" must be an S3 bucket name/)
  t.throws(() => loadConfig({ ...s3, COFFER_BLOB_S3_ENDPOINT: 'ftp://x' }), /COFFER_BLOB_S3_ENDPOINT/)
  t.throws(() => loadConfig({ ...s3, COFFER_BLOB_S3_TIMEOUT_SECONDS: '0' }), /COFFER_BLOB_S3_TIMEOUT_SECONDS="0" must be an integer from 1 to 600/)
  const secret = 'x'.repeat(600)
  t.throws(() => loadConfig({ ...s3, COFFER_BLOB_S3_ACCESS_KEY_ID: 'AKIA0000', COFFER_BLOB_S3_SECRET_ACCESS_KEY: secret }), {
    message: 'invalid configuration: COFFER_BLOB_S3_SECRET_ACCESS_KEY=(hidden) must be a secret access key',
  })
})
