import { createHash, createHmac } from 'node:crypto'
import fs from 'node:fs'
import http from 'node:http'
import type { Test } from 'tap'
import type { InjectOptions } from 'fastify'
import { SignatureV4 } from '@smithy/signature-v4'
import {
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  GetObjectCommand,
  ListObjectsV2Command,
  S3Client,
  UploadPartCommand,
  type S3ServiceException,
} from '@aws-sdk/client-s3'
import { buildApp } from '../src/app'
import { loadConfig, type Config } from '../src/config'
import { createCore, type Core } from '../src/core'
import { ManualClock } from '../src/lib/clock'
import { createLogger } from '../src/lib/logger'
import { buildS3App, type S3App } from '../src/s3/server'
import type { App } from '../src/http/types'
import type { BlobStore } from '../src/blobs/blob-store'
import { ADMIN_KEY, admin, bearer, captureLogs, filesBelow, purgeStoredBlobs, tempDir, testDatabase, testStoreEnv } from './helper'

export interface S3Context {
  app: App
  s3app: S3App
  core: Core
  config: Config
  clock: ManualClock
  dir: string
  endpoint: string
  logs: Record<string, unknown>[]
  tenant: { id: string; apiKey: string; webhookSecret: string; headers: { authorization: string } }
  credentials: { accessKeyId: string; secretAccessKey: string }
  /** An SDK client with default settings (checksums, retries), path-style as self-hosted S3 needs. */
  client: S3Client
  /** The blob store settings (testStoreEnv): pass to makeS3 to restart on the same content. */
  storeEnv: Record<string, string>
}

/**
 * A core with both fronts: the API for `inject`, the S3 listener on a free loopback port (real
 * clients need a socket). The clock is manual but starts at the real time: clients sign with it.
 * The content goes to the test blob store (COFFER_TEST_BLOB_STORE: disk, or the Ceph gateway).
 */
export async function makeS3(
  t: Test,
  env: Record<string, string> = {},
  opts: {
    quotaBytes?: number
    dir?: string
    existing?: S3Context['tenant'] & { credentials: S3Context['credentials'] }
    /** Another context's store (a restart on its data dir): its content, and its clean-up, are that context's. */
    storeEnv?: Record<string, string>
    /** Which blob store, when not the run's (COFFER_TEST_BLOB_STORE). */
    store?: 'disk' | 's3'
    /** Wraps the blob store the core uses (to hold an operation at a chosen moment). */
    wrapStore?: (store: BlobStore) => BlobStore
  } = {},
): Promise<S3Context & { close(): Promise<void> }> {
  const dir = opts.dir ?? tempDir(t, 'coffer-s3-')
  const storeEnv = opts.storeEnv ?? testStoreEnv(opts.store)
  // What the test left in the fixture's bucket goes when it ends (the bucket is shared and kept).
  if (!opts.storeEnv) t.teardown(() => purgeStoredBlobs(storeEnv, dir))
  // A small disk reserve, as helper.ts's makeApp: 4 MiB written and fsynced per test is traffic for nothing.
  const config = loadConfig(
    { COFFER_ADMIN_API_KEY: ADMIN_KEY, COFFER_LOG_LEVEL: 'debug', COFFER_DISK_RESERVE_BYTES: '65536', ...storeEnv, COFFER_S3_PORT: '0', ...env },
    { 'data-dir': dir },
  )
  const clock = new ManualClock(Date.now())
  const { stream, lines } = captureLogs()
  const logger = createLogger(config.logLevel, stream)
  const database = await testDatabase(t, dir)
  const core = createCore(config, { clock, log: logger, ...(database ? { database } : {}), ...(opts.wrapStore ? { store: opts.wrapStore } : {}) })
  const app = await buildApp(core, { logger })
  const s3app = await buildS3App(core, { logger })
  await s3app.listen({ port: 0, host: '127.0.0.1' })
  const addr = s3app.server.address()
  const endpoint = `http://127.0.0.1:${typeof addr === 'object' && addr ? addr.port : 0}`
  // The clock follows real time so that signatures made now verify (tests may still move it).
  const ticker = setInterval(() => clock.set(Math.max(clock.now(), Date.now())), 200)
  const tenant = opts.existing ?? (await createTenantWithS3(app, opts.quotaBytes))
  const client = s3Client(endpoint, tenant.credentials, config.s3Region)
  let closed = false
  const close = async () => {
    if (closed) return
    closed = true
    clearInterval(ticker)
    client.destroy()
    await s3app.close()
    await app.close()
    core.close()
  }
  t.teardown(close)
  return { app, s3app, core, config, clock, dir, endpoint, logs: lines, tenant, credentials: tenant.credentials, client, storeEnv, close }
}

