// @suites: sqlite
// The CLI on PostgreSQL (#30), through the built dist/coffer.cjs as a person runs it: every
// data-dir command on the database a server runs on (the server sees each change at its next
// request), backup refused naming pg_dump, rotate-key refused while a node holds a lease,
// encrypt-blobs and migrate-blobs on it, serve's warning about a coffer.db it does not serve,
// one server secret across nodes, and serve --workers 2 on one database.
import t, { type Test } from 'tap'
import fs from 'node:fs'
import http from 'node:http'
import path from 'node:path'
import { randomBytes } from 'node:crypto'
import { ListBucketsCommand, S3Client } from '@aws-sdk/client-s3'
import { buildBundle, runCoffer, startCoffer, type Running } from './process-helper'
import { fileBytes, filesBelow, tempDir } from './helper'
import { startReceiver } from './webhook-receiver'
import { admin as pgAdmin, freshSchema, withPg } from './pg/fixture'
import { fixtureEnv } from './s3/fixture'
import { PG_MIGRATIONS } from '../src/db/pg/migrations'
import { secretFingerprint } from '../src/services/server-secret'

buildBundle()
t.setTimeout(300_000)

const ADMIN = 'pg-cli-admin-key-0123456789'
const S3_LISTENING = /coffer S3 listening on (http:\/\/[^\s"]+)/
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

/** `coffer serve` on `dir` with `env` (its COFFER_DATABASE_URL), stopped (SIGKILL) at the end of the test. */
async function serve(t: Test, dir: string, env: Record<string, string>, args: string[] = [], ready?: RegExp): Promise<Running> {
  const server = await startCoffer(['serve', '--port', '0', '--host', '127.0.0.1', '--data-dir', dir, ...args], {
    cwd: dir,
    env,
    timeoutMs: 60_000,
    ...(ready ? { ready } : {}),
  })
  t.teardown(() => void server.child.kill('SIGKILL'))
  return server
}

/** Stops a server gracefully (SIGTERM): its leases are given up. */
async function stop(server: Running): Promise<number | string> {
  server.child.kill('SIGTERM')
  return server.exited
}

/** A data-dir command run to completion: its exit code and output. */
function cli(dir: string, env: Record<string, string>, ...args: string[]): { status: number | null; stdout: string; stderr: string } {
  const r = runCoffer([...args, '--data-dir', dir], { cwd: dir, env })
  return { status: r.status, stdout: r.stdout, stderr: r.stderr }
}

const bearer = (key: string) => ({ authorization: `Bearer ${key}` })

async function get(url: string, headers: Record<string, string> = {}): Promise<{ status: number; body: Buffer }> {
  const res = await fetch(url, { headers })
  return { status: res.status, body: Buffer.from(await res.arrayBuffer()) }
}

/** A GET on a connection of its own: the cluster's primary hands each new connection to the next worker. */
function statusOnNewConnection(url: string, headers: Record<string, string>): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { headers, agent: false }, (res) => {
      res.resume()
      res.on('end', () => resolve(res.statusCode ?? 0))
    })
    req.on('error', reject)
    req.end()
  })
}

/** The handshake on `base`, the PUT of the bytes to its presigned path on `putBase` (another node, or the same). */
async function upload(
  base: string,
  key: string,
  bytes: Buffer,
  extra: Record<string, unknown> = {},
  putBase = base,
): Promise<{ fileId: string; status: number }> {
  const hs = await fetch(`${base}/api/v1/upload/request`, {
    method: 'POST',
    headers: { ...bearer(key), 'content-type': 'application/json' },
    body: JSON.stringify({ fileType: 'image/png', fileName: 'a.png', ...extra }),
  })
  if (hs.status !== 200) throw new Error(`handshake: ${hs.status} ${await hs.text()}`)
  const h = (await hs.json()) as { fileId: string; presignedUrl: string }
  const put = await fetch(`${putBase}${h.presignedUrl}`, { method: 'PUT', headers: { 'content-type': 'image/png' }, body: new Uint8Array(bytes) })
  await put.arrayBuffer()
  return { fileId: h.fileId, status: put.status }
}

