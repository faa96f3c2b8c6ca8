// @suites: sqlite
// The first hour of a newcomer, in a browser: `coffer serve` on a new data dir with nothing set,
// at a terminal; the console opened at the address its banner shows, signed in with the key the
// banner shows; a bucket made, three files of different kinds uploaded into it, previewed and
// downloaded, all through the console, with no second command. The log keeps no key.
import t from 'tap'
import crypto from 'node:crypto'
import fs from 'node:fs'
import path from 'node:path'
import { spawnSync } from 'node:child_process'
import { CHROMIUM, launchBrowser, noisePng, screenshots, watchedPage } from './browser'
import { buildBundle } from './process-helper'
import { tempDir } from './helper'
import { bannerValue, PRETTY, serveOnTerminal, until } from './terminal'
import { findSecrets, TEST_LOG_DIR } from './log-scan/secrets'
import { formatBytes } from '../src/console/format'

// Installing chromium (scripts/chromium.sh) may wait for another apt run: give this file the time
// then. The flow starts a server, signs in and moves three files each way: minutes on a loaded machine.
t.setTimeout(fs.existsSync(CHROMIUM) ? 360_000 : 20 * 60_000)

buildBundle()

/** Every file under `dir`, as paths relative to it. */
function filesUnder(dir: string): string[] {
  return fs.readdirSync(dir, { recursive: true, withFileTypes: true }).flatMap((e) => (e.isFile() ? [path.relative(dir, path.join(e.parentPath, e.name))] : []))
}

