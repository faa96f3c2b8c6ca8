import { createHmac } from 'node:crypto'

/**
 * Standard Webhooks signature (https://www.standardwebhooks.com): base64 HMAC-SHA256 over
 * `<id>.<timestamp>.<body>`, keyed with the base64-decoded part of the `whsec_` secret.
 */
export function sign(secret: string, id: string, timestampSeconds: number, body: string): string {
  const key = Buffer.from(secret.replace(/^whsec_/, ''), 'base64')
  return `v1,${createHmac('sha256', key).update(`${id}.${timestampSeconds}.${body}`).digest('base64')}`
}