withPg(t, 'the CLI on PostgreSQL', (url) => {
  t.test('every data-dir command works on the database a server runs on, which sees each change at its next request', async (t) => {
    const dir = tempDir(t)
    const env = { COFFER_DATABASE_URL: await freshSchema(t, url), COFFER_ADMIN_API_KEY: ADMIN, COFFER_WEBHOOK_ALLOW_PRIVATE: 'true' }
    const server = await serve(t, dir, env)
    // Logged a moment after the API's line, which startCoffer waits for.
    let s3Url: string | undefined
    for (let i = 0; i < 100 && s3Url === undefined; i++) {
      s3Url = server.lines.map((l) => S3_LISTENING.exec(l)?.[1]).find(Boolean)
      if (s3Url === undefined) await sleep(50)
    }
    t.notOk(fs.existsSync(path.join(dir, 'coffer.db')), 'no coffer.db: the metadata is in PostgreSQL')

    // tenant create: the server answers the new key at its next request.
    const made = cli(dir, env, 'tenant', 'create', '--name', 'made by the CLI', '--json')
    t.equal(made.status, 0, made.stderr)
    const tenant = JSON.parse(made.stdout) as { id: string; apiKey: string }
    const quota = async (key: string) => {
      const r = await get(`${server.url}/api/v1/tenant/quota`, bearer(key))
      return { status: r.status, quotaBytes: r.status === 200 ? (JSON.parse(r.body.toString()) as { quotaBytes: number }).quotaBytes : undefined }
    }
    t.same(await quota(tenant.apiKey), { status: 200, quotaBytes: 524288000 }, 'a tenant made by the CLI is answered by the server')
    const rows = await pgAdmin(env.COFFER_DATABASE_URL, 'SELECT name FROM tenants WHERE id = $1', [tenant.id])
    t.same(rows.rows, [{ name: 'made by the CLI' }], "it is PostgreSQL's row")

    // list, show, update.
    const list = cli(dir, env, 'tenant', 'list', '--json')
    t.equal(list.status, 0, list.stderr)
    t.same(
      (JSON.parse(list.stdout) as { id: string }[]).map((r) => r.id),
      [tenant.id],
      'tenant list',
    )
    const shown = cli(dir, env, 'tenant', 'show', tenant.id, '--json')
    t.match(JSON.parse(shown.stdout), { id: tenant.id, name: 'made by the CLI' }, 'tenant show')
    t.equal(cli(dir, env, 'tenant', 'update', tenant.id, '--quota-bytes', '1MiB').status, 0, 'tenant update')
    t.same(await quota(tenant.apiKey), { status: 200, quotaBytes: 1048576 }, 'the new quota at the next request')

    // regenerate-key: the key the server verified a moment ago is refused at once.
    const regen = cli(dir, env, 'tenant', 'regenerate-key', tenant.id, '--json')
    t.equal(regen.status, 0, regen.stderr)
    const key = (JSON.parse(regen.stdout) as { apiKey: string }).apiKey
    t.equal((await quota(tenant.apiKey)).status, 401, 'a key regenerated by the CLI is refused by the server at once')
    t.equal((await quota(key)).status, 200, 'the new key works')

    // S3 credentials made, listed and revoked by the CLI, used and refused on the server's S3 front.
    const pair = JSON.parse(cli(dir, env, 'tenant', 's3-credentials', 'create', tenant.id, '--json').stdout) as {
      accessKeyId: string
      secretAccessKey: string
    }
    t.ok(s3Url, 'the S3 front listens')
    const client = new S3Client({
      endpoint: s3Url!,
      region: 'us-east-1',
      forcePathStyle: true,
      credentials: { accessKeyId: pair.accessKeyId, secretAccessKey: pair.secretAccessKey },
    })
    t.teardown(() => client.destroy())
    t.same((await client.send(new ListBucketsCommand({}))).Buckets ?? [], [], 'a pair made by the CLI signs requests the server accepts')
    t.match(cli(dir, env, 'tenant', 's3-credentials', 'list', tenant.id).stdout, pair.accessKeyId, 's3-credentials list')
    t.equal(cli(dir, env, 'tenant', 's3-credentials', 'revoke', tenant.id, pair.accessKeyId).status, 0, 's3-credentials revoke')
    await t.rejects(client.send(new ListBucketsCommand({})), { name: 'InvalidAccessKeyId' }, 'revoked by the CLI: refused by the server at once')

    // A file whose webhook fails three times (dead), re-driven by the CLI and then delivered by
    // the server; verified, deleted, collected.
    const receiver = await startReceiver(t, [500, 500, 500, 200])
    const bytes = fileBytes('image/png', 100_000, 3)
    const up = await upload(server.url, key, bytes, { webhookUrl: receiver.url })
    t.equal(up.status, 200, 'uploaded')
    await receiver.waitFor(3, 20_000)
    type Event = { id: string; event: string; fileId: string; status: string }
    const eventsOf = (...status: string[]) => JSON.parse(cli(dir, env, 'webhooks', 'list', '--json', ...status).stdout) as Event[]
    const until = async (what: string, fn: () => boolean) => {
      for (let i = 0; i < 100 && !fn(); i++) await sleep(100)
      t.ok(fn(), what)
    }
    await until("webhooks list reads the server's outbox: the event dead after three attempts", () =>
      eventsOf('--status', 'dead').some((e) => e.event === 'file.uploaded' && e.fileId === up.fileId),
    )
    const [event] = eventsOf('--status', 'dead')
    const retried = cli(dir, env, 'webhooks', 'retry', event!.id, '--json')
    t.same([retried.status, JSON.parse(retried.stdout)], [0, { retried: 1 }], 'webhooks retry')
    await receiver.waitFor(4, 20_000)
    t.equal(receiver.received[3]!.headers['webhook-id'], receiver.received[0]!.headers['webhook-id'], 're-sent by the server, same webhook-id')
    await until('delivered', () => eventsOf().some((e) => e.id === event!.id && e.status === 'delivered'))
    const none = cli(dir, env, 'webhooks', 'retry', '--all-dead', '--json')
    t.same([none.status, JSON.parse(none.stdout)], [0, { retried: 0 }], 'webhooks retry --all-dead: none left')
    const verified = cli(dir, env, 'verify', '--json')
    t.equal(verified.status, 0, verified.stdout)
    t.match(JSON.parse(verified.stdout), { ok: true, checked: 1, missing: [], corrupt: [] }, 'verify checks the blob PostgreSQL records')
    const del = await fetch(`${server.url}/api/v1/files/${up.fileId}`, { method: 'DELETE', headers: bearer(key) })
    t.equal(del.status, 200, 'deleted')
    const gc = cli(dir, { ...env, COFFER_DELETED_RETENTION_SECONDS: '0' }, 'gc', '--json')
    t.equal(gc.status, 0, gc.stderr)
    t.match(JSON.parse(gc.stdout), { filesPurged: 1, blobsRemoved: 1 }, 'gc purges the file deleted on the server and its blob')
    t.same(filesBelow(path.join(dir, 'blobs')), [], 'the blob file is gone')

    // tenant delete: the server refuses its key at the next request.
    t.equal(cli(dir, env, 'tenant', 'delete', tenant.id).status, 2, 'delete needs --yes')
    t.equal(cli(dir, env, 'tenant', 'delete', tenant.id, '--yes').status, 0, 'tenant delete --yes')
    t.equal((await quota(key)).status, 401, 'a tenant deleted by the CLI: its key refused by the server at once')

    // backup: refused at once, one line naming pg_dump, nothing written.
    const dest = path.join(tempDir(t), 'copy')
    const backup = cli(dir, env, 'backup', dest)
    t.equal(backup.status, 2, 'backup refused')
    t.match(backup.stderr, /^coffer: the metadata is in PostgreSQL.*pg_dump.*blobs\/ and secret/)
    t.equal(backup.stderr.trim().split('\n').length, 1, 'one line')
    t.notOk(fs.existsSync(dest), 'nothing written')
    t.equal(await stop(server), 0, 'the server stops cleanly')
  })

  t.test('encrypt-blobs on PostgreSQL, and rotate-key refused while a node holds a lease', async (t) => {
    const dir = tempDir(t)
    const env = { COFFER_DATABASE_URL: await freshSchema(t, url), COFFER_ADMIN_API_KEY: ADMIN, COFFER_LEASE_SECONDS: '5' }
    const keyFile = (name: string) => {
      const file = path.join(tempDir(t, 'coffer-key-'), name)
      fs.writeFileSync(file, `${randomBytes(32).toString('hex')}\n`, { mode: 0o600 })
      return file
    }
    const tenant = JSON.parse(cli(dir, env, 'tenant', 'create', '--name', 'sealed', '--json').stdout) as { apiKey: string }
    const plain = await serve(t, dir, env)
    const bytes = fileBytes('image/png', 150_000, 4)
    const { fileId } = await upload(plain.url, tenant.apiKey, bytes)
    t.equal(await stop(plain), 0)

    // Encryption turned on for a database that has content in the clear: encrypt-blobs seals it
    // while the server runs.
    const old = { ...env, COFFER_ENCRYPTION_KEY_FILE: keyFile('old.key') }
    const sealedServer = await serve(t, dir, old)
    const sealed = cli(dir, old, 'encrypt-blobs', '--json')
    t.equal(sealed.status, 0, sealed.stderr)
    t.match(JSON.parse(sealed.stdout), { checked: 1, sealed: 1, done: true }, 'encrypt-blobs seals the content PostgreSQL records')

    const next = keyFile('new.key')
    const refused = cli(dir, old, 'rotate-key', '--new-key-file', next)
    t.equal(refused.status, 2, 'rotate-key refused while the server runs')
    t.match(refused.stderr, /^coffer: a server is running on the PostgreSQL database \(it holds \d+ lease\(s\), e\.g\. pid \d+ .*\): stop every node first/)
    t.equal(await stop(sealedServer), 0)
    const rotated = cli(dir, old, 'rotate-key', '--new-key-file', next)
    t.equal(rotated.status, 0, `rotate-key once every node has stopped: ${rotated.stderr}`)
    const after = await serve(t, dir, { ...env, COFFER_ENCRYPTION_KEY_FILE: next })
    const got = await get(`${after.url}/api/v1/files/${fileId}/download`, bearer(tenant.apiKey))
    t.equal(got.status, 200)
    t.ok(got.body.equals(bytes), 'the new key reads the content')
    t.equal(await stop(after), 0)
  })

  const ceph = fixtureEnv()
  t.test('migrate-blobs on PostgreSQL: the content into the S3 store, served from there', { skip: 'unavailable' in ceph && ceph.unavailable }, async (t) => {
    if ('unavailable' in ceph) return
    const dir = tempDir(t)
    const env = { COFFER_DATABASE_URL: await freshSchema(t, url), COFFER_ADMIN_API_KEY: ADMIN }
    const s3 = { ...env, ...ceph.env, COFFER_BLOB_STORE: 's3', COFFER_BLOB_S3_PREFIX: `pg-cli-${process.pid}-${randomBytes(4).toString('hex')}/` }
    const tenant = JSON.parse(cli(dir, env, 'tenant', 'create', '--name', 'moved', '--json').stdout) as { apiKey: string }
    const disk = await serve(t, dir, env)
    const bytes = fileBytes('image/png', 120_000, 5)
    const { fileId } = await upload(disk.url, tenant.apiKey, bytes)
    const moved = cli(dir, s3, 'migrate-blobs', '--to', 's3', '--json')
    t.equal(moved.status, 0, moved.stderr)
    t.match(JSON.parse(moved.stdout), { to: 's3', checked: 1, copied: 1, missing: [], corrupt: [] }, 'the blob PostgreSQL records, copied')
    t.equal(await stop(disk), 0)
    const remote = await serve(t, dir, s3)
    const got = await get(`${remote.url}/api/v1/files/${fileId}/download`, bearer(tenant.apiKey))
    t.ok(got.status === 200 && got.body.equals(bytes), 'served from the S3 store')
    t.equal(await stop(remote), 0)
  })

  t.test('serve on PostgreSQL over a data dir whose coffer.db holds tenants: it serves, and warns naming coffer migrate-metadata', async (t) => {
    const dir = tempDir(t)
    // A data dir served on SQLite first, with a tenant in its coffer.db.
    const sqliteEnv = { COFFER_ADMIN_API_KEY: ADMIN }
    t.equal(await stop(await serve(t, dir, sqliteEnv)), 0)
    t.equal(cli(dir, sqliteEnv, 'tenant', 'create', '--name', 'left in sqlite').status, 0)
    const server = await serve(t, dir, { ...sqliteEnv, COFFER_DATABASE_URL: await freshSchema(t, url) })
    const warning = server.lines.find((l) => l.includes('migrate-metadata'))
    t.ok(warning, 'a warning line')
    t.match(JSON.parse(warning!), {
      level: 40,
      tenants: 1,
      msg: /coffer\.db holds 1 tenant\(s\) that this server does not serve.*coffer migrate-metadata --to postgres:\/\/… --data-dir /,
    })
    t.notMatch(warning!, /postgres:\/\/[^…]/, 'never the URL')
    t.equal((await get(`${server.url}/health`)).status, 200, 'and serves')
    t.equal(await stop(server), 0)
    // A data dir with no coffer.db (or no tenant in it) says nothing.
    const clean = await serve(t, tempDir(t), { ...sqliteEnv, COFFER_DATABASE_URL: await freshSchema(t, url) })
    t.notOk(
      clean.lines.some((l) => l.includes('migrate-metadata')),
      'no warning without a coffer.db',
    )
    t.equal(await stop(clean), 0)
  })

  t.test('one server secret across the nodes of a database', async (t) => {
    await t.test('a node whose secret differs from the first one refuses to start; so does a command', async (t) => {
      const env = { COFFER_DATABASE_URL: await freshSchema(t, url), COFFER_ADMIN_API_KEY: ADMIN }
      // Each data dir generates a secret of its own.
      const first = await serve(t, tempDir(t), env)
      const other = tempDir(t)
      const r = runCoffer(['serve', '--port', '0', '--host', '127.0.0.1', '--data-dir', other], { cwd: other, env })
      t.equal(r.status, 2, 'the second node exits 2')
      t.equal(
        r.stderr,
        "coffer: this node's server secret differs from the one the other nodes on this PostgreSQL database use (their signed URLs and S3 secrets need the same): set the same COFFER_SECRET on every node\n",
        'with one line saying what to set',
      )
      t.equal(cli(other, env, 'tenant', 'list').status, 2, 'a command on that data dir is refused too')
      const stored = await pgAdmin(env.COFFER_DATABASE_URL, 'SELECT fingerprint FROM server_secret')
      const secret = fs.readFileSync(path.join(other, 'secret'), 'utf8')
      t.equal(stored.rows.length, 1, 'one fingerprint')
      t.notMatch(stored.rows[0].fingerprint as string, secret.trim(), 'never the secret')
      t.equal((await get(`${first.url}/health`)).status, 200, 'the first node serves on')
      t.equal(await stop(first), 0)
    })

    await t.test("migrate-metadata --to makes the data dir's secret the database's: a node with another one refuses to start", async (t) => {
      const dir = tempDir(t)
      const sqliteEnv = { COFFER_ADMIN_API_KEY: ADMIN }
      t.equal(await stop(await serve(t, dir, sqliteEnv)), 0)
      const tenant = JSON.parse(cli(dir, sqliteEnv, 'tenant', 'create', '--name', 'moved', '--json').stdout) as { id: string; apiKey: string }
      const pair = JSON.parse(cli(dir, sqliteEnv, 'tenant', 's3-credentials', 'create', tenant.id, '--json').stdout) as {
        accessKeyId: string
        secretAccessKey: string
      }
      const database = await freshSchema(t, url)
      // A node that started on the database while it was empty, with a secret of its own.
      const early = tempDir(t)
      t.equal(await stop(await serve(t, early, { ...sqliteEnv, COFFER_DATABASE_URL: database })), 0)
      const moved = cli(dir, sqliteEnv, 'migrate-metadata', '--to', database)
      t.equal(moved.status, 0, moved.stderr)
      t.match(moved.stderr, /every node on the PostgreSQL database must use this data dir's server secret/, 'says so')
      const stored = await pgAdmin(database, 'SELECT fingerprint FROM server_secret')
      t.same(
        stored.rows,
        [{ fingerprint: secretFingerprint(Buffer.from(fs.readFileSync(path.join(dir, 'secret'), 'utf8').trim(), 'hex')) }],
        "the data dir's secret, by its fingerprint",
      )
      const env = { ...sqliteEnv, COFFER_DATABASE_URL: database }
      const refused = runCoffer(['serve', '--port', '0', '--host', '127.0.0.1', '--data-dir', early], { cwd: early, env })
      t.equal(refused.status, 2, 'the node with another secret is refused')
      t.match(refused.stderr, /set the same COFFER_SECRET on every node/)
      // The data dir itself serves the copied S3 pair from PostgreSQL.
      const node = await serve(t, dir, env)
      let s3Url: string | undefined
      for (let i = 0; i < 100 && s3Url === undefined; i++) {
        s3Url = node.lines.map((l) => S3_LISTENING.exec(l)?.[1]).find(Boolean)
        if (s3Url === undefined) await sleep(50)
      }
      const client = new S3Client({ endpoint: s3Url!, region: 'us-east-1', forcePathStyle: true, credentials: pair })
      t.teardown(() => client.destroy())
      t.same((await client.send(new ListBucketsCommand({}))).Buckets ?? [], [], 'the S3 secret sealed on SQLite opens on the node')
      t.equal(await stop(node), 0)
    })

    await t.test('with the same COFFER_SECRET, a link signed by one node is served by the other', async (t) => {
      const env = { COFFER_DATABASE_URL: await freshSchema(t, url), COFFER_ADMIN_API_KEY: ADMIN, COFFER_SECRET: randomBytes(24).toString('hex') }
      const [a, b] = [await serve(t, tempDir(t), env), await serve(t, tempDir(t), env)]
      const made = await fetch(`${a.url}/api/v1/admin/tenants`, {
        method: 'POST',
        headers: { ...bearer(ADMIN), 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'two nodes' }),
      })
      const { apiKey } = (await made.json()) as { apiKey: string }
      // Small enough to be kept in the database, which both nodes read (each has its own data dir).
      const bytes = fileBytes('image/png', 4000, 6)
      const up = await upload(a.url, apiKey, bytes, {}, b.url)
      t.equal(up.status, 200, 'the presigned upload path of a handshake on A is accepted by B')
      const signed = (await (await fetch(`${a.url}/api/v1/files/${up.fileId}/signed-url`, { headers: bearer(apiKey) })).json()) as { url: string }
      const link = new URL(signed.url)
      const got = await get(`${b.url}${link.pathname}${link.search}`)
      t.equal(got.status, 200, 'a download URL signed by A is served by B')
      t.ok(got.body.equals(bytes), 'its content')
      t.equal(await stop(a), 0)
      t.equal(await stop(b), 0)
    })
  })

  t.test('serve --workers 2 on PostgreSQL: the first worker migrates, both serve one database', async (t) => {
    const dir = tempDir(t)
    const database = await freshSchema(t, url)
    const env = { COFFER_DATABASE_URL: database, COFFER_ADMIN_API_KEY: ADMIN, COFFER_LOG_LEVEL: 'info' }
    const READY = /coffer ready: \d+ workers listening on (http:\/\/[^\s",]+)/
    const server = await serve(t, dir, env, ['--workers', '2'], READY)
    t.notOk(fs.existsSync(path.join(dir, 'coffer.db')), 'no coffer.db')
    const versions = await pgAdmin(database, 'SELECT version FROM schema_migrations ORDER BY version')
    t.same(
      versions.rows.map((r) => r.version as number),
      PG_MIGRATIONS.map((m) => m.version),
      'every migration applied, once',
    )
    const made = await fetch(`${server.url}/api/v1/admin/tenants`, {
      method: 'POST',
      headers: { ...bearer(ADMIN), 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'workers' }),
    })
    const { apiKey } = (await made.json()) as { apiKey: string }
    // Each connection goes to the next worker: a tenant made through one is answered by both.
    const before = server.lines.length
    for (let i = 0; i < 12; i++) t.equal(await statusOnNewConnection(`${server.url}/api/v1/tenant/quota`, bearer(apiKey)), 200)
    await sleep(200)
    const workers = new Set(
      server.lines
        .slice(before)
        .filter((l) => l.startsWith('{') && l.includes('"request completed"'))
        .map((l) => (JSON.parse(l) as { worker?: number }).worker),
    )
    t.same([...workers].sort(), [1, 2], 'both workers answered from the one database')
    t.equal(await stop(server), 0, 'SIGTERM stops both')
  })
})
