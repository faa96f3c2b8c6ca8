// @suites: sqlite
import t from 'tap'
import fs from 'node:fs'
import type { Page } from 'playwright-core'
import { CreateBucketCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3'
import { CHROMIUM, launchBrowser, noisePng, screenshots, startEphemeral, watchedPage, type Ephemeral } from './browser'
import { formatBytes } from '../src/console/format'
import type { Overview as OverviewData } from '../src/contract/overview'

// The console's admin overview (#31) and its themes in Debian's chromium: the figures shown are the
// ones GET /api/v1/admin/overview answered, after known uploads and a webhook that died; the dark
// theme follows the system setting (prefers-color-scheme) and every text of the main views keeps
// a contrast of 4.5:1 or more, in both themes. README's picture of the overview is taken here, at
// 1280 and 360 px, light and dark.

if (!fs.existsSync(CHROMIUM)) t.setTimeout(20 * 60_000)

const api = (srv: Ephemeral, key: string, p: string, init: RequestInit = {}) =>
  fetch(`${srv.url}${p}`, { ...init, headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...init.headers } })
const overview = async (srv: Ephemeral) => (await (await api(srv, srv.adminApiKey, '/api/v1/admin/overview')).json()) as OverviewData

/**
 * Every visible text of the page whose contrast with the background behind it is under 4.5:1
 * (WCAG 2 AA for body text), as `text: ratio`. Disabled controls are exempt (WCAG 1.4.3).
 */
function lowContrast(page: Page): Promise<string[]> {
  return page.evaluate(() => {
    const rgb = (c: string) => {
      const m = /rgba?\(([\d.]+)[ ,]+([\d.]+)[ ,]+([\d.]+)(?:[ ,/]+([\d.]+))?\)/.exec(c)
      return m ? { r: +m[1]!, g: +m[2]!, b: +m[3]!, a: m[4] === undefined ? 1 : +m[4] } : null
    }
    const lum = (c: { r: number; g: number; b: number }) => {
      const ch = (v: number) => ((v /= 255) <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4)
      return 0.2126 * ch(c.r) + 0.7152 * ch(c.g) + 0.0722 * ch(c.b)
    }
    const background = (e: Element | null) => {
      for (; e; e = e.parentElement) {
        const c = rgb(getComputedStyle(e).backgroundColor)
        if (c && c.a > 0) return c
      }
      return rgb(getComputedStyle(document.documentElement).backgroundColor) ?? { r: 255, g: 255, b: 255, a: 1 }
    }
    const out: string[] = []
    const els = [...document.querySelectorAll<HTMLElement>('body *')]
    for (const e of els) {
      const own = [...e.childNodes].some((n) => n.nodeType === Node.TEXT_NODE && n.textContent!.trim() !== '')
      const field = (e instanceof HTMLInputElement && e.type !== 'checkbox' && e.type !== 'file' && e.value !== '') || e instanceof HTMLSelectElement
      if (!own && !field) continue
      if (e.getClientRects().length === 0 || e.closest(':disabled')) continue
      const fg = rgb(getComputedStyle(e).color)
      const bg = background(e)
      if (!fg) continue
      const [hi, lo] = [lum(fg), lum(bg)].sort((a, b) => b - a)
      const ratio = (hi! + 0.05) / (lo! + 0.05)
      if (ratio < 4.5) out.push(`${(e.textContent || (e as HTMLInputElement).value || '').trim().slice(0, 40)}: ${ratio.toFixed(2)}`)
    }
    return out
  })
}

const bodyBackground = (page: Page) => page.evaluate(() => getComputedStyle(document.body).backgroundColor)

