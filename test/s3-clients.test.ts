// @suites: pg s3
// Real S3 clients, unmodified, with their default settings, from Debian's packages (installed by
// scripts/s3-clients.sh when missing): the AWS CLI, rclone, restic and s3cmd against the S3 listener.
import { execFile } from 'node:child_process'
import { createHash } from 'node:crypto'
import fs from 'node:fs'
import path from 'node:path'
import t, { type Test } from 'tap'
import { CreateBucketCommand } from '@aws-sdk/client-s3'
import { makeS3, pattern } from './s3-helper'
import { s3ClientsMissing, tempDir } from './helper'

// Longer than the suite's default per-file timeout: real clients and processes, bounded per step.
t.setTimeout(900000)

const missing = s3ClientsMissing('the real-client S3 tests')

interface Run {
  code: number
  stdout: string
  stderr: string
}

/** Runs a client asynchronously (the server shares this process's event loop), bounded in time. */
function run(cmd: string, args: string[], env: Record<string, string>, cwd: string): Promise<Run> {
  return new Promise((resolve) => {
    execFile(cmd, args, { env: { PATH: '/usr/bin:/bin', ...env }, cwd, timeout: 180_000, maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) => {
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout: String(stdout), stderr: String(stderr) })
    })
  })
}

async function ok(t: Test, r: Promise<Run>, what: string): Promise<string> {
  const res = await r
  t.equal(res.code, 0, `${what}${res.code !== 0 ? `: ${res.stderr.slice(-2000)}` : ''}`)
  return res.stdout
}

function writeTree(dir: string): Record<string, Buffer> {
  const files: Record<string, Buffer> = {
    'a.txt': Buffer.from('hello from a\n'),
    'sub/b.bin': pattern(200_000, 2),
    'sub/deeper/c with space.dat': pattern(3_333, 3),
    'ünïcödé.txt': Buffer.from('unicode name\n'),
    empty: Buffer.alloc(0),
  }
  for (const [name, data] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(dir, name)), { recursive: true })
    fs.writeFileSync(path.join(dir, name), data)
  }
  return files
}

function sameTree(t: Test, dir: string, files: Record<string, Buffer>, what: string): void {
  for (const [name, data] of Object.entries(files)) {
    const p = path.join(dir, name)
    t.ok(fs.existsSync(p) && fs.readFileSync(p).equals(data), `${what}: ${name} byte for byte`)
  }
}

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex')

