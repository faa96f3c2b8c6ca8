import t from 'tap'
import fs from 'node:fs'
import path from 'node:path'
import { CHROMIUM, launchBrowser, noisePng, screenshots, startEphemeral, textPdf, watchedPage } from './browser'
import { CONSOLE_CSP } from '../src/http/routes/console'
import { formatBytes } from '../src/console/format'

// The web console (#17) in a real browser: Debian's chromium driven by playwright-core, against
// the real bundle (`coffer serve --ephemeral`, which the console is compiled into).

// Installing chromium (scripts/chromium.sh) may wait for another apt run to finish: give this file
// the time then (CI installs it before the tests).
if (!fs.existsSync(CHROMIUM)) t.setTimeout(20 * 60_000)

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

t.test('tenant: sign in, upload two files, preview, copy a link and open it, delete, sign out', async (t) => {
  const srv = await startEphemeral(t)
  const context = await launchBrowser(t)
  if (!context) return
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: srv.url })
  const key = srv.tenant.apiKey

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

  const page = await watchedPage(t, context)
  const first = await page.goto(`${srv.url}/`)
  t.equal(new URL(page.url()).pathname, '/console', '/ redirects to the console')
  t.equal(first?.headers()['content-security-policy'], CONSOLE_CSP)

  await page.getByLabel('API key').fill(key)
  await page.getByRole('button', { name: 'Sign in' }).click()
  await page.getByText('Tenant: ephemeral').waitFor()
  t.same(JSON.parse((await page.evaluate(() => sessionStorage.getItem('coffer.session')))!), { key, role: 'tenant' }, 'the key is in sessionStorage')
  t.same(await context.cookies(), [], 'and no cookie exists')

  // Two files at once through the file input; each bar is driven by XHR upload progress.
  const png = noisePng(640, 400)
  const pdf = textPdf('Quarterly report')
  await page.getByLabel('Upload files').setInputFiles([
    { name: 'photo.png', mimeType: 'image/png', buffer: png },
    { name: 'report.pdf', mimeType: 'application/pdf', buffer: pdf },
  ])
  for (const [name, size] of [
    ['photo.png', png.length],
    ['report.pdf', pdf.length],
  ] as const) {
    const row = page.getByRole('list', { name: 'Uploads' }).getByRole('listitem').filter({ hasText: name })
    await row.getByText('Uploaded').waitFor()
    const bar = row.getByRole('progressbar', { name: `Upload of ${name}` })
    t.same(await bar.evaluate((p: HTMLProgressElement) => [p.value, p.max]), [size, size], `${name}: progress reached 100% (${size} bytes)`)
  }
  // A refused upload says why, in the API's words.
  await page.getByLabel('Upload files').setInputFiles([{ name: 'notes.txt', mimeType: 'text/plain', buffer: Buffer.from('hello') }])
  await page
    .getByRole('list', { name: 'Uploads' })
    .getByRole('listitem')
    .filter({ hasText: 'notes.txt' })
    .getByText('File type "text/plain" is not allowed')
    .waitFor()
  t.pass('an upload the API refuses shows its message')
  const files = page.getByRole('table').filter({ hasText: 'photo.png' })
  await files.getByRole('row').filter({ hasText: 'report.pdf' }).waitFor()
  t.match(await files.locator('caption').textContent(), /^3 files$/)
  const listed = (await (await api(srv.url, key, '/api/v1/files')).json()).files as { id: string; originalName: string; sizeBytes: number }[]
  const photo = listed.find((f) => f.originalName === 'photo.png')!
  const report = listed.find((f) => f.originalName === 'report.pdf')!
  t.equal(photo.sizeBytes, png.length, 'stored whole')
  const { usedBytes } = await (await api(srv.url, key, '/api/v1/tenant/quota')).json()
  t.ok(usedBytes > png.length + pdf.length, 'both count against the quota')
  // The fixture's tenant has no quota limit.
  await page.getByText(/^[\d.]+ [KM]iB used \(no limit\)$/).waitFor()
  t.equal(await page.locator('#quota').evaluate((m: HTMLMeterElement) => m.value), usedBytes, 'the quota gauge shows it')

  // Previews: fetched with the key, shown from blob: URLs under the page's CSP.
  await page.getByRole('button', { name: 'Preview photo.png' }).click()
  const img = page.getByRole('dialog').getByRole('img', { name: 'Preview of photo.png' })
  await img.waitFor()
  await page.waitForFunction(() => (document.querySelector('dialog img') as HTMLImageElement | null)?.complete)
  t.same(await img.evaluate((i: HTMLImageElement) => [i.naturalWidth, i.naturalHeight, i.src.startsWith('blob:')]), [640, 400, true], 'the image decoded')
  await page.keyboard.press('Escape')
  await page.getByRole('dialog').waitFor({ state: 'detached' })
  await page.getByRole('button', { name: 'Preview report.pdf' }).click()
  const frame = page.getByRole('dialog').locator('iframe[title="Preview of report.pdf"]')
  t.match(await frame.getAttribute('src'), /^blob:/)
  await page.waitForFunction(() => true)
  for (let i = 0; i < 50 && !page.frames().some((f) => f.url().startsWith('chrome-extension://')); i++) await page.waitForTimeout(100)
  t.ok(
    page.frames().some((f) => f.url().startsWith('chrome-extension://')),
    "chromium's PDF viewer renders it",
  )
  await page.getByRole('dialog').getByRole('button', { name: 'Close' }).click()

  // Download: the browser saves the exact bytes under the file's name.
  const [saved] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: 'Download report.pdf' }).click()])
  t.equal(saved.suggestedFilename(), 'report.pdf')
  t.ok(fs.readFileSync((await saved.path())!).equals(pdf), 'Download saves the exact bytes')

  // Drag and drop onto the Upload card.
  const dropped = await page.evaluateHandle(
    (bytes) => {
      const dt = new DataTransfer()
      dt.items.add(new File([new Uint8Array(bytes)], 'dropped.pdf', { type: 'application/pdf' }))
      return dt
    },
    [...pdf],
  )
  await page.getByRole('region', { name: 'Upload' }).dispatchEvent('drop', { dataTransfer: dropped })
  await page.getByRole('list', { name: 'Uploads' }).getByRole('listitem').filter({ hasText: 'dropped.pdf' }).getByText('Uploaded').waitFor()
  await files.getByRole('row').filter({ hasText: 'dropped.pdf' }).waitFor()
  t.pass('a dropped file is uploaded and listed')

  // Copy link with a chosen lifetime, then open the link in a fresh tab: the file downloads.
  await page.getByLabel('Link lifetime').selectOption({ label: '5 minutes' })
  const before = Date.now()
  await page.getByRole('button', { name: 'Copy link to photo.png' }).click()
  await page.getByRole('status').getByText('Link copied').waitFor()
  const link = await page.getByLabel('Signed link').inputValue()
  t.equal(await page.evaluate(() => navigator.clipboard.readText()), link, 'the link is on the clipboard')
  const expires = Number(new URL(link).searchParams.get('expires'))
  t.ok(expires >= before + 299_000 && expires <= Date.now() + 301_000, 'valid for the chosen 5 minutes')
  const tab = await context.newPage()
  const [download] = await Promise.all([tab.waitForEvent('download'), tab.goto(link).catch(() => undefined)])
  t.equal(download.suggestedFilename(), 'photo.png')
  t.ok(fs.readFileSync((await download.path())!).equals(png), 'the link downloads the exact bytes')
  await tab.close()

  // The dead webhook delivery is listed and can be retried.
  const hooks = page.getByRole('region', { name: 'Webhook deliveries' })
  await hooks.getByRole('button', { name: 'Refresh deliveries' }).click()
  await hooks.getByText('dead').waitFor()
  await hooks.getByRole('button', { name: /^Retry delivery / }).click()
  await hooks.getByRole('button', { name: /^Retry delivery / }).waitFor({ state: 'detached' })
  t.equal(await hooks.locator('.status').first().textContent(), 'pending', 'retried: pending again')

  // Workspaces: create, rename.
  const ws = page.getByRole('region', { name: 'Workspaces' })
  await ws.getByLabel('New workspace name').fill('Client photos')
  await ws.getByLabel('Quota').fill('1 GiB')
  await ws.getByRole('button', { name: 'Create workspace' }).click()
  await ws.getByRole('button', { name: 'Edit workspace Client photos' }).click()
  await ws.getByLabel('Name', { exact: true }).fill('Client archive')
  await ws.getByRole('button', { name: 'Save' }).click()
  await ws.getByText('Client archive').waitFor()
  const { workspaces } = await (await api(srv.url, key, '/api/v1/workspaces')).json()
  t.match(workspaces, [{ name: 'Client archive', slug: 'client-photos', quotaBytes: 2 ** 30 }])

  await screenshots(t, page, 'console-tenant', { until: page.getByRole('region', { name: 'Files', exact: true }) })

  // Delete, confirmed in a dialog.
  await page.getByRole('button', { name: 'Delete report.pdf' }).click()
  await page.getByRole('dialog').getByRole('button', { name: 'Delete' }).click()
  await files.getByRole('row').filter({ hasText: 'report.pdf' }).waitFor({ state: 'detached' })
  t.equal((await api(srv.url, key, `/api/v1/files/${report.id}`)).status, 404, 'deleted on the server')
  t.equal((await api(srv.url, key, `/api/v1/files/${photo.id}`)).status, 200, 'the other one stays')

  // Filters: by context, by workspace; paging by the API's cursor (20 a page).
  for (let i = 0; i < 21; i++) {
    const h = await (
      await api(srv.url, key, '/api/v1/upload/request', {
        method: 'POST',
        body: JSON.stringify({ fileType: 'application/pdf', fileName: `bulk-${i}.pdf`, context: 'bulk' }),
      })
    ).json()
    t.equal(
      (await fetch(`${srv.url}${h.presignedUrl}`, { method: 'PUT', headers: { 'content-type': 'application/pdf' }, body: new Uint8Array(pdf) })).status,
      200,
    )
  }
  const filesRegion = page.getByRole('region', { name: 'Files', exact: true })
  await filesRegion.getByLabel('Context').fill('bulk')
  await filesRegion.getByRole('button', { name: 'Filter' }).click()
  await filesRegion.getByText('21 files').waitFor()
  t.equal(await filesRegion.locator('tbody tr').count(), 20, 'a first page of 20')
  await filesRegion.getByRole('button', { name: 'Next page' }).click()
  await filesRegion.locator('tbody tr').filter({ hasText: 'bulk-0.pdf' }).waitFor()
  t.equal(await filesRegion.locator('tbody tr').count(), 1, 'the 21st on the next page')
  t.ok(await filesRegion.getByRole('button', { name: 'Next page' }).isDisabled(), 'and no page after it')
  await filesRegion.getByRole('button', { name: 'Previous page' }).click()
  await filesRegion.locator('tbody tr').filter({ hasText: 'bulk-20.pdf' }).waitFor()
  await filesRegion.getByLabel('Context').fill('')
  await filesRegion.getByLabel('Workspace').selectOption({ label: 'Client archive' })
  await filesRegion.getByRole('button', { name: 'Filter' }).click()
  await filesRegion.getByText('0 files').waitFor()
  await filesRegion.getByText('No files match the filter.').waitFor()
  await filesRegion.getByLabel('Workspace').selectOption({ label: 'All workspaces' })
  await filesRegion.getByRole('button', { name: 'Filter' }).click()
  await filesRegion.getByText('24 files').waitFor()
  t.pass('filtered by context and by workspace')

  await ws.getByRole('button', { name: 'Delete workspace Client archive' }).click()
  await page.getByRole('dialog').getByRole('button', { name: 'Delete workspace' }).click()
  await ws.getByRole('button', { name: 'Delete workspace Client archive' }).waitFor({ state: 'detached' })
  t.same((await (await api(srv.url, key, '/api/v1/workspaces')).json()).workspaces, [], 'workspace deleted')

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
