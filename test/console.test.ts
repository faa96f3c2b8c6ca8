// @suites: sqlite
import t from 'tap'
import fs from 'node:fs'
import path from 'node:path'
import { CHROMIUM, launchBrowser, noisePng, screenshots, startEphemeral, textPdf, watchedPage } from './browser'
import { CONSOLE_CSP } from '../src/http/routes/console'
import { formatBytes } from '../src/console/format'
import { CreateBucketCommand, GetObjectCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3'

// The web console (#17) in a real browser: Debian's chromium driven by playwright-core, against
// the real bundle (`coffer serve --ephemeral`, which the console is compiled into).

// Installing chromium (scripts/chromium.sh) may wait for another apt run to finish: give this file
// the time then (CI installs it before the tests).
// The tenant's flow uploads, downloads and previews a dozen files: four minutes on a loaded machine.
t.setTimeout(fs.existsSync(CHROMIUM) ? 360_000 : 20 * 60_000)

const api = (base: string, key: string, p: string, init: RequestInit = {}) =>
  fetch(`${base}${p}`, { ...init, headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...init.headers } })

t.test('the console is a strict-CSP page served from the bundle, and / leads to it', async (t) => {
  const srv = await startEphemeral(t)
  const root = await fetch(`${srv.url}/`, { redirect: 'manual' })
  t.equal(root.status, 302)
  t.equal(root.headers.get('location'), '/console')
  const page = await fetch(`${srv.url}/console`)
  t.equal(page.status, 200)
  t.match(page.headers.get('content-type'), /^text\/html/)
  t.equal(page.headers.get('content-security-policy'), CONSOLE_CSP)
  t.match(CONSOLE_CSP, /^default-src 'self';.*frame-ancestors 'none'/)
  t.notMatch(CONSOLE_CSP, /unsafe-inline|unsafe-eval/)
  t.equal(page.headers.get('x-frame-options'), 'DENY')
  t.equal(page.headers.get('set-cookie'), null, 'no cookie, ever')
  const html = await page.text()
  t.notMatch(html, /<script>|<style>|\sstyle=|\son[a-z]+=/i, 'nothing inline')
  const assets = [...html.matchAll(/(?:src|href)="(\/console\/assets\/[^"]+)"/g)].map((m) => m[1]!)
  t.same(assets.map((a) => path.extname(a)).sort(), ['.css', '.js', '.svg'], 'one script, one stylesheet, one icon')
  for (const a of assets) {
    const res = await fetch(`${srv.url}${a}`)
    t.equal(res.status, 200, a)
    t.match(res.headers.get('cache-control'), /immutable/)
    t.ok((await res.text()).length > 200, `${a} has content`)
  }
  t.match(await fetch(`${srv.url}/console/assets/app-NOPE.js`).then((r) => r.json()), { error: { code: 'NOT_FOUND' } })
  t.equal((await fetch(`${srv.url}/console/`)).status, 200)
})

