/**
 * The encrypted data dir (COFFER_ENCRYPTION_KEY_FILE, issue #27) beside the plain one, in the same
 * run: the same API transfers against two Coffer processes on the disk store that differ only in
 * the master key. What the ratio shows is the cost of sealing and opening every byte (AES-256-GCM
 * in 64 KiB chunks, SHA-256 and an HMAC per blob name) on top of what a transfer does anyway.
 */
import fs from 'node:fs'
import path from 'node:path'
import crypto from 'node:crypto'
import { auth, handshakeBody, pngBytes, startCoffer, uniqueCopy, upload, type Coffer } from '../coffer'
import { request } from '../http'
import { idsFile, templateFile, wrk } from '../wrk'
import { interleaved, paired, summarize } from '../stats'
import { seedDataset } from '../datasets'
import { notMeasured, type BenchContext, type FigureResult } from '../figure'

const MIB = 1024 * 1024
const LARGE = 100 * MIB
const SMALL = 4096
const mbps = (bytes: number, ms: number) => bytes / 1e6 / (ms / 1000)

type Spec = Omit<FigureResult, 'coffer' | 'baseline' | 'ratio' | 'met'>

const BASELINE = 'the same on a plain data dir, same run'
const SPECS = {
  largePut: { key: 'encrypted-put-100mib', figure: 'Encrypted data dir: one 100 MiB PUT, MB/s', unit: 'MB/s' },
  largeGet: { key: 'encrypted-get-100mib', figure: 'Encrypted data dir: one 100 MiB GET, MB/s', unit: 'MB/s' },
  smallPut: { key: 'encrypted-put-4kib', figure: 'Encrypted data dir: 4 KiB uploads/s (handshake + PUT, wrk c=16)', unit: 'uploads/s' },
  smallGet: { key: 'encrypted-get-4kib', figure: 'Encrypted data dir: 4 KiB downloads/s (wrk c=16)', unit: 'req/s' },
} satisfies Record<string, Omit<Spec, 'baselineLabel' | 'target'>>

const spec = (s: (typeof SPECS)[keyof typeof SPECS]): Spec => ({ ...s, baselineLabel: BASELINE, target: 'report' })

function result(s: Spec, r: { subject: number; baseline: number; ratio: number }, extra: Partial<FigureResult> = {}): FigureResult {
  return { ...s, coffer: r.subject, baseline: r.baseline, ratio: r.ratio, met: null, ...extra }
}

