/**
 * The S3 front against the API in the same run, on the same server process and data dir (#14):
 * 4 KiB PutObject/s and GetObject/s at c=16 (wrk, as the API's own figures), one 100 MiB
 * PutObject and GetObject. Target: each within 0.8x of the same operation through the API.
 */
import path from 'node:path'
import { auth, handshakeBody, pngBytes, startCoffer, uniqueCopy, upload } from '../coffer'
import { request } from '../http'
import { interleaved, paired, summarize } from '../stats'
import { encodePath, prepareSigned, sha256Hex, signHeaders, type Credentials } from '../s3-sign'
import { generatorBound, idsFile, templateFile, wrk, type WrkResult } from '../wrk'
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

/** More 4 KiB PutObjects a second than this machine's S3 front can take: the keys signed per run. */
const PUTS_PER_SECOND_CAP = 8000

function result(
  spec: (typeof SPECS)[keyof typeof SPECS],
  r: { subject: number; baseline: number; ratio: number },
  details: Record<string, unknown>,
  invalid?: string,
): FigureResult {
  const { note, ...rest } = details as { note?: string }
  return {
    ...spec,
    coffer: r.subject,
    baseline: r.baseline,
    ratio: r.ratio,
    target: '≥ 0.8× of the API',
    met: invalid ? null : r.ratio >= 0.8,
    ...(invalid ? { invalid } : {}),
    ...(typeof note === 'string' ? { note } : {}),
    details: rest,
  }
}

function unmeasured(spec: (typeof SPECS)[keyof typeof SPECS], note: string): FigureResult {
  return { ...spec, coffer: null, baseline: null, ratio: null, target: '≥ 0.8× of the API', met: null, note }
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

    if ('unavailable' in ctx.wrk) {
      const why = `not measured: wrk: ${ctx.wrk.unavailable}`
      out.push(unmeasured(SPECS.smallPut, why), unmeasured(SPECS.smallGet, why))
      return out
    }
    const bin = ctx.wrk.path
    // Both sides on wrk in its own process, one thread, c=16: the API side with the scripts of the
    // API's own figures (transfers.ts), the S3 side with requests signed ahead here. Any run whose
    // generator was >= 90% busy measured wrk, and the figure is INVALID.
    const runs: WrkResult[] = []
    const measured = (r: WrkResult) => {
      runs.push(r)
      return r.rps
    }
    let round = 0
    const smallTemplate = () => templateFile(ctx.dir, `s3-small-put-${++round}`, pngBytes(SMALL))

    ctx.log('  S3: 4 KiB PutObject vs API uploads, c=16 (wrk)')
    const s3PutRun = async (seconds: number) => {
      const r = ++round
      // Distinct keys, more than any run can use (it fails rather than overwrite one).
      const count = PUTS_PER_SECOND_CAP * seconds
      const paths = Array.from({ length: count }, (_, i) => encodePath(`/bench/small/${r}/${i}.bin`))
      const file = prepareSigned(path.join(ctx.dir, `s3-put-${r}.signed`), creds, 'PUT', host, paths)
      return measured(await wrk({ bin, dir: ctx.dir, url: s3, script: 'preparedS3', args: [file, 'PUT', smallTemplate(), '1'], connections: 16, seconds }))
    }
    const apiPutRun = async (seconds: number) =>
      measured(
        await wrk({
          bin,
          dir: ctx.dir,
          url: coffer.url,
          script: 'twoStepUpload',
          args: [apiKey, smallTemplate(), handshakeBody(SMALL).toString()],
          connections: 16,
          seconds,
        }),
      )
    await apiPutRun(1)
    await s3PutRun(1)
    runs.length = 0
    const smallPut = await paired(
      ctx.runs,
      () => apiPutRun(ctx.loadSeconds),
      () => s3PutRun(ctx.loadSeconds),
    )
    const putInvalid = generatorBound(runs)
    out.push(
      result(
        SPECS.smallPut,
        smallPut,
        {
          runs: smallPut,
          seconds: ctx.loadSeconds,
          generatorCpuShare: runs.map((r) => r.generatorCpuShare),
          note: 'an S3 write is one request, an API upload two (handshake, PUT); S3 PUTs are signed ahead with UNSIGNED-PAYLOAD, bodies unique',
        },
        putInvalid,
      ),
    )

    ctx.log('  S3: 4 KiB GetObject vs API downloads, c=16 (wrk)')
    const apiIds: string[] = []
    const s3Keys: string[] = []
    for (let i = 0; i < 256; i++) {
      const bytes = pngBytes(SMALL)
      apiIds.push((await upload(coffer.url, apiKey, bytes)).fileId)
      s3Keys.push((await putObject(bytes)).path)
    }
    const ids = idsFile(ctx.dir, 's3-api-get', apiIds)
    const apiGetRun = async (seconds: number) =>
      measured(
        await wrk({
          bin,
          dir: ctx.dir,
          url: coffer.url,
          script: 'randomGet',
          args: [ids, '/api/v1/files/', '/download', auth(apiKey).authorization],
          connections: 16,
          seconds,
        }),
      )
    const s3GetRun = async (seconds: number) => {
      // Signed afresh for each run; a signature stays valid for the 15 minutes of allowed skew.
      const file = prepareSigned(path.join(ctx.dir, 's3-get.signed'), creds, 'GET', host, s3Keys)
      return measured(await wrk({ bin, dir: ctx.dir, url: s3, script: 'preparedS3', args: [file, 'GET'], connections: 16, seconds }))
    }
    await apiGetRun(1)
    await s3GetRun(1)
    runs.length = 0
    const smallGet = await paired(
      ctx.runs,
      () => apiGetRun(ctx.loadSeconds),
      () => s3GetRun(ctx.loadSeconds),
    )
    const getInvalid = generatorBound(runs)
    out.push(
      result(
        SPECS.smallGet,
        smallGet,
        { runs: smallGet, seconds: ctx.loadSeconds, objects: s3Keys.length, generatorCpuShare: runs.map((r) => r.generatorCpuShare) },
        getInvalid,
      ),
    )
    return out
  } finally {
    await coffer.stop()
  }
}
