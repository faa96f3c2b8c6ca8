/**
 * The S3 front against the API in the same run, on the same server process and data dir (#14):
 * 4 KiB PutObject/s and GetObject/s at c=16, one 100 MiB PutObject and GetObject. Target: each
 * within 0.8x of the same operation through the Storage Brain API.
 */
import path from 'node:path'
import { auth, pngBytes, startCoffer, uniqueCopy, upload } from '../coffer'
import { load, request } from '../http'
import { interleaved, paired, summarize } from '../stats'
import { encodePath, sha256Hex, signHeaders, type Credentials } from '../s3-sign'
import type { BenchContext, FigureResult } from '../figure'
import { loadConfig } from '../../../src/config'
import { createCore } from '../../../src/core'

const MIB = 1024 * 1024
const LARGE = 100 * MIB
const SMALL = 4096
const mbps = (bytes: number, ms: number) => bytes / 1e6 / (ms / 1000)

const SPECS = {
  smallPut: {
    key: 's3-put-4kib',
    figure: '4 KiB PutObject/s (c=16)',
    baselineLabel: 'API uploads of 4 KiB (handshake + PUT), c=16, same server',
    unit: 'objects/s',
  },
  smallGet: { key: 's3-get-4kib', figure: '4 KiB GetObject/s (c=16)', baselineLabel: 'API downloads of 4 KiB, c=16, same server', unit: 'req/s' },
  largePut: { key: 's3-put-100mib', figure: 'one 100 MiB PutObject, MB/s', baselineLabel: 'one 100 MiB API PUT, same server', unit: 'MB/s' },
  largeGet: { key: 's3-get-100mib', figure: 'one 100 MiB GetObject, MB/s', baselineLabel: 'one 100 MiB API download, same server', unit: 'MB/s' },
} as const

function result(
  spec: (typeof SPECS)[keyof typeof SPECS],
  r: { subject: number; baseline: number; ratio: number },
  details: Record<string, unknown>,
): FigureResult {
  return { ...spec, coffer: r.subject, baseline: r.baseline, ratio: r.ratio, target: '≥ 0.8× of the API', met: r.ratio >= 0.8, details }
}

