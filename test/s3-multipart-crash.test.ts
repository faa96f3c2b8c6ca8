// @suites: pg s3
// A server killed with SIGKILL between the commit of a CompleteMultipartUpload and the removal of
// its parts (#24): the parts' content is left recorded but unused; `coffer verify` reports it, the
// next start removes it without an operator, and the object and its retried Complete are intact.
// On the run's blob store: COFFER_TEST_BLOB_STORE=s3 runs it with the content on the Ceph gateway.
import { createHash } from 'node:crypto'
import t from 'tap'
import { CreateBucketCommand, CreateMultipartUploadCommand, GetObjectCommand, UploadPartCommand } from '@aws-sdk/client-s3'
import { buildBundle, runCoffer } from './process-helper'
import { storedSizes, TEST_BLOB_STORE } from './helper'
import { completeCommand, pattern } from './s3-helper'
import { crashServer, storeEnv } from './s3-crash-harness'

t.setTimeout(240_000)

buildBundle()

const MiB = 1024 * 1024
const sha = (b: Buffer | Uint8Array) => createHash('sha256').update(b).digest('hex')

interface VerifyJson {
  ok: boolean
  checked: number
  missing: string[]
  corrupt: string[]
  orphans: string[]
  unreferenced: string[]
}

function verify(cwd: string, dbEnv: Record<string, string>): VerifyJson {
  const r = runCoffer(['verify', '--json', '--data-dir', 'data'], { cwd, env: { ...storeEnv, ...dbEnv } })
  if (r.status !== 0) throw new Error(`coffer verify exited ${r.status}: ${r.stdout}${r.stderr}`)
  return JSON.parse(r.stdout) as VerifyJson
}

t.test(`SIGKILL after a Complete committed, before its parts went (${TEST_BLOB_STORE} blob store)`, async (t) => {
  const crash = await crashServer(t, 'mpcrash', { firstEnv: { COFFER_TEST_CRASH_AT: 's3-complete-committed' }, quotaBytes: 100 * MiB })
  const { cwd, dataDir } = crash
  let c = crash.client()

  await c.send(new CreateBucketCommand({ Bucket: 'crash' }))
  const parts = [pattern(5 * MiB, 1), pattern(5 * MiB, 2), pattern(5 * MiB, 3), pattern(300_000, 4)]
  const object = Buffer.concat(parts)
  const { UploadId } = await c.send(new CreateMultipartUploadCommand({ Bucket: 'crash', Key: 'big' }))
  const etags: [number, string][] = []
  for (const [i, body] of parts.entries()) {
    const r = await c.send(new UploadPartCommand({ Bucket: 'crash', Key: 'big', UploadId, PartNumber: i + 1, Body: body }))
    etags.push([i + 1, r.ETag!])
  }
  const lost = await c.send(completeCommand('crash', 'big', UploadId, etags)).then(
    () => 'answered',
    () => 'lost',
  )
  t.equal(lost, 'lost', 'the Complete never got its answer')
  const died = await Promise.race([crash.server.exited, new Promise((r) => setTimeout(() => r('still running'), 10_000))])
  t.equal(died, 'SIGKILL', 'the server died at the crash point')
  if (died !== 'SIGKILL') return
  c.destroy()

  // What the crash left: the object committed, its parts' rows gone, their content still stored.
  const partShas = parts.map(sha)
  const inspect = () =>
    crash.inspect((db) => ({
      object: db.pluck("SELECT sha256 FROM files WHERE object_key = 'big' AND deleted_at IS NULL").get(),
      parts: db.pluck('SELECT count(*) FROM s3_parts').get(),
      blobRows: new Set(db.pluck('SELECT sha256 FROM blobs').all() as string[]),
      used: db.pluck('SELECT used_bytes FROM tenants WHERE id = ?').get(crash.tenantId),
    }))
  const after = inspect()
  t.equal(after.object, sha(object), 'the object was committed')
  t.equal(after.parts, 0, 'with its parts')
  t.equal(after.used, object.length, 'usage is the object alone')
  let stored = await storedSizes(storeEnv, dataDir)
  t.same(
    partShas.filter((s) => stored.has(s)),
    partShas,
    "the parts' content is still stored",
  )

  // coffer verify sees it: recorded blobs nothing references.
  const report = verify(cwd, crash.dbEnv)
  t.same([...report.unreferenced].sort(), [...partShas].sort(), 'coffer verify reports the parts as unreferenced')
  t.same([report.missing, report.corrupt, report.orphans], [[], [], []], 'and nothing missing, corrupt or orphaned')
  const text = runCoffer(['verify', '--data-dir', 'data'], { cwd, env: { ...storeEnv, ...crash.dbEnv } })
  t.match(text.stdout, /4 unreferenced/, 'the text report counts them')

  // The next start removes them, without an operator.
  await crash.start()
  t.ok(
    crash.server.lines.some((l) => l.includes('removed content released before the previous run stopped')),
    'the start says it removed them',
  )
  stored = await storedSizes(storeEnv, dataDir)
  t.same(
    partShas.filter((s) => stored.has(s)),
    [],
    "the parts' content is gone from the store",
  )
  t.same([...stored.keys()], [sha(object)], "only the object's content is stored")
  const clean = inspect()
  t.same([...clean.blobRows], [sha(object)], 'and recorded')
  t.equal(clean.used, object.length, 'usage is still exact')

  // The client's retry of the Complete whose answer was lost: 200, the same object.
  c = crash.client()
  const retried = await c.send(completeCommand('crash', 'big', UploadId, etags))
  t.match(retried.ETag, /-4"$/, 'the retried Complete answers 200 with the multipart ETag')
  const got = await c.send(new GetObjectCommand({ Bucket: 'crash', Key: 'big' }))
  t.equal(sha(await got.Body!.transformToByteArray()), sha(object), 'the object reads back byte for byte')
  t.equal(got.ETag, retried.ETag)

  crash.server.child.kill('SIGTERM')
  t.equal(await crash.server.exited, 0)
  const final = verify(cwd, crash.dbEnv)
  t.same([final.unreferenced, final.orphans, final.missing, final.corrupt], [[], [], [], []], 'coffer verify: nothing left over')
})
