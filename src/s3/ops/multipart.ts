import { S3Error } from '../errors'
import { readSmallBody } from '../ingest'
import { MAX_XML_BODY_BYTES, childOf, listOf, malformed, parseXml, textOf } from '../xml'
import { etagOf } from '../objects'
import { MAX_PARTS } from '../multipart'
import { awsEncode } from '../sigv4'
import { CHECKSUM_ALGORITHMS, checksumElement, uploadChecksum, type ChecksumAlgorithm } from '../checksums'
import { checkLockRequest, header, intParam, iso, objectInput, owner, refuseUnsupported, xml, type Handlers, type OpContext } from './context'
import { copyConditions, copySource } from './objects'
import { versionIdHeader } from '../versions'
import { COPY_SOURCE_CUSTOMER, readKey, reportKey, writeKey, type SseKey } from '../sse'

/** Multipart uploads: create, upload (or copy) parts, complete, abort, list. */
export const multipartHandlers = {
  CreateMultipartUpload(c) {
    const { core, s3, tenant, bucket, key, request, reply } = c
    const checksum = uploadChecksum(header(request, 'x-amz-checksum-algorithm'), header(request, 'x-amz-checksum-type'))
    const input = objectInput(request, tenant.id)
    checkLockRequest(c, input)
    // The upload's key (#27): each part is sealed under it, and must bring it again if it is the customer's.
    const sse = writeKey(request, core, core.bucketEncryption.get(s3.buckets.resolve(tenant, bucket).id), tenant.id)
    const upload = s3.multipart.create(tenant, bucket, key, sse ? { ...input, sse: sse.stored } : input, checksum)
    reportKey(reply, sse)
    if (checksum) reply.header('x-amz-checksum-algorithm', checksum.algorithm.toUpperCase()).header('x-amz-checksum-type', checksum.type)
    return xml(reply, 'InitiateMultipartUploadResult', { Bucket: bucket, Key: key, UploadId: upload.id })
  },

  async UploadPart(c) {
    const { uploadId, partNumber } = partOf(c)
    refuseUnsupported(c.request)
    // The upload's key: an SSE-C part brings the customer's key, which must be the upload's (#27).
    const sse = readKey(c.request, c.s3.multipart.uploadInfo(c.tenant, c.bucket, c.key, uploadId).sse, c.core)
    const r = await c.s3.multipart.uploadPart(c.tenant, c.bucket, c.key, uploadId, partNumber, c.body(), sse)
    reportKey(c.reply, sse)
    c.reply.header('etag', r.etag)
    if (r.checksum) c.reply.header(`x-amz-checksum-${r.checksum.algorithm}`, r.checksum.value)
    return c.reply.send()
  },

  async UploadPartCopy(c) {
    const { s3, tenant, bucket, key, request, reply } = c
    const { uploadId, partNumber } = partOf(c)
    refuseUnsupported(request)
    const sse = readKey(request, s3.multipart.uploadInfo(tenant, bucket, key, uploadId).sse, c.core)
    const from = copySource(request, c.tenant.id)
    const source = s3.objects.head(tenant, from.bucket, from.key, from.versionId)
    const sourceKey = readKey(request, source.info?.sse, c.core, COPY_SOURCE_CUSTOMER)
    const sourceVersion = versionIdHeader(source)
    if (sourceVersion !== undefined) reply.header('x-amz-copy-source-version-id', sourceVersion)
    copyConditions(request)(source)
    let range: { start: number; end: number } | undefined
    const rangeHeader = header(request, 'x-amz-copy-source-range')
    if (rangeHeader !== undefined) {
      // Not one range of the form bytes=first-last: InvalidArgument. One that the source does not
      // hold: InvalidRange, as the S3 conformance suite (ceph/s3-tests) and RGW have it (#24; see README).
      const m = /^bytes=(\d{1,15})-(\d{1,15})$/.exec(rangeHeader)
      if (!m || Number(m[1]) > Number(m[2])) {
        throw new S3Error(
          'InvalidArgument',
          'The x-amz-copy-source-range value must be of the form bytes=first-last where first and last are the zero-based offsets of the first and last bytes to copy',
          { ArgumentName: 'x-amz-copy-source-range', ArgumentValue: rangeHeader },
        )
      }
      if (Number(m[2]) >= source.size) {
        throw new S3Error('InvalidRange', `The requested range is not satisfiable: the source object is ${source.size} bytes`, {
          RangeRequested: rangeHeader,
        })
      }
      range = { start: Number(m[1]), end: Number(m[2]) }
    }
    const r = await s3.multipart.uploadPartCopy(tenant, bucket, key, uploadId, partNumber, source, range, sourceKey, sse)
    reportKey(reply, sse)
    return xml(reply, 'CopyPartResult', {
      ETag: r.etag,
      LastModified: iso(r.lastModified),
      ...(r.checksum ? { [checksumElement(r.checksum.algorithm)]: r.checksum.value } : {}),
    })
  },

  async CompleteMultipartUpload({ core, s3, tenant, bucket, key, query, request, reply, body }) {
    // On CompleteMultipartUpload, an x-amz-checksum-<algorithm> header is the checksum the client
    // expects of the whole object (S3: ChecksumSHA256 … of the request), not one of the XML body.
    const spec = body()
    const headers = { ...spec.headers }
    let expected: { algorithm: string; value: string } | undefined
    for (const name of Object.keys(headers)) {
      const m = /^x-amz-checksum-(.+)$/.exec(name)
      if (!m || m[1] === 'mode' || m[1] === 'type' || m[1] === 'algorithm') continue
      expected = { algorithm: m[1]!, value: header(request, name)! }
      delete headers[name]
    }
    const doc = parseXml(await readSmallBody({ ...spec, headers }, MAX_XML_BODY_BYTES))
    const root = childOf(doc, 'CompleteMultipartUpload')
    if (!root) throw malformed()
    const listed = listOf(root, 'Part').map((p) => {
      const n = textOf(p, 'PartNumber')
      const etag = textOf(p, 'ETag')
      if (n === undefined || !/^\d{1,5}$/.test(n.trim()) || etag === undefined) throw malformed()
      const checksums: Partial<Record<ChecksumAlgorithm, string>> = {}
      for (const a of CHECKSUM_ALGORITHMS) {
        const v = textOf(p, checksumElement(a))
        if (v !== undefined) checksums[a] = v
      }
      return { partNumber: Number(n.trim()), etag, checksums }
    })
    // A part number listed twice in a row: the later entry, as RGW takes it (a client that re-sent a
    // part lists the ETag of each attempt, the last to finish last; ceph/s3-tests, #24).
    const parts = listed.filter((p, i) => listed[i + 1]?.partNumber !== p.partNumber)
    if (parts.length === 0 || parts.length > MAX_PARTS) throw malformed()
    // An SSE-C upload completes only with its key, as ceph/s3-tests checks of AWS (test_copy_part_enc):
    // none or another is 400 (#27). A Complete retried after the upload completed is answered as before.
    let sse: SseKey | undefined
    try {
      sse = readKey(request, s3.multipart.uploadInfo(tenant, bucket, key, query.get('uploadId')!).sse, core)
    } catch (err) {
      if (!(err instanceof S3Error) || err.code !== 'NoSuchUpload') throw err
    }
    // Conditional completion (If-Match / If-None-Match), as PutObject's.
    const conditions = { ifMatch: header(request, 'if-match'), ifNoneMatch: header(request, 'if-none-match') }
    const row = await s3.multipart.complete(tenant, bucket, key, query.get('uploadId')!, parts, expected, sse, conditions)
    const versionId = versionIdHeader(row, true)
    if (versionId !== undefined) reply.header('x-amz-version-id', versionId)
    if (row.info?.sse) reportKey(reply, sse ?? { stored: row.info.sse })
    const checksum = row.info?.checksum
    return xml(reply, 'CompleteMultipartUploadResult', {
      Location: `/${bucket}/${awsEncode(key, true)}`,
      Bucket: bucket,
      Key: key,
      ETag: etagOf(row),
      ...(checksum ? { [checksumElement(checksum.algorithm as ChecksumAlgorithm)]: checksum.value, ChecksumType: checksum.type ?? 'COMPOSITE' } : {}),
    })
  },

  async AbortMultipartUpload({ s3, tenant, bucket, key, query, reply }) {
    await s3.multipart.abort(tenant, bucket, key, query.get('uploadId')!)
    return reply.code(204).send()
  },

  ListParts({ s3, tenant, bucket, key, query: q, reply }) {
    const max = intParam(q, 'max-parts', 1000, 1000)
    const marker = intParam(q, 'part-number-marker', 0, MAX_PARTS)
    const { upload, parts, truncated } = s3.multipart.listParts(tenant, bucket, key, q.get('uploadId')!, marker, max)
    const algorithm = upload.info.checksumAlgorithm as ChecksumAlgorithm | undefined
    return xml(reply, 'ListPartsResult', {
      Bucket: bucket,
      Key: key,
      UploadId: upload.id,
      Initiator: owner(tenant),
      Owner: owner(tenant),
      StorageClass: 'STANDARD',
      PartNumberMarker: marker,
      ...(truncated && parts.length > 0 ? { NextPartNumberMarker: parts.at(-1)!.partNumber } : {}),
      MaxParts: max,
      IsTruncated: truncated,
      ...(algorithm ? { ChecksumAlgorithm: algorithm.toUpperCase(), ChecksumType: upload.info.checksumType ?? 'COMPOSITE' } : {}),
      Part: parts.map((p) => ({
        PartNumber: p.partNumber,
        LastModified: iso(p.createdAt),
        ETag: `"${p.md5}"`,
        Size: p.size,
        ...(algorithm && p.checksum !== null ? { [checksumElement(algorithm)]: p.checksum } : {}),
      })),
    })
  },

  ListMultipartUploads({ s3, tenant, bucket, query: q, reply }) {
    const encoding = q.get('encoding-type')
    if (encoding !== undefined && encoding !== 'url') throw new S3Error('InvalidArgument', 'Invalid Encoding Method specified in Request')
    const enc = (s: string) => (encoding === 'url' ? awsEncode(s, true) : s)
    const prefix = q.get('prefix') ?? ''
    const delimiter = q.get('delimiter') ?? ''
    const max = intParam(q, 'max-uploads', 1000, 1000)
    const keyMarker = q.get('key-marker') || undefined
    // S3 ignores upload-id-marker without a key-marker.
    const idMarker = keyMarker === undefined ? undefined : q.get('upload-id-marker') || undefined
    const page = s3.multipart.listUploads(tenant, bucket, { prefix, delimiter, keyMarker, uploadIdMarker: idMarker, maxUploads: max })
    const last = page.last
    return xml(reply, 'ListMultipartUploadsResult', {
      Bucket: bucket,
      KeyMarker: enc(keyMarker ?? ''),
      UploadIdMarker: idMarker ?? '',
      // A page ending on a common prefix resumes past all of it: the prefix is the next key marker.
      ...(page.truncated && last
        ? last.kind === 'object'
          ? { NextKeyMarker: enc(last.row.key), NextUploadIdMarker: last.row.id }
          : { NextKeyMarker: enc(last.prefix), NextUploadIdMarker: '' }
        : {}),
      ...(encoding ? { EncodingType: encoding } : {}),
      ...(delimiter !== '' ? { Delimiter: enc(delimiter) } : {}),
      Prefix: enc(prefix),
      MaxUploads: max,
      IsTruncated: page.truncated,
      Upload: page.entries.flatMap((e) =>
        e.kind === 'object'
          ? [
              {
                Key: enc(e.row.key),
                UploadId: e.row.id,
                Initiator: owner(tenant),
                Owner: owner(tenant),
                StorageClass: 'STANDARD',
                Initiated: iso(e.row.createdAt),
              },
            ]
          : [],
      ),
      CommonPrefixes: page.entries.flatMap((e) => (e.kind === 'prefix' ? [{ Prefix: enc(e.prefix) }] : [])),
    })
  },
} satisfies Handlers

/** UploadPart's and UploadPartCopy's uploadId and partNumber (1–10,000). */
function partOf({ query }: OpContext): { uploadId: string; partNumber: number } {
  const uploadId = query.get('uploadId')
  const partRaw = query.get('partNumber') ?? ''
  if (uploadId === undefined || !/^\d{1,5}$/.test(partRaw) || Number(partRaw) < 1 || Number(partRaw) > MAX_PARTS) {
    throw new S3Error('InvalidArgument', 'Part number must be an integer between 1 and 10000, inclusive, with an uploadId')
  }
  return { uploadId, partNumber: Number(partRaw) }
}