export async function encryptionFigures(ctx: BenchContext): Promise<FigureResult[]> {
  const plainSet = seedDataset(path.join(ctx.dir, 'encryption-plain'), 0)
  const sealedSet = seedDataset(path.join(ctx.dir, 'encryption-sealed'), 0)
  // The master key lives outside both data dirs, as Coffer requires.
  const keyFile = path.join(ctx.dir, 'encryption-master.key')
  fs.writeFileSync(keyFile, crypto.randomBytes(32).toString('hex'), { mode: 0o600 })
  let plain: Coffer | undefined
  let sealed: Coffer | undefined
  try {
    plain = await startCoffer(plainSet.dir)
    sealed = await startCoffer(sealedSet.dir, undefined, { COFFER_ENCRYPTION_KEY_FILE: keyFile })
    const sides = [
      { url: plain.url, key: plainSet.seed.apiKey },
      { url: sealed.url, key: sealedSet.seed.apiKey },
    ] as const
    const out: FigureResult[] = []

    ctx.log('  encrypted data dir: one 100 MiB PUT and GET, each beside a plain data dir')
    const template = pngBytes(LARGE)
    const last: (string | undefined)[] = [undefined, undefined]
    const putLarge = (side: 0 | 1) => async () => {
      const { fileId, putMs } = await upload(sides[side].url, sides[side].key, uniqueCopy(template))
      last[side] = fileId
      return mbps(LARGE, putMs)
    }
    const [plainPut, sealedPut] = await interleaved(ctx.runs, [putLarge(0), putLarge(1)])
    const put = summarize(plainPut!, sealedPut!)
    out.push(
      result(spec(SPECS.largePut), put, {
        note: 'both hash and fsync the body as it streams to tmp/; the encrypted side also seals it in 64 KiB AES-256-GCM chunks on the way',
        details: { runs: put },
      }),
    )
    const getLarge = (side: 0 | 1) => async () => {
      const res = await request(`${sides[side].url}/api/v1/files/${last[side]!}/download`, { headers: auth(sides[side].key), discard: true })
      if (res.status !== 200 || res.bytes !== LARGE) throw new Error(`GET: ${res.status}, ${res.bytes} bytes`)
      return mbps(LARGE, res.ms)
    }
    await getLarge(0)()
    await getLarge(1)()
    const [plainGet, sealedGet] = await interleaved(ctx.runs, [getLarge(0), getLarge(1)])
    const get = summarize(plainGet!, sealedGet!)
    out.push(
      result(spec(SPECS.largeGet), get, {
        note: 'the plain side streams the file from the page cache; the encrypted side authenticates and decrypts every chunk before sending it',
        details: { runs: get },
      }),
    )

    if ('unavailable' in ctx.wrk) {
      const why = `wrk: ${ctx.wrk.unavailable}`
      out.push(notMeasured(spec(SPECS.smallPut), why), notMeasured(spec(SPECS.smallGet), why))
      return out
    }
    const bin = ctx.wrk.path

    ctx.log('  encrypted data dir: 4 KiB uploads, c=16, beside a plain data dir')
    let round = 0
    const uploads = (side: 0 | 1) => async (seconds: number) => {
      const t = templateFile(ctx.dir, `encryption-put-${++round}`, pngBytes(SMALL))
      const args = [sides[side].key, t, handshakeBody(SMALL).toString()]
      return (await wrk({ bin, dir: ctx.dir, url: sides[side].url, script: 'twoStepUpload', args, connections: 16, seconds })).rps
    }
    await uploads(0)(1)
    await uploads(1)(1)
    const smallPut = await paired(
      ctx.runs,
      () => uploads(0)(ctx.loadSeconds),
      () => uploads(1)(ctx.loadSeconds),
    )
    out.push(
      result(spec(SPECS.smallPut), smallPut, {
        note: 'small content is kept in the database either way; sealed, it is 56 bytes longer and costs a key derivation and an HMAC',
        details: { runs: smallPut, seconds: ctx.loadSeconds },
      }),
    )

    ctx.log('  encrypted data dir: 4 KiB downloads, c=16, beside a plain data dir')
    const lists: string[] = []
    for (const side of [0, 1] as const) {
      const ids: string[] = []
      for (let i = 0; i < 256; i++) ids.push((await upload(sides[side].url, sides[side].key, pngBytes(SMALL))).fileId)
      lists.push(idsFile(ctx.dir, `encryption-get-${side}`, ids))
    }
    const downloads = (side: 0 | 1) => async (seconds: number) =>
      (
        await wrk({
          bin,
          dir: ctx.dir,
          url: sides[side].url,
          script: 'randomGet',
          args: [lists[side]!, '/api/v1/files/', '/download', auth(sides[side].key).authorization],
          connections: 16,
          seconds,
        })
      ).rps
    await downloads(0)(1)
    await downloads(1)(1)
    const smallGet = await paired(
      ctx.runs,
      () => downloads(0)(ctx.loadSeconds),
      () => downloads(1)(ctx.loadSeconds),
    )
    out.push(
      result(spec(SPECS.smallGet), smallGet, {
        note: 'each encrypted download derives the blob key (HKDF) and opens one GCM chunk',
        details: { runs: smallGet, seconds: ctx.loadSeconds, files: 256 },
      }),
    )
    return out
  } finally {
    await Promise.all([plain?.stop(), sealed?.stop()])
  }
}
