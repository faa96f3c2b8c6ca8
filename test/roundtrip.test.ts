// @suites: pg-all
import t, { type Test } from 'tap'
import fs from 'node:fs'
import http from 'node:http'
import { createHash } from 'node:crypto'
import { Readable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import { assertFlatMemory, buildBundle, createTenantOverHttp, memoryOf, startCoffer } from './process-helper'
import path from 'node:path'
import { fileBytes, tempDir, testDatabaseEnv } from './helper'

buildBundle()

const ADMIN = 'roundtrip-admin-key-0123456789'
const MiB = 1024 * 1024

/** `size` bytes of a PDF-looking stream, generated on the fly (never held whole), with its SHA-256. */
function generated(size: number): { stream: Readable; digest: () => string } {
  const hash = createHash('sha256')
  const block = fileBytes('application/pdf', MiB, size)
  let sent = 0
  const stream = new Readable({
    read() {
      if (sent >= size) return void this.push(null)
      const n = Math.min(block.length, size - sent)
      const chunk = Buffer.from(block.subarray(0, n))
      if (sent > 0 && n >= 4) chunk.writeUInt32BE(sent, 0) // every MiB differs
      hash.update(chunk)
      sent += n
      this.push(chunk)
    },
  })
  return { stream, digest: () => hash.digest('hex') }
}

function put(url: string, body: Readable, size: number): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: 'PUT', headers: { 'content-type': 'application/pdf', 'content-length': size } }, (res) => {
      let text = ''
      res.setEncoding('utf8')
      res.on('data', (d: string) => (text += d))
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }))
    })
    req.on('error', reject)
    body.pipe(req)
  })
}

async function downloadDigest(url: string, headers: Record<string, string> = {}): Promise<{ status: number; digest: string; length: number }> {
  const res = await fetch(url, { headers })
  const hash = createHash('sha256')
  let length = 0
  await pipeline(Readable.fromWeb(res.body as never), async function (src) {
    for await (const chunk of src) {
      hash.update(chunk as Buffer)
      length += (chunk as Buffer).length
    }
  })
  return { status: res.status, digest: hash.digest('hex'), length }
}

/** A server on a fresh data dir under `cwd`, with one tenant of 1 GiB quota. */
async function startWithTenant(t: Test, cwd: string) {
  // On PostgreSQL (COFFER_TEST_DATABASE=postgres) a schema of the fixture, dropped after the kill below.
  const dbEnv = await testDatabaseEnv(t, path.join(cwd, 'data'))
  const server = await startCoffer(['serve', '--port', '0', '--data-dir', 'data'], { cwd, env: { ...dbEnv, COFFER_ADMIN_API_KEY: ADMIN } })
  t.teardown(() => void server.child.kill('SIGKILL'))
  const { auth } = await createTenantOverHttp(server.url, ADMIN, { name: 'big', quotaBytes: 1024 * MiB })
  return { server, auth }
}

t.test('1 KiB, 20 MiB and 100 MiB round-trip byte for byte over HTTP, by key and by signed URL; memory stays flat', async (t) => {
  const cwd = tempDir(t)
  const { server, auth } = await startWithTenant(t, cwd)
  let before = 0
  for (const size of [1024, 20 * MiB, 100 * MiB]) {
    const hs = await fetch(`${server.url}/api/v1/upload/request`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ fileType: 'application/pdf', fileName: `big-${size}.pdf`, fileSizeBytes: size }),
    })
    t.equal(hs.status, 200)
    const { fileId, presignedUrl } = (await hs.json()) as { fileId: string; presignedUrl: string }
    const source = generated(size)
    const res = await put(`${server.url}${presignedUrl}`, source.stream, size)
    t.equal(res.status, 200, `${size}: PUT answered ${res.status}`)
    t.equal((JSON.parse(res.body) as { sizeBytes: number }).sizeBytes, size)
    const expected = source.digest()
    const byKey = await downloadDigest(`${server.url}/api/v1/files/${fileId}/download`, auth)
    t.same(byKey, { status: 200, digest: expected, length: size }, `${size}: bearer download`)
    const signed = (await (await fetch(`${server.url}/api/v1/files/${fileId}/signed-url`, { headers: auth })).json()) as { url: string }
    const bySignedUrl = await downloadDigest(signed.url)
    t.same(bySignedUrl, { status: 200, digest: expected, length: size }, `${size}: signed URL download`)
    // What the server uses once it has served a small file: everything after is the large transfers'.
    if (size === 1024) before = memoryOf(server.child.pid!).rss
  }
  assertFlatMemory(t, server.child.pid!, before, '100 MiB each way')
})

t.test('a body that outgrows the 100 MiB limit is cut off with 413 and nothing stays on disk', async (t) => {
  const cwd = tempDir(t)
  const { server, auth } = await startWithTenant(t, cwd)
  const hs = await fetch(`${server.url}/api/v1/upload/request`, {
    method: 'POST',
    headers: { ...auth, 'content-type': 'application/json' },
    body: JSON.stringify({ fileType: 'application/pdf', fileName: 'huge.pdf' }),
  })
  const { presignedUrl, fileId } = (await hs.json()) as { presignedUrl: string; fileId: string }
  // Chunked (no Content-Length), so the limit is enforced while streaming, not from a header.
  const res = await new Promise<{ status: number; body: string }>((resolve, reject) => {
    const req = http.request(`${server.url}${presignedUrl}`, { method: 'PUT', headers: { 'content-type': 'application/pdf' } }, (r) => {
      let text = ''
      r.setEncoding('utf8')
      r.on('data', (d: string) => (text += d))
      r.on('end', () => resolve({ status: r.statusCode ?? 0, body: text }))
    })
    req.on('error', reject)
    generated(100 * MiB + 1).stream.pipe(req)
  })
  t.equal(res.status, 413)
  t.same(JSON.parse(res.body).error.details, { fileSize: null, maxSize: 104857600 })
  const file = (await (await fetch(`${server.url}/api/v1/files/${fileId}`, { headers: auth })).json()) as { processingStatus: string }
  t.equal(file.processingStatus, 'failed')
  t.same(fs.readdirSync(`${cwd}/data/tmp`), [], 'no partial temp file')
  t.same(fs.readdirSync(`${cwd}/data/blobs/sha256`), [], 'no blob')
  const quota = (await (await fetch(`${server.url}/api/v1/tenant/quota`, { headers: auth })).json()) as { usedBytes: number }
  t.equal(quota.usedBytes, 0)
})