t.test('a newcomer starts coffer, signs in with the banner’s key and stores, previews and downloads files in a bucket', async (t) => {
  const cwd = tempDir(t, 'coffer-first-run-browser-')
  // A person's `coffer serve` in an empty directory (data in ./data), nothing set; ports the system picks.
  const term = await serveOnTerminal(t, cwd, ['--port', '0', '--s3-port', '0'])
  await until(term, (l) => l.some((x) => x.startsWith('  set -a;')), 'the banner', 60_000)
  const consoleUrl = bannerValue(term.lines, 'Console')
  const apiKey = bannerValue(term.lines, 'API key')
  const secretKey = bannerValue(term.lines, 'Secret key')
  t.match(consoleUrl, /^http:\/\/127\.0\.0\.1:\d+\/console\/$/, 'the banner shows the console address')
  t.match(apiKey, /^sk_live_/, 'and a tenant API key')

  const context = await launchBrowser(t)
  if (!context) return
  const origin = new URL(consoleUrl).origin
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin })
  const page = await watchedPage(t, context, 30_000)
  await page.goto(consoleUrl)

  // The key, copied from the terminal, pasted into the sign-in field.
  const field = page.locator('input[name=key]')
  await field.waitFor()
  await page.evaluate((k) => navigator.clipboard.writeText(k), apiKey)
  await field.focus()
  await page.keyboard.press('Control+V')
  t.equal(await field.inputValue(), apiKey, 'the pasted key is in the field')
  await page.locator('button.primary').click()
  await page.getByText('Tenant: default').waitFor()
  t.pass('signed in as the tenant "default" the first start made')

  // What a newcomer sees first: the Buckets home, empty, saying what to do.
  const nav = page.getByRole('navigation', { name: 'Sections' })
  t.equal(await nav.locator('[aria-current="page"]').textContent(), 'Buckets', 'the Buckets home')
  const buckets = page.getByRole('region', { name: 'Buckets' })
  await buckets.getByText('No buckets yet. Create one, then open it to upload files into it.').waitFor()
  t.equal(await buckets.getByRole('row').count(), 0, 'no bucket listed')
  t.match(await page.locator('.storage .usage').textContent(), /^0 B (used|of )/, 'nothing stored yet')
  await screenshots(t, page, 'console-first-run', { until: buckets })

  // A bucket made in the console, opened by its name.
  await buckets.getByLabel('New bucket name').fill('my-files')
  await buckets.getByRole('button', { name: 'Create bucket' }).click()
  await buckets.getByRole('button', { name: 'Open bucket my-files' }).click()
  const browser = page.getByRole('region', { name: /^Bucket my-files/ })
  await browser.getByText('This folder is empty.').waitFor()

  // Three files from the disk, as a person picks them: a text, a real tar.gz and a PNG.
  const disk = tempDir(t, 'coffer-newcomer-files-')
  fs.mkdirSync(path.join(disk, 'site'))
  fs.writeFileSync(path.join(disk, 'site', 'index.html'), '<!doctype html><title>Home</title><h1>Hello</h1>\n')
  fs.writeFileSync(path.join(disk, 'site', 'data.bin'), crypto.randomBytes(20_000))
  const tar = spawnSync('tar', ['czf', path.join(disk, 'site.tar.gz'), '-C', disk, 'site'], { encoding: 'utf8', timeout: 30_000 })
  t.equal(tar.status, 0, `tar czf: ${tar.stderr}`)
  fs.writeFileSync(path.join(disk, 'notes.txt'), 'Things to keep\n- the lease\n- photos of the flat\n')
  fs.writeFileSync(path.join(disk, 'photo.png'), noisePng(320, 200))
  const names = ['notes.txt', 'photo.png', 'site.tar.gz']
  const original = Object.fromEntries(names.map((n) => [n, fs.readFileSync(path.join(disk, n))]))
  t.ok(original['site.tar.gz']!.subarray(0, 2).equals(Buffer.from([0x1f, 0x8b])), 'site.tar.gz is gzip')

  await page.getByLabel('Upload files here').setInputFiles(names.map((n) => path.join(disk, n)))
  const uploads = browser.getByRole('list', { name: 'Uploads to this bucket' })
  for (const name of names) await uploads.getByRole('listitem').filter({ hasText: name }).getByText('Uploaded').waitFor()
  await browser.getByText('0 folders and 3 objects on this page').waitFor()
  t.same(await browser.locator('tbody th.name').allTextContents(), names, 'the bucket lists the three files')

  // Previews: the text's words, the picture decoded.
  await browser.getByRole('button', { name: 'Preview notes.txt' }).click()
  const dialog = page.getByRole('dialog')
  const text = dialog.getByLabel('Preview of notes.txt')
  await text.waitFor()
  t.equal(await text.textContent(), original['notes.txt']!.toString(), 'the text preview shows the file’s text')
  await dialog.getByRole('button', { name: 'Close' }).click()
  await dialog.waitFor({ state: 'detached' })

  await browser.getByRole('button', { name: 'Preview photo.png' }).click()
  const img = dialog.getByRole('img', { name: 'Preview of photo.png' })
  await img.waitFor()
  await page.waitForFunction(() => ((document.querySelector('dialog img') as HTMLImageElement | null)?.naturalWidth ?? 0) > 0, null, { timeout: 30_000 })
  t.same(await img.evaluate((i: HTMLImageElement) => [i.naturalWidth, i.naturalHeight]), [320, 200], 'the picture shows, decoded at its size')
  await dialog.getByRole('button', { name: 'Close' }).click()
  await dialog.waitFor({ state: 'detached' })

  // A tar.gz is bytes to keep, not to look at: no Preview; its name opens its details.
  const tgzRow = browser.getByRole('row').filter({ hasText: 'site.tar.gz' })
  t.equal(await tgzRow.getByRole('button', { name: /^Preview/ }).count(), 0, 'no Preview for the tar.gz')
  t.same(await tgzRow.getByRole('button').allTextContents(), ['site.tar.gz', 'Download', 'Share link'], 'its name, Download and Share link')
  const tgzType = (await tgzRow.getByRole('cell').nth(2).textContent())!
  t.match(tgzType, /^application\/(x-)?gzip$/, 'listed as gzip')
  await browser.getByRole('button', { name: 'Details of site.tar.gz' }).click()
  const details = page.getByRole('dialog', { name: 'Details of site.tar.gz' })
  const sha256 = crypto.createHash('sha256').update(original['site.tar.gz']!).digest('hex')
  await details.getByText(sha256).waitFor()
  const shown = (await details.locator('dl.details').innerText()).replace(/\s+/g, ' ')
  t.match(shown, `(${original['site.tar.gz']!.length.toLocaleString('en-US')} bytes)`, 'the details show its size in bytes')
  t.match(shown, `Content type ${tgzType}`, 'its type')
  t.match(shown, `SHA-256 ${sha256}`, 'and the SHA-256 of the file sent')
  await details.getByRole('button', { name: 'Close' }).click()
  await details.waitFor({ state: 'detached' })

  // Downloads: each file's exact bytes, under its name.
  for (const name of names) {
    const [saved] = await Promise.all([page.waitForEvent('download', { timeout: 30_000 }), browser.getByRole('button', { name: `Download ${name}` }).click()])
    t.equal(saved.suggestedFilename(), name, `${name}: saved under its name`)
    t.ok(fs.readFileSync((await saved.path())!).equals(original[name]!), `${name}: the download is the bytes uploaded`)
  }

  // Back home: the bucket with its three objects and their size.
  await browser.getByRole('button', { name: 'All buckets' }).click()
  const row = buckets.getByRole('row').filter({ hasText: 'my-files' })
  await row.getByRole('cell', { name: '3', exact: true }).waitFor()
  const total = names.reduce((n, name) => n + original[name]!.length, 0)
  await row.getByRole('cell', { name: formatBytes(total), exact: true }).waitFor()
  t.pass(`my-files: 3 objects, ${formatBytes(total)}`)

  // Stopped; then the log (what the terminal showed besides the banner) and the data dir hold no key.
  process.kill(term.pid, 'SIGTERM')
  const code = await Promise.race([term.exited, new Promise((r) => setTimeout(() => r('still running after 30 s'), 30_000))])
  t.equal(code, 0, 'coffer stops cleanly')
  const from = term.lines.findIndex((l) => l.includes('Coffer is ready'))
  const to = term.lines.findIndex((l) => l.startsWith('  set -a;'))
  t.ok(from >= 0 && to > from, 'one banner')
  const outside = [...term.lines.slice(0, from), ...term.lines.slice(to + 1)].filter((l) => l.trim() !== '')
  t.notOk(
    outside.some((l) => l.includes('Coffer is ready')),
    'shown once',
  )
  const logLines = outside.filter((l) => PRETTY.test(l))
  t.ok(
    logLines.some((l) => / method=PUT /.test(l) && l.includes('/objects?') && / statusCode=20\d/.test(l)),
    'the log has the uploads’ requests',
  )
  t.ok(
    logLines.some((l) => / method=GET /.test(l) && l.includes('/download') && / statusCode=20[06]/.test(l)),
    'and the downloads’',
  )
  for (const [what, secret] of [
    ['the API key', apiKey],
    ['the S3 secret key', secretKey],
  ] as const) {
    t.same(
      outside.filter((l) => l.includes(secret)),
      [],
      `no line of the terminal but the banner's holds ${what}`,
    )
  }
  t.same(
    logLines.flatMap((l) => findSecrets(l).map((kind) => `${kind}: ${l}`)),
    [],
    'no log line holds a credential',
  )
  fs.mkdirSync(TEST_LOG_DIR, { recursive: true })
  fs.appendFileSync(path.join(TEST_LOG_DIR, `first-run-browser-${term.pid}.log`), logLines.map((l) => `${l}\n`).join(''))
  // The data dir: the keys in the clear in first-run.env alone (the API key is kept hashed, the S3
  // secret sealed), none in its database, its blobs or a log.
  const dataDir = path.join(cwd, 'data')
  const files = filesUnder(dataDir)
  t.ok(files.includes('coffer.db') && files.includes('first-run.env'), `the data dir: ${files.join(', ')}`)
  const holding = (secret: string) => files.filter((f) => fs.readFileSync(path.join(dataDir, f)).includes(secret))
  t.same(holding(apiKey), ['first-run.env'], 'the API key is in first-run.env and in no other file of the data dir')
  t.same(holding(secretKey), ['first-run.env'], 'the S3 secret key too')
})
