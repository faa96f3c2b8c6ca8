import t from 'tap'
import { PassThrough } from 'node:stream'
import { webhooksCommand } from '../src/cli/webhooks'
import { tenantCommand } from '../src/cli/tenant'
import { loadConfig } from '../src/config'
import { createCore } from '../src/core'
import { tempDir } from './helper'

// #12 item 8: whatever a stored string holds (rows written before the handshake refused control
// characters, or by hand), the CLI's tables never print it raw: no terminal escapes, no forged rows.

t.test('webhooks list and tenant list escape control and bidi characters', async (t) => {
  const dir = tempDir(t)
  const core = createCore(loadConfig({}, { 'data-dir': dir }))
  const { tenant } = core.tenants.create({ name: 'plain' })
  // Legacy rows, as an older version accepted them.
  core.db.prepare('UPDATE tenants SET name = ? WHERE id = ?').run('evil\u001b[2J\u202eeman', tenant.id)
  core.outbox.insert({
    id: 'msg_legacy',
    tenantId: tenant.id,
    fileId: '01890000-0000-7000-8000-000000000000',
    event: 'file.uploaded',
    url: 'https://example.com/a\u001b[31m\r\n01890000-0000-7000-8000-00000000dead  file.uploaded  delivered',
    payload: '{}',
    now: Date.now(),
  })
  core.close()
  const stdout = new PassThrough()
  const io = { env: { COFFER_DATA_DIR: dir }, stdout, stderr: new PassThrough() }
  t.equal(await webhooksCommand(['list'], io), 0)
  t.equal(await tenantCommand(['list'], io), 0)
  const out = (stdout.read() as Buffer).toString('utf8')
  // eslint-disable-next-line no-control-regex -- the point: no control character may appear
  t.notMatch(out, /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u202a-\u202e]/, 'no raw control or bidi character reaches the terminal')
  t.match(out, 'https://example.com/a\\u{1b}[31m\\u{d}\\u{a}01890000', 'shown escaped')
  t.match(out, 'evil\\u{1b}[2J\\u{202e}eman')
  t.equal(out.trimEnd().split('\n').length, 4, 'two headers and two rows: no forged row')
})
