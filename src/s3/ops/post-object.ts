import { createHmac, timingSafeEqual } from 'node:crypto'
import { Transform, type Readable } from 'node:stream'
import busboy from 'busboy'
import type { FastifyReply, FastifyRequest } from 'fastify'
import type { Core } from '../../core'
import type { AuthenticatedTenant } from '../../db/repos/tenants'
import { S3Error } from '../errors'
import { ALGORITHM, signingKey } from '../sigv4'
import { checkPostPolicy, parsePostPolicy } from '../post-policy'
import { xmlDocument } from '../xml'
import { tagsOfXml } from './tagging'
import { objectInput } from './context'
import { checkSseHeader } from './encryption'
import { writeKey } from '../sse'
import { authorize, type Principal } from '../authorize'

/**
 * POST Object: a browser's form upload to `POST /<bucket>` (Amazon S3 API reference, "POST
 * Object"; "Browser-based uploads using POST"). The request is unsigned: the form is, by its policy
 * and the signature of that policy (SigV4's form fields, or SigV2's `AWSAccessKeyId`/`signature`
 * when COFFER_S3_SIGV2 is on). The fields come first and are small; the `file` field is last, and
 * is streamed into the same write as PutObject's (quotas, webhooks, content addressing). Fields
 * after the file are ignored, as S3 does.
 */

/** The most the fields before the file may take (AWS answers MaxPostPreDataLengthExceeded over 20 KB). */
const MAX_PRE_DATA_BYTES = 20 * 1024
/** The most fields a form may have before its file. */
const MAX_FIELDS = 200

const SUCCESS_STATUSES = new Set(['200', '201', '204'])

/** Fields that are a request header of PutObject under another name. */
const AS_HEADER: Record<string, string> = { acl: 'x-amz-acl' }
/** A form's object lock fields (PutObject's headers of the same names). */
const LOCK_FIELDS = ['x-amz-object-lock-mode', 'x-amz-object-lock-retain-until-date', 'x-amz-object-lock-legal-hold'] as const

/** Verifies the form's signature of its policy and returns the tenant it proves. */
function authenticateForm(core: Core, fields: ReadonlyMap<string, string>, policy: string): AuthenticatedTenant {
  const { config } = core
  const v4 = fields.get('x-amz-signature')
  if (v4 !== undefined || fields.has('x-amz-credential') || fields.has('x-amz-algorithm')) {
    const algorithm = fields.get('x-amz-algorithm')
    const credential = fields.get('x-amz-credential')
    const date = fields.get('x-amz-date')
    if (algorithm === undefined || credential === undefined || date === undefined || v4 === undefined) {
      throw new S3Error('InvalidArgument', 'A SigV4 form needs the fields x-amz-algorithm, x-amz-credential, x-amz-date and x-amz-signature')
    }
    if (algorithm !== ALGORITHM) throw new S3Error('InvalidArgument', `Unsupported x-amz-algorithm: only ${ALGORITHM} is`)
    const m = /^([^/]{1,128})\/(\d{8})\/([^/]{1,64})\/s3\/aws4_request$/.exec(credential)
    if (!m) throw new S3Error('InvalidArgument', 'x-amz-credential is mal-formed; expecting "<YOUR-AKID>/YYYYMMDD/REGION/s3/aws4_request"')
    if (!/^\d{8}T\d{6}Z$/.test(date) || !date.startsWith(m[2]!))
      throw new S3Error('InvalidArgument', "x-amz-date must be YYYYMMDDTHHMMSSZ of the credential's date")
    if (m[3] !== config.s3Region) {
      throw new S3Error('AuthorizationHeaderMalformed', `the region '${m[3]}' is wrong; expecting '${config.s3Region}'`, { Region: config.s3Region })
    }
    const found = core.s3Credentials.lookup(m[1]!)
    if (!found) throw new S3Error('InvalidAccessKeyId', 'The AWS Access Key Id you provided does not exist in our records.')
    if (!signingKey(found.secret, m[2]!, m[3]).matches(policy, v4.toLowerCase())) {
      throw new S3Error('SignatureDoesNotMatch', 'The request signature we calculated does not match the signature you provided.')
    }
    return found.tenant
  }
  const id = fields.get('awsaccesskeyid')
  const v2 = fields.get('signature')
  if (id === undefined && v2 === undefined) throw new S3Error('AccessDenied', 'Anonymous form uploads are not allowed: sign the policy with an S3 credential')
  if (id === undefined || v2 === undefined) throw new S3Error('InvalidArgument', 'A signed form needs both AWSAccessKeyId and signature')
  if (!config.s3Sigv2) throw new S3Error('InvalidRequest', 'The authorization mechanism you have provided is not supported. Please use AWS4-HMAC-SHA256.')
  const found = core.s3Credentials.lookup(id)
  if (!found) throw new S3Error('InvalidAccessKeyId', 'The AWS Access Key Id you provided does not exist in our records.')
  const expected = createHmac('sha1', found.secret).update(policy).digest()
  const presented = Buffer.from(v2, 'base64')
  if (presented.length !== expected.length || !timingSafeEqual(presented, expected)) {
    throw new S3Error('SignatureDoesNotMatch', 'The request signature we calculated does not match the signature you provided.')
  }
  return found.tenant
}