t.test('admin overview: the numbers the API returns, after known uploads and a dead webhook', async (t) => {
  const srv = await startEphemeral(t)
  const before = await overview(srv)

  // Known content: two objects through S3 for the ephemeral tenant, one PNG through the API for
  // another tenant, the same PNG again (stored once), and an upload whose webhook cannot be delivered.
  const s3 = new S3Client({ endpoint: srv.s3.endpoint, region: srv.s3.region, forcePathStyle: true, credentials: srv.s3 })
  t.teardown(() => s3.destroy())
  await s3.send(new CreateBucketCommand({ Bucket: 'overview' }))
  const objects = [Buffer.alloc(300_000, 1), Buffer.alloc(120_000, 2)]
  for (const [i, Body] of objects.entries()) await s3.send(new PutObjectCommand({ Bucket: 'overview', Key: `o${i}`, Body }))
  const other = await (await api(srv, srv.adminApiKey, '/api/v1/admin/tenants', { method: 'POST', body: JSON.stringify({ name: 'smaller' }) })).json()
  const png = noisePng(60, 40)
  for (const webhookUrl of [undefined, 'http://127.0.0.1:9/hook']) {
    const hs = await (
      await api(srv, other.apiKey, '/api/v1/upload/request', {
        method: 'POST',
        body: JSON.stringify({ fileType: 'image/png', fileName: 'p.png', ...(webhookUrl ? { webhookUrl } : {}) }),
      })
    ).json()
    t.equal((await fetch(`${srv.url}${hs.presignedUrl}`, { method: 'PUT', headers: { 'content-type': 'image/png' }, body: new Uint8Array(png) })).status, 200)
  }
  // Port 9 refuses at once: three attempts, 1 s then 2 s apart, then a dead letter.
  let now = await overview(srv)
  for (let i = 0; i < 100 && now.webhooks.dead === 0; i++) {
    await new Promise((r) => setTimeout(r, 200))
    now = await overview(srv)
  }
  t.same(now.webhooks, { pending: 0, dead: 1, oldestPendingAt: null }, 'the undeliverable event is a dead letter')
  t.same(
    now.blobs,
    { count: before.blobs.count + 3, bytes: before.blobs.bytes + objects[0]!.length + objects[1]!.length + png.length },
    'three new contents (the same PNG twice is stored once)',
  )
  t.same(
    now.tenants.byUsage.map((x) => x.name),
    ['ephemeral', 'smaller'],
    'by usage, largest first',
  )

  const context = await launchBrowser(t)
  if (!context) return
  const page = await watchedPage(t, context)
  await page.goto(`${srv.url}/console`)
  await page.getByLabel('API key').fill(srv.adminApiKey)
  const [answered] = await Promise.all([page.waitForResponse((r) => r.url().includes('/api/v1/admin/overview')), page.getByLabel('API key').press('Enter')])
  const shown = (await answered.json()) as OverviewData
  t.same(shown.blobs, now.blobs, 'the page got the same figures (nothing uploaded since)')
  const card = page.getByRole('region', { name: 'Overview' })
  const figure = (term: string) => card.locator('dt', { hasText: term }).locator('xpath=following-sibling::dd')
  await figure('Blobs').waitFor()
  t.equal(await figure('Version').textContent(), shown.server.version)
  t.equal(await figure('Blobs').textContent(), `${shown.blobs.count.toLocaleString('en')} (${formatBytes(shown.blobs.bytes)})`)
  t.equal(await figure('Free space').textContent(), `${formatBytes(shown.dataDir.freeBytes)} of ${formatBytes(shown.dataDir.totalBytes)}`)
  t.match(await figure('Requests').textContent(), `${shown.requests.sinceStart.requests.toLocaleString('en')} since start`)
  t.match(
    await figure('Errors').textContent(),
    `since start ${shown.requests.sinceStart.clientErrors} client (4xx), ${shown.requests.sinceStart.serverErrors} server (5xx)`,
  )
  t.equal(await figure('Webhook backlog').textContent(), '0 pending')
  t.match(await figure('Dead letters').textContent(), /^1 \(coffer webhooks retry re-drives them\)$/)
  const rows = card.locator('tbody tr')
  t.same(
    await rows.locator('th').allTextContents(),
    shown.tenants.byUsage.map((x) => x.name),
    'the usage table in the order the API gave',
  )
  // The largest is the ephemeral tenant, whose quota is unlimited: its usage has no "of".
  const top = shown.tenants.byUsage[0]!
  t.match(
    await rows.first().textContent(),
    top.quotaBytes >= Number.MAX_SAFE_INTEGER ? `${formatBytes(top.usedBytes)} used (no limit)` : `${formatBytes(top.usedBytes)} of`,
  )
  await screenshots(t, page, 'console-overview', { target: card })

  // Keyboard: Refresh overview is reachable and asks the API again.
  await card.getByRole('button', { name: 'Refresh overview' }).focus()
  const [again] = await Promise.all([page.waitForResponse((r) => r.url().includes('/api/v1/admin/overview')), page.keyboard.press('Enter')])
  t.equal(again.status(), 200)
})