t.test('tenant: home is one list of buckets; a bucket name opens it; one upload button takes any type into it; previews close on Escape', async (t) => {
  const srv = await startEphemeral(t)
  const context = await launchBrowser(t)
  if (!context) return
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: srv.url })
  const key = srv.tenant.apiKey
  const s3 = new S3Client({ endpoint: srv.s3.endpoint, region: srv.s3.region, forcePathStyle: true, credentials: srv.s3 })
  t.teardown(() => s3.destroy())

  // A delivery that dies: a webhook to a closed loopback port (3 attempts within about 3 s).
  const hs = await (
    await api(srv.url, key, '/api/v1/upload/request', {
      method: 'POST',
      body: JSON.stringify({ fileType: 'image/png', fileName: 'hooked.png', webhookUrl: 'http://127.0.0.1:1/hook', context: 'hooks' }),
    })
  ).json()
  t.equal(
    (await fetch(`${srv.url}${hs.presignedUrl}`, { method: 'PUT', headers: { 'content-type': 'image/png' }, body: new Uint8Array(noisePng(16, 16)) })).status,
    200,
  )
  for (let i = 0; i < 100; i++) {
    const { deliveries } = await (await api(srv.url, key, '/api/v1/webhooks/deliveries?status=dead')).json()
    if (deliveries.length === 1) break
    await new Promise((r) => setTimeout(r, 100))
  }
  // A bucket made over S3 and a workspace made over the API: both are buckets, listed once each.
  await s3.send(new CreateBucketCommand({ Bucket: 'backups' }))
  await s3.send(new PutObjectCommand({ Bucket: 'backups', Key: 'restic/data/3f/3f9a0c7e', Body: Buffer.alloc(2048, 5) }))
  t.equal(
    (await api(srv.url, key, '/api/v1/workspaces', { method: 'POST', body: JSON.stringify({ name: 'Client photos', slug: 'client-photos' }) })).status,
    201,
  )

  const page = await watchedPage(t, context)
  const first = await page.goto(`${srv.url}/`)
  t.equal(new URL(page.url()).pathname, '/console', '/ redirects to the console')
  t.equal(first?.headers()['content-security-policy'], CONSOLE_CSP)

  await page.getByLabel('API key').fill(key)
  await page.getByRole('button', { name: 'Sign in' }).click()
  await page.getByText('Tenant: ephemeral').waitFor()
  t.same(JSON.parse((await page.evaluate(() => sessionStorage.getItem('coffer.session')))!), { key, role: 'tenant' }, 'the key is in sessionStorage')
  t.same(await context.cookies(), [], 'and no cookie exists')

  // Home: the buckets, one list, nothing else in a long scroll; a small navigation to the rest.
  const nav = page.getByRole('navigation', { name: 'Sections' })
  t.same(await nav.getByRole('button').allTextContents(), ['Buckets', 'Deleted files', 'Webhooks', 'Access keys'])
  t.equal(await nav.locator('[aria-current="page"]').textContent(), 'Buckets', 'the buckets are home')
  const buckets = page.getByRole('region', { name: 'Buckets' })
  await buckets.getByRole('row').filter({ hasText: 'client-photos' }).waitFor()
  t.same(await buckets.locator('tbody th.name button').allTextContents(), ['backups', 'client-photos'], 'every bucket once, by its bucket name')
  t.match(
    await buckets.getByRole('row').filter({ hasText: 'client-photos' }).textContent(),
    /Client photos/,
    "a workspace's display name beside its bucket name",
  )
  t.equal(await page.locator('section.card').count(), 1, 'one card on the page')
  for (const gone of ['Files', 'Upload', 'Workspaces', 'Storage', 'Webhook deliveries', 'Access keys', 'Deleted files']) {
    t.equal(await page.getByRole('region', { name: gone, exact: true }).count(), 0, `no ${gone} card on the home page`)
  }
  t.equal(await page.locator('input[type="file"]').count(), 0, 'no upload outside a bucket')
  const used0 = (await (await api(srv.url, key, '/api/v1/tenant/quota')).json()).usedBytes as number
  await page.getByText(`${formatBytes(used0)} used (no limit)`).waitFor()

  // A bucket made here; its name opens it.
  await buckets.getByLabel('New bucket name').fill('inbox')
  await buckets.getByRole('button', { name: 'Create bucket' }).click()
  await buckets.getByRole('button', { name: 'Open bucket inbox' }).click()
  const browser = page.getByRole('region', { name: /^Bucket inbox/ })
  await browser.getByText('This folder is empty.').waitFor()

  // One upload button; files of any type, each with its bar, into the bucket open.
  t.equal(await page.getByLabel(/^Upload files/).count(), 1, 'one upload button for files')
  const txt = Buffer.from('Shopping list\n- coffee\n- paper\n')
  const tgz = Buffer.concat([Buffer.from([0x1f, 0x8b, 0x08, 0x00]), Buffer.alloc(30_000, 9)])
  const png = noisePng(640, 400)
  const pdf = textPdf('Quarterly report')
  const sent: [string, string, Buffer][] = [
    ['notes.txt', 'text/plain', txt],
    ['site.tar.gz', 'application/gzip', tgz],
    ['photo.png', 'image/png', png],
    ['report.pdf', 'application/pdf', pdf],
  ]
  await page.getByLabel(/^Upload files/).setInputFiles(sent.map(([name, mimeType, buffer]) => ({ name, mimeType, buffer })))
  for (const [name, , bytes] of sent) {
    const row = browser.getByRole('list', { name: 'Uploads to this bucket' }).getByRole('listitem').filter({ hasText: name })
    await row.getByText('Uploaded').waitFor()
    const bar = row.getByRole('progressbar', { name: `Upload of ${name}` })
    t.same(await bar.evaluate((p: HTMLProgressElement) => [p.value, p.max]), [bytes.length, bytes.length], `${name}: progress reached 100%`)
  }
  await browser.getByText('0 folders and 4 objects on this page').waitFor()
  t.same(await browser.locator('tbody th.name').allTextContents(), ['notes.txt', 'photo.png', 'report.pdf', 'site.tar.gz'])
  for (const [name, type, bytes] of sent) {
    const got = await s3.send(new GetObjectCommand({ Bucket: 'inbox', Key: name }))
    t.equal(got.ContentType, type, `${name}: stored with its type`)
    t.ok(Buffer.from(await got.Body!.transformToByteArray()).equals(bytes), `${name}: S3 reads the bytes sent`)
  }
  for (const [name, , bytes] of sent.slice(0, 3)) {
    const [saved] = await Promise.all([page.waitForEvent('download'), browser.getByRole('button', { name: `Download ${name}` }).click()])
    t.equal(saved.suggestedFilename(), name)
    t.ok(fs.readFileSync((await saved.path())!).equals(bytes), `${name}: Download saves the exact bytes`)
  }
  const { usedBytes } = await (await api(srv.url, key, '/api/v1/tenant/quota')).json()
  t.equal(usedBytes, used0 + txt.length + tgz.length + png.length + pdf.length, 'all four count against the quota')
  // The fixture's tenant has no quota limit.
  await page.getByText(`${formatBytes(usedBytes)} used (no limit)`).waitFor()
  t.equal(await page.locator('#quota').evaluate((m: HTMLMeterElement) => m.value), usedBytes, 'the quota gauge shows it')

  // Previews: Escape closes them, the PDF's too with the focus inside its viewer.
  await browser.getByRole('button', { name: 'Preview photo.png' }).click()
  const img = page.getByRole('dialog').getByRole('img', { name: 'Preview of photo.png' })
  await page.waitForFunction(() => (document.querySelector('dialog img') as HTMLImageElement | null)?.naturalWidth === 640)
  t.equal(await img.evaluate((i: HTMLImageElement) => i.naturalHeight), 400, 'the image decoded')
  await page.keyboard.press('Escape')
  await page.getByRole('dialog').waitFor({ state: 'detached' })
  await browser.getByRole('button', { name: 'Preview report.pdf' }).click()
  const frame = page.getByRole('dialog').locator('iframe[title="Preview of report.pdf"]')
  t.match(await frame.getAttribute('src'), /^blob:/)
  for (let i = 0; i < 50 && !page.frames().some((f) => f.url().startsWith('chrome-extension://')); i++) await page.waitForTimeout(100)
  t.ok(
    page.frames().some((f) => f.url().startsWith('chrome-extension://')),
    "chromium's PDF viewer renders it",
  )
  await page.waitForTimeout(500)
  await frame.click()
  await page.keyboard.press('Escape')
  await page.getByRole('dialog').waitFor({ state: 'detached', timeout: 5000 })
  t.pass('Escape closes the PDF preview after a click into the PDF')
  await browser.getByRole('button', { name: 'Preview report.pdf' }).click()
  await frame.waitFor()
  await frame.evaluate((f: HTMLIFrameElement) => f.contentWindow!.focus())
  await page.keyboard.press('Escape')
  await page.getByRole('dialog').waitFor({ state: 'detached', timeout: 5000 })
  t.pass('and with the focus put in its frame')

  // Drag and drop onto the bucket's card: one more file, any type.
  const csv = 'month,spent\n1,1000\n'
  const dropped = await page.evaluateHandle((text) => {
    const dt = new DataTransfer()
    dt.items.add(new File([text], 'budget.csv', { type: 'text/csv' }))
    return dt
  }, csv)
  await browser.dispatchEvent('drop', { dataTransfer: dropped })
  await browser.getByRole('list', { name: 'Uploads to this bucket' }).getByRole('listitem').filter({ hasText: 'budget.csv' }).getByText('Uploaded').waitFor()
  await browser.getByRole('button', { name: 'Details of budget.csv' }).waitFor()
  t.equal(await (await s3.send(new GetObjectCommand({ Bucket: 'inbox', Key: 'budget.csv' }))).Body!.transformToString(), csv, 'a dropped file is stored')

  // A share link with a chosen lifetime opens without a key.
  await browser.getByLabel('Link lifetime').selectOption({ label: '5 minutes' })
  const before = Date.now()
  await browser.getByRole('button', { name: 'Share link to photo.png' }).click()
  await browser.getByRole('status').getByText('Link copied').waitFor()
  const link = await browser.getByRole('textbox', { name: 'Share link' }).inputValue()
  t.equal(await page.evaluate(() => navigator.clipboard.readText()), link, 'the link is on the clipboard')
  const expires = Number(new URL(link).searchParams.get('expires'))
  t.ok(expires >= before + 299_000 && expires <= Date.now() + 301_000, 'valid for the chosen 5 minutes')
  t.ok(Buffer.from(await (await fetch(link)).arrayBuffer()).equals(png), 'the link serves the exact bytes')

  // Back home: the bucket's count; its settings (display name, quota) in its row.
  await browser.getByRole('button', { name: 'All buckets' }).click()
  await buckets.getByRole('row').filter({ hasText: 'inbox' }).getByRole('cell', { name: '5', exact: true }).waitFor()
  await buckets.getByRole('button', { name: 'Settings of bucket client-photos' }).click()
  await buckets.getByLabel('Display name').fill('Client archive')
  await buckets.getByLabel('Quota').fill('1 GiB')
  await buckets.getByRole('button', { name: 'Save' }).click()
  await buckets.getByText('Client archive').waitFor()
  const { workspaces } = await (await api(srv.url, key, '/api/v1/workspaces')).json()
  t.match(
    workspaces.find((w: { slug: string }) => w.slug === 'client-photos'),
    { name: 'Client archive', quotaBytes: 2 ** 30 },
  )
  await screenshots(t, page, 'console-tenant', { until: buckets })

  // The other places, one at a time: the dead webhook delivery is retried there.
  await nav.getByRole('button', { name: 'Webhooks' }).click()
  t.equal(await buckets.count(), 0, 'one section at a time')
  const hooks = page.getByRole('region', { name: 'Webhook deliveries' })
  await hooks.getByText('dead').waitFor()
  await hooks.getByRole('button', { name: /^Retry delivery / }).click()
  await hooks.getByRole('button', { name: /^Retry delivery / }).waitFor({ state: 'detached' })
  t.equal(await hooks.locator('.status').first().textContent(), 'pending', 'retried: pending again')
  await page.reload()
  await hooks.waitFor()
  t.pass('a reload stays in the section')
  await nav.getByRole('button', { name: 'Deleted files' }).click()
  await page.getByRole('region', { name: 'Deleted files' }).getByText('No deleted files with versions').waitFor()
  await nav.getByRole('button', { name: 'Buckets' }).click()
  await buckets.waitFor()

  await page.getByRole('button', { name: 'Sign out' }).click()
  await page.getByLabel('API key').waitFor()
  t.equal(await page.evaluate(() => sessionStorage.getItem('coffer.session')), null, 'signing out forgets the key')
})