/** Holds the file to the policy's content-length-range: over its maximum fails at once, under its minimum at the end. */
function sizeGuard(size: { min: number; max: number } | undefined): Transform {
  let seen = 0
  return new Transform({
    transform(chunk: Buffer, _enc, callback) {
      seen += chunk.length
      if (size !== undefined && seen > size.max)
        return callback(new S3Error('EntityTooLarge', 'Your proposed upload exceeds the maximum allowed size', { MaxSizeAllowed: String(size.max) }))
      callback(null, chunk)
    },
    flush(callback) {
      if (size !== undefined && seen < size.min) {
        return callback(new S3Error('EntityTooSmall', 'Your proposed upload is smaller than the minimum allowed size', { MinSizeAllowed: String(size.min) }))
      }
      callback()
    },
  })
}

/** The file part once the fields before it are checked: authenticated, policed, and streamed into the write. */
async function store(core: Core, request: FastifyRequest, bucket: string, fields: Map<string, string>, file: Readable, filename: string) {
  const policyText = fields.get('policy')
  const form = new Map(fields)
  // The key may name the file's own name (`${filename}`), and is checked against the policy as it will be.
  const rawKey = fields.get('key')
  if (rawKey === undefined) {
    throw new S3Error('InvalidArgument', "Bucket POST must contain a field named 'key'.  If it is specified, please check the order of the fields.", {
      ArgumentName: 'key',
      ArgumentValue: '',
    })
  }
  const key = rawKey.split('${filename}').join(filename)
  form.set('key', key)
  if (fields.has('bucket') && fields.get('bucket') !== bucket) throw new S3Error('AccessDenied', 'The bucket field names another bucket than the one posted to')
  form.set('bucket', bucket)
  // No policy is an anonymous upload, which only a bucket granting anyone its writes takes (public-read-write, or a policy).
  let signer: AuthenticatedTenant | undefined
  let policy: ReturnType<typeof parsePostPolicy> | undefined
  if (policyText === undefined) {
    if (fields.has('x-amz-signature') || fields.has('signature')) throw new S3Error('InvalidArgument', 'A signed form needs its policy field')
  } else {
    signer = authenticateForm(core, fields, policyText)
    request.s3TenantId = signer.id
    policy = parsePostPolicy(policyText)
    checkPostPolicy(policy, form, core.clock.now())
  }
  // Authorized as a PutObject of the key, with the form's acl field as its x-amz-acl and its object
  // lock fields as those headers, which ask for s3:PutObjectRetention / s3:PutObjectLegalHold too
  // (authorize.ts): the form's fields are what is stored, never the request's own headers.
  const acl = fields.get('acl')
  const lockFields = Object.fromEntries(LOCK_FIELDS.map((name) => [name, fields.get(name)]))
  const facts = {
    headers: { ...request.headers, ...(acl !== undefined ? { 'x-amz-acl': acl } : {}), ...lockFields },
    ip: request.ip,
    protocol: request.protocol,
  }
  const principal: Principal = signer ? { kind: 'tenant', tenant: signer } : { kind: 'anonymous' }
  const { tenant, bucket: name } = authorize(
    core,
    facts,
    principal,
    { name: 'PostObject', action: 's3:PutObject', on: 'object' },
    { bucket, key, query: new Map() },
  )
  // The form's other fields are PutObject's headers: Content-Type, x-amz-meta-*, Cache-Control…,
  // and the options Coffer refuses where it does not implement them (501, as the headers are).
  const headers: Record<string, string> = {}
  for (const [name, value] of fields) {
    if (name === 'key' || name === 'policy' || name === 'file' || name === 'bucket' || name === 'tagging' || name.startsWith('x-ignore-')) continue
    headers[AS_HEADER[name] ?? name] = value
  }
  const input = objectInput({ headers, s3ContentType: fields.get('content-type') }, tenant.id)
  // The `tagging` field is a Tagging document (S3's POST Object), not the header's query form.
  const tagging = fields.get('tagging')
  if (tagging !== undefined) {
    const tags = tagsOfXml(tagging)
    if (Object.keys(tags).length > 0) input.tags = tags
  }
  const digests: Record<string, string> = {}
  for (const [name, value] of Object.entries(headers)) if (name === 'content-md5' || name.startsWith('x-amz-checksum-')) digests[name] = value
  const guarded = file.pipe(sizeGuard(policy?.size))
  file.once('error', (err) => guarded.destroy(err))
  const { s3 } = core
  // Server-side encryption fields as PutObject's headers (#27): checked, then the object's key (or the bucket's default).
  checkSseHeader({ headers }, 'PutObject', core.kms, tenant.id)
  const sse = writeKey({ headers }, core, core.bucketEncryption.get(s3.buckets.resolve(tenant, name).id), tenant.id)
  const { etag, row } = await s3.objects.put(tenant, name, key, { source: guarded, payload: { kind: 'unsigned' }, headers: digests }, input, {}, sse)
  const redirect = fields.get('success_action_redirect') ?? fields.get('redirect')
  let target: URL | undefined
  try {
    target = redirect === undefined || redirect === '' ? undefined : new URL(redirect)
  } catch {
    target = undefined
  }
  return { etag, key, row, target }
}

