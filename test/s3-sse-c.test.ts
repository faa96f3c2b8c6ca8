// @suites: pg-all
import t from 'tap'
import fs from 'node:fs'
import path from 'node:path'
import { createHash, randomBytes } from 'node:crypto'
import {
  CompleteMultipartUploadCommand,
  CopyObjectCommand,
  CreateBucketCommand,
  CreateMultipartUploadCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutBucketVersioningCommand,
  PutObjectCommand,
  UploadPartCommand,
  UploadPartCopyCommand,
} from '@aws-sdk/client-s3'
import { completeCommand, makeS3, pattern, s3Error, sendSigned as send, storedBytes } from './s3-helper'
import { tempDir } from './helper'
import type { Test } from 'tap'
import type { Engine } from '../src/db/engine'

// SSE-C (#27): objects sealed under the customer's key, through the AWS SDK v3.

const keyA = randomBytes(32)
const keyB = randomBytes(32)
const md5 = (k: Buffer) => createHash('md5').update(k).digest('base64')
const sseC = (k: Buffer) => ({ SSECustomerAlgorithm: 'AES256', SSECustomerKey: k.toString('base64'), SSECustomerKeyMD5: md5(k) })
const copySseC = (k: Buffer) => ({
  CopySourceSSECustomerAlgorithm: 'AES256',
  CopySourceSSECustomerKey: k.toString('base64'),
  CopySourceSSECustomerKeyMD5: md5(k),
})
const bodyOf = async (p: Promise<{ Body?: { transformToByteArray(): Promise<Uint8Array> } }>) => Buffer.from(await (await p).Body!.transformToByteArray())

function masterKeyEnv(t: Test): Record<string, string> {
  const file = path.join(tempDir(t, 'coffer-key-'), 'master.key')
  fs.writeFileSync(file, randomBytes(32).toString('hex'), { mode: 0o600 })
  return { COFFER_ENCRYPTION_KEY_FILE: file }
}

