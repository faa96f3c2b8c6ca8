// @suites: pg-all
// ListMultipartUploads through the AWS SDK: prefix, delimiter (CommonPrefixes), key-marker /
// upload-id-marker pagination and max-uploads as Amazon's S3 API reference describes them.
import t, { type Test } from 'tap'
import { CreateBucketCommand, CreateMultipartUploadCommand, ListMultipartUploadsCommand, type ListMultipartUploadsCommandInput } from '@aws-sdk/client-s3'
import { MultipartRepo } from '../src/db/repos/multipart'
import { newUploadId } from '../src/s3/multipart'
import { makeS3, type S3Context } from './s3-helper'

/** One page as [key, uploadId] pairs and common prefixes, with the markers it hands on. */
async function page(ctx: S3Context, input: Omit<ListMultipartUploadsCommandInput, 'Bucket'>) {
  const r = await ctx.client.send(new ListMultipartUploadsCommand({ Bucket: 'mpl', ...input }))
  return {
    uploads: (r.Uploads ?? []).map((u) => [u.Key!, u.UploadId!] as const),
    prefixes: (r.CommonPrefixes ?? []).map((p) => p.Prefix!),
    truncated: r.IsTruncated === true,
    nextKey: r.NextKeyMarker,
    nextId: r.NextUploadIdMarker,
  }
}

/** Every entry of a listing walked page by page through the markers each page returns. */
async function walk(ctx: S3Context, input: Omit<ListMultipartUploadsCommandInput, 'Bucket'>) {
  const entries: string[] = []
  let markers: { KeyMarker?: string; UploadIdMarker?: string } = {}
  for (let pages = 1; pages < 100; pages++) {
    const p = await page(ctx, { ...input, ...markers })
    entries.push(...p.uploads.map(([k, id]) => `${k}#${id}`), ...p.prefixes.map((cp) => `${cp}…`))
    if (!p.truncated) return { entries, pages }
    markers = { KeyMarker: p.nextKey!, ...(p.nextId ? { UploadIdMarker: p.nextId } : {}) }
  }
  throw new Error('the listing never ended')
}

const KEYS = ['a/1', 'a/1', 'a/2', 'b', 'c/d/e', 'c/f', 'd', 'é', '😀/x']

async function seed(t: Test) {
  const ctx = await makeS3(t)
  await ctx.client.send(new CreateBucketCommand({ Bucket: 'mpl' }))
  const ids: [string, string][] = []
  for (const key of KEYS) {
    const { UploadId } = await ctx.client.send(new CreateMultipartUploadCommand({ Bucket: 'mpl', Key: key }))
    ids.push([key, UploadId!])
  }
  // S3's order: UTF-8 bytes of the key, then upload id.
  ids.sort(([a, x], [b, y]) => Buffer.compare(Buffer.from(a), Buffer.from(b)) || (x < y ? -1 : x > y ? 1 : 0))
  return { ctx, ids }
}

t.test('prefix and delimiter roll keys up into CommonPrefixes', async (t) => {
  const { ctx, ids } = await seed(t)
  const all = await page(ctx, {})
  t.same(all.uploads, ids, 'no delimiter: every upload in (key, upload id) order')
  t.equal(all.truncated, false)

  const top = await page(ctx, { Delimiter: '/' })
  t.same(
    top.uploads.map(([k]) => k),
    ['b', 'd', 'é'],
  )
  t.same(top.prefixes, ['a/', 'c/', '😀/'])
  const c = await page(ctx, { Prefix: 'c/', Delimiter: '/' })
  t.same(
    c.uploads.map(([k]) => k),
    ['c/f'],
  )
  t.same(c.prefixes, ['c/d/'])
  const multi = await page(ctx, { Prefix: 'a', Delimiter: '/1' })
  t.same(multi.prefixes, ['a/1'], 'a delimiter of several characters')
  t.same(
    multi.uploads.map(([k]) => k),
    ['a/2'],
  )
  t.same(await page(ctx, { Prefix: 'zz', Delimiter: '/' }), { uploads: [], prefixes: [], truncated: false, nextKey: undefined, nextId: undefined })
})

