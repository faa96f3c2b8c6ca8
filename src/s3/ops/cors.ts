import { CorsConfigError, type CorsRule } from '../../services/bucket-cors'
import { S3Error } from '../errors'
import { readSmallBody } from '../ingest'
import { MAX_XML_BODY_BYTES, childOf, listOf, malformed, parseXml, textOf, textsOf } from '../xml'
import { xml, type Handlers } from './context'

/** A bucket's CORS configuration (Put/Get/DeleteBucketCors), kept by core.bucketCors. */
export const corsHandlers = {
  async PutBucketCors({ core, s3, tenant, bucket, reply, body }) {
    const w = s3.buckets.resolve(tenant, bucket)
    const rules = parseCorsConfiguration(await readSmallBody(body(), MAX_XML_BODY_BYTES))
    try {
      core.bucketCors.put(w.id, rules)
    } catch (err) {
      if (err instanceof CorsConfigError) throw new S3Error(err.code, err.message)
      throw err
    }
    return reply.send()
  },

  GetBucketCors({ core, s3, tenant, bucket, reply }) {
    const w = s3.buckets.resolve(tenant, bucket)
    const rules = core.bucketCors.get(w.id)
    if (rules === undefined) throw new S3Error('NoSuchCORSConfiguration', 'The CORS configuration does not exist', { BucketName: bucket })
    return xml(reply, 'CORSConfiguration', {
      CORSRule: rules.map((r) => ({
        ...(r.id !== undefined ? { ID: r.id } : {}),
        AllowedHeader: r.allowedHeaders,
        AllowedMethod: r.allowedMethods,
        AllowedOrigin: r.allowedOrigins,
        ExposeHeader: r.exposeHeaders,
        ...(r.maxAgeSeconds !== undefined ? { MaxAgeSeconds: r.maxAgeSeconds } : {}),
      })),
    })
  },

  DeleteBucketCors({ core, s3, tenant, bucket, reply }) {
    const w = s3.buckets.resolve(tenant, bucket)
    core.bucketCors.delete(w.id)
    return reply.code(204).send()
  },
} satisfies Handlers

/** A CORSConfiguration document's rules; its validation is the service's (bucket-cors.ts). */
function parseCorsConfiguration(doc: Buffer): CorsRule[] {
  const config = childOf(parseXml(doc), 'CORSConfiguration')
  if (!config) throw malformed()
  return listOf(config, 'CORSRule').map((r) => {
    const id = textOf(r, 'ID')
    const maxAge = textOf(r, 'MaxAgeSeconds')
    if (maxAge !== undefined && !/^\d{1,9}$/.test(maxAge.trim())) throw malformed()
    return {
      ...(id !== undefined ? { id } : {}),
      allowedOrigins: textsOf(r, 'AllowedOrigin'),
      allowedMethods: textsOf(r, 'AllowedMethod'),
      allowedHeaders: textsOf(r, 'AllowedHeader'),
      exposeHeaders: textsOf(r, 'ExposeHeader'),
      ...(maxAge !== undefined ? { maxAgeSeconds: Number(maxAge.trim()) } : {}),
    }
  })
}