export function s3Client(endpoint: string, credentials: { accessKeyId: string; secretAccessKey: string }, region = 'us-east-1'): S3Client {
  return new S3Client({ endpoint, region, forcePathStyle: true, credentials })
}

/** A tenant through the admin API, with an S3 credential pair through the admin API. */
export async function createTenantWithS3(app: App, quotaBytes?: number) {
  const res = await app.inject({
    method: 'POST',
    url: '/api/v1/admin/tenants',
    headers: admin,
    payload: { name: `s3-${Math.random().toString(36).slice(2)}`, ...(quotaBytes !== undefined ? { quotaBytes } : {}) },
  })
  if (res.statusCode !== 201) throw new Error(`tenant creation failed: ${res.statusCode} ${res.body}`)
  const { id, apiKey, webhookSecret } = res.json() as { id: string; apiKey: string; webhookSecret: string }
  const cred = await app.inject({ method: 'POST', url: `/api/v1/admin/tenants/${id}/s3-credentials`, headers: admin })
  if (cred.statusCode !== 201) throw new Error(`credential creation failed: ${cred.statusCode} ${cred.body}`)
  const credentials = cred.json() as { accessKeyId: string; secretAccessKey: string }
  return { id, apiKey, webhookSecret, headers: bearer(apiKey), credentials }
}

/** CompleteMultipartUpload of the parts given as [part number, ETag], in that order. */
export const completeCommand = (bucket: string, key: string, uploadId: string | undefined, parts: [number, string | undefined][]) =>
  new CompleteMultipartUploadCommand({
    Bucket: bucket,
    Key: key,
    UploadId: uploadId,
    MultipartUpload: { Parts: parts.map(([PartNumber, ETag]) => ({ PartNumber, ETag })) },
  })

/** The body of a GetObject (or any answer with one) as a Buffer. */
export const bodyOf = async (p: Promise<{ Body?: { transformToByteArray(): Promise<Uint8Array> } }>) =>
  Buffer.from(await (await p).Body!.transformToByteArray())

/**
 * A two-part multipart upload asking for SSE-S3 (AES256), each answer checked to report it, then
 * read back whole and by a range across the parts; the object's bytes and its parts' are returned.
 */
export async function sseS3Multipart(t: Test, client: S3Client, bucket: string, key: string): Promise<{ whole: Buffer; parts: Buffer[] }> {
  const mp = await client.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: key, ServerSideEncryption: 'AES256' }))
  t.equal(mp.ServerSideEncryption, 'AES256', 'CreateMultipartUpload reports it')
  const p1 = pattern(5 * 1024 * 1024, 3)
  const p2 = pattern(70_000, 4)
  const u1 = await client.send(new UploadPartCommand({ Bucket: bucket, Key: key, UploadId: mp.UploadId, PartNumber: 1, Body: p1 }))
  t.equal(u1.ServerSideEncryption, 'AES256', 'UploadPart reports it')
  const u2 = await client.send(new UploadPartCommand({ Bucket: bucket, Key: key, UploadId: mp.UploadId, PartNumber: 2, Body: p2 }))
  const done = await client.send(
    completeCommand(bucket, key, mp.UploadId, [
      [1, u1.ETag],
      [2, u2.ETag],
    ]),
  )
  t.equal(done.ServerSideEncryption, 'AES256', 'CompleteMultipartUpload reports it')
  const whole = Buffer.concat([p1, p2])
  t.ok((await bodyOf(client.send(new GetObjectCommand({ Bucket: bucket, Key: key })))).equals(whole), 'the multipart object reads back')
  const across = await bodyOf(client.send(new GetObjectCommand({ Bucket: bucket, Key: key, Range: `bytes=${p1.length - 100}-${p1.length + 100}` })))
  t.ok(across.equals(whole.subarray(p1.length - 100, p1.length + 101)), 'a range across the parts')
  return { whole, parts: [p1, p2] }
}

/**
 * Every stored blob's bytes, read behind Coffer's back: on the disk store the data dir's blob files
 * (and its tmp/ files with `tmp`) and the database's inline blobs; on the S3 store the bucket's
 * objects under the app's prefix. What the encryption tests search for plaintext.
 */
