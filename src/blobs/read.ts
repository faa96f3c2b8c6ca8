import fs from 'node:fs'
import type { Readable } from 'node:stream'
import type { BlobStore } from './blob-store'

/**
 * A stored blob as a stream, whole or a byte range (inclusive `end`). Fails with ENOENT when the
 * blob is missing. (The S3 front's reader until the BlobStore grows an `open` of its own, #11.)
 */
export function openBlob(store: BlobStore, sha256: string, range?: { start: number; end: number }): Readable {
  return fs.createReadStream(store.pathOf(sha256), { ...(range ? { start: range.start, end: range.end } : {}), highWaterMark: 256 * 1024 })
}

/** `length` bytes of a stored blob from `start`, in one synchronous open/read/close (small reads, #7). */
export function readBlobSync(store: BlobStore, sha256: string, start: number, length: number): Buffer {
  const fd = fs.openSync(store.pathOf(sha256), 'r')
  try {
    const buf = Buffer.allocUnsafe(length)
    let got = 0
    while (got < length) {
      const n = fs.readSync(fd, buf, got, length - got, start + got)
      if (n === 0) break
      got += n
    }
    if (got !== length) throw new Error(`stored content ${sha256} is shorter than its record`)
    return buf
  } finally {
    fs.closeSync(fd)
  }
}