/** Answers a POST Object request (routes.ts dispatches it before any header authentication). */
export async function postObject(core: Core, request: FastifyRequest, reply: FastifyReply, bucket: string): Promise<FastifyReply> {
  const type = request.s3ContentType
  if (type === undefined || !/^multipart\/form-data\s*;/i.test(type)) {
    throw new S3Error('PreconditionFailed', 'Bucket POST must be of the enclosure-type multipart/form-data', {
      Condition: 'Bucket POST must be of the enclosure-type multipart/form-data',
    })
  }
  let parser: busboy.Busboy
  try {
    parser = busboy({
      headers: { 'content-type': type },
      defParamCharset: 'utf8',
      limits: { fieldNameSize: 1024, fieldSize: MAX_PRE_DATA_BYTES, fields: MAX_FIELDS, parts: MAX_FIELDS + 1, headerPairs: 100 },
    })
  } catch {
    throw new S3Error('MalformedPOSTRequest', 'The body of your POST request is not well-formed multipart/form-data.')
  }
  const raw = request.raw
  const fields = new Map<string, string>()
  let preData = 0
  const pending: Promise<void>[] = []
  const result = new Promise<Awaited<ReturnType<typeof store>>>((resolve, reject) => {
    let fileSeen = false
    const tooLarge = () => new S3Error('MaxPostPreDataLengthExceeded', 'Your POST request fields preceding the upload file were too large.')
    const add = (name: string, value: string) => {
      preData += Buffer.byteLength(name) + Buffer.byteLength(value)
      if (preData > MAX_PRE_DATA_BYTES) return reject(tooLarge())
      // Field names are case-insensitive (AWS; ceph/s3-tests' test_post_object_case_insensitive_condition_fields).
      const lower = name.toLowerCase()
      if (!fields.has(lower)) fields.set(lower, value)
    }
    parser.on('field', (name, value, info) => {
      if (fileSeen) return
      if (info.valueTruncated || info.nameTruncated) return reject(tooLarge())
      add(name, value)
    })
    parser.on('file', (name, stream, info) => {
      if (fileSeen) return void stream.resume()
      if (name.toLowerCase() !== 'file') {
        // A field sent as a file part (a filename in its disposition, as Python's requests does): its text.
        const chunks: Buffer[] = []
        let size = 0
        pending.push(
          new Promise<void>((done) => {
            stream.on('data', (chunk: Buffer) => {
              size += chunk.length
              if (size <= MAX_PRE_DATA_BYTES) chunks.push(chunk)
            })
            stream.once('end', () => {
              if (size > MAX_PRE_DATA_BYTES) reject(tooLarge())
              else add(name, Buffer.concat(chunks).toString('utf8'))
              done()
            })
          }),
        )
        return
      }
      fileSeen = true
      Promise.all(pending)
        .then(() => store(core, request, bucket, fields, stream, info.filename ?? ''))
        .then(resolve, (err: Error) => {
          stream.resume()
          reject(err)
        })
    })
    parser.once('error', () => reject(new S3Error('MalformedPOSTRequest', 'The body of your POST request is not well-formed multipart/form-data.')))
    parser.once('close', () => {
      if (!fileSeen) reject(new S3Error('InvalidArgument', 'POST requires exactly one file upload per request.', { ArgumentName: 'file', ArgumentValue: '0' }))
    })
    raw.pipe(parser)
  })
  let stored: Awaited<ReturnType<typeof store>>
  try {
    stored = await result
  } catch (err) {
    // What is left of the body is the error handler's to discard (discard-body.ts), not the parser's.
    raw.unpipe(parser)
    throw err
  }
  const { etag, key, target } = stored
  reply.header('etag', etag)
  if (target !== undefined) {
    target.searchParams.set('bucket', bucket)
    target.searchParams.set('key', key)
    target.searchParams.set('etag', etag)
    return reply.code(303).header('location', target.toString()).send()
  }
  const status = fields.get('success_action_status')
  const code = status !== undefined && SUCCESS_STATUSES.has(status) ? Number(status) : 204
  if (code !== 201) return reply.code(code).send()
  const location = `${request.protocol}://${request.headers.host ?? 'localhost'}/${encodeURIComponent(bucket)}/${key.split('/').map(encodeURIComponent).join('/')}`
  return reply
    .code(201)
    .type('application/xml')
    .send(xmlDocument('PostResponse', { Location: location, Bucket: bucket, Key: key, ETag: etag }, false))
}