export async function s3Figures(ctx: BenchContext): Promise<FigureResult[]> {
  // A data dir of its own: one tenant, one bucket, one S3 credential pair, made offline.
  const dataDir = path.join(ctx.dir, 's3-data')
  const core = createCore(loadConfig({}, { 'data-dir': dataDir }))
  let apiKey: string
  let creds: Credentials
  try {
    const { tenant, apiKey: key } = core.tenants.create({ name: 's3-bench', quotaBytes: 64 * 1024 ** 3 })
    core.workspaces.create({ ...tenant }, { name: 'bench', slug: 'bench' })
    const pair = core.s3Credentials.create(tenant.id)
    apiKey = key
    creds = { accessKeyId: pair.accessKeyId, secretAccessKey: pair.secretAccessKey, region: core.config.s3Region }
  } finally {
    core.close()
  }
  const coffer = await startCoffer(dataDir)
  const s3 = coffer.s3Url
  const host = s3.replace('http://', '')
  try {
    const out: FigureResult[] = []
    let n = 0
    const putObject = async (bytes: Buffer) => {
      const p = encodePath(`/bench/large/${++n}.bin`)
      const res = await request(`${s3}${p}`, { method: 'PUT', headers: signHeaders(creds, 'PUT', host, p, sha256Hex(bytes)), body: bytes })
      if (res.status !== 200) throw new Error(`PutObject: ${res.status} ${res.body.toString().slice(0, 200)}`)
      return { ms: res.ms, path: p }
    }

    ctx.log('  S3: one 100 MiB PutObject vs API PUT')
    const template = pngBytes(LARGE)
    let lastS3 = ''
    let lastApi = ''
    const [apiPut, s3Put] = await interleaved(ctx.runs, [
      async () => {
        const r = await upload(coffer.url, apiKey, uniqueCopy(template))
        lastApi = r.fileId
        return mbps(LARGE, r.putMs)
      },
      async () => {
        const r = await putObject(uniqueCopy(template))
        lastS3 = r.path
        return mbps(LARGE, r.ms)
      },
    ])
    const put = summarize(apiPut!, s3Put!)
    out.push(result(SPECS.largePut, put, { runs: put, note: 'the S3 body is signed (x-amz-content-sha256 of the bytes), as the SDK and CLI send it' }))

    ctx.log('  S3: one 100 MiB GetObject vs API download')
    const getOnce = async (url: string, headers: Record<string, string>) => {
      const res = await request(url, { headers, discard: true })
      if (res.status !== 200 || res.bytes !== LARGE) throw new Error(`GET ${url}: ${res.status}, ${res.bytes} bytes`)
      return mbps(LARGE, res.ms)
    }
    const gets = [
      () => getOnce(`${coffer.url}/api/v1/files/${lastApi}/download`, auth(apiKey)),
      () => getOnce(`${s3}${lastS3}`, signHeaders(creds, 'GET', host, lastS3, 'UNSIGNED-PAYLOAD')),
    ]
    for (const g of gets) await g()
    const [apiGet, s3Get] = await interleaved(ctx.runs, gets)
    const get = summarize(apiGet!, s3Get!)
    out.push(result(SPECS.largeGet, get, { runs: get }))

    ctx.log('  S3: 4 KiB PutObject vs API uploads, c=16')
    const small = pngBytes(SMALL)
    const s3PutRun = async (seconds: number) =>
      (
        await load({
          url: s3,
          connections: 16,
          duration: seconds,
          requests: [
            {
              method: 'PUT',
              setupRequest: (req) => {
                const body = uniqueCopy(small)
                const p = `/bench/small/${++n}.bin`
                return { ...req, path: p, headers: signHeaders(creds, 'PUT', host, p, sha256Hex(body)), body }
              },
            },
          ],
        })
      ).rps
    const apiPutRun = async (seconds: number) => {
      let uploads = 0
      const r = await load({
        url: coffer.url,
        connections: 16,
        duration: seconds,
        requests: [
          {
            method: 'POST',
            path: '/api/v1/upload/request',
            headers: { ...auth(apiKey), 'content-type': 'application/json' },
            body: JSON.stringify({ fileType: 'image/png', fileName: 'bench.png', fileSizeBytes: SMALL }),
            onResponse: (_status, body, context) => {
              ;(context as { url: string }).url = (JSON.parse(body) as { presignedUrl: string }).presignedUrl
            },
          },
          {
            method: 'PUT',
            setupRequest: (req, context) => ({
              ...req,
              path: (context as { url: string }).url,
              headers: { 'content-type': 'image/png' },
              body: uniqueCopy(small),
            }),
            onResponse: (status) => {
              if (status === 200) uploads++
            },
          },
        ],
      })
      return uploads / r.seconds
    }
    await apiPutRun(1)
    await s3PutRun(1)
    const smallPut = await paired(
      ctx.runs,
      () => apiPutRun(ctx.loadSeconds),
      () => s3PutRun(ctx.loadSeconds),
    )
    out.push(
      result(SPECS.smallPut, smallPut, { runs: smallPut, seconds: ctx.loadSeconds, note: 'an S3 write is one request; an API upload is two (handshake, PUT)' }),
    )

    ctx.log('  S3: 4 KiB GetObject vs API downloads, c=16')
    const apiIds: string[] = []
    const s3Keys: string[] = []
    for (let i = 0; i < 256; i++) {
      const bytes = pngBytes(SMALL)
      apiIds.push((await upload(coffer.url, apiKey, bytes)).fileId)
      s3Keys.push((await putObject(bytes)).path)
    }
    const pick = <T>(a: T[]) => a[Math.floor(Math.random() * a.length)]!
    const apiGetRun = async (seconds: number) =>
      (
        await load({
          url: coffer.url,
          connections: 16,
          duration: seconds,
          headers: auth(apiKey),
          requests: [{ setupRequest: (req) => ({ ...req, path: `/api/v1/files/${pick(apiIds)}/download` }) }],
        })
      ).rps
    const s3GetRun = async (seconds: number) =>
      (
        await load({
          url: s3,
          connections: 16,
          duration: seconds,
          requests: [
            {
              setupRequest: (req) => {
                const p = pick(s3Keys)
                return { ...req, path: p, headers: signHeaders(creds, 'GET', host, p, 'UNSIGNED-PAYLOAD') }
              },
            },
          ],
        })
      ).rps
    await apiGetRun(1)
    await s3GetRun(1)
    const smallGet = await paired(
      ctx.runs,
      () => apiGetRun(ctx.loadSeconds),
      () => s3GetRun(ctx.loadSeconds),
    )
    out.push(result(SPECS.smallGet, smallGet, { runs: smallGet, seconds: ctx.loadSeconds, objects: s3Keys.length }))
    return out
  } finally {
    await coffer.stop()
  }
}
