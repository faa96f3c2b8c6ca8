// @suites: pg-all
import t from 'tap'
import { buildBundle, createTenantOverHttp, runCoffer, startCoffer } from './process-helper'
import path from 'node:path'
import { fileBytes, tempDir, TEST_DATABASE, testDatabaseEnv } from './helper'
import { CLAIM_MS } from '../src/webhooks/scheduler'
import { startReceiver } from './webhook-receiver'

buildBundle()

const ADMIN = 'restart-admin-key-0123456789'

t.test('an event whose delivery was interrupted by SIGKILL is delivered after a restart, with the same webhook-id', async (t) => {
  const cwd = tempDir(t)
  // On PostgreSQL (COFFER_TEST_DATABASE=postgres) the server and the commands share the dir's schema.
  const dbEnv = await testDatabaseEnv(t, path.join(cwd, 'data'))
  const env = { ...dbEnv, COFFER_ADMIN_API_KEY: ADMIN, COFFER_WEBHOOK_ALLOW_PRIVATE: 'true' }
  // The receiver fails the first attempt; the process is killed before the retry (due 1 s later).
  const receiver = await startReceiver(t, [503, 200])
  let server = await startCoffer(['serve', '--port', '0', '--data-dir', 'data'], { cwd, env })
  t.teardown(() => void server.child.kill('SIGKILL'))
  const { auth } = await createTenantOverHttp(server.url, ADMIN, { name: 'hooks' })
  const hs = (await (
    await fetch(`${server.url}/api/v1/upload/request`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ fileType: 'image/png', fileName: 'a.png', webhookUrl: receiver.url }),
    })
  ).json()) as { presignedUrl: string; fileId: string }
  const put = await fetch(`${server.url}${hs.presignedUrl}`, {
    method: 'PUT',
    headers: { 'content-type': 'image/png' },
    body: new Uint8Array(fileBytes('image/png', 500)),
  })
  t.equal(put.status, 200)
  await receiver.waitFor(1)
  server.child.kill('SIGKILL')
  t.equal(await server.exited, 'SIGKILL')
  const pendingAfterKill = JSON.parse(runCoffer(['webhooks', 'list', '--json', '--data-dir', 'data'], { cwd, env: dbEnv }).stdout) as {
    status: string
    attempts: number
  }[]
  // The kill may land before or after the failed attempt was recorded; either way it is undelivered.
  t.equal(pendingAfterKill.length, 1)
  t.equal(pendingAfterKill[0]!.status, 'pending', 'undelivered after the kill')
  t.ok(pendingAfterKill[0]!.attempts <= 1)
  t.equal(receiver.received.length, 1, 'the retry had not happened before the kill')

  server = await startCoffer(['serve', '--port', '0', '--data-dir', 'data'], { cwd, env })
  // On PostgreSQL a start clears no other node's claim (#30): the killed one's lapses after CLAIM_MS.
  await receiver.waitFor(2, TEST_DATABASE === 'postgres' ? CLAIM_MS + 15_000 : 10_000)
  const [first, second] = receiver.received
  t.equal(second!.headers['webhook-id'], first!.headers['webhook-id'], 'the same webhook-id, so the receiver can deduplicate')
  t.equal(JSON.parse(second!.body).fileId, hs.fileId)
  await new Promise((r) => setTimeout(r, 200))
  const after = JSON.parse(runCoffer(['webhooks', 'list', '--json', '--data-dir', 'data'], { cwd, env: dbEnv }).stdout) as {
    status: string
    attempts: number
  }[]
  t.match(after, [{ status: 'delivered' }])
  server.child.kill('SIGTERM')
  t.equal(await server.exited, 0)
})
