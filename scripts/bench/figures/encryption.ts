/**
 * The encrypted data dir (COFFER_ENCRYPTION_KEY_FILE, issue #27) beside the plain one, in the same
 * run: the same API transfers against two Coffer processes on the disk store that differ only in
 * the master key. What the ratio shows is the cost of sealing and opening every byte (AES-256-GCM
 * in 64 KiB chunks, SHA-256 and an HMAC per blob name) on top of what a transfer does anyway.
 */
import fs from 'node:fs'
import path from 'node:path'
import crypto from 'node:crypto'
import { startCoffer, type Coffer } from '../coffer'
import { seedDataset } from '../datasets'
import type { BenchContext, FigureResult } from '../figure'
import { sideBySideTransfers, transferSpecs } from '../side-by-side'

const SPECS = transferSpecs('encrypted', 'Encrypted data dir', 'the same on a plain data dir, same run')

export async function encryptionFigures(ctx: BenchContext): Promise<FigureResult[]> {
  const plainSet = seedDataset(path.join(ctx.dir, 'encryption-plain'), 0)
  const sealedSet = seedDataset(path.join(ctx.dir, 'encryption-sealed'), 0)
  // The master key lives outside both data dirs, as Coffer requires.
  const keyFile = path.join(ctx.dir, 'encryption-master.key')
  fs.writeFileSync(keyFile, crypto.randomBytes(32).toString('hex'), { mode: 0o600 })
  let plain: Coffer | undefined
  let sealed: Coffer | undefined
  try {
    plain = await startCoffer(plainSet.dir)
    sealed = await startCoffer(sealedSet.dir, undefined, { COFFER_ENCRYPTION_KEY_FILE: keyFile })
    return await sideBySideTransfers(ctx, {
      subject: 'encrypted data dir',
      beside: 'a plain data dir',
      tag: 'encryption',
      sides: [
        { url: plain.url, key: plainSet.seed.apiKey },
        { url: sealed.url, key: sealedSet.seed.apiKey },
      ],
      specs: SPECS,
      notes: {
        largePut: 'both hash and fsync the body as it streams to tmp/; the encrypted side also seals it in 64 KiB AES-256-GCM chunks on the way',
        largeGet: 'the plain side streams the file from the page cache; the encrypted side authenticates and decrypts every chunk before sending it',
        smallPut: 'small content is kept in the database either way; sealed, it is 56 bytes longer and costs a key derivation and an HMAC',
        smallGet: 'each encrypted download derives the blob key (HKDF) and opens one GCM chunk',
      },
    })
  } finally {
    await Promise.all([plain?.stop(), sealed?.stop()])
  }
}
