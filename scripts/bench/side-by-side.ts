/**
 * The same four API transfers (one 100 MiB PUT and GET, 4 KiB uploads and downloads at c=16)
 * against two Coffer processes that differ in one setting, in the same run: side 0 is the
 * baseline, side 1 the subject. The encrypted-data-dir and S3-store figures are both this shape.
 */
import crypto from 'node:crypto'
import { auth, handshakeBody, pngBytes, uniqueCopy, upload } from './coffer'
import { request } from './http'
import { idsFile, templateFile, wrk } from './wrk'
import { interleaved, paired, summarize } from './stats'
import { notMeasured, type BenchContext, type FigureResult } from './figure'

const MIB = 1024 * 1024
const LARGE = 100 * MIB
const SMALL = 4096
const mbps = (bytes: number, ms: number) => bytes / 1e6 / (ms / 1000)
const sha = (b: Buffer) => crypto.createHash('sha256').update(b).digest('hex')

export type Spec = Omit<FigureResult, 'coffer' | 'baseline' | 'ratio' | 'met'>
type Transfer = 'largePut' | 'largeGet' | 'smallPut' | 'smallGet'

/** The four rows of a side-by-side run: keys `<key>-put-100mib` …, figures titled `<title>: …`. */
export function transferSpecs(key: string, title: string, baselineLabel: string): Record<Transfer, Spec> {
  const spec = (s: Pick<Spec, 'key' | 'figure' | 'unit'>): Spec => ({ ...s, baselineLabel, target: 'report' })
  return {
    largePut: spec({ key: `${key}-put-100mib`, figure: `${title}: one 100 MiB PUT, MB/s`, unit: 'MB/s' }),
    largeGet: spec({ key: `${key}-get-100mib`, figure: `${title}: one 100 MiB GET, MB/s`, unit: 'MB/s' }),
    smallPut: spec({ key: `${key}-put-4kib`, figure: `${title}: 4 KiB uploads/s (handshake + PUT, wrk c=16)`, unit: 'uploads/s' }),
    smallGet: spec({ key: `${key}-get-4kib`, figure: `${title}: 4 KiB downloads/s (wrk c=16)`, unit: 'req/s' }),
  }
}

export interface Side {
  url: string
  key: string
}

export interface SideBySide {
  /** Names the subject in the log ("S3 store"), and what it stands beside ("the disk store"). */
  subject: string
  beside: string
  /** Prefix of the files this run writes into ctx.dir. */
  tag: string
  sides: readonly [Side, Side]
  specs: Record<Transfer, Spec>
  /** What each transfer costs the subject that the baseline does not pay. */
  notes: Record<Transfer, string>
  /** Called after each 100 MiB PUT with its content's SHA-256 and the previous one's of that side. */
  largeStored?: (side: 0 | 1, sha256: string, previous: string | undefined) => Promise<void>
  /** Called once both 100 MiB GETs are measured, with each side's last SHA-256. */
  largeDone?: (last: readonly [string, string]) => Promise<void>
}

/** A row of one of these specs, from a paired or summarized measure. */
function result(s: Spec, r: { subject: number; baseline: number; ratio: number }, extra: Partial<FigureResult>): FigureResult {
  return { ...s, coffer: r.subject, baseline: r.baseline, ratio: r.ratio, met: null, ...extra }
}

export async function sideBySideTransfers(ctx: BenchContext, o: SideBySide): Promise<FigureResult[]> {
  const { sides, specs, notes } = o
  const out: FigureResult[] = []

  ctx.log(`  ${o.subject}: one 100 MiB PUT and GET, each beside ${o.beside}`)
  const template = pngBytes(LARGE)
  const last: ({ fileId: string; sha256: string } | undefined)[] = [undefined, undefined]
  const putLarge = (side: 0 | 1) => async () => {
    const bytes = uniqueCopy(template)
    const { fileId, putMs } = await upload(sides[side].url, sides[side].key, bytes)
    const previous = last[side]?.sha256
    last[side] = { fileId, sha256: sha(bytes) }
    await o.largeStored?.(side, last[side].sha256, previous)
    return mbps(LARGE, putMs)
  }
  const [basePut, subjectPut] = await interleaved(ctx.runs, [putLarge(0), putLarge(1)])
  const put = summarize(basePut!, subjectPut!)
  out.push(result(specs.largePut, put, { note: notes.largePut, details: { runs: put } }))
  const getLarge = (side: 0 | 1) => async () => {
    const res = await request(`${sides[side].url}/api/v1/files/${last[side]!.fileId}/download`, { headers: auth(sides[side].key), discard: true })
    if (res.status !== 200 || res.bytes !== LARGE) throw new Error(`GET: ${res.status}, ${res.bytes} bytes`)
    return mbps(LARGE, res.ms)
  }
  await getLarge(0)()
  await getLarge(1)()
  const [baseGet, subjectGet] = await interleaved(ctx.runs, [getLarge(0), getLarge(1)])
  const get = summarize(baseGet!, subjectGet!)
  out.push(result(specs.largeGet, get, { note: notes.largeGet, details: { runs: get } }))
  await o.largeDone?.([last[0]!.sha256, last[1]!.sha256])

  if ('unavailable' in ctx.wrk) {
    const why = `wrk: ${ctx.wrk.unavailable}`
    out.push(notMeasured(specs.smallPut, why), notMeasured(specs.smallGet, why))
    return out
  }
  const bin = ctx.wrk.path

  ctx.log(`  ${o.subject}: 4 KiB uploads, c=16, beside ${o.beside}`)
  let round = 0
  // A fresh template per run: content an earlier run stored would be deduplicated.
  const uploads = (side: 0 | 1) => async (seconds: number) => {
    const t = templateFile(ctx.dir, `${o.tag}-put-${++round}`, pngBytes(SMALL))
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
  out.push(result(specs.smallPut, smallPut, { note: notes.smallPut, details: { runs: smallPut, seconds: ctx.loadSeconds } }))

  ctx.log(`  ${o.subject}: 4 KiB downloads, c=16, beside ${o.beside}`)
  const lists: string[] = []
  for (const side of [0, 1] as const) {
    const ids: string[] = []
    for (let i = 0; i < 256; i++) ids.push((await upload(sides[side].url, sides[side].key, pngBytes(SMALL))).fileId)
    lists.push(idsFile(ctx.dir, `${o.tag}-get-${side}`, ids))
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
  out.push(result(specs.smallGet, smallGet, { note: notes.smallGet, details: { runs: smallGet, seconds: ctx.loadSeconds, files: 256 } }))
  return out
}