t.test('key-marker and upload-id-marker as the S3 reference defines them', async (t) => {
  const { ctx, ids } = await seed(t)
  const a1 = ids.filter(([k]) => k === 'a/1').map(([, id]) => id)
  const afterKey = await page(ctx, { KeyMarker: 'a/1' })
  t.same(
    afterKey.uploads.map(([k]) => k),
    ['a/2', 'b', 'c/d/e', 'c/f', 'd', 'é', '😀/x'],
    'a key marker alone: only keys after it',
  )
  const afterUpload = await page(ctx, { KeyMarker: 'a/1', UploadIdMarker: a1[0] })
  t.same(afterUpload.uploads[0], ['a/1', a1[1]], 'with an upload id marker: later uploads of that key too')
  t.equal(afterUpload.uploads.length, ids.length - 1)
  const ignored = await page(ctx, { UploadIdMarker: a1[1] })
  t.same(ignored.uploads, ids, 'an upload id marker without a key marker is ignored')
  const insidePrefix = await page(ctx, { Delimiter: '/', KeyMarker: 'c/' })
  t.same(insidePrefix.prefixes, ['😀/'], 'a key marker naming a common prefix resumes past all of it')
  t.same(
    insidePrefix.uploads.map(([k]) => k),
    ['d', 'é'],
  )
})

t.test('max-uploads pages: every entry once, in order, through the markers each page returns', async (t) => {
  const { ctx, ids } = await seed(t)
  const idOf = (key: string) => ids.find(([k]) => k === key)![1]
  const first = await page(ctx, { MaxUploads: 1 })
  t.equal(first.truncated, true)
  t.same([first.nextKey, first.nextId], ids[0], 'NextKeyMarker and NextUploadIdMarker name the last upload')
  for (const size of [1, 2, 3]) {
    const flat = await walk(ctx, { MaxUploads: size })
    t.same(
      flat.entries,
      ids.map(([k, id]) => `${k}#${id}`),
      `${size} a page`,
    )
    t.equal(flat.pages, Math.ceil(ids.length / size))
    const rolled = await walk(ctx, { MaxUploads: size, Delimiter: '/' })
    t.same(
      [...rolled.entries].sort(),
      ['a/…', `b#${idOf('b')}`, 'c/…', `d#${idOf('d')}`, `é#${idOf('é')}`, '😀/…'].sort(),
      `${size} a page, rolled up at the delimiter`,
    )
    t.equal(rolled.pages, Math.ceil(6 / size))
  }
  const zero = await page(ctx, { MaxUploads: 0 })
  t.same([zero.uploads, zero.prefixes, zero.truncated], [[], [], false])
})

t.test('a page costs the same at any depth: the uploads under a common prefix are skipped, not read', async (t) => {
  const ctx = await makeS3(t)
  await ctx.client.send(new CreateBucketCommand({ Bucket: 'mpl' }))
  const tenant = ctx.core.tenants.authenticate(ctx.tenant.apiKey)!
  for (let i = 0; i < 600; i++) ctx.core.s3.multipart.create(tenant, 'mpl', `deep/${String(i).padStart(4, '0')}`, { contentType: 'x/y', meta: {} })
  for (const key of ['a', 'z']) ctx.core.s3.multipart.create(tenant, 'mpl', key, { contentType: 'x/y', meta: {} })
  let read = 0
  // eslint-disable-next-line @typescript-eslint/unbound-method -- re-bound with apply below
  const list = MultipartRepo.prototype.list
  // Counts the rows the listing actually pulls from SQLite.
  MultipartRepo.prototype.list = function* (this: MultipartRepo, ...args: Parameters<typeof list>) {
    for (const row of list.apply(this, args)) {
      read++
      yield row
    }
  }
  t.teardown(() => {
    MultipartRepo.prototype.list = list
  })
  const rolled = await page(ctx, { Delimiter: '/' })
  t.same(rolled.prefixes, ['deep/'])
  t.same(
    rolled.uploads.map(([k]) => k),
    ['a', 'z'],
  )
  t.ok(read <= 4, `${read} rows read for a listing past 600 uploads under one prefix`)
  read = 0
  const deepPage = await page(ctx, { Prefix: 'deep/', KeyMarker: 'deep/0590', MaxUploads: 5 })
  t.same(
    deepPage.uploads.map(([k]) => k),
    ['deep/0591', 'deep/0592', 'deep/0593', 'deep/0594', 'deep/0595'],
  )
  t.ok(read <= 6, `${read} rows read for a page of 5 deep in the listing`)
})

t.test('upload ids never start with - or _, which a command line would read as an option', async (t) => {
  // 10,000 draws: without the rule about 1 in 32 would start so (P(none) < 1e-130).
  const bad = Array.from({ length: 10_000 }, newUploadId).filter((id) => !/^[A-Za-z0-9][A-Za-z0-9_-]{31}$/.test(id))
  t.same(bad, [], 'every id is 32 base64url characters starting with a letter or a digit')
})
