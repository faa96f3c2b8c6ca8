// @suites: sqlite
import t from 'tap'
import fs from 'node:fs'
import path from 'node:path'
import { makeApp, tempDir } from './helper'
import { BUNDLE, ROOT, buildBundle, startCoffer } from './process-helper'
import { REFERENCE_PAGES } from '../src/lib/reference-pages'

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
  // The reference pages too: their Markdown is in the bundle.
  const cli = await fetch(`${server.url}/docs/reference/cli`)
  t.equal(cli.status, 200)
  t.match(await cli.text(), /<h1 id="command-line">Command line<\/h1>/)
  t.match(await (await fetch(`${server.url}/docs/reference/`)).text(), '<a href="readme">')
  server.child.kill('SIGTERM')
  t.equal(await server.exited, 0)
})

t.test('GET /docs/reference/: the README and the reference pages as HTML, linked to each other, under the same strict policy', async (t) => {
  const { app } = await makeApp(t)
  const redirect = await app.inject({ url: '/docs/reference' })
  t.equal(redirect.statusCode, 301)
  t.equal(new URL(redirect.headers.location as string, 'http://x/docs/reference').pathname, '/docs/reference/')

  const index = await app.inject({ url: '/docs/reference/' })
  t.equal(index.statusCode, 200)
  t.equal(index.headers['content-type'], 'text/html; charset=utf-8')
  const csp = index.headers['content-security-policy'] as string
  t.match(csp, /default-src 'self'/)
  t.match(csp, /script-src 'none'/, 'no script at all')
  t.match(csp, /frame-ancestors 'none'/)
  t.notMatch(index.body, /<script|style="/, 'nothing inline')

  // Every page of the list is on the index, answers, and shows its first heading.
  const pages = Object.entries(REFERENCE_PAGES)
  t.ok(pages.length >= 16, `${pages.length} pages`)
  const html = new Map<string, string>()
  for (const [name, file] of pages) {
    t.match(index.body, `<a href="${name}">`, `the index links ${name}`)
    const res = await app.inject({ url: `/docs/reference/${name}` })
    t.equal(res.statusCode, 200, name)
    t.equal(res.headers['content-type'], 'text/html; charset=utf-8')
    t.equal(res.headers['content-security-policy'], csp)
    t.equal(res.headers['x-content-type-options'], 'nosniff')
    const heading = /^# (.*)$/m.exec(fs.readFileSync(path.join(ROOT, file), 'utf8'))![1]!.replace(/`/g, '')
    t.match(res.body.replace(/<[^>]+>/g, ''), heading, `${name} shows its heading "${heading}"`)
    t.notMatch(res.body, /<script|\son[a-z]+=|style="/, `${name}: nothing inline that the policy would refuse`)
    html.set(name, res.body)
  }
  t.match(html.get('configuration'), '<td><code>COFFER_PORT</code></td>', 'tables are tables')
  t.match(html.get('cli'), /<pre><code class="language-text">Usage: coffer serve/, 'code blocks are code')

  // Every link of every page resolves: to a served page and one of its headings, to this page's own heading, or out.
  const ids = (body: string) => new Set([...body.matchAll(/\sid="([^"]+)"/g)].map((m) => m[1]!))
  let checked = 0
  for (const [name, body] of html) {
    for (const m of body.matchAll(/<a href="([^"]+)"/g)) {
      const href = m[1]!.replace(/&amp;/g, '&')
      if (/^https?:/.test(href)) continue
      const url = new URL(href, `http://x/docs/reference/${name}`)
      if (url.pathname === '/docs' || url.pathname === '/openapi.json') continue
      const target = url.pathname.replace('/docs/reference/', '')
      t.ok(html.has(target) || target === '', `${name}: ${href} is a page`)
      if (url.hash && html.has(target)) t.ok(ids(html.get(target)!).has(decodeURIComponent(url.hash.slice(1))), `${name}: ${href} names a heading of ${target}`)
      checked++
    }
  }
  t.ok(checked > 150, `${checked} links checked`)
  // What the server does not carry is text, not a broken link; the README's pictures are their descriptions.
  t.notMatch(html.get('readme'), /<img|href="[^"]*\.md/, 'no picture and no link to a Markdown file')
  t.match(html.get('readme'), /\(Picture: The console right after signing in/)

  const css = await app.inject({ url: '/docs/reference/style.css' })
  t.equal(css.statusCode, 200)
  t.equal(css.headers['content-type'], 'text/css; charset=utf-8')
  t.equal(
    (
      await app.inject({
        url: '/docs/reference/cli',
        headers: { 'if-none-match': html.has('cli') ? ((await app.inject({ url: '/docs/reference/cli' })).headers.etag as string) : '' },
      })
    ).statusCode,
    304,
  )
  for (const url of [
    '/docs/reference/nope',
    '/docs/reference/index',
    '/docs/reference/cli' + '.md' /* a file name, not a page name */,
    '/docs/reference/..%2fpackage.json',
  ]) {
    const res = await app.inject({ url })
    t.equal(res.statusCode, 404, url)
    t.equal(res.json().error.code, 'NOT_FOUND')
  }
})
