// @suites: pg-all
import t from 'tap'
import { ListBucketsCommand, S3Client, type S3ServiceException } from '@aws-sdk/client-s3'
import { PgError } from '../src/db/pg/errors'
import { makeS3 } from './s3-helper'

// The S3 front's answer when PostgreSQL's connection is lost or refused inside a statement (#30):
// 503 ServiceUnavailable with Retry-After, as the API answers 503 DATABASE_UNAVAILABLE, not a 500
// InternalError (whose SDKs retry no differently but whose operators are paged for a bug). The
// error is the bridge's own PgError, as src/db/pg/bridge.ts throws it for each of the codes it
// can see: the connection class and the server ending the session.

t.test('a statement that finds the database gone answers 503 ServiceUnavailable with Retry-After; the next one is served', async (t) => {
  const ctx = await makeS3(t, {}, { store: 'disk' })
  const buckets = ctx.core.s3.buckets
  const list = buckets.list.bind(buckets)
  const client = new S3Client({ endpoint: ctx.endpoint, region: 'us-east-1', forcePathStyle: true, credentials: ctx.credentials, maxAttempts: 1 })
  t.teardown(() => client.destroy())
  for (const code of ['08006', '08001', '57P01']) {
    buckets.list = () => {
      throw new PgError('Connection terminated unexpectedly', code)
    }
    const err = (await client.send(new ListBucketsCommand({})).then(
      () => undefined,
      (e: unknown) => e,
    )) as S3ServiceException & { $response?: { headers: Record<string, string> } }
    t.ok(err, `${code}: refused`)
    t.equal(err.$metadata.httpStatusCode, 503, `${code}: 503`)
    t.equal(err.name, 'ServiceUnavailable', `${code}: S3's ServiceUnavailable`)
    t.equal(err.$response?.headers['retry-after'], '5', `${code}: with Retry-After`)
  }
  // Another PostgreSQL error (a constraint, a syntax error: a bug, not an outage) stays a 500.
  buckets.list = () => {
    throw new PgError('duplicate key value violates unique constraint', '23505')
  }
  const other = (await client.send(new ListBucketsCommand({})).then(
    () => undefined,
    (e: unknown) => e,
  )) as S3ServiceException
  t.equal(other.$metadata.httpStatusCode, 500, 'any other error is a 500 InternalError')
  buckets.list = list
  const back = await client.send(new ListBucketsCommand({}))
  t.equal(back.$metadata.httpStatusCode, 200, 'the database back: served')
})
