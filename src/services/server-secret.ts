import { createHmac } from 'node:crypto'
import type { Engine } from '../db/engine'
import { ServerSecretRepo } from '../db/repos/server-secret'

/**
 * A node's server secret is not the one the other nodes of its database use (#30): what it signs
 * (download URLs, presigned upload paths) the others refuse, and the S3 secrets they sealed it
 * cannot open. Raised at start, before anything is served or written.
 */
export class SecretMismatchError extends Error {
  override name = 'SecretMismatchError'
  constructor() {
    super(
      "this node's server secret differs from the one the other nodes on this PostgreSQL database use (their signed URLs and S3 secrets need the same): set the same COFFER_SECRET on every node",
    )
  }
}

/** What is stored of the secret: an HMAC of a fixed label under it, from which the secret cannot be recovered. */
export function secretFingerprint(secret: Buffer): string {
  return createHmac('sha256', secret).update('coffer/server-secret-fingerprint/v1').digest('hex')
}

/**
 * On a database several nodes share (PostgreSQL, #30): the first node's secret is recorded by its
 * fingerprint, and a node whose secret differs is refused. Each node's own data dir would
 * otherwise generate a secret of its own (lib/data-dir.ts loadSecret), and a link signed by one
 * node would be refused by the next. SQLite has one data dir, one secret file: never called there.
 */
export function assertSharedSecret(db: Engine, secret: Buffer, now: number): void {
  const mine = secretFingerprint(secret)
  const stored = db.transaction(() => new ServerSecretRepo(db).claim(mine, now))
  if (stored !== mine) throw new SecretMismatchError()
}

/**
 * `coffer migrate-metadata --to postgres://…` (#30): the S3 secrets it copied are sealed under the
 * data dir's secret and its signed links were made with it, so that secret is the database's from
 * now on, in place of whatever a node that started on the (then empty) database recorded: a node
 * with another one is refused from its first start, not found out by failed signatures after.
 */
export function adoptSecret(db: Engine, secret: Buffer, now: number): void {
  db.transaction(() => new ServerSecretRepo(db).set(secretFingerprint(secret), now))
}