for (const dataDir of ['plain', 'encrypted'] as const) {
  t.test(`SSE-C with a ${dataDir} data dir: put, get, range, head, wrong key, copies, multipart`, async (t) => {
    const ctx = await makeS3(t, dataDir === 'encrypted' ? masterKeyEnv(t) : {}, { store: 'disk' })
    const { client } = ctx
    await client.send(new CreateBucketCommand({ Bucket: 'ssec' }))
    const body = pattern(300_000, 7)
    const put = await client.send(new PutObjectCommand({ Bucket: 'ssec', Key: 'a', Body: body, ...sseC(keyA) }))
    t.equal(put.SSECustomerAlgorithm, 'AES256', 'PutObject reports the algorithm')
    t.equal(put.SSECustomerKeyMD5, md5(keyA), 'and the key MD5')
    t.equal(put.ServerSideEncryption, undefined, 'not SSE-S3')
    t.ok((await bodyOf(client.send(new GetObjectCommand({ Bucket: 'ssec', Key: 'a', ...sseC(keyA) })))).equals(body), 'GET with the key')
    const ranged = await bodyOf(client.send(new GetObjectCommand({ Bucket: 'ssec', Key: 'a', Range: 'bytes=65530-200001', ...sseC(keyA) })))
    t.ok(ranged.equals(body.subarray(65530, 200002)), 'a ranged GET across chunks')
    const head = await client.send(new HeadObjectCommand({ Bucket: 'ssec', Key: 'a', ...sseC(keyA) }))
    t.equal(head.ContentLength, body.length, 'HEAD: the plaintext size')
    t.equal(head.SSECustomerKeyMD5, md5(keyA))
    const listed = await client.send(new ListObjectsV2Command({ Bucket: 'ssec' }))
    t.equal(listed.Contents?.[0]?.Size, body.length, 'listed at its plaintext size')

    // Refusals, as ceph/s3-tests expects of AWS.
    t.match(await s3Error(client.send(new GetObjectCommand({ Bucket: 'ssec', Key: 'a' }))), { name: 'InvalidRequest', status: 400 }, 'GET without the key')
    t.match(await s3Error(client.send(new GetObjectCommand({ Bucket: 'ssec', Key: 'a', ...sseC(keyB) }))), { status: 400 }, 'GET with another key')
    t.match(await s3Error(client.send(new HeadObjectCommand({ Bucket: 'ssec', Key: 'a' }))), { status: 400 }, 'HEAD without the key')
    const badMd5 = await send(ctx, {
      method: 'PUT',
      path: '/ssec/bad',
      headers: {
        'x-amz-server-side-encryption-customer-algorithm': 'AES256',
        'x-amz-server-side-encryption-customer-key': keyA.toString('base64'),
        'x-amz-server-side-encryption-customer-key-md5': md5(keyB),
      },
      payload: 'x',
    })
    t.equal(badMd5.status, 400, 'a key MD5 that is not the key')
    t.match(badMd5.body, '<Code>InvalidArgument</Code>')
    const noAlgorithm = await send(ctx, {
      method: 'PUT',
      path: '/ssec/bad',
      headers: { 'x-amz-server-side-encryption-customer-key': keyA.toString('base64'), 'x-amz-server-side-encryption-customer-key-md5': md5(keyA) },
      payload: 'x',
    })
    t.equal(noAlgorithm.status, 400, 'a key without the algorithm')
    const plain = await client.send(new PutObjectCommand({ Bucket: 'ssec', Key: 'plain', Body: body }))
    t.ok(plain.ETag)
    t.match(await s3Error(client.send(new GetObjectCommand({ Bucket: 'ssec', Key: 'plain', ...sseC(keyA) }))), { status: 400 }, 'a key for a plain object')

    // Not deduplicated, and never in the clear: the same content put twice is two blobs, neither holding the plaintext.
    await client.send(new PutObjectCommand({ Bucket: 'ssec', Key: 'a2', Body: body, ...sseC(keyA) }))
    const shas = ctx.core.db.pluck("SELECT sha256 FROM files WHERE object_key IN ('a', 'a2', 'plain') AND deleted_at IS NULL").all() as string[]
    t.equal(new Set(shas).size, 3, 'each SSE-C object is a blob of its own, none shared with the plain one')
    const plainSha = createHash('sha256').update(body).digest('hex')
    t.equal(shas.filter((s) => s === plainSha).length, 1, 'only the plain object is addressed by its SHA-256, the others by their sealed bytes')
    const probe = body.subarray(100_000, 100_032)
    const stored = await storedBytes(ctx)
    const holding = stored.filter((b) => b.includes(probe))
    t.equal(holding.length, dataDir === 'plain' ? 1 : 0, 'only the plain object is in the clear (in a plain data dir)')

    // Copies: key A → key B, SSE-C → plain, plain → SSE-C.
    const toB = await client.send(new CopyObjectCommand({ Bucket: 'ssec', Key: 'b', CopySource: 'ssec/a', ...copySseC(keyA), ...sseC(keyB) }))
    t.ok(toB.CopyObjectResult?.ETag)
    t.equal(toB.SSECustomerKeyMD5, md5(keyB), 'the copy reports its own key')
    t.ok((await bodyOf(client.send(new GetObjectCommand({ Bucket: 'ssec', Key: 'b', ...sseC(keyB) })))).equals(body), 'the copy reads with key B')
    t.match(await s3Error(client.send(new GetObjectCommand({ Bucket: 'ssec', Key: 'b', ...sseC(keyA) }))), { status: 400 }, 'not with key A')
    t.match(
      await s3Error(client.send(new CopyObjectCommand({ Bucket: 'ssec', Key: 'c', CopySource: 'ssec/a' }))),
      { status: 400 },
      'a copy of an SSE-C source without its key',
    )
    await client.send(new CopyObjectCommand({ Bucket: 'ssec', Key: 'clear', CopySource: 'ssec/a', ...copySseC(keyA) }))
    t.ok((await bodyOf(client.send(new GetObjectCommand({ Bucket: 'ssec', Key: 'clear' })))).equals(body), 'SSE-C → plain')
    await client.send(new CopyObjectCommand({ Bucket: 'ssec', Key: 'back', CopySource: 'ssec/clear', ...sseC(keyB) }))
    t.ok((await bodyOf(client.send(new GetObjectCommand({ Bucket: 'ssec', Key: 'back', ...sseC(keyB) })))).equals(body), 'plain → SSE-C')
    await client.send(new CopyObjectCommand({ Bucket: 'ssec', Key: 'b', CopySource: 'ssec/b', ...copySseC(keyB), ...sseC(keyA) }))
    t.ok((await bodyOf(client.send(new GetObjectCommand({ Bucket: 'ssec', Key: 'b', ...sseC(keyA) })))).equals(body), 'a key changed in place')

    await client.send(new CopyObjectCommand({ Bucket: 'ssec', Key: 'a2', CopySource: 'ssec/a2', ...copySseC(keyA) }))
    t.ok((await bodyOf(client.send(new GetObjectCommand({ Bucket: 'ssec', Key: 'a2' })))).equals(body), 'decrypted in place (a copy onto itself)')
    await client.send(new CopyObjectCommand({ Bucket: 'ssec', Key: 'a2', CopySource: 'ssec/a2', ...sseC(keyA) }))

    // Multipart: every part with the key, an UploadPartCopy from an SSE-C source, reads across parts.
    const p1 = pattern(5 * 1024 * 1024 + 3, 8)
    const mp = await client.send(new CreateMultipartUploadCommand({ Bucket: 'ssec', Key: 'mp', ...sseC(keyA) }))
    t.equal(mp.SSECustomerKeyMD5, md5(keyA))
    const u1 = await client.send(new UploadPartCommand({ Bucket: 'ssec', Key: 'mp', UploadId: mp.UploadId, PartNumber: 1, Body: p1, ...sseC(keyA) }))
    t.match(
      await s3Error(client.send(new UploadPartCommand({ Bucket: 'ssec', Key: 'mp', UploadId: mp.UploadId, PartNumber: 2, Body: 'x', ...sseC(keyB) }))),
      { status: 400 },
      'a part with another key',
    )
    t.match(
      await s3Error(client.send(new UploadPartCommand({ Bucket: 'ssec', Key: 'mp', UploadId: mp.UploadId, PartNumber: 2, Body: 'x' }))),
      { status: 400 },
      'a part without the key',
    )
    const u2 = await client.send(
      new UploadPartCopyCommand({
        Bucket: 'ssec',
        Key: 'mp',
        UploadId: mp.UploadId,
        PartNumber: 2,
        CopySource: 'ssec/b',
        CopySourceRange: 'bytes=1000-99999',
        ...copySseC(keyA),
        ...sseC(keyA),
      }),
    )
    const parts = {
      Parts: [
        { PartNumber: 1, ETag: u1.ETag },
        { PartNumber: 2, ETag: u2.CopyPartResult?.ETag },
      ],
    }
    t.match(
      await s3Error(
        client.send(
          completeCommand('ssec', 'mp', mp.UploadId, [
            [1, u1.ETag],
            [2, u2.CopyPartResult?.ETag],
          ]),
        ),
      ),
      { status: 400 },
      'Complete without the key (ceph/s3-tests test_copy_part_enc)',
    )
    t.match(
      await s3Error(
        client.send(new CompleteMultipartUploadCommand({ Bucket: 'ssec', Key: 'mp', UploadId: mp.UploadId, MultipartUpload: parts, ...sseC(keyB) })),
      ),
      { status: 400 },
      'Complete with another key',
    )
    const done = await client.send(
      new CompleteMultipartUploadCommand({ Bucket: 'ssec', Key: 'mp', UploadId: mp.UploadId, MultipartUpload: parts, ...sseC(keyA) }),
    )
    t.ok(done.ETag, 'Complete with the key')
    const whole = Buffer.concat([p1, body.subarray(1000, 100_000)])
    t.ok((await bodyOf(client.send(new GetObjectCommand({ Bucket: 'ssec', Key: 'mp', ...sseC(keyA) })))).equals(whole), 'the multipart object reads back')
    const across = await bodyOf(
      client.send(new GetObjectCommand({ Bucket: 'ssec', Key: 'mp', Range: `bytes=${p1.length - 70_000}-${p1.length + 70_000}`, ...sseC(keyA) })),
    )
    t.ok(across.equals(whole.subarray(p1.length - 70_000, p1.length + 70_001)), 'a range across the two sealed parts')
    const part2 = await bodyOf(client.send(new GetObjectCommand({ Bucket: 'ssec', Key: 'mp', PartNumber: 2, ...sseC(keyA) })))
    t.ok(part2.equals(body.subarray(1000, 100_000)), 'partNumber=2')
    t.match(
      await s3Error(client.send(new GetObjectCommand({ Bucket: 'ssec', Key: 'mp', ...sseC(keyB) }))),
      { status: 400 },
      'wrong key on the multipart object',
    )
    t.equal((await client.send(new ListObjectsV2Command({ Bucket: 'ssec', Prefix: 'mp' }))).Contents?.[0]?.Size, whole.length)

    // Versions: each version keeps its own key.
    await client.send(new CreateBucketCommand({ Bucket: 'ssec-v' }))
    await client.send(new PutBucketVersioningCommand({ Bucket: 'ssec-v', VersioningConfiguration: { Status: 'Enabled' } }))
    const v1 = await client.send(new PutObjectCommand({ Bucket: 'ssec-v', Key: 'k', Body: 'one', ...sseC(keyA) }))
    await client.send(new PutObjectCommand({ Bucket: 'ssec-v', Key: 'k', Body: 'two', ...sseC(keyB) }))
    t.equal((await bodyOf(client.send(new GetObjectCommand({ Bucket: 'ssec-v', Key: 'k', VersionId: v1.VersionId, ...sseC(keyA) })))).toString(), 'one')
    t.equal((await bodyOf(client.send(new GetObjectCommand({ Bucket: 'ssec-v', Key: 'k', ...sseC(keyB) })))).toString(), 'two')
    t.match(await s3Error(client.send(new GetObjectCommand({ Bucket: 'ssec-v', Key: 'k', VersionId: v1.VersionId, ...sseC(keyB) }))), { status: 400 })

    // coffer verify checks sealed objects like any blob; a flipped byte is detected, never served.
    t.same((await ctx.core.gc.verify()).corrupt, [], 'verify: nothing corrupt')
    if (dataDir === 'plain') {
      const sha = ctx.core.db.pluck("SELECT sha256 FROM files WHERE object_key = 'a2' AND deleted_at IS NULL").get() as string
      const entry = fs.readdirSync(ctx.core.dataDir.blobs, { recursive: true, withFileTypes: true }).find((e) => e.isFile() && e.name === sha)!
      const file = path.join(entry.parentPath, entry.name)
      fs.chmodSync(file, 0o600)
      const bytes = fs.readFileSync(file)
      bytes[150_000] = bytes[150_000]! ^ 1
      fs.writeFileSync(file, bytes)
      t.same((await ctx.core.gc.verify()).corrupt, [sha], 'verify reports the flipped byte')
      await t.rejects(bodyOf(client.send(new GetObjectCommand({ Bucket: 'ssec', Key: 'a2', ...sseC(keyA) }))), 'the GET fails, never serves it')
      const first = await bodyOf(client.send(new GetObjectCommand({ Bucket: 'ssec', Key: 'a2', Range: 'bytes=0-999', ...sseC(keyA) })))
      t.ok(first.equals(body.subarray(0, 1000)), 'a range of undamaged chunks still reads')
    }

    // The Storage Brain API has no key: 409, never the sealed bytes.
    const fileId = ctx.core.db.pluck("SELECT id FROM files WHERE object_key = 'a' AND deleted_at IS NULL").get() as string
    const api = await ctx.app.inject({ url: `/api/v1/files/${fileId}/download`, headers: ctx.tenant.headers })
    t.equal(api.statusCode, 409, 'the API refuses to download an SSE-C object')
    t.equal(api.json().error.code, 'CONFLICT')

    // A presigned URL may carry the key as a query parameter (hoisted headers): its log line does not.
    await send(ctx, { method: 'GET', path: '/ssec/a', query: { 'x-amz-server-side-encryption-customer-key': keyB.toString('base64') } })
    t.ok(JSON.stringify(ctx.logs).includes('x-amz-server-side-encryption-customer-key=[REDACTED]'), 'the URL is logged with the key redacted')

    // The key is nowhere: not in the database, not in a log line.
    // On PostgreSQL every row of the schema as text (bytea as hex, #30).
    const dump = ctx.core.sqlite ? fs.readFileSync(ctx.core.dataDir.db) : pgRows(ctx.core.db)
    for (const k of [keyA, keyB]) {
      t.notOk(dump.includes(k), 'the raw key is not in the database')
      t.notOk(dump.includes(Buffer.from(k.toString('hex'))), 'nor its hex')
      t.notOk(dump.includes(Buffer.from(k.toString('base64'))), 'nor its base64')
      t.notOk(JSON.stringify(ctx.logs).includes(k.toString('base64')), 'nor in the logs')
    }
  })
}

/** Every row of every table of the schema an engine on PostgreSQL works in, as text. */
function pgRows(db: Engine): Buffer {
  const tables = db.pluck('SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()').all() as string[]
  return Buffer.from(tables.map((n) => db.pluck<[], string | null>(`SELECT string_agg(x::text, chr(10)) FROM "${n}" x`).get() ?? '').join('\n'))
}
