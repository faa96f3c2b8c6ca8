// @suites: sqlite
import t from 'tap'
import fs from 'node:fs'
import { createHash } from 'node:crypto'
import { CreateBucketCommand, DeleteObjectCommand, GetObjectCommand, PutBucketVersioningCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3'
import { CHROMIUM, launchBrowser, startEphemeral, watchedPage } from './browser'

// The console's versions view (#25) in Debian's chromium: a key's versions listed with their date,
// size, hash and current marker; an older one restored (with a confirmation, by keyboard) and its
// bytes downloaded; a deleted key found among the deleted files and restored through its versions.

if (!fs.existsSync(CHROMIUM)) t.setTimeout(20 * 60_000)

const sha = (s: string) => createHash('sha256').update(s).digest('hex')

t.test("tenant: a key's versions, an older one restored and downloaded; a deleted key restored through its versions", async (t) => {
  const srv = await startEphemeral(t)
  const s3 = new S3Client({ endpoint: srv.s3.endpoint, region: srv.s3.region, forcePathStyle: true, credentials: srv.s3 })
  t.teardown(() => s3.destroy())
  await s3.send(new CreateBucketCommand({ Bucket: 'reports' }))
  await s3.send(new PutBucketVersioningCommand({ Bucket: 'reports', VersioningConfiguration: { Status: 'Enabled' } }))
  const bodies = ['version one', 'version two, longer', 'version three']
  const ids: string[] = []
  for (const Body of bodies) {
    ids.push((await s3.send(new PutObjectCommand({ Bucket: 'reports', Key: 'q3/report.txt', Body, ContentType: 'text/plain' }))).VersionId!)
    // Distinct times, newest first in the view.
    await new Promise((r) => setTimeout(r, 5))
  }

  const context = await launchBrowser(t)
  if (!context) return
  const page = await watchedPage(t, context)
  await page.goto(`${srv.url}/console`)
  await page.getByLabel('API key').fill(srv.tenant.apiKey)
  await page.getByRole('button', { name: 'Sign in' }).click()
  // The key in its bucket: the bucket browser, its folder, the object's details, its versions.
  const browser = page.getByRole('region', { name: /^Bucket reports/ })
  const openReport = async () => {
    await page.getByRole('button', { name: 'Open bucket reports' }).click()
    await browser.getByRole('button', { name: 'Open folder q3' }).click()
    await browser.getByRole('button', { name: 'Details of report.txt' }).waitFor()
  }
  await openReport()
  await browser.getByRole('button', { name: 'Details of report.txt' }).click()
  const details = page.getByRole('dialog', { name: 'Details of q3/report.txt' })
  await details.getByRole('button', { name: 'Versions' }).click()

  // The versions view: newest first, the current one marked, sizes and hashes.
  const dialog = page.getByRole('dialog', { name: 'Versions of q3/report.txt' })
  await dialog.getByText('3 versions').waitFor()
  const rows = dialog.locator('tbody tr')
  t.equal(await rows.count(), 3)
  t.match(await rows.nth(0).textContent(), /current/, 'the newest is the current one')
  t.notMatch(await rows.nth(1).textContent(), /current/)
  t.same(
    await dialog.locator('td.hash code').evaluateAll((codes) => codes.map((c) => c.getAttribute('title'))),
    [...bodies].reverse().map(sha),
    'each version with its SHA-256, newest first',
  )
  t.match(await rows.nth(1).locator('[data-label="Size"]').textContent(), /^19 B$/)
  t.equal(
    await rows
      .nth(0)
      .getByRole('button', { name: /^Restore/ })
      .count(),
    0,
    'the current version has no Restore',
  )

  // Restore the oldest with the keyboard: focus its labelled button, Enter, Enter on the confirmation.
  await dialog.getByRole('button', { name: new RegExp(`^Restore the version of .*\\(${ids[0]!.replace(/[.]/g, '\\.')}\\)$`) }).focus()
  await page.keyboard.press('Enter')
  const confirm = page.getByRole('dialog', { name: 'Restore version' })
  await confirm.getByText(/It becomes the current version/).waitFor()
  t.equal(await page.evaluate(() => document.activeElement?.textContent), 'Restore', 'the confirmation takes the focus, on its action')
  await page.keyboard.press('Enter')
  await confirm.waitFor({ state: 'detached' })
  await dialog.getByRole('status').getByText('it is the current version now').waitFor()
  await dialog.getByText('4 versions').waitFor()
  t.equal(await dialog.locator('td.hash code').first().getAttribute('title'), sha('version one'), 'the restored content is the current version')
  await page.keyboard.press('Escape')
  await dialog.waitFor({ state: 'detached' })
  await page.keyboard.press('Escape')
  await details.waitFor({ state: 'detached' })

  // Download the object now listed: the restored bytes.
  const [saved] = await Promise.all([page.waitForEvent('download'), browser.getByRole('button', { name: 'Download report.txt' }).click()])
  t.equal(saved.suggestedFilename(), 'report.txt')
  t.equal(fs.readFileSync((await saved.path())!, 'utf8'), 'version one', 'the download is the restored version')
  t.equal(await (await s3.send(new GetObjectCommand({ Bucket: 'reports', Key: 'q3/report.txt' }))).Body!.transformToString(), 'version one')

  // Deleted (a delete marker): listed under Deleted files, restored through its versions.
  await s3.send(new DeleteObjectCommand({ Bucket: 'reports', Key: 'q3/report.txt' }))
  await browser.getByRole('navigation', { name: 'Breadcrumb' }).getByRole('button', { name: 'reports' }).click()
  await browser.getByText('This folder is empty.').waitFor()
  t.pass('no longer in its bucket')
  await page.getByRole('navigation', { name: 'Sections' }).getByRole('button', { name: 'Deleted files' }).click()
  const deleted = page.getByRole('region', { name: 'Deleted files' })
  const row = deleted.getByRole('row').filter({ hasText: 'report.txt' })
  t.equal(await row.locator('[data-label="Bucket"]').textContent(), 'reports', 'listed with its bucket')
  await deleted.getByRole('button', { name: 'Versions of deleted report.txt' }).click()
  const versions = page.getByRole('dialog', { name: 'Versions of report.txt' })
  await versions.getByText('5 versions').waitFor()
  const all = versions.locator('tbody tr')
  t.match(await all.nth(0).textContent(), /current.*delete marker|delete marker.*current/, 'the delete marker is current')
  await all
    .nth(2)
    .getByRole('button', { name: /^Restore/ })
    .click()
  await confirm.getByRole('button', { name: 'Restore' }).click()
  await versions.getByText('6 versions').waitFor()
  await versions.getByRole('button', { name: 'Close' }).click()
  await deleted.getByText('No deleted files with versions').waitFor()
  await page.getByRole('navigation', { name: 'Sections' }).getByRole('button', { name: 'Buckets' }).click()
  await openReport()
  const [again] = await Promise.all([page.waitForEvent('download'), browser.getByRole('button', { name: 'Download report.txt' }).click()])
  t.equal(fs.readFileSync((await again.path())!, 'utf8'), 'version three', 'the deleted key is back with the version chosen')
})
