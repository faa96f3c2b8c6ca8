// @suites: sqlite
import t, { type Test } from 'tap'
import fs from 'node:fs'
import path from 'node:path'
import { createHash } from 'node:crypto'
import type { Page } from 'playwright-core'
import { CreateBucketCommand, DeleteObjectCommand, ListObjectsV2Command, PutBucketVersioningCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3'
import { CHROMIUM, launchBrowser, noisePng, screenshots, startEphemeral, textPdf, watchedPage, type Ephemeral } from './browser'
import { tempDir } from './helper'

// The console's bucket browser (#31) in Debian's chromium: buckets with their counts, created and
// deleted (the non-empty refusal shown), a bucket of 10,000 keys browsed by prefix with keyset
// pages, filter and sort; a folder uploaded into a prefix with a progress bar per file; previews,
// a share link opened without a key, an object's details, several objects deleted at once with
// the one that failed named; and one flow by keyboard alone. README's pictures of the browser and
// of an object's details are taken here, at 1280 and 360 px, light and dark.

// Seeding 10,000 objects takes 30 s of the file's time on a loaded machine: four minutes in all.
t.setTimeout(fs.existsSync(CHROMIUM) ? 240_000 : 20 * 60_000)

const pad = (n: number) => String(n).padStart(5, '0')
/** Key i of the big bucket: 9,000 in one flat folder, the rest in ten sub-folders. */
const bigKey = (i: number) => (i < 9000 ? `logs/${pad(i)}.log` : `photos/album-${i % 10}/${pad(i)}.png`)

function s3Of(t: Test, srv: Ephemeral): S3Client {
  const s3 = new S3Client({ endpoint: srv.s3.endpoint, region: srv.s3.region, forcePathStyle: true, credentials: srv.s3 })
  t.teardown(() => s3.destroy())
  return s3
}

/** A page of Debian's chromium signed in to the console as the ephemeral tenant; undefined when chromium is missing (launchBrowser has said why). */
async function signedIn(t: Test, srv: Ephemeral): Promise<Page | undefined> {
  const context = await launchBrowser(t)
  if (!context) return undefined
  const page = await watchedPage(t, context, 15_000)
  await page.goto(`${srv.url}/console`)
  await page.getByLabel('API key').fill(srv.tenant.apiKey)
  await page.getByRole('button', { name: 'Sign in' }).click()
  await page.getByText('Tenant: ephemeral').waitFor()
  return page
}

/** Presses Tab until the focused element is the one named `name` (its accessible name): reachable by keyboard. */
async function tabTo(page: Page, name: string): Promise<void> {
  for (let i = 0; i < 120; i++) {
    await page.keyboard.press('Tab')
    const focused = await page.evaluate(() => {
      const el = document.activeElement
      return el ? (el.getAttribute('aria-label') ?? el.textContent ?? '').trim() : ''
    })
    if (focused === name) return
  }
  throw new Error(`"${name}" was not reached with Tab`)
}

t.test('buckets: counts, a bucket of 10,000 keys browsed by prefix with pages, filter and sort; create, and delete only when empty', async (t) => {
  // 10,000 objects seeded at start by the fixture's --bucket big=DIR, through the S3 PutObject path
  // in the server (10,000 PutObjects over HTTP took over two minutes on a loaded 2-core machine).
  const dir = tempDir(t)
  for (let i = 0; i < 10_000; i++) {
    const file = path.join(dir, ...bigKey(i).split('/'))
    fs.mkdirSync(path.dirname(file), { recursive: true })
    fs.writeFileSync(file, 'x'.repeat(1 + (i % 97)))
  }
  const started = performance.now()
  const srv = await startEphemeral(t, ['--bucket', `big=${dir}`], 100_000)
  t.comment(`started with 10,000 objects seeded in ${((performance.now() - started) / 1000).toFixed(1)} s`)
  const s3 = s3Of(t, srv)

  const page = await signedIn(t, srv)
  if (!page) return
  const buckets = page.getByRole('region', { name: 'Buckets' })
  const bigRow = buckets.getByRole('row').filter({ hasText: 'big' })
  await bigRow.getByText((10_000).toLocaleString('en-US')).waitFor()
  t.match(await bigRow.locator('[data-label="Size"]').textContent(), /KiB$/)

  // The top level: two folders, no objects.
  await buckets.getByRole('button', { name: 'Open bucket big' }).click()
  const browser = page.getByRole('region', { name: /^Bucket big/ })
  await browser.getByText('2 folders and 0 objects on this page').waitFor()
  t.same(await browser.locator('tbody tr.folder th').allTextContents(), ['logs/', 'photos/'])

  // logs/: 9,000 keys, 100 a page, in key order; the next page starts after the last one.
  await browser.getByRole('button', { name: 'Open folder logs' }).click()
  await browser.getByText('0 folders and 100 objects on this page').waitFor()
  const names = () => browser.locator('tbody th.name').allTextContents()
  t.same((await names()).slice(0, 2), ['00000.log', '00001.log'])
  t.equal((await names()).at(-1), '00099.log')
  t.equal(await browser.getByRole('navigation', { name: 'Breadcrumb' }).locator('[aria-current="page"]').textContent(), 'logs')
  for (let p = 1; p <= 3; p++) {
    await browser.getByRole('button', { name: 'Next page' }).click()
    await browser.getByRole('button', { name: `Details of ${pad(p * 100)}.log` }).waitFor()
    t.equal((await names())[0], `${pad(p * 100)}.log`, `page ${p + 1} starts where page ${p} ended`)
  }
  await browser.getByRole('button', { name: 'Previous page' }).click()
  await browser.getByRole('button', { name: 'Details of 00200.log' }).waitFor()

  // Sorting orders the page shown: by size, largest first (sizes are 1 + i % 97 bytes).
  await browser.getByRole('button', { name: /^Size/ }).click()
  await browser.getByRole('button', { name: /^Size/ }).click()
  t.equal(await browser.locator('th[aria-sort="descending"]').textContent(), 'Size ▼, sorted descending')
  t.equal((await names())[0], '00290.log', '1 + 290 % 97 = 97 bytes, the largest of 00200-00299')
  await browser.getByRole('button', { name: /^Name/ }).click()

  // The filter is a name prefix inside the folder, served by the same keyset listing.
  await browser.getByLabel('Filter by name prefix').fill('0899')
  await browser.getByText('0 folders and 10 objects on this page').waitFor()
  t.same(
    await names(),
    Array.from({ length: 10 }, (_, i) => `${pad(8990 + i)}.log`),
  )
  t.ok(await browser.getByRole('button', { name: 'Next page' }).isDisabled(), 'one page')
  await browser.getByLabel('Filter by name prefix').fill('zzz')
  await browser.getByText('Nothing here starts with “zzz”.').waitFor()

  // Breadcrumbs back to the root, then into a sub-folder of photos/.
  await browser.getByRole('navigation', { name: 'Breadcrumb' }).getByRole('button', { name: 'big' }).click()
  await browser.getByRole('button', { name: 'Open folder photos' }).click()
  await browser.getByText('10 folders and 0 objects on this page').waitFor()
  await browser.getByRole('button', { name: 'Open folder album-3' }).click()
  await browser.getByText('0 folders and 100 objects on this page').waitFor()
  t.equal((await names())[0], '09003.png')
  await browser.getByRole('button', { name: 'All buckets' }).click()

  // Create a bucket; the full one cannot be deleted (the reason shown), the empty one can.
  await buckets.getByLabel('New bucket name').fill('Bad_Name')
  await buckets.getByRole('button', { name: 'Create bucket' }).click()
  await buckets
    .getByRole('alert')
    .getByText(/is not a bucket name/)
    .waitFor()
  await buckets.getByLabel('New bucket name').fill('scratch')
  await buckets.getByRole('button', { name: 'Create bucket' }).click()
  await buckets.getByRole('row').filter({ hasText: 'scratch' }).waitFor()
  await buckets.getByRole('button', { name: 'Delete bucket big' }).click()
  const confirm = page.getByRole('dialog', { name: 'Delete bucket' })
  await confirm.getByRole('button', { name: 'Delete bucket' }).click()
  await confirm.getByRole('alert').getByText('The workspace is not empty: it holds 10000 files. Delete them first.').waitFor()
  await confirm.getByRole('button', { name: 'Cancel' }).click()
  t.equal((await s3.send(new ListObjectsV2Command({ Bucket: 'big', MaxKeys: 1 }))).KeyCount, 1, 'nothing was deleted')
  await buckets.getByRole('button', { name: 'Delete bucket scratch' }).click()
  await confirm.getByRole('button', { name: 'Delete bucket' }).click()
  await confirm.waitFor({ state: 'detached' })
  await buckets.getByRole('row').filter({ hasText: 'scratch' }).waitFor({ state: 'detached' })
  t.equal(await buckets.getByRole('row').filter({ hasText: 'big' }).count(), 1)
})

t.test('a folder upload into a prefix, previews, a share link without a key, details, and several objects deleted at once; by keyboard', async (t) => {
  const srv = await startEphemeral(t)
  const s3 = s3Of(t, srv)
  await s3.send(new CreateBucketCommand({ Bucket: 'site' }))
  const readme = 'Read me first.\nSecond line.\n'
  await s3.send(
    new PutObjectCommand({
      Bucket: 'site',
      Key: 'notes/readme.txt',
      Body: readme,
      ContentType: 'text/plain',
      Metadata: { owner: 'ada' },
      Tagging: 'team=blue',
    }),
  )

  const page = await signedIn(t, srv)
  if (!page) return

  // Keyboard only: Tab to the bucket, Enter; Tab to the folder, Enter; Tab to the object's details, Enter; Escape.
  await page.locator('body').focus()
  await tabTo(page, 'Open bucket site')
  await page.keyboard.press('Enter')
  const browser = page.getByRole('region', { name: /^Bucket site/ })
  await browser.getByRole('button', { name: 'Open folder notes' }).waitFor()
  t.equal(await page.evaluate(() => document.activeElement?.id), 'browser-h', 'the focus moves to the bucket heading')
  await tabTo(page, 'Open folder notes')
  await page.keyboard.press('Enter')
  await browser.getByRole('button', { name: 'Details of readme.txt' }).waitFor()
  await tabTo(page, 'Details of readme.txt')
  await page.keyboard.press('Enter')
  const details = page.getByRole('dialog', { name: 'Details of notes/readme.txt' })
  await details.getByText('text/plain').waitFor()
  const text = await details.locator('dl').textContent()
  t.match(text, createHash('sha256').update(readme).digest('hex'), 'its SHA-256')
  t.match(text, `"${createHash('md5').update(readme).digest('hex')}"`, 'its ETag')
  t.match(text, /Legal holdOff/)
  t.match(text, /AccessPrivate \(ACL private\)/)
  t.equal(await details.getByRole('table', { name: 'User metadata' }).getByRole('row').textContent(), 'ownerada')
  t.equal(await details.getByRole('table', { name: 'Tags' }).getByRole('row').textContent(), 'teamblue')
  await page.keyboard.press('Escape')
  await details.waitFor({ state: 'detached' })

  // A folder upload: every file of the directory under notes/ + its relative path, a bar each.
  const root = tempDir(t)
  const album = path.join(root, 'album')
  fs.mkdirSync(path.join(album, 'sub'), { recursive: true })
  const png = noisePng(64, 48)
  fs.writeFileSync(path.join(album, 'a.png'), png)
  fs.writeFileSync(path.join(album, 'c.png'), noisePng(32, 32, 3))
  fs.writeFileSync(path.join(album, 'sub', 'b.pdf'), textPdf('Hello'))
  await browser.getByLabel('Upload a folder here').setInputFiles(album)
  const uploads = browser.getByRole('list', { name: 'Uploads to this bucket' })
  for (const k of ['notes/album/a.png', 'notes/album/c.png', 'notes/album/sub/b.pdf']) {
    const item = uploads.getByRole('listitem').filter({ hasText: k })
    await item.getByText('Uploaded').waitFor()
    t.equal(await item.getByRole('progressbar', { name: `Upload of ${k}` }).count(), 1, `a progress bar for ${k}`)
  }
  const listed = await s3.send(new ListObjectsV2Command({ Bucket: 'site', Prefix: 'notes/album/' }))
  t.same(
    listed.Contents?.map((o) => o.Key),
    ['notes/album/a.png', 'notes/album/c.png', 'notes/album/sub/b.pdf'],
  )
  await browser.getByRole('button', { name: 'Open folder album' }).waitFor()

  // Previews: a text (capped, by Range), then an image and a PDF of the folder just uploaded.
  await browser.getByRole('button', { name: 'Preview readme.txt' }).click()
  const textPreview = page.getByRole('dialog', { name: 'Preview of readme.txt' })
  t.equal(await textPreview.locator('pre').textContent(), readme)
  await textPreview.getByRole('button', { name: 'Close' }).click()
  await browser.getByRole('button', { name: 'Open folder album' }).click()
  await browser.getByRole('button', { name: 'Preview a.png' }).click()
  const img = page.getByRole('dialog', { name: 'Preview of a.png' }).getByRole('img')
  await page.waitForFunction(() => (document.querySelector('dialog img') as HTMLImageElement | null)?.naturalWidth === 64)
  t.match(await img.getAttribute('src'), /\/download\?expires=.*&disposition=inline$/, 'a signed URL, inline')
  await page.keyboard.press('Escape')

  // A share link of a chosen lifetime, opened without a key.
  await browser.getByLabel('Link lifetime').selectOption({ label: '1 day' })
  await browser.getByRole('button', { name: 'Share link to a.png' }).click()
  await browser
    .getByRole('status')
    .getByText(/for notes\/album\/a\.png, valid until/)
    .waitFor()
  const link = await browser.getByRole('textbox', { name: 'Share link' }).inputValue()
  const expires = Number(new URL(link).searchParams.get('expires'))
  t.ok(Math.abs(expires - Date.now() - 86_400_000) < 120_000, 'valid for a day')
  const shared = await fetch(link)
  t.equal(shared.status, 200)
  t.ok(Buffer.from(await shared.arrayBuffer()).equals(png), 'the link serves the bytes, no key needed')

  // Several deleted at once, one confirmation; c.png is deleted elsewhere meanwhile: its failure is named.
  await browser.getByRole('checkbox', { name: 'Select a.png' }).check()
  await browser.getByRole('checkbox', { name: 'Select c.png' }).check()
  await s3.send(new DeleteObjectCommand({ Bucket: 'site', Key: 'notes/album/c.png' }))
  await browser.getByRole('button', { name: 'Delete selected (2)' }).click()
  const confirm = page.getByRole('dialog', { name: 'Delete objects' })
  t.match(await confirm.textContent(), /Delete 2 objects: a\.png, c\.png\?/)
  await confirm.getByRole('button', { name: 'Delete' }).click()
  const report = browser.getByRole('status').filter({ hasText: 'Deleted 1 object' })
  await report.waitFor()
  t.match(await report.getByRole('list', { name: 'Objects not deleted' }).textContent(), /notes\/album\/c\.png: File not found/)
  await browser.getByRole('button', { name: 'Details of a.png' }).waitFor({ state: 'detached' })
  t.same(
    (await s3.send(new ListObjectsV2Command({ Bucket: 'site', Prefix: 'notes/album/' }))).Contents?.map((o) => o.Key),
    ['notes/album/sub/b.pdf'],
  )

  // The PDF previews in a frame.
  await browser.getByRole('button', { name: 'Open folder sub' }).click()
  await browser.getByRole('button', { name: 'Preview b.pdf' }).click()
  await page.getByRole('dialog', { name: 'Preview of b.pdf' }).locator('iframe[src^="blob:"]').waitFor()
})

t.test("README's pictures: a bucket of folders and objects of several types, two selected, and an object's details; usable at 360 px", async (t) => {
  const srv = await startEphemeral(t)
  const s3 = s3Of(t, srv)
  // A team's bucket as one would find it: folders, a README, documents, media, an archive.
  await s3.send(new CreateBucketCommand({ Bucket: 'team-site' }))
  await s3.send(new PutBucketVersioningCommand({ Bucket: 'team-site', VersioningConfiguration: { Status: 'Enabled' } }))
  const seed: [string, string, Buffer | string, Record<string, string>?, string?][] = [
    ['README.txt', 'text/plain', 'What is where in this bucket.\nphotos/: the website pictures, by year.\ndocs/: contracts and brochures.\n'],
    ['budget-2026.csv', 'text/csv', 'month,spent\n' + Array.from({ length: 12 }, (_, i) => `${i + 1},${1000 + i * 37}`).join('\n')],
    ['brochure.pdf', 'application/pdf', textPdf('Spring brochure')],
    ['logo.png', 'image/png', noisePng(240, 120), { author: 'design team', source: 'logo-v3.svg' }, 'project=website&reviewed=yes'],
    ['intro.mp4', 'video/mp4', Buffer.alloc(1_843_200, 7)],
    ['podcast-episode-1.mp3', 'audio/mpeg', Buffer.alloc(912_384, 3)],
    ['site-backup-2026-11-01.tar.gz', 'application/gzip', Buffer.alloc(2_621_440, 1)],
    ['settings.json', 'application/json', JSON.stringify({ theme: 'auto', locale: 'en' }, null, 2)],
    ['docs/contract-2026.pdf', 'application/pdf', textPdf('Contract')],
    ['docs/handbook.pdf', 'application/pdf', textPdf('Handbook')],
    ['photos/2026/03/harbour.png', 'image/png', noisePng(320, 200, 11)],
    ['photos/2026/04/team-day.png', 'image/png', noisePng(320, 200, 12)],
    ['videos/launch.mp4', 'video/mp4', Buffer.alloc(300_000, 9)],
  ]
  for (const [Key, ContentType, Body, Metadata, Tagging] of seed) {
    await s3.send(new PutObjectCommand({ Bucket: 'team-site', Key, Body, ContentType, ...(Metadata ? { Metadata } : {}), ...(Tagging ? { Tagging } : {}) }))
  }

  const page = await signedIn(t, srv)
  if (!page) return
  await page.getByRole('button', { name: 'Open bucket team-site' }).click()
  const browser = page.getByRole('region', { name: /^Bucket team-site/ })
  await browser.getByText('3 folders and 8 objects on this page').waitFor()
  t.same(await browser.locator('tbody tr.folder th').allTextContents(), ['docs/', 'photos/', 'videos/'])
  t.equal(await browser.locator('tr.folder svg.icon').count(), 3, "each folder's mark is drawn, not an emoji a font may lack")
  await browser.getByRole('checkbox', { name: 'Select brochure.pdf' }).check()
  await browser.getByRole('checkbox', { name: 'Select logo.png' }).check()
  await browser.getByRole('button', { name: 'Delete selected (2)' }).waitFor()
  t.equal(await browser.locator('tr.selected').count(), 2, 'two rows selected, and marked so')
  await screenshots(t, page, 'console-bucket-browser', { target: browser })

  await browser.getByRole('button', { name: 'Details of logo.png' }).click()
  const details = page.getByRole('dialog', { name: 'Details of logo.png' })
  await details.getByRole('table', { name: 'Tags' }).waitFor()
  t.match(await details.locator('dl').textContent(), /versioning enabled/)
  await screenshots(t, page, 'console-object-details', { target: details })
  await page.keyboard.press('Escape')
  await details.waitFor({ state: 'detached' })
})
