import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import zlib from 'node:zlib'
import { spawnSync } from 'node:child_process'
import type { Test } from 'tap'
import { chromium, type BrowserContext, type Page } from 'playwright-core'
import { buildBundle, ROOT, startCoffer, type Running } from './process-helper'
import { tempDir } from './helper'

export const CHROMIUM = '/usr/bin/chromium'

/** Why chromium cannot be had (null: it is there), found out once per test process. */
let problem: string | null | undefined

/** Debian's chromium, installed by scripts/chromium.sh when missing: null, or why it cannot be had. */
export function ensureChromium(): string | null {
  if (problem === undefined) problem = installChromium()
  return problem
}

function installChromium(): string | null {
  if (fs.existsSync(CHROMIUM)) return null
  const r = spawnSync('bash', [path.join(ROOT, 'scripts', 'chromium.sh')], { encoding: 'utf8', timeout: 20 * 60_000 })
  if (r.status === 0 && fs.existsSync(CHROMIUM)) return null
  const said = `${r.stderr ?? ''}`.trim().split('\n').slice(-3).join(' / ')
  return `Debian's chromium is not installed and scripts/chromium.sh could not install it (${said || r.error?.message || `exit ${r.status}`})`
}

/**
 * Launches headless chromium on a new, empty profile, closed when the test ends; or, without
 * chromium, skips the test LOUDLY (fails instead under CI=true, or as root, who could install it).
 */
export async function launchBrowser(t: Test): Promise<BrowserContext | null> {
  const missing = ensureChromium()
  if (missing !== null) {
    if (process.env.CI === 'true' || process.getuid?.() === 0) {
      t.fail(missing)
      return null
    }
    process.stderr.write(`\n*** SKIPPING the browser tests of the web console: ${missing} ***\n\n`)
    t.skip(`SKIPPED: ${missing}`, () => {})
    return null
  }
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'coffer-chromium-'))
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    // As root chromium needs --no-sandbox; the rest keeps it from reaching for the network.
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--no-first-run', '--disable-sync'],
    viewport: { width: 1280, height: 900 },
    acceptDownloads: true,
  })
  t.teardown(async () => {
    await context.close()
    fs.rmSync(profile, { recursive: true, force: true })
  })
  return context
}

/** A real `width`×`height` RGB PNG of noise (so it does not compress away), as browsers decode it. */
export function noisePng(width: number, height: number, seed = 7): Buffer {
  const chunk = (type: string, data: Buffer) => {
    const body = Buffer.concat([Buffer.from(type, 'latin1'), data])
    const out = Buffer.alloc(body.length + 8)
    out.writeUInt32BE(data.length, 0)
    body.copy(out, 4)
    out.writeUInt32BE(zlib.crc32(body), body.length + 4)
    return out
  }
  const ihdr = Buffer.alloc(13)
  ihdr.writeUInt32BE(width, 0)
  ihdr.writeUInt32BE(height, 4)
  ihdr[8] = 8 // bit depth
  ihdr[9] = 2 // RGB
  const raw = Buffer.alloc((width * 3 + 1) * height)
  let x = seed
  for (let i = 0; i < raw.length; i++) {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0
    raw[i] = i % (width * 3 + 1) === 0 ? 0 : x >>> 24
  }
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', ihdr),
    chunk('IDAT', zlib.deflateSync(raw)),
    chunk('IEND', Buffer.alloc(0)),
  ])
}

/** A one-page PDF that says `text`, with a correct cross-reference table. */
export function textPdf(text: string): Buffer {
  const stream = `BT /F1 28 Tf 40 120 Td (${text}) Tj ET`
  const objects = [
    '<< /Type /Catalog /Pages 2 0 R >>',
    '<< /Type /Pages /Kids [3 0 R] /Count 1 >>',
    '<< /Type /Page /Parent 2 0 R /MediaBox [0 0 400 250] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>',
    `<< /Length ${stream.length} >>\nstream\n${stream}\nendstream`,
    '<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>',
  ]
  let out = '%PDF-1.4\n'
  const offsets = objects.map((o, i) => {
    const at = out.length
    out += `${i + 1} 0 obj\n${o}\nendobj\n`
    return at
  })
  const xref = out.length
  out += `xref\n0 ${objects.length + 1}\n0000000000 65535 f \n${offsets.map((o) => `${String(o).padStart(10, '0')} 00000 n \n`).join('')}`
  out += `trailer\n<< /Size ${objects.length + 1} /Root 1 0 R >>\nstartxref\n${xref}\n%%EOF\n`
  return Buffer.from(out, 'latin1')
}

/** README's console images: rewritten only when asked (COFFER_UPDATE_SCREENSHOTS=1), so that a test
 * run leaves the checkout as it found it; otherwise the screenshots go to the test's temp dir. */
export const SCREENSHOTS = path.join(ROOT, 'test', 'screenshots')
export const UPDATE_SCREENSHOTS = process.env.COFFER_UPDATE_SCREENSHOTS === '1'

/** The JSON line of `coffer serve --ephemeral`. */
export interface Ephemeral {
  url: string
  adminApiKey: string
  tenant: { id: string; apiKey: string }
  s3: { endpoint: string; region: string; accessKeyId: string; secretAccessKey: string }
}

/**
 * The real bundle served `--ephemeral` (the console is compiled into it), stopped when the test
 * ends; `args` are more flags (`--bucket NAME=DIR` seeds a bucket before it is ready, `timeoutMs` then).
 */
export async function startEphemeral(t: Test, args: string[] = [], timeoutMs?: number): Promise<Ephemeral> {
  buildBundle()
  const cwd = tempDir(t)
  const server: Running = await startCoffer(['serve', '--ephemeral', '--port', '0', ...args], {
    cwd,
    env: { TMPDIR: cwd },
    ready: /^\{"url":"(http:\/\/[^"]+)"/,
    ...(timeoutMs !== undefined ? { timeoutMs } : {}),
  })
  t.teardown(async () => {
    server.child.kill('SIGTERM')
    await server.exited
  })
  return JSON.parse(server.stdout.find((l) => l.startsWith('{"url"'))!) as Ephemeral
}

/** Fails the test on any script error or CSP violation the page reports. */
export function watchPage(t: Test, page: Page): void {
  page.on('pageerror', (err) => t.fail(`page error: ${err.message}`))
  page.on('console', (m) => {
    if (/Content Security Policy|Refused to/i.test(m.text())) t.fail(`CSP violation: ${m.text()}`)
  })
}
