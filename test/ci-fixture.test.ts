// @suites: sqlite
// The CI fixture of #28: fixed credentials, seeded buckets, --write-env / --json-file and
// `coffer wait`, driven through the bundle as a pipeline would, with real S3 clients.
import t from 'tap'
import fs from 'node:fs'
import path from 'node:path'
import { execFile, spawnSync } from 'node:child_process'
import { BUNDLE, buildBundle, runCoffer, startCoffer } from './process-helper'
import { fileBytes, s3ClientsMissing, tempDir } from './helper'
import { envLines } from '../src/cli/fixture-files'
import { contentTypeOf } from '../src/cli/content-types'

t.setTimeout(300_000)
buildBundle()

const READY = /^\{"url":"(http:\/\/[^"]+)"/
const SECRET = 'fixture/Secret+key=0123456789abcdefABCD'

/** The file as GitHub reads $GITHUB_ENV: NAME=value lines, the value as it stands. */
function asGithub(file: string): Record<string, string> {
  return Object.fromEntries(
    fs
      .readFileSync(file, 'utf8')
      .trimEnd()
      .split('\n')
      .map((l) => l.split(/=(.*)/s).slice(0, 2) as [string, string]),
  )
}

/** The values of `names` in a shell after `set -a; . FILE; set +a` (bash itself reads the file). */
function sourced(file: string, names: string[]): Record<string, string> {
  const r = spawnSync('bash', ['-c', 'set -a; . "$1"; set +a; shift; for n in "$@"; do printf "%s\\0" "${!n}"; done', 'bash', file, ...names], {
    encoding: 'utf8',
  })
  if (r.status !== 0) throw new Error(`sourcing ${file} failed: ${r.stderr}`)
  const values = r.stdout.split('\0')
  return Object.fromEntries(names.map((n, i) => [n, values[i]!]))
}

function run(cmd: string, args: string[], env: Record<string, string>, cwd: string): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(cmd, args, { env, cwd, timeout: 120_000 }, (err, stdout, stderr) =>
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr }),
    )
  })
}

/** A fixtures directory: nested keys, a JSON file, binary content, a name with a space. */
function fixturesDir(root: string): Record<string, Buffer> {
  const files: Record<string, Buffer> = {
    'users.json': Buffer.from('[{"id":1,"name":"Ada"}]\n'),
    'images/logo.png': fileBytes('image/png', 4000),
    'reports/2026/q1 summary.txt': Buffer.from('first quarter\n'),
  }
  for (const [key, bytes] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(root, key)), { recursive: true })
    fs.writeFileSync(path.join(root, key), bytes)
  }
  return files
}

const missing = s3ClientsMissing('the real-client fixture test')