t.test('dark theme follows the system setting; every text of the main views keeps 4.5:1 in both themes', async (t) => {
  const srv = await startEphemeral(t)
  // Something in each state to show: a completed file and a pending upload.
  const png = noisePng(40, 30)
  const hs = await (
    await api(srv, srv.tenant.apiKey, '/api/v1/upload/request', { method: 'POST', body: JSON.stringify({ fileType: 'image/png', fileName: 'done.png' }) })
  ).json()
  t.equal((await fetch(`${srv.url}${hs.presignedUrl}`, { method: 'PUT', headers: { 'content-type': 'image/png' }, body: new Uint8Array(png) })).status, 200)
  await api(srv, srv.tenant.apiKey, '/api/v1/upload/request', { method: 'POST', body: JSON.stringify({ fileType: 'image/png', fileName: 'waiting.png' }) })
  // A bucket with a display name of its own, for the tenant's home.
  await api(srv, srv.tenant.apiKey, '/api/v1/workspaces', { method: 'POST', body: JSON.stringify({ name: 'Client photos', slug: 'client-photos' }) })

  const context = await launchBrowser(t)
  if (!context) return
  const page = await watchedPage(t, context)
  await page.emulateMedia({ colorScheme: 'light' })
  await page.goto(`${srv.url}/console`)
  const light = await bodyBackground(page)
  t.same(await lowContrast(page), [], 'sign-in, light')
  await page.emulateMedia({ colorScheme: 'dark' })
  const dark = await bodyBackground(page)
  t.not(dark, light, `the dark theme's background (${dark}) is not the light one's (${light})`)
  t.same(await lowContrast(page), [], 'sign-in, dark')

  for (const [who, key, ready] of [
    ['tenant', srv.tenant.apiKey, 'Buckets'],
    ['admin', srv.adminApiKey, 'Overview'],
  ] as const) {
    await page.getByLabel('API key').fill(key)
    await page.getByLabel('API key').press('Enter')
    const region = page.getByRole('region', { name: ready })
    await region.getByRole('table').waitFor()
    for (const scheme of ['dark', 'light'] as const) {
      await page.emulateMedia({ colorScheme: scheme })
      t.equal(await bodyBackground(page), scheme === 'dark' ? dark : light, `${who} view, ${scheme}: the page follows the setting`)
      t.same(await lowContrast(page), [], `${who} view, ${scheme}: no text under 4.5:1`)
    }
    if (who === 'tenant') {
      // Each of the tenant's other places, and a dialog: the primary button on the accent colour.
      const nav = page.getByRole('navigation', { name: 'Sections' })
      for (const [tab, shows] of [
        ['Webhooks', page.getByRole('cell', { name: 'delivered' }).or(page.getByText('No webhook deliveries yet'))],
        ['Deleted files', page.getByText('No deleted files with versions')],
        ['Access keys', page.getByRole('region', { name: 'Access keys' }).getByRole('table')],
      ] as const) {
        await nav.getByRole('button', { name: tab }).click()
        await shows.first().waitFor()
        for (const scheme of ['dark', 'light'] as const) {
          await page.emulateMedia({ colorScheme: scheme })
          t.same(await lowContrast(page), [], `tenant, ${tab}, ${scheme}: no text under 4.5:1`)
        }
      }
      await page.emulateMedia({ colorScheme: 'dark' })
      await page.getByRole('region', { name: 'Access keys' }).getByRole('button', { name: 'Create access key' }).click()
      await page.getByRole('dialog', { name: 'New access key' }).waitFor()
      t.same(await lowContrast(page), [], 'the new key dialog, dark')
      await page.keyboard.press('Escape')
    }
    await page.getByRole('button', { name: 'Sign out' }).click()
  }
})
