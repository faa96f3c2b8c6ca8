// @suites: sqlite
// The console's tenant forms offer the server's file types (--file-types): one checkbox per type it
// supports (the spec's six, then the operator's), and "Any type (*)" when it takes any. What is
// ticked is what the admin API then stores; a tenant whose list is ['*'] shows Any ticked and keeps
// ['*'] when saved unchanged; the tenants table says 'all' for the server's whole list and 'any'
// for ['*']. In Debian's chromium, against the real bundle.
import fs from 'node:fs'
import t, { type Test } from 'tap'
import type { Locator } from 'playwright-core'
import { CHROMIUM, launchBrowser, startEphemeral, watchedPage, type Ephemeral } from './browser'

if (!fs.existsSync(CHROMIUM)) t.setTimeout(20 * 60_000)

const SIX = ['image/jpeg', 'image/png', 'image/webp', 'image/gif', 'image/avif', 'application/pdf']

const api = (srv: Ephemeral, p: string, init: RequestInit = {}) =>
  fetch(`${srv.url}${p}`, { ...init, headers: { authorization: `Bearer ${srv.adminApiKey}`, 'content-type': 'application/json', ...init.headers } })
const tenant = async (srv: Ephemeral, id: string) => {
  const res = await api(srv, `/api/v1/admin/tenants/${id}`)
  if (res.status !== 200) throw new Error(`GET tenant ${id}: ${res.status}`)
  return (await res.json()) as { name: string; allowedFileTypes: string[]; quotaBytes: number }
}
const createTenant = async (srv: Ephemeral, body: object) => {
  const res = await api(srv, '/api/v1/admin/tenants', { method: 'POST', body: JSON.stringify(body) })
  if (res.status !== 201) throw new Error(`POST tenant: ${res.status} ${await res.text()}`)
  return (await res.json()) as { id: string; name: string }
}

/** The labels of a form's file-type checkboxes, in order, with whether each is ticked and enabled. */
const checkboxes = (fieldset: Locator) =>
  fieldset.locator('label').evaluateAll((labels) =>
    labels.map((l) => {
      const input = l.querySelector('input')!
      return `${l.textContent!.trim()}${input.checked ? ' [x]' : ' [ ]'}${input.disabled ? ' disabled' : ''}`
    }),
  )

async function signIn(t: Test, srv: Ephemeral) {
  const context = await launchBrowser(t)
  if (!context) return null
  const page = await watchedPage(t, context)
  await page.goto(`${srv.url}/console`)
  await page.getByLabel('API key').fill(srv.adminApiKey)
  // The forms take the server's types from the overview: wait for its answer.
  await Promise.all([page.waitForResponse((r) => r.url().includes('/api/v1/admin/overview')), page.getByLabel('API key').press('Enter')])
  return page
}
t.test('--file-types text/plain,application/zip: the forms offer the extra types, and what is ticked is stored', async (t) => {
  const srv = await startEphemeral(t, ['--file-types', 'text/plain,application/zip'])
  const whole = [...SIX, 'text/plain', 'application/zip']
  const six = await createTenant(srv, { name: 'sixonly', allowedFileTypes: SIX })
  const page = await signIn(t, srv)
  if (!page) return

  const form = page.getByRole('region', { name: 'New tenant' })
  const types = form.getByRole('group', { name: 'Allowed file types' })
  await types.getByLabel('application/zip').waitFor()
  t.same(
    await checkboxes(types),
    whole.map((x) => `${x} [x]`),
    'the new tenant form: the six, then the operator’s two, all ticked (the server’s default), no Any choice',
  )

  // The tenants table: the whole list is 'all', the six alone are listed.
  const tenants = page.getByRole('region', { name: 'Tenants' })
  const typesCell = (name: string) => tenants.getByRole('row').filter({ hasText: name }).locator('td[data-label="Allowed types"]')
  await tenants.getByRole('row').filter({ hasText: 'sixonly' }).waitFor()
  t.equal(await typesCell('ephemeral').textContent(), 'all', "the tenant with the server's whole list")
  t.equal(await typesCell('sixonly').textContent(), SIX.join(', '), 'the six are not all on this server')

  // Create with the default: every supported type.
  await form.getByLabel('Tenant name').fill('everything')
  await form.getByRole('button', { name: 'Create tenant' }).click()
  await page.getByRole('dialog', { name: 'Tenant everything created' }).getByRole('button', { name: 'Done' }).click()
  const listed = (await (await api(srv, '/api/v1/admin/tenants')).json()) as { tenants: { id: string; name: string; allowedFileTypes: string[] }[] }
  t.same(listed.tenants.find((x) => x.name === 'everything')?.allowedFileTypes, whole, 'created with all of them')

  // Create with text/plain and a PNG only.
  await form.getByLabel('Tenant name').fill('texts')
  for (const x of whole) if (x !== 'text/plain' && x !== 'image/png') await types.getByLabel(x, { exact: true }).uncheck()
  await form.getByRole('button', { name: 'Create tenant' }).click()
  await page.getByRole('dialog', { name: 'Tenant texts created' }).getByRole('button', { name: 'Done' }).click()
  const texts = ((await (await api(srv, '/api/v1/admin/tenants')).json()) as typeof listed).tenants.find((x) => x.name === 'texts')!
  t.same(texts.allowedFileTypes, ['image/png', 'text/plain'], 'text/plain stored as ticked')
  await typesCell('texts').filter({ hasText: 'image/png, text/plain' }).waitFor()

  // Edit the six-only tenant: tick text/plain, save, and the admin API has it.
  await tenants.getByRole('button', { name: 'Edit tenant sixonly' }).click()
  const edit = page.getByRole('dialog', { name: 'Edit sixonly' })
  const editTypes = edit.getByRole('group', { name: 'Allowed file types' })
  t.same(await checkboxes(editTypes), [...SIX.map((x) => `${x} [x]`), 'text/plain [ ]', 'application/zip [ ]'], 'the editor shows the tenant’s ticks')
  await editTypes.getByLabel('text/plain').check()
  await edit.getByRole('button', { name: 'Save' }).click()
  await edit.waitFor({ state: 'detached' })
  t.same((await tenant(srv, six.id)).allowedFileTypes, [...SIX, 'text/plain'], 'text/plain added on the server')
  await typesCell('sixonly').filter({ hasText: 'text/plain' }).waitFor()
})