t.test('--bucket fixtures=DIR and --write-env: the AWS CLI, boto3 and the AWS SDK v3 with only the environment file', { skip: missing ?? false }, async (t) => {
  const dir = tempDir(t)
  const seeded = fixturesDir(path.join(dir, 'fixtures'))
  const envFile = path.join(dir, 'coffer.env')
  const jsonFile = path.join(dir, 'coffer.json')
  const server = await startCoffer(
    [
      'serve',
      '--ephemeral',
      '--s3-access-key-id',
      'test1234',
      '--s3-secret-access-key',
      SECRET,
      '--bucket',
      'fixtures=fixtures',
      '--bucket',
      'uploads',
      '--write-env',
      envFile,
      '--json-file',
      jsonFile,
    ],
    { cwd: dir, env: { TMPDIR: dir, COFFER_S3_PORT: '' }, ready: READY },
  )
  t.teardown(() => server.child.kill('SIGKILL'))
  t.equal(fs.statSync(envFile).mode & 0o777, 0o600, 'the env file is 0600')
  t.equal(fs.statSync(jsonFile).mode & 0o777, 0o600, 'the JSON file is 0600')
  t.equal(fs.readFileSync(jsonFile, 'utf8'), `${server.stdout[0]}\n`, '--json-file holds the JSON line')
  const info = JSON.parse(server.stdout[0]!) as {
    url: string
    tenant: { apiKey: string }
    s3: { endpoint: string; accessKeyId: string; secretAccessKey: string }
  }
  t.match(info.s3, { accessKeyId: 'test1234', secretAccessKey: SECRET }, 'the fixed pair')

  // The file as GitHub reads $GITHUB_ENV (NAME=value, no quoting) and as bash sources it: the same values.
  const github = asGithub(envFile)
  const env = sourced(envFile, Object.keys(github))
  t.same(env, github, 'bash and GitHub read the same values')
  t.match(env, {
    AWS_ACCESS_KEY_ID: 'test1234',
    AWS_SECRET_ACCESS_KEY: SECRET,
    AWS_REGION: 'us-east-1',
    AWS_DEFAULT_REGION: 'us-east-1',
    AWS_ENDPOINT_URL: info.s3.endpoint,
    AWS_ENDPOINT_URL_S3: info.s3.endpoint,
    COFFER_URL: info.url,
    COFFER_API_KEY: info.tenant.apiKey,
    COFFER_PID: String(server.child.pid),
  })
  const home = tempDir(t)
  // Nothing but the file (and a PATH and an empty HOME, so no ~/.aws of this machine is read).
  const clientEnv = { ...env, PATH: '/usr/bin:/bin', HOME: home }

  // Debian 12's AWS CLI (2.9.19) and boto3 (1.26.27, botocore 1.29.27) predate AWS_ENDPOINT_URL
  // (read from AWS CLI 2.13 and botocore 1.31 on): for these two alone the endpoint is passed
  // from the same file. Credentials and region come from the environment.
  const aws = (...args: string[]) => run('/usr/bin/aws', ['--endpoint-url', env.AWS_ENDPOINT_URL!, ...args], clientEnv, home)
  const ls = await aws('s3', 'ls', 's3://fixtures', '--recursive')
  t.equal(ls.code, 0, ls.stderr)
  t.same(
    ls.stdout
      .trim()
      .split('\n')
      .map((l) => l.replace(/^\S+ \S+ +\d+ /, ''))
      .sort(),
    Object.keys(seeded).sort(),
    'aws s3 ls: the seeded keys',
  )
  const cp = await aws('s3', 'cp', 's3://fixtures/images/logo.png', path.join(home, 'logo.png'))
  t.equal(cp.code, 0, cp.stderr)
  t.ok(fs.readFileSync(path.join(home, 'logo.png')).equals(seeded['images/logo.png']!), 'aws s3 cp: the same bytes')
  const head = await aws('s3api', 'head-object', '--bucket', 'fixtures', '--key', 'users.json')
  t.equal(head.code, 0, head.stderr)
  t.equal((JSON.parse(head.stdout) as { ContentType: string }).ContentType, 'application/json', 'a JSON fixture is served as application/json')

  const boto3 = await run(
    '/usr/bin/python3',
    [
      '-c',
      [
        'import boto3, os, json',
        "s3 = boto3.client('s3', endpoint_url=os.environ['AWS_ENDPOINT_URL'])",
        "keys = [o['Key'] for o in s3.list_objects_v2(Bucket='fixtures')['Contents']]",
        "body = s3.get_object(Bucket='fixtures', Key='reports/2026/q1 summary.txt')['Body'].read().decode()",
        "s3.put_object(Bucket='uploads', Key='from-boto3.txt', Body=b'written by boto3')",
        'print(json.dumps({"keys": keys, "body": body}))',
      ].join('\n'),
    ],
    clientEnv,
    home,
  )
  t.equal(boto3.code, 0, boto3.stderr)
  t.same(JSON.parse(boto3.stdout), { keys: Object.keys(seeded).sort(), body: 'first quarter\n' }, 'boto3 lists and reads the seeded bucket')

  // The SDK v3 reads everything from the environment, the endpoint included: no option at all.
  const sdk = await run(
    process.execPath,
    [
      '-e',
      `const { S3Client, ListObjectsV2Command, GetObjectCommand } = require(${JSON.stringify(require.resolve('@aws-sdk/client-s3'))})
      const s3 = new S3Client({})
      ;(async () => {
        const listed = await s3.send(new ListObjectsV2Command({ Bucket: 'uploads' }))
        const got = await s3.send(new GetObjectCommand({ Bucket: 'fixtures', Key: 'users.json' }))
        console.log(JSON.stringify({ keys: listed.Contents.map((o) => o.Key), users: await got.Body.transformToString() }))
      })().catch((err) => { console.error(err); process.exit(1) })`,
    ],
    clientEnv,
    home,
  )
  t.equal(sdk.code, 0, sdk.stderr)
  t.same(
    JSON.parse(sdk.stdout),
    { keys: ['from-boto3.txt'], users: seeded['users.json']!.toString() },
    'the SDK v3 sees the seeded bucket and the object boto3 wrote',
  )

  server.child.kill('SIGTERM')
  t.equal(await server.exited, 0)
  const logs = server.lines.filter((l) => !server.stdout.includes(l)).join('\n')
  t.notOk(logs.includes(SECRET), 'the fixed secret is never logged')
})