export async function storedBytes(ctx: Pick<S3Context, 'config' | 'core'>, opts: { tmp?: boolean } = {}): Promise<Buffer[]> {
  if (ctx.config.blobStore === 'disk') {
    const files = [...filesBelow(ctx.core.dataDir.blobs), ...(opts.tmp ? filesBelow(ctx.core.dataDir.tmp) : [])]
    const rows = ctx.core.db.pluck('SELECT content FROM blob_inline').all() as Buffer[]
    return [...files.map((f) => fs.readFileSync(f)), ...rows]
  }
  const c = ctx.config
  const store = new S3Client({
    endpoint: c.blobS3Endpoint!,
    region: c.blobS3Region,
    forcePathStyle: true,
    credentials: { accessKeyId: c.blobS3AccessKeyId!, secretAccessKey: c.blobS3SecretAccessKey! },
  })
  try {
    const out: Buffer[] = []
    const listed = await store.send(new ListObjectsV2Command({ Bucket: c.blobS3Bucket!, Prefix: c.blobS3Prefix ?? '' }))
    for (const o of listed.Contents ?? []) out.push(await bodyOf(store.send(new GetObjectCommand({ Bucket: c.blobS3Bucket!, Key: o.Key! }))))
    return out
  } finally {
    store.destroy()
  }
}

/** Deterministic pseudo-random bytes. */
export function pattern(size: number, seed = 1): Buffer {
  const out = Buffer.allocUnsafe(size)
  let x = (seed * 2654435761) >>> 0
  for (let i = 0; i < size; i++) {
    x = (x * 1103515245 + 12345) >>> 0
    out[i] = x >>> 24
  }
  return out
}

const toBytes = (d: string | ArrayBuffer | ArrayBufferView): string | Buffer =>
  typeof d === 'string' ? d : d instanceof ArrayBuffer ? Buffer.from(d) : Buffer.from(d.buffer, d.byteOffset, d.byteLength)
/** The hash constructor the SDK signer wants, from node:crypto (HMAC when given a key). */
export class NodeSha256 {
  private readonly h
  constructor(secret?: string | ArrayBuffer | ArrayBufferView) {
    this.h = secret === undefined ? createHash('sha256') : createHmac('sha256', toBytes(secret))
  }
  update(data: string | ArrayBuffer | ArrayBufferView) {
    this.h.update(toBytes(data))
  }
  async digest() {
    return new Uint8Array(this.h.digest())
  }
}

/** Percent-encodes a key as S3 clients do (every byte but unreserved characters and `/`). */
export const encodeKey = (key: string) =>
  key
    .split('/')
    .map((s) => encodeURIComponent(s).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`))
    .join('/')

/** A request signed by the AWS SDK's own signer, for `inject` into the S3 app. */
export async function signedRequest(
  ctx: Pick<S3Context, 'credentials' | 'endpoint'>,
  req: {
    method: string
    path: string
    host?: string
    query?: Record<string, string>
    headers?: Record<string, string>
    payload?: string | Buffer
    payloadHash?: string
  },
): Promise<InjectOptions> {
  const signer = new SignatureV4({ service: 's3', region: 'us-east-1', credentials: ctx.credentials, sha256: NodeSha256, uriEscapePath: false })
  const host = ctx.endpoint.replace('http://', '')
  const signed = await signer.sign({
    method: req.method,
    protocol: 'http:',
    hostname: '127.0.0.1',
    path: req.path,
    query: req.query ?? {},
    headers: { host: req.host ?? host, 'x-amz-content-sha256': req.payloadHash ?? 'UNSIGNED-PAYLOAD', ...req.headers },
  })
  const qs = Object.entries(req.query ?? {})
    .map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`)
    .join('&')
  return {
    method: req.method as 'GET',
    url: qs ? `${req.path}?${qs}` : req.path,
    headers: signed.headers,
    ...(req.payload !== undefined ? { payload: req.payload } : {}),
  }
}

/** The SDK error a call fails with, as its name and HTTP status (throws when the call succeeds). */
export async function s3Error(p: Promise<unknown>): Promise<{ name: string; status: number | undefined }> {
  try {
    await p
  } catch (err) {
    const e = err as S3ServiceException
    return { name: e.name, status: e.$metadata?.httpStatusCode }
  }
  throw new Error('expected the S3 call to fail')
}

/** A request signed by the SDK's signer, sent on a real socket (Node's HTTP server sees it as clients send it). */
export async function sendSigned(
  ctx: Pick<S3Context, 'credentials' | 'endpoint'>,
  req: { method: string; path: string; query?: Record<string, string>; headers?: Record<string, string>; payload?: string | Buffer },
): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }> {
  const signed = await signedRequest(ctx, req)
  return new Promise((resolve, reject) => {
    const r = http.request(`${ctx.endpoint}${signed.url as string}`, { method: req.method, headers: signed.headers as http.OutgoingHttpHeaders })
    r.on('response', (res) => {
      let body = ''
      res.setEncoding('utf8')
      res.on('data', (d: string) => (body += d))
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }))
    })
    r.on('error', reject)
    r.end(req.payload)
  })
}
