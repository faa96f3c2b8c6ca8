/**
 * Instructions per 4 KiB GetObject against the API's download of the same size, each under
 * `valgrind --tool=callgrind` by the method of callgrind.ts (#14): the count hardly moves with
 * the machine's other load, so it compares two versions of the S3 front where req/s cannot.
 * `--against-bundle PATH` counts another build's GetObject too.
 *
 * Each measurement is its own server on a fresh data dir, set up over HTTP only (a tenant and an
 * S3 credential through the admin API, a bucket and objects through S3, files through the API's
 * two-step upload), so an older build can be measured. Every GetObject is signed in the header
 * with UNSIGNED-PAYLOAD, as the SDK and the CLI send it, and signed afresh per request (the
 * client runs outside valgrind; a signature stays valid for the 15 minutes of allowed skew, and
 * a run under callgrind can take longer).
 */
import fs from 'node:fs'
import path from 'node:path'
import { BUNDLE, pngBytes, uniqueCopy } from '../coffer'
import { json, request } from '../http'
import { freePort } from '../processes'
import { encodePath, signHeaders, type Credentials } from '../s3-sign'
import { ADMIN_KEY, adminTenant, againstRow, countInstructions, instructionRow, uploadFiles, type Workload } from './callgrind'
import { notMeasured, type BenchContext, type FigureResult } from '../figure'

const OBJECTS = 20
const SIZE = 4096

/** A tenant with `OBJECTS` 4 KiB files uploaded through the API, whose downloads are then read in turn. */
function apiDownloads() {
  return async (base: string): Promise<Workload> => {
    const tenant = await adminTenant(base, 'callgrind-api')
    const ids = await uploadFiles(base, tenant.apiKey, OBJECTS, SIZE)
    return { paths: ids.map((id) => `/api/v1/files/${id}/download`), headers: { authorization: `Bearer ${tenant.apiKey}` } }
  }
}

/** A tenant, an S3 credential, a bucket and `OBJECTS` 4 KiB objects put through S3, then read with GetObject in turn. */
function s3Gets(s3Port: number, method: 'GET' | 'PUT' = 'GET') {
  return async (base: string): Promise<Workload> => {
    const tenant = await adminTenant(base, 'callgrind-s3')
    const pair = await json<{ accessKeyId: string; secretAccessKey: string }>(
      `${base}/api/v1/admin/tenants/${tenant.id}/s3-credentials`,
      { method: 'POST', headers: { authorization: `Bearer ${ADMIN_KEY}` } },
      201,
    )
    const creds: Credentials = { ...pair, region: 'us-east-1' }
    const s3 = `http://127.0.0.1:${s3Port}`
    const host = `127.0.0.1:${s3Port}`
    const send = async (method: string, p: string, body?: Buffer) => {
      const res = await request(s3 + p, { method, headers: signHeaders(creds, method, host, p, 'UNSIGNED-PAYLOAD'), ...(body ? { body } : {}) })
      if (res.status !== 200) throw new Error(`S3 ${method} ${p}: ${res.status} ${res.body.toString().slice(0, 200)}`)
    }
    await send('PUT', '/callgrind')
    const template = pngBytes(SIZE)
    const paths: string[] = []
    for (let n = 0; n < OBJECTS; n++) {
      const p = encodePath(`/callgrind/objects/cg-${n}.png`)
      await send('PUT', p, uniqueCopy(template))
      paths.push(p)
    }
    return { paths, headers: (p) => signHeaders(creds, method, host, p, 'UNSIGNED-PAYLOAD'), base: s3 }
  }
}

/** The same set-up, then 4 KiB PutObjects one after the other, each to a new key and a unique body (#29). */
function s3Puts(s3Port: number) {
  return async (base: string): Promise<Workload> => {
    const gets = await s3Gets(s3Port, 'PUT')(base)
    const template = pngBytes(SIZE)
    return { ...gets, put: { body: () => uniqueCopy(template), path: (n) => encodePath(`/callgrind/puts/${n}.png`) } }
  }
}

/**
 * `--only s3-put-callgrind` (#29): instructions per 4 KiB PutObject of this build and of each
 * `--against-bundle`, a before/after count that req/s on a loaded machine cannot give. The
 * requests go one after the other, so each is a group-commit batch of its own (BEGIN, COMMIT and
 * a WAL flush apiece): a floor of what batching at c=16 shares.
 */
