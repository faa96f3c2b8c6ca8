// @suites: sqlite
import t from 'tap'
import fs from 'node:fs'
import path from 'node:path'
import {
  CreateBucketCommand,
  GetObjectCommand,
  ListObjectVersionsCommand,
  PutBucketVersioningCommand,
  PutObjectCommand,
  type S3Client,
} from '@aws-sdk/client-s3'
import { loadConfig } from '../src/config'
import { createCore } from '../src/core'
import { createLogger } from '../src/lib/logger'
import { PG_MIGRATIONS } from '../src/db/pg/migrations'
import { startServer, type Server } from '../src/server'
import { backupDataDir } from '../src/services/backup'
import { ADMIN_KEY, admin, captureLogs, tempDir } from './helper'
import { bodyOf, createTenantWithS3, s3Client, s3Error } from './s3-helper'
import { admin as pgAdmin, freshSchema, withPg } from './pg/fixture'

// A core over PostgreSQL (#30, CoreOptions.database): createCore opens the bridge, migrates under
// the advisory lock and builds every service on the engine, and two servers on one database act
// as two nodes (the content on a data dir both share, as README's "Metadata in PostgreSQL" says).
t.setTimeout(300_000)

withPg(t, 'a core over PostgreSQL', (url) => {
  t.test('createCore on PostgreSQL: migrated once, no SQLite file, the services on the engine, backup refused', async (t) => {
    const database = { postgres: await freshSchema(t, url) }
    const dir = tempDir(t)
    const config = loadConfig({ COFFER_ADMIN_API_KEY: ADMIN_KEY, COFFER_DISK_RESERVE_BYTES: '65536' }, { 'data-dir': dir })
    const one = createCore(config, { database })
    t.teardown(() => one.close())
    t.equal(one.db.dialect, 'postgres', 'core.db is the PostgreSQL engine')
    t.equal(one.sqlite, undefined, 'no SQLite connection')
    t.notOk(fs.existsSync(path.join(dir, 'coffer.db')), 'no coffer.db in the data dir')
    const versions = async () =>
      (await pgAdmin(database.postgres, 'SELECT version FROM schema_migrations ORDER BY version')).rows.map((r) => r.version as number)
    t.same(
      await versions(),
      PG_MIGRATIONS.map((m) => m.version),
      'every migration applied',
    )
    // A second node on the same database finds the schema migrated and applies nothing again.
    const two = createCore(config, { database })
    t.teardown(() => two.close())
    t.same(
      await versions(),
      PG_MIGRATIONS.map((m) => m.version),
      'each applied once',
    )

    const { tenant, apiKey } = one.tenants.create({ name: 'pg-core' })
    const row = await pgAdmin(database.postgres, 'SELECT name FROM tenants WHERE id = $1', [tenant.id])
    t.same(row.rows, [{ name: 'pg-core' }], "the tenant is PostgreSQL's row")
    t.equal(two.tenants.authenticate(apiKey)?.id, tenant.id, 'the other core authenticates its key')
    one.tenants.regenerateKey(tenant.id)
    t.equal(two.tenants.authenticate(apiKey), undefined, 'the key the other core had cached is refused at its next use (auth_version)')

    await t.rejects(backupDataDir(one, path.join(tempDir(t), 'copy')), /PostgreSQL.*pg_dump/, 'coffer backup points at pg_dump')
  })

  t.test("two servers on one PostgreSQL: each sees the other's writes at its next request; a start clears no lease and no claim", async (t) => {
    const database = { postgres: await freshSchema(t, url) }
    const dir = tempDir(t)
    const config = loadConfig(
      { COFFER_ADMIN_API_KEY: ADMIN_KEY, COFFER_DISK_RESERVE_BYTES: '65536' },
      { port: '0', 's3-port': '0', host: '127.0.0.1', 'data-dir': dir },
    )
    const start = async (): Promise<Server> => {
      const server = await startServer(config, createLogger('silent', captureLogs().stream), { database })
      t.teardown(() => server.close())
      return server
    }
    const a = await start()
    t.equal(a.core.db.dialect, 'postgres')
    const owner = await createTenantWithS3(a.app)
    // What another node holds when the second one starts: a background job's lease, an event's claim.
    const now = Date.now()
    t.ok(a.core.leases.take('gc', 3_600_000, 'node elsewhere'), 'a lease held by another node')
    a.core.outbox.insert({ id: 'ev', tenantId: owner.id, fileId: 'f', event: 'file.uploaded', url: 'http://127.0.0.1:9/', payload: '{}', now })
    t.same(a.core.outbox.claim(['ev'], 'node elsewhere', now, now + 3_600_000), ['ev'], 'an event claimed by another node')

    const b = await start()
    t.equal(b.core.leases.holderOf('gc'), 'node elsewhere', "the second node's start left the lease to its holder")
    const claim = await pgAdmin(database.postgres, "SELECT claimed_by FROM outbox WHERE id = 'ev'")
    t.same(claim.rows, [{ claimed_by: 'node elsewhere' }], "and the event's claim")

    const client = (server: Server): S3Client => {
      const c = s3Client(server.s3!.url, owner.credentials, config.s3Region)
      t.teardown(() => c.destroy())
      return c
    }
    const [onA, onB] = [client(a), client(b)]
    const Bucket = 'nodes'
    await onA.send(new CreateBucketCommand({ Bucket }))
    // Node A reads the bucket's state (unversioned) before node B changes it.
    await onA.send(new PutObjectCommand({ Bucket, Key: 'k', Body: 'zero' }))
    t.equal((await bodyOf(onB.send(new GetObjectCommand({ Bucket, Key: 'k' })))).toString(), 'zero', 'written on A, read on B')
    await onB.send(new PutBucketVersioningCommand({ Bucket, VersioningConfiguration: { Status: 'Enabled' } }))
    await onA.send(new PutObjectCommand({ Bucket, Key: 'k', Body: 'one' }))
    await onA.send(new PutObjectCommand({ Bucket, Key: 'k', Body: 'two' }))
    const listed = await onB.send(new ListObjectVersionsCommand({ Bucket }))
    t.equal(listed.Versions?.length, 3, 'A wrote versions at once after B enabled versioning: no stale bucket state')

    // A credential revoked on B is refused by A at its next request.
    const revoked = await b.app.inject({
      method: 'DELETE',
      url: `/api/v1/admin/tenants/${owner.id}/s3-credentials/${owner.credentials.accessKeyId}`,
      headers: admin,
    })
    t.equal(revoked.statusCode, 204, 'revoked on B')
    t.same(await s3Error(onA.send(new GetObjectCommand({ Bucket, Key: 'k' }))), { name: 'InvalidAccessKeyId', status: 403 }, 'refused on A')
  })
})