t.test('--file-types "*": an Any choice; a tenant with ["*"] shows it ticked and keeps ["*"] when saved unchanged', async (t) => {
  const srv = await startEphemeral(t, ['--file-types', '*'])
  const anyTenant = await createTenant(srv, { name: 'anything', allowedFileTypes: ['*'] })
  const some = await createTenant(srv, { name: 'somecsv', allowedFileTypes: ['image/png', 'text/csv'] })
  const page = await signIn(t, srv)
  if (!page) return

  const form = page.getByRole('region', { name: 'New tenant' })
  const types = form.getByRole('group', { name: 'Allowed file types' })
  await types.getByLabel('Any type (*)').waitFor()
  t.same(
    await checkboxes(types),
    ['Any type (*) [x]', ...SIX.map((x) => `${x} [x] disabled`)],
    "the new tenant form: Any ticked (the server's default), the six covered by it",
  )

  const tenants = page.getByRole('region', { name: 'Tenants' })
  const typesCell = (name: string) => tenants.getByRole('row').filter({ hasText: name }).locator('td[data-label="Allowed types"]')
  await tenants.getByRole('row').filter({ hasText: 'somecsv' }).waitFor()
  t.equal(await typesCell('anything').textContent(), 'any')
  t.equal(await typesCell('somecsv').textContent(), 'image/png, text/csv')

  // The ['*'] tenant: Any ticked; saved with only a new name, its list stays ['*'].
  await tenants.getByRole('button', { name: 'Edit tenant anything' }).click()
  let edit = page.getByRole('dialog', { name: 'Edit anything' })
  t.same(await checkboxes(edit.getByRole('group', { name: 'Allowed file types' })), ['Any type (*) [x]', ...SIX.map((x) => `${x} [x] disabled`)])
  await edit.getByLabel('Name').fill('anything2')
  await edit.getByRole('button', { name: 'Save' }).click()
  await edit.waitFor({ state: 'detached' })
  await tenants.getByRole('row').filter({ hasText: 'anything2' }).waitFor()
  t.match(await tenant(srv, anyTenant.id), { name: 'anything2', allowedFileTypes: ['*'] }, 'renamed, still any type')

  // A tenant with a type beyond the six: the editor shows it ticked; ticking Any stores ['*'].
  await tenants.getByRole('button', { name: 'Edit tenant somecsv' }).click()
  edit = page.getByRole('dialog', { name: 'Edit somecsv' })
  const editTypes = edit.getByRole('group', { name: 'Allowed file types' })
  t.same(await checkboxes(editTypes), ['Any type (*) [ ]', ...SIX.map((x) => `${x} ${x === 'image/png' ? '[x]' : '[ ]'}`), 'text/csv [x]'])
  await editTypes.getByLabel('Any type (*)').check()
  await edit.getByRole('button', { name: 'Save' }).click()
  await edit.waitFor({ state: 'detached' })
  t.same((await tenant(srv, some.id)).allowedFileTypes, ['*'], 'Any stored as ["*"]')
  await typesCell('somecsv').filter({ hasText: /^any$/ }).waitFor()

  // Unticking Any leaves the listed types ticked: saved, they are the tenant's list.
  await tenants.getByRole('button', { name: 'Edit tenant somecsv' }).click()
  edit = page.getByRole('dialog', { name: 'Edit somecsv' })
  await edit.getByLabel('Any type (*)').uncheck()
  await edit.getByLabel('application/pdf').uncheck()
  await edit.getByRole('button', { name: 'Save' }).click()
  await edit.waitFor({ state: 'detached' })
  t.same((await tenant(srv, some.id)).allowedFileTypes, SIX.slice(0, 5), 'the five left ticked')
})
