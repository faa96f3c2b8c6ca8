// @suites: sqlite
import t from 'tap'
import fs from 'node:fs'
import path from 'node:path'
import { makeApp, tempDir } from './helper'
import { BUNDLE, buildBundle, startCoffer } from './process-helper'

const DIST = path.dirname(require.resolve('swagger-ui-dist/package.json'))

t.test('GET /docs: Swagger UI on the generated OpenAPI document, every asset from this server', async (t) => {
  const { app } = await makeApp(t)
  const page = await app.inject({ url: '/docs' })
  t.equal(page.statusCode, 200)
  t.equal(page.headers['content-type'], 'text/html; charset=utf-8')
  t.match(page.headers['content-security-policy'], /default-src 'self'/)
  t.match(page.headers['content-security-policy'], /script-src 'self'(;|$)/, 'no inline or remote script')
  const refs = [...page.body.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]!)
  t.same(refs.sort(), ['docs/favicon-32x32.png', 'docs/init.js', 'docs/swagger-ui-bundle.js', 'docs/swagger-ui.css'])
  t.notMatch(page.body, /https?:\/\//, 'no CDN, no absolute URL')
  for (const ref of refs) {
    // Relative to /docs, as a browser resolves it.
    const url = new URL(ref, 'http://x/docs').pathname
    const res = await app.inject({ url })
    t.equal(res.statusCode, 200, url)
    const name = path.basename(url)
    if (name !== 'init.js') t.ok(res.rawPayload.equals(fs.readFileSync(path.join(DIST, name))), `${name} is swagger-ui-dist's`)
  }
  t.equal((await app.inject({ url: '/docs/swagger-ui.css' })).headers['content-type'], 'text/css; charset=utf-8')
  t.equal((await app.inject({ url: '/docs/swagger-ui-bundle.js' })).headers['content-type'], 'text/javascript; charset=utf-8')
  const init = await app.inject({ url: '/docs/init.js' })
  t.match(init.body, /url: 'openapi\.json'/, 'the UI loads this server’s document')
  t.equal(new URL('openapi.json', 'http://x/docs').pathname, '/openapi.json')
  t.equal((await app.inject({ url: '/openapi.json' })).statusCode, 200)
  t.match((await app.inject({ url: '/docs/LICENSE' })).body, /Apache License/, 'the UI’s licence is served with it')

  const etag = page.headers.etag as string
  t.equal((await app.inject({ url: '/docs', headers: { 'if-none-match': etag } })).statusCode, 304)
  const slash = await app.inject({ url: '/docs/' })
  t.equal(slash.statusCode, 301)
  t.equal(slash.headers.location, '../docs')
  for (const url of ['/docs/nope.js', '/docs/index.html', '/docs/..%2fpackage.json']) {
    const res = await app.inject({ url })
    t.equal(res.statusCode, 404, url)
    t.equal(res.json().error.code, 'NOT_FOUND')
  }
  const doc = (await app.inject({ url: '/openapi.json' })).json() as { paths: Record<string, unknown> }
  t.notOk(
    Object.keys(doc.paths).some((p) => p.startsWith('/docs')),
    '/docs is not part of the API document',
  )
})

t.test('the bundle serves /docs with no node_modules beside it: the assets are inlined', async (t) => {
  buildBundle()
  const dir = tempDir(t)
  fs.copyFileSync(BUNDLE, path.join(dir, 'coffer.cjs'))
  fs.copyFileSync(path.join(path.dirname(BUNDLE), 'better_sqlite3.node'), path.join(dir, 'better_sqlite3.node'))
  const server = await startCoffer([path.join(dir, 'coffer.cjs'), 'serve', '--port', '0', '--data-dir', path.join(dir, 'data')], {
    cwd: dir,
    command: process.execPath,
  })
  t.teardown(() => server.child.kill('SIGKILL'))
  for (const name of ['swagger-ui-bundle.js', 'swagger-ui.css', 'favicon-32x32.png']) {
    const res = await fetch(`${server.url}/docs/${name}`)
    t.equal(res.status, 200, name)
    t.ok(Buffer.from(await res.arrayBuffer()).equals(fs.readFileSync(path.join(DIST, name))), `${name}: the same bytes`)
  }
  t.equal((await fetch(`${server.url}/docs`)).status, 200)
  server.child.kill('SIGTERM')
  t.equal(await server.exited, 0)
})