export async function s3PutCallgrindFigure(ctx: BenchContext): Promise<FigureResult[]> {
  const figure = '4 KiB PutObject instructions/request (callgrind)'
  const vg = ctx.valgrind
  if ('unavailable' in vg)
    return [notMeasured({ key: 's3-put-callgrind', figure, baselineLabel: 'other builds', unit: 'instr', target: 'report' }, vg.unavailable)]
  const counts = ctx.callgrindRequests
  const measure = async (name: string, bundle: string) => {
    const dataDir = fs.mkdtempSync(path.join(ctx.dir, `s3-put-callgrind-data-${name}-`))
    const s3Port = await freePort()
    ctx.log(`  ${name}: ${bundle}`)
    return countInstructions(
      ctx,
      vg,
      name,
      process.execPath,
      (port) => [bundle, 'serve', '--port', String(port), '--s3-port', String(s3Port), '--data-dir', dataDir],
      { COFFER_ADMIN_API_KEY: ADMIN_KEY },
      s3Puts(s3Port),
      counts,
    )
  }
  const own = await measure('s3-put', BUNDLE)
  const results: FigureResult[] = [
    instructionRow({
      key: 's3-put-callgrind',
      figure,
      baselineLabel: 'itself (see the rows against other builds)',
      coffer: own.perRequest,
      baseline: own.perRequest,
      ratio: 1,
      target: 'report',
      met: null,
      note: `user-space instructions per PutObject on the server's main thread, ${counts.measured} one after the other on one keep-alive connection after ${counts.warmup} of warm-up, each a batch of its own`,
      details: { blocks: own.blocks, allThreads: own.allThreads, counts, valgrind: vg.version },
    }),
  ]
  for (const [i, against] of ctx.againstBundles.entries()) {
    const other = await measure(`s3-put-against-${i + 1}`, against)
    results.push(
      againstRow(`s3-put-callgrind-against-${i + 1}`, '4 KiB PutObject', against, other.perRequest, own.perRequest, {
        details: { blocks: other.blocks, allThreads: other.allThreads },
      }),
    )
  }
  return results
}

export async function s3CallgrindFigure(ctx: BenchContext): Promise<FigureResult[]> {
  const figure = '4 KiB GetObject instructions/request (callgrind)'
  const baselineLabel = 'API download of 4 KiB, same build'
  const vg = ctx.valgrind
  if ('unavailable' in vg) return [notMeasured({ key: 's3-callgrind', figure, baselineLabel, unit: 'instr', target: 'report' }, vg.unavailable)]
  const counts = ctx.callgrindRequests
  ctx.log(`  s3-callgrind: ${counts.warmup} requests of warm-up, then ${counts.measured} counted, per server (${vg.version})`)
  const measure = async (name: string, bundle: string, workload: 'api' | 's3') => {
    const dataDir = fs.mkdtempSync(path.join(ctx.dir, `s3-callgrind-data-${name}-`))
    const s3Port = await freePort()
    ctx.log(`  ${name}: ${bundle}`)
    return countInstructions(
      ctx,
      vg,
      name,
      process.execPath,
      (port) => [bundle, 'serve', '--port', String(port), '--s3-port', String(s3Port), '--data-dir', dataDir],
      { COFFER_ADMIN_API_KEY: ADMIN_KEY },
      workload === 'api' ? apiDownloads() : s3Gets(s3Port),
      counts,
    )
  }
  const api = await measure('api-download', BUNDLE, 'api')
  const s3 = await measure('s3-get', BUNDLE, 's3')
  const note = `user-space instructions per request on the server's main thread (callgrind.ts says why), ${counts.measured} requests one after the other on one keep-alive connection after ${counts.warmup} of warm-up (the last of blocks counted until two agree within 2%); GetObject signed in the header with UNSIGNED-PAYLOAD`
  const results: FigureResult[] = [
    instructionRow({
      key: 's3-callgrind',
      figure,
      baselineLabel,
      coffer: s3.perRequest,
      baseline: api.perRequest,
      // As the req/s figures read: the API's cost over S3's, so that 0.8 is the target's line.
      ratio: api.perRequest / s3.perRequest,
      target: 'report (req/s target: ≥ 0.8× of the API)',
      met: null,
      note,
      details: { blocks: { api: api.blocks, s3: s3.blocks }, counts, valgrind: vg.version },
    }),
  ]
  for (const [i, against] of ctx.againstBundles.entries()) {
    const other = await measure(`s3-get-against-${i + 1}`, against, 's3')
    results.push(
      againstRow(`s3-callgrind-against-${i + 1}`, '4 KiB GetObject', against, other.perRequest, s3.perRequest, { details: { blocks: other.blocks } }),
    )
  }
  return results
}