t.test('AWS CLI: s3 mb/cp/ls/sync/rm and s3api multipart and presign', { skip: missing }, async (t) => {
  const ctx = await makeS3(t)
  const home = tempDir(t, 'coffer-awscli-')
  fs.mkdirSync(path.join(home, '.aws'))
  fs.writeFileSync(path.join(home, '.aws', 'config'), '[default]\nregion = us-east-1\ns3 =\n  addressing_style = path\n')
  const env = {
    HOME: home,
    AWS_ACCESS_KEY_ID: ctx.credentials.accessKeyId,
    AWS_SECRET_ACCESS_KEY: ctx.credentials.secretAccessKey,
    AWS_EC2_METADATA_DISABLED: 'true',
    AWS_PAGER: '',
  }
  const aws = (...args: string[]) => run('/usr/bin/aws', ['--endpoint-url', ctx.endpoint, ...args], env, home)

  await ok(t, aws('s3', 'mb', 's3://cli-bucket'), 'aws s3 mb')
  const big = pattern(20 * 1024 * 1024, 11)
  fs.writeFileSync(path.join(home, 'big.bin'), big)
  await ok(t, aws('s3', 'cp', path.join(home, 'big.bin'), 's3://cli-bucket/big/big.bin'), 'aws s3 cp of 20 MiB (multipart by default)')
  const src = path.join(home, 'tree')
  const files = writeTree(src)
  await ok(t, aws('s3', 'sync', src, 's3://cli-bucket/tree'), 'aws s3 sync up')
  const ls = await ok(t, aws('s3', 'ls', '--recursive', 's3://cli-bucket'), 'aws s3 ls --recursive')
  for (const name of ['big/big.bin', 'tree/a.txt', 'tree/sub/b.bin', 'tree/sub/deeper/c with space.dat', 'tree/ünïcödé.txt']) t.match(ls, name)
  const top = await ok(t, aws('s3', 'ls', 's3://cli-bucket/'), 'aws s3 ls of prefixes')
  t.match(top, /PRE big\//)
  t.match(top, /PRE tree\//)

  const down = path.join(home, 'down')
  await ok(t, aws('s3', 'sync', 's3://cli-bucket/tree', down), 'aws s3 sync down')
  sameTree(t, down, files, 'aws s3 sync round trip')
  await ok(t, aws('s3', 'cp', 's3://cli-bucket/big/big.bin', path.join(home, 'big.out')), 'aws s3 cp down')
  t.equal(sha(fs.readFileSync(path.join(home, 'big.out'))), sha(big))

  // s3api: a multipart upload by hand.
  const part = pattern(5 * 1024 * 1024, 12)
  fs.writeFileSync(path.join(home, 'part1'), part)
  fs.writeFileSync(path.join(home, 'part2'), Buffer.from('tail'))
  const created = JSON.parse(await ok(t, aws('s3api', 'create-multipart-upload', '--bucket', 'cli-bucket', '--key', 'manual.bin'), 'create-multipart-upload'))
  const uploadPart = async (n: number, file: string): Promise<string> =>
    JSON.parse(
      await ok(
        t,
        aws(
          's3api',
          'upload-part',
          '--bucket',
          'cli-bucket',
          '--key',
          'manual.bin',
          '--part-number',
          String(n),
          '--upload-id',
          created.UploadId,
          '--body',
          file,
        ),
        `upload-part ${n}`,
      ),
    ).ETag
  const e1 = await uploadPart(1, path.join(home, 'part1'))
  const e2 = await uploadPart(2, path.join(home, 'part2'))
  const parts = JSON.parse(
    await ok(t, aws('s3api', 'list-parts', '--bucket', 'cli-bucket', '--key', 'manual.bin', '--upload-id', created.UploadId), 'list-parts'),
  )
  // list-multipart-uploads: the CLI pages through NextKeyMarker/NextUploadIdMarker itself
  // (--page-size 1), merging the uploads and common prefixes of every page.
  const pending: string[] = []
  for (const key of ['dir/one', 'dir/two', 'dir/sub/three', 'other/four']) {
    pending.push(JSON.parse(await ok(t, aws('s3api', 'create-multipart-upload', '--bucket', 'cli-bucket', '--key', key), `create ${key}`)).UploadId)
  }
  const listed = JSON.parse(
    await ok(t, aws('s3api', 'list-multipart-uploads', '--bucket', 'cli-bucket', '--delimiter', '/', '--page-size', '1'), 'list-multipart-uploads /'),
  )
  t.same(
    listed.Uploads.map((u: { Key: string }) => u.Key),
    ['manual.bin'],
  )
  t.same(
    listed.CommonPrefixes.map((p: { Prefix: string }) => p.Prefix),
    ['dir/', 'other/'],
  )
  const dir = JSON.parse(
    await ok(
      t,
      aws('s3api', 'list-multipart-uploads', '--bucket', 'cli-bucket', '--prefix', 'dir/', '--delimiter', '/', '--page-size', '1'),
      'list-multipart-uploads dir/',
    ),
  )
  t.same(
    dir.Uploads.map((u: { Key: string }) => u.Key),
    ['dir/one', 'dir/two'],
  )
  t.same(
    dir.CommonPrefixes.map((p: { Prefix: string }) => p.Prefix),
    ['dir/sub/'],
  )
  const every = JSON.parse(await ok(t, aws('s3api', 'list-multipart-uploads', '--bucket', 'cli-bucket', '--page-size', '2'), 'list-multipart-uploads'))
  t.same(
    every.Uploads.map((u: { Key: string }) => u.Key),
    ['dir/one', 'dir/sub/three', 'dir/two', 'manual.bin', 'other/four'],
  )
  for (const [i, key] of ['dir/one', 'dir/two', 'dir/sub/three', 'other/four'].entries()) {
    await ok(t, aws('s3api', 'abort-multipart-upload', '--bucket', 'cli-bucket', '--key', key, '--upload-id', pending[i]!), `abort ${key}`)
  }
  t.same(
    parts.Parts.map((p: { PartNumber: number }) => p.PartNumber),
    [1, 2],
  )
  fs.writeFileSync(
    path.join(home, 'parts.json'),
    JSON.stringify({
      Parts: [
        { PartNumber: 1, ETag: e1 },
        { PartNumber: 2, ETag: e2 },
      ],
    }),
  )
  const done = JSON.parse(
    await ok(
      t,
      aws(
        's3api',
        'complete-multipart-upload',
        '--bucket',
        'cli-bucket',
        '--key',
        'manual.bin',
        '--upload-id',
        created.UploadId,
        '--multipart-upload',
        `file://${path.join(home, 'parts.json')}`,
      ),
      'complete-multipart-upload',
    ),
  )
  t.match(done.ETag, /-2"$/)
  const head = JSON.parse(await ok(t, aws('s3api', 'head-object', '--bucket', 'cli-bucket', '--key', 'manual.bin'), 'head-object'))
  t.equal(head.ContentLength, part.length + 4)

  // A presigned GET works with no credentials at all.
  const url = (await ok(t, aws('s3', 'presign', 's3://cli-bucket/tree/a.txt', '--expires-in', '300'), 'aws s3 presign')).trim()
  const res = await fetch(url)
  t.equal(res.status, 200)
  t.equal(await res.text(), 'hello from a\n')
  const tampered = await fetch(url.replace('a.txt', 'ünïcödé.txt'))
  t.equal(tampered.status, 403)

  await ok(t, aws('s3', 'rm', '--recursive', 's3://cli-bucket/tree'), 'aws s3 rm --recursive')
  const left = await ok(t, aws('s3', 'ls', '--recursive', 's3://cli-bucket'), 'aws s3 ls after rm')
  t.notMatch(left, 'tree/')
  await ok(t, aws('s3', 'rm', 's3://cli-bucket/big/big.bin'), 'aws s3 rm')
  await ok(t, aws('s3', 'rm', 's3://cli-bucket/manual.bin'), 'aws s3 rm')
  await ok(t, aws('s3', 'rb', 's3://cli-bucket'), 'aws s3 rb')
  t.equal(ctx.core.tenants.quota(ctx.tenant.id).usedBytes, 0, 'everything released')
})

t.test('rclone: copy, sync, check --download', { skip: missing }, async (t) => {
  const ctx = await makeS3(t)
  const home = tempDir(t, 'coffer-rclone-')
  const env = {
    HOME: home,
    RCLONE_CONFIG: path.join(home, 'rclone.conf'),
    RCLONE_CONFIG_COFFER_TYPE: 's3',
    RCLONE_CONFIG_COFFER_PROVIDER: 'Other',
    RCLONE_CONFIG_COFFER_ACCESS_KEY_ID: ctx.credentials.accessKeyId,
    RCLONE_CONFIG_COFFER_SECRET_ACCESS_KEY: ctx.credentials.secretAccessKey,
    RCLONE_CONFIG_COFFER_ENDPOINT: ctx.endpoint,
    RCLONE_CONFIG_COFFER_REGION: 'us-east-1',
  }
  fs.writeFileSync(env.RCLONE_CONFIG, '')
  const rclone = (...args: string[]) => run('/usr/bin/rclone', [...args], env, home)
  const src = path.join(home, 'src')
  const files = writeTree(src)
  fs.writeFileSync(path.join(src, 'large.bin'), pattern(12 * 1024 * 1024, 21))
  files['large.bin'] = fs.readFileSync(path.join(src, 'large.bin'))
  await ok(t, rclone('mkdir', 'coffer:rclone-bucket'), 'rclone mkdir')
  await ok(t, rclone('copy', src, 'coffer:rclone-bucket/data'), 'rclone copy')
  await ok(t, rclone('check', '--download', src, 'coffer:rclone-bucket/data'), 'rclone check --download')
  fs.rmSync(path.join(src, 'a.txt'))
  fs.writeFileSync(path.join(src, 'new.txt'), 'new file\n')
  delete files['a.txt']
  files['new.txt'] = Buffer.from('new file\n')
  await ok(t, rclone('sync', src, 'coffer:rclone-bucket/data'), 'rclone sync')
  await ok(t, rclone('check', '--download', src, 'coffer:rclone-bucket/data'), 'rclone check --download after sync')
  const listing = await ok(t, rclone('lsf', '-R', 'coffer:rclone-bucket/data'), 'rclone lsf')
  t.notMatch(listing, /^a\.txt$/m, 'sync deleted the removed file')
  t.match(listing, /^new\.txt$/m)
  const out = path.join(home, 'out')
  await ok(t, rclone('copy', 'coffer:rclone-bucket/data', out), 'rclone copy down')
  sameTree(t, out, files, 'rclone round trip')
})

t.test('restic: init, backup, check --read-data, restore byte for byte', { skip: missing }, async (t) => {
  const ctx = await makeS3(t)
  const home = tempDir(t, 'coffer-restic-')
  await ctx.client.send(new CreateBucketCommand({ Bucket: 'restic-repo' }))
  const env = {
    HOME: home,
    RESTIC_REPOSITORY: `s3:${ctx.endpoint}/restic-repo`,
    RESTIC_PASSWORD: 'correct horse battery staple',
    AWS_ACCESS_KEY_ID: ctx.credentials.accessKeyId,
    AWS_SECRET_ACCESS_KEY: ctx.credentials.secretAccessKey,
    RESTIC_CACHE_DIR: path.join(home, 'cache'),
  }
  const restic = (...args: string[]) => run('/usr/bin/restic', args, env, home)
  const src = path.join(home, 'data')
  const files = writeTree(src)
  fs.writeFileSync(path.join(src, 'large.bin'), pattern(9 * 1024 * 1024, 31))
  files['large.bin'] = fs.readFileSync(path.join(src, 'large.bin'))
  await ok(t, restic('init'), 'restic init')
  await ok(t, restic('backup', src), 'restic backup')
  fs.writeFileSync(path.join(src, 'a.txt'), 'changed\n')
  files['a.txt'] = Buffer.from('changed\n')
  await ok(t, restic('backup', src), 'restic backup (second snapshot)')
  await ok(t, restic('check', '--read-data'), 'restic check --read-data')
  const snaps = JSON.parse(await ok(t, restic('snapshots', '--json'), 'restic snapshots'))
  t.equal(snaps.length, 2)
  const target = path.join(home, 'restore')
  await ok(t, restic('restore', 'latest', '--target', target), 'restic restore')
  sameTree(t, path.join(target, src), files, 'restic restore')
})

t.test('s3cmd: mb, put (multipart), ls, get, del', { skip: missing }, async (t) => {
  const ctx = await makeS3(t)
  const home = tempDir(t, 'coffer-s3cmd-')
  const host = ctx.endpoint.replace('http://', '')
  const cfg = path.join(home, '.s3cfg')
  fs.writeFileSync(
    cfg,
    `[default]\naccess_key = ${ctx.credentials.accessKeyId}\nsecret_key = ${ctx.credentials.secretAccessKey}\nhost_base = ${host}\nhost_bucket = ${host}\nuse_https = False\nsignature_v2 = False\nbucket_location = us-east-1\n`,
  )
  const s3cmd = (...args: string[]) => run('/usr/bin/s3cmd', ['-c', cfg, ...args], { HOME: home }, home)
  await ok(t, s3cmd('mb', 's3://s3cmd-bucket'), 's3cmd mb')
  const big = pattern(17 * 1024 * 1024, 41)
  fs.writeFileSync(path.join(home, 'big.bin'), big)
  fs.writeFileSync(path.join(home, 'small.txt'), 'small file\n')
  await ok(t, s3cmd('put', path.join(home, 'big.bin'), 's3://s3cmd-bucket/dir/big.bin'), 's3cmd put (15 MiB multipart chunks by default)')
  await ok(t, s3cmd('put', path.join(home, 'small.txt'), 's3://s3cmd-bucket/small.txt'), 's3cmd put')
  const ls = await ok(t, s3cmd('ls', '-r', 's3://s3cmd-bucket'), 's3cmd ls -r')
  t.match(ls, 's3://s3cmd-bucket/dir/big.bin')
  t.match(ls, 's3://s3cmd-bucket/small.txt')
  await ok(t, s3cmd('get', 's3://s3cmd-bucket/dir/big.bin', path.join(home, 'big.out')), 's3cmd get')
  t.equal(sha(fs.readFileSync(path.join(home, 'big.out'))), sha(big))
  await ok(t, s3cmd('del', 's3://s3cmd-bucket/dir/big.bin', 's3://s3cmd-bucket/small.txt'), 's3cmd del')
  await ok(t, s3cmd('rb', 's3://s3cmd-bucket'), 's3cmd rb')
})