t.test('the fixed keys: the admin key from COFFER_ADMIN_API_KEY, the tenant key, their rules', async (t) => {
  const dir = tempDir(t)
  const tenantKey = `sk_test_${'k'.repeat(30)}`
  const server = await startCoffer(['serve', '--ephemeral', '--port', '0', '--s3-port', 'off', '--tenant-api-key', tenantKey], {
    cwd: dir,
    env: { TMPDIR: dir, COFFER_ADMIN_API_KEY: 'a-fixed-admin-key-0123456789' },
    ready: READY,
  })
  t.teardown(() => server.child.kill('SIGKILL'))
  const info = JSON.parse(server.stdout[0]!) as { adminApiKey: string; tenant: { apiKey: string } }
  t.equal(info.adminApiKey, 'a-fixed-admin-key-0123456789', 'COFFER_ADMIN_API_KEY is honoured')
  t.equal(info.tenant.apiKey, tenantKey)
  t.equal((await fetch(`${server.url}/api/v1/admin/tenants`, { headers: { authorization: 'Bearer a-fixed-admin-key-0123456789' } })).status, 200)
  t.equal((await fetch(`${server.url}/api/v1/tenant/info`, { headers: { authorization: `Bearer ${tenantKey}` } })).status, 200)
  server.child.kill('SIGTERM')
  t.equal(await server.exited, 0)

  // What S3 clients send: the AWS and MinIO shapes, LocalStack's test/test.
  for (const [id, secret] of [
    ['AKIAIOSFODNN7EXAMPLE', 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY'],
    ['minioadmin', 'minioadmin'],
    ['test', 'test'],
  ] as const) {
    const ok = await startCoffer(['serve', '--ephemeral', '--port', '0', '--s3-access-key-id', id, '--s3-secret-access-key', secret], {
      cwd: dir,
      env: { TMPDIR: dir },
      ready: READY,
    })
    t.match(JSON.parse(ok.stdout[0]!), { s3: { accessKeyId: id, secretAccessKey: secret } }, `${id} is accepted`)
    ok.child.kill('SIGTERM')
    await ok.exited
  }
  // Refused, one line, exit 2, nothing left in TMPDIR, the secret never echoed.
  const refused: [string[], RegExp][] = [
    [['--s3-access-key-id', 'a/b12', '--s3-secret-access-key', 'secret1'], /--s3-access-key-id="a\/b12" must be 3 to 128 characters/],
    [['--s3-access-key-id', 'ab', '--s3-secret-access-key', 'secret1'], /--s3-access-key-id="ab" must be/],
    [['--s3-access-key-id', 'tést1234', '--s3-secret-access-key', 'secret1'], /--s3-access-key-id="tést1234" must be/],
    [['--s3-access-key-id', 'test1234', '--s3-secret-access-key', 'has space'], /--s3-secret-access-key=\(hidden\) must be 4 to 128 characters/],
    [['--s3-access-key-id', 'test1234', '--s3-secret-access-key', 'dollar$1'], /--s3-secret-access-key=\(hidden\) must be/],
    [['--s3-access-key-id', 'test1234'], /set both --s3-access-key-id and --s3-secret-access-key/],
    [['--tenant-api-key', 'sk_prod_0123456789012345678901'], /--tenant-api-key=\(hidden\) must be sk_live_ or sk_test_/],
    [['--bucket', 'Bad_Name'], /--bucket "Bad_Name" is not a bucket name/],
    [['--bucket', 'ok-bucket', '--bucket', 'ok-bucket'], /names the bucket ok-bucket twice/],
    [['--bucket', 'seeded=no-such-dir'], /--bucket seeded=no-such-dir: no such directory/],
    [['--bucket', 'with-fifo=with-fifo'], /cannot seed a bucket with .*with-fifo\/pipe: not a regular file/],
    [['--write-env', 'no/such/dir/coffer.env'], /--write-env no\/such\/dir\/coffer.env: its directory .* does not exist/],
  ]
  const tmp = path.join(dir, 'tmp')
  fs.mkdirSync(tmp)
  fs.mkdirSync(path.join(dir, 'with-fifo'))
  t.equal(spawnSync('mkfifo', [path.join(dir, 'with-fifo', 'pipe')]).status, 0)
  for (const [args, message] of refused) {
    const r = runCoffer(['serve', '--ephemeral', '--port', '0', ...args], { cwd: dir, env: { TMPDIR: tmp } })
    t.equal(r.status, 2, args.join(' '))
    t.match(r.stderr, message)
    t.equal(r.stderr.trim().split('\n').length, 1, 'one line')
    t.notOk(r.stderr.includes('has space') || r.stderr.includes('dollar$1'), 'the secret is not echoed')
    t.equal(r.stdout, '')
  }
  t.same(fs.readdirSync(tmp), [], 'no temporary data dir was made')
  const env = runCoffer(['serve', '--ephemeral', '--port', '0'], { cwd: dir, env: { TMPDIR: tmp, COFFER_S3_BUCKETS: 'abc,UPPER' } })
  t.equal(env.status, 2)
  t.match(env.stderr, /COFFER_S3_BUCKETS "UPPER" is not a bucket name/)
})

t.test('a persistent data dir: the fixed pair and key at the first start; later starts must give the same', async (t) => {
  const dir = tempDir(t)
  const seed = path.join(dir, 'seed')
  fs.mkdirSync(seed)
  fs.writeFileSync(path.join(seed, 'a.txt'), 'first')
  const data = path.join(dir, 'data')
  const tenantKey = `sk_live_${'p'.repeat(30)}`
  const fixed = ['--tenant-api-key', tenantKey, '--s3-access-key-id', 'persist1', '--s3-secret-access-key', 'persist-secret']
  const start = (extra: string[], env: Record<string, string> = {}) =>
    startCoffer(['serve', '--port', '0', '--data-dir', data, ...extra], { cwd: dir, env: { TMPDIR: dir, ...env } })
  const first = await start([...fixed, '--bucket', `files=${seed}`])
  const list = async (url: string) =>
    (
      (await (await fetch(`${url}/api/v1/files`, { headers: { authorization: `Bearer ${tenantKey}` } })).json()) as { files: { originalName: string }[] }
    ).files.map((f) => f.originalName)
  t.same(await list(first.url), ['a.txt'], 'the bucket was created and seeded at the first start')
  first.child.kill('SIGTERM')
  t.equal(await first.exited, 0)

  // The same values (from the environment this time), one more bucket: fine; a seeded bucket that exists is left as it is.
  fs.writeFileSync(path.join(seed, 'b.txt'), 'second')
  const again = await start([], {
    COFFER_TENANT_API_KEY: tenantKey,
    COFFER_S3_ACCESS_KEY_ID: 'persist1',
    COFFER_S3_SECRET_ACCESS_KEY: 'persist-secret',
    COFFER_S3_BUCKETS: `files=${seed},more`,
  })
  t.same(await list(again.url), ['a.txt'], 'an existing bucket is not seeded again')
  const ws = (await (await fetch(`${again.url}/api/v1/workspaces`, { headers: { authorization: `Bearer ${tenantKey}` } })).json()) as {
    workspaces: { slug: string }[]
  }
  t.same(ws.workspaces.map((w) => w.slug).sort(), ['files', 'more'])
  again.child.kill('SIGTERM')
  t.equal(await again.exited, 0)

  // Another value is refused loudly, never silently kept or replaced.
  for (const [args, message] of [
    [
      ['--s3-access-key-id', 'persist1', '--s3-secret-access-key', 'other-secret'],
      /--s3-secret-access-key \(COFFER_S3_SECRET_ACCESS_KEY\) differs from the data dir's/,
    ],
    [
      ['--s3-access-key-id', 'persist2', '--s3-secret-access-key', 'persist-secret'],
      /^coffer: --s3-access-key-id \(COFFER_S3_ACCESS_KEY_ID\) is not the data dir's/,
    ],
    [['--tenant-api-key', `sk_live_${'q'.repeat(30)}`], /^coffer: --tenant-api-key \(COFFER_TENANT_API_KEY\) is not the data dir's/],
    [
      [...fixed.slice(0, 2), '--s3-access-key-id', 'persist2', '--s3-secret-access-key', 'persist-secret'],
      /^coffer: --s3-access-key-id \(COFFER_S3_ACCESS_KEY_ID\) differs/,
    ],
    [['--bucket', 'x-bucket'], /--bucket \(COFFER_S3_BUCKETS\) without --ephemeral needs the tenant/],
  ] as [string[], RegExp][]) {
    const r = runCoffer(['serve', '--port', '0', '--data-dir', data, ...args], { cwd: dir, env: { TMPDIR: dir } })
    t.equal(r.status, 2, args.join(' '))
    t.match(r.stderr, message)
    t.equal(r.stderr.trim().split('\n').length, 1, 'one line')
    t.notOk(r.stderr.includes('other-secret'), 'the secret is not echoed')
  }
  // A data dir that has tenants but no such pair: not a first start.
  const other = path.join(dir, 'other')
  const plain = await startCoffer(['serve', '--port', '0', '--data-dir', other], { cwd: dir, env: { COFFER_ADMIN_API_KEY: 'admin-key-0123456789abcdef' } })
  await fetch(`${plain.url}/api/v1/admin/tenants`, {
    method: 'POST',
    headers: { authorization: 'Bearer admin-key-0123456789abcdef', 'content-type': 'application/json' },
    body: '{"name":"someone"}',
  })
  plain.child.kill('SIGTERM')
  await plain.exited
  const late = runCoffer(['serve', '--port', '0', '--data-dir', other, ...fixed], { cwd: dir })
  t.equal(late.status, 2)
  t.match(
    late.stderr,
    /--tenant-api-key \(COFFER_TENANT_API_KEY\) and --s3-access-key-id \(COFFER_S3_ACCESS_KEY_ID\) are not the data dir's \(.*, which has tenants\): fixed credentials are set at the first start of a new data dir only/,
  )
})

t.test('coffer wait: 0 once /health answers, 1 with one line on a timeout or when the process is gone', async (t) => {
  const dir = tempDir(t)
  const envFile = path.join(dir, 'coffer.env')
  // An earlier run's file, naming a server that is not there: removed at start, never read as this run's.
  fs.writeFileSync(envFile, 'COFFER_URL=http://127.0.0.1:1\nCOFFER_PID=1\n')
  const server = await startCoffer(['serve', '--ephemeral', '--port', '0', '--write-env', envFile], { cwd: dir, env: { TMPDIR: dir }, ready: READY })
  t.teardown(() => server.child.kill('SIGKILL'))
  t.equal(runCoffer(['wait', server.url], { cwd: dir }).status, 0, 'a URL')
  const byFile = runCoffer(['wait', envFile, '--pid', String(server.child.pid), '--timeout', '10'], { cwd: dir })
  t.equal(byFile.status, 0, byFile.stderr)
  const timedOut = runCoffer(['wait', 'http://127.0.0.1:1', '--timeout', '0.3'], { cwd: dir })
  t.equal(timedOut.status, 1)
  t.equal(timedOut.stderr, 'coffer: gave up after 0.3 s waiting for http://127.0.0.1:1/health to answer 200\n')
  const notMine = runCoffer(['wait', envFile, '--pid', String(process.pid), '--timeout', '0.3'], { cwd: dir })
  t.equal(notMine.status, 1, "a file another process wrote is not this process's")
  server.child.kill('SIGTERM')
  await server.exited
  const gone = runCoffer(['wait', path.join(dir, 'never.env'), '--pid', String(server.child.pid), '--timeout', '20'], { cwd: dir })
  t.equal(gone.status, 1)
  t.match(gone.stderr, /^coffer: coffer \(pid \d+\) exited before it was ready\n$/)
  t.equal(runCoffer(['wait'], { cwd: dir }).status, 2, 'a usage error')
  t.ok(fs.existsSync(BUNDLE))
})

t.test('envLines: only values that stand unquoted; contentTypeOf: by extension, octet-stream otherwise', async (t) => {
  t.equal(envLines({ A: 'http://[::1]:9000', B: 'ab+/=._-', C: undefined, D: 7 }), 'A=http://[::1]:9000\nB=ab+/=._-\nD=7\n')
  for (const bad of ['a b', '$HOME', '~/x', 'a"b', "a'b", 'a\nb', 'a`b', 'a;b', 'é'])
    t.throws(() => envLines({ X: bad }), /--write-env: the value of X has characters an env file cannot hold unquoted/, JSON.stringify(bad))
  t.equal(contentTypeOf('data/users.JSON'), 'application/json')
  t.equal(contentTypeOf('a/readme.txt'), 'text/plain; charset=utf-8')
  t.equal(contentTypeOf('img/logo.png'), 'image/png')
  t.equal(contentTypeOf('archive.tar.gz'), 'application/gzip')
  t.equal(contentTypeOf('Makefile'), 'application/octet-stream')
  t.equal(contentTypeOf('dir.json/blob'), 'application/octet-stream', 'the extension of the last segment only')
})
