import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import zlib from 'node:zlib'
import { spawnSync } from 'node:child_process'
import type { Test } from 'tap'
import { chromium, type BrowserContext, type Locator, type Page } from 'playwright-core'
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

/** The two widths README shows: a desktop window and a small phone (#31). */
export const SHOT_SIZES = [
  { size: 'desktop', width: 1280, height: 900 },
  { size: '360px', width: 360, height: 780 },
] as const
export const SHOT_SCHEMES = ['light', 'dark'] as const
/** README shows the PNGs inline: each stays under this, or the README page gets slow to open. */
export const SHOT_MAX_BYTES = 250 * 1024

export interface ShotOptions {
  /** Crop to this element (a card, a dialog) rather than the page: a full page of the tenant view is megapixels of things shown elsewhere. */
  target?: Locator
  /** The whole page, beyond the viewport; without a target, only the viewport is taken. */
  fullPage?: boolean
  /** The page from its top to the bottom of this element (the cards under it left out, to keep the PNG small). */
  until?: Locator
}

/**
 * The names of table rows (`tbody th.name`) of at most 16 characters without a space that the
 * layout broke over lines: a squeezed column shows "dropped.pdf" as "dropped.p" over "df".
 */
function brokenNames(page: Page): Promise<string[]> {
  return page.evaluate(() => {
    const out: string[] = []
    for (const th of document.querySelectorAll('tbody th.name')) {
      if (th.getClientRects().length === 0) continue
      const walker = document.createTreeWalker(th, NodeFilter.SHOW_TEXT, { acceptNode: (n) => (n.textContent!.trim() ? 1 : 3) })
      const first = walker.nextNode()
      const text = first?.textContent?.trim() ?? ''
      if (!first || text.length > 16 || /\s/.test(text)) continue
      const range = document.createRange()
      range.selectNodeContents(first)
      const tops = [...range.getClientRects()].map((r) => r.top).sort((a, b) => a - b)
      if (tops.some((top, i) => i > 0 && top - tops[i - 1]! > 4)) out.push(text)
    }
    return out
  })
}

/**
 * README's pictures of the console (#31): `<name>-{desktop,360px}-{light,dark}.png`, the page (or
 * `target`) at 1280 and at 360 px wide, in the light and the dark theme (prefers-color-scheme,
 * emulated). At each width the page must not scroll sideways and the target must hold its content
 * (a phone user would otherwise pan to reach a button); each PNG must be a real picture under
 * SHOT_MAX_BYTES. The viewport and the colour scheme are put back afterwards.
 */
export async function screenshots(t: Test, page: Page, name: string, opts: ShotOptions = {}): Promise<void> {
  const dir = UPDATE_SCREENSHOTS ? SCREENSHOTS : tempDir(t)
  fs.mkdirSync(dir, { recursive: true })
  const viewport = page.viewportSize()
  for (const { size, width, height } of SHOT_SIZES) {
    await page.setViewportSize({ width, height })
    // A dialog taller than the window scrolls inside it: the window grows until the picture shows all of it.
    const hidden = opts.target ? await opts.target.evaluate((e) => e.scrollHeight - e.clientHeight) : 0
    if (hidden > 0) await page.setViewportSize({ width, height: height + hidden + 16 })
    const pageWidth = await page.evaluate(() => document.documentElement.scrollWidth)
    t.ok(pageWidth <= width, `${name}, ${size}: the page does not scroll sideways (scrollWidth ${pageWidth} <= ${width})`)
    const broken = await brokenNames(page)
    t.same(broken, [], `${name}, ${size}: no short name in a table is broken over two lines`)
    if (opts.target) {
      const fit = await opts.target.evaluate((e) => ({ scroll: e.scrollWidth, client: e.clientWidth, right: Math.ceil(e.getBoundingClientRect().right) }))
      t.ok(fit.scroll <= fit.client && fit.right <= width, `${name}, ${size}: the content fits in its box (${JSON.stringify(fit)})`)
    }
    for (const colorScheme of SHOT_SCHEMES) {
      await page.emulateMedia({ colorScheme })
      const file = path.join(dir, `${name}-${size}-${colorScheme}.png`)
      if (opts.target) await opts.target.screenshot({ path: file, animations: 'disabled' })
      else if (opts.until) {
        const bottom = await opts.until.evaluate((e) => Math.ceil(e.getBoundingClientRect().bottom + window.scrollY + 16))
        await page.screenshot({ path: file, fullPage: true, clip: { x: 0, y: 0, width, height: bottom }, animations: 'disabled' })
      } else await page.screenshot({ path: file, fullPage: opts.fullPage ?? false, animations: 'disabled' })
      const png = fs.readFileSync(file)
      t.ok(png.subarray(0, 8).equals(Buffer.from('89504e470d0a1a0a', 'hex')) && png.length > 5000, `${path.basename(file)} is a PNG of the page`)
      t.ok(png.length < SHOT_MAX_BYTES, `${path.basename(file)} is ${Math.round(png.length / 1024)} KiB, under ${SHOT_MAX_BYTES / 1024} KiB`)
    }
  }
  // Playwright's default scheme is light: what the tests after this one expect.
  await page.emulateMedia({ colorScheme: 'light' })
  if (viewport) await page.setViewportSize(viewport)
}

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

/** A new page of `context` whose waits give up after `timeoutMs`, watched (watchPage). */
export async function watchedPage(t: Test, context: BrowserContext, timeoutMs = 10_000): Promise<Page> {
  const page = await context.newPage()
  page.setDefaultTimeout(timeoutMs)
  watchPage(t, page)
  return page
}

/** Fails the test on any script error or CSP violation the page reports. */
export function watchPage(t: Test, page: Page): void {
  page.on('pageerror', (err) => t.fail(`page error: ${err.message}`))
  page.on('console', (m) => {
    if (/Content Security Policy|Refused to/i.test(m.text())) t.fail(`CSP violation: ${m.text()}`)
  })
}