t.test('admin: tenants with usage, create one, change its quota and types, regenerate its key, delete it', async (top) => {
  const srv = await startEphemeral(top)
  const listing = await api(srv.url, srv.adminApiKey, '/api/v1/admin/tenants?limit=1')
  top.equal(listing.status, 200, 'the admin tenant listing the view is built on answers')
  await top.test('in the browser', async (t) => {
    const context = await launchBrowser(t)
    if (!context) return
    const page = await watchedPage(t, context)
    // Some usage to show: a file of the ephemeral tenant.
    const png = noisePng(300, 200)
    const hs = await (
      await api(srv.url, srv.tenant.apiKey, '/api/v1/upload/request', { method: 'POST', body: JSON.stringify({ fileType: 'image/png', fileName: 'a.png' }) })
    ).json()
    t.equal((await fetch(`${srv.url}${hs.presignedUrl}`, { method: 'PUT', headers: { 'content-type': 'image/png' }, body: new Uint8Array(png) })).status, 200)
    await page.goto(`${srv.url}/console`)

    await page.getByLabel('API key').fill('not-the-admin-key-0123456789')
    await page.getByRole('button', { name: 'Sign in' }).click()
    await page.getByRole('alert').filter({ hasText: 'neither a tenant API key nor the admin key' }).waitFor()
    t.pass('a wrong key gets a readable message')
    // Keyboard only: type the key, Enter submits.
    await page.getByLabel('API key').fill(srv.adminApiKey)
    await page.getByLabel('API key').press('Enter')
    await page.getByRole('heading', { name: 'Coffer admin' }).waitFor()
    const tenants = page.getByRole('region', { name: 'Tenants' })
    await tenants
      .getByRole('row')
      .filter({ hasText: 'ephemeral' })
      .getByText(`${formatBytes(png.length)} used (no limit)`)
      .waitFor()
    t.pass('tenants are listed with their usage')

    const form = page.getByRole('region', { name: 'New tenant' })
    await form.getByLabel('Tenant name').fill('acme')
    await form.getByLabel('Quota').fill('1 GiB')
    await form.getByLabel('image/gif').uncheck()
    await form.getByRole('button', { name: 'Create tenant' }).click()
    const shown = page.getByRole('dialog', { name: 'Tenant acme created' })
    const apiKey = await shown.getByLabel('New API key', { exact: true }).inputValue()
    t.match(apiKey, /^sk_live_/, 'the new key is shown once')
    t.equal((await api(srv.url, apiKey, '/api/v1/tenant/info')).status, 200, 'and it works')
    await shown.getByRole('button', { name: 'Done' }).click()
    const row = tenants.getByRole('row').filter({ hasText: 'acme' })
    await row.getByText('0 B of 1 GiB').waitFor()
    t.notMatch(await page.content(), apiKey, 'and is gone from the page once dismissed')
    const { tenants: listed } = await (await api(srv.url, srv.adminApiKey, '/api/v1/admin/tenants')).json()
    const acme = listed.find((x: { name: string }) => x.name === 'acme')
    t.match(acme, { quotaBytes: 2 ** 30, allowedFileTypes: ['image/jpeg', 'image/png', 'image/webp', 'image/avif', 'application/pdf'] })

    await row.getByRole('button', { name: 'Edit tenant acme' }).click()
    const edit = page.getByRole('dialog', { name: 'Edit acme' })
    await edit.getByLabel('Quota').fill('2 GiB')
    await edit.getByLabel('image/gif').check()
    await edit.getByRole('button', { name: 'Save' }).click()
    await row.getByText('0 B of 2 GiB').waitFor()
    t.match(
      await (await api(srv.url, srv.adminApiKey, `/api/v1/admin/tenants/${acme.id}`)).json(),
      { quotaBytes: 2 ** 31, allowedFileTypes: ['image/jpeg', 'image/png', 'image/webp', 'image/gif', 'image/avif', 'application/pdf'] },
      'quota and types changed on the server',
    )
    await screenshots(t, page, 'console-admin', { fullPage: true })

    await row.getByRole('button', { name: 'Regenerate key of acme' }).click()
    await page.getByRole('dialog').getByRole('button', { name: 'Regenerate key' }).click()
    const newKey = await page.getByRole('dialog', { name: 'New key for acme' }).getByLabel('New API key', { exact: true }).inputValue()
    t.not(newKey, apiKey)
    t.equal((await api(srv.url, apiKey, '/api/v1/tenant/info')).status, 401, 'the old key stops working')
    t.equal((await api(srv.url, newKey, '/api/v1/tenant/info')).status, 200, 'the new one works')
    await page.getByRole('button', { name: 'Done' }).click()

    await row.getByRole('button', { name: 'Delete tenant acme' }).click()
    await page.getByRole('dialog').getByRole('button', { name: 'Delete tenant' }).click()
    await row.waitFor({ state: 'detached' })
    t.equal((await api(srv.url, srv.adminApiKey, `/api/v1/admin/tenants/${acme.id}`)).status, 404, 'deleted on the server')

    await page.getByRole('button', { name: 'Sign out' }).click()
    await page.getByLabel('API key').waitFor()
    t.equal(await page.evaluate(() => sessionStorage.getItem('coffer.session')), null)
  })
})
