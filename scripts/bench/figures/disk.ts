/**
 * What durability and integrity cost on this machine, measured beside the figures: nginx neither
 * hashes nor fsyncs, Coffer must do both (SHA-256 while streaming; fsync of the blob, its
 * directories and the SQLite commit). These numbers explain the gaps in the write figures.
 */
import fs from 'node:fs'
import path from 'node:path'
import { createHash, randomBytes } from 'node:crypto'
import { median } from '../stats'
import type { BenchContext } from '../figure'

export interface DiskCosts {
  /** SHA-256 of 100 MiB in one call, ms (single core). */
  sha256For100MiBMs: number
  /** Writing 100 MiB into the page cache, 1 MiB per write call, ms. */
  write100MiBMs: number
  /** fsync of those 100 MiB afterwards, ms. */
  fsync100MiBMs: number
  /** Create, write 4 KiB, fsync, close: one small durable file, one at a time, ms. */
  smallFileFsyncMs: number
  /** The same with 16 at once through Node's thread pool, as a server does it: durable small files per second. */
  smallFileFsyncsPerSecond: number
}

export async function diskCosts(ctx: BenchContext): Promise<DiskCosts> {
  const dir = fs.mkdtempSync(path.join(ctx.dir, 'disk-'))
  try {
    const big = randomBytes(100 * 1024 * 1024)
    const hashes: number[] = []
    const writes: number[] = []
    const syncs: number[] = []
    for (let i = 0; i < ctx.runs; i++) {
      let t = performance.now()
      createHash('sha256').update(big).digest()
      hashes.push(performance.now() - t)
      const file = path.join(dir, `big-${i}`)
      const fd = fs.openSync(file, 'w')
      t = performance.now()
      for (let off = 0; off < big.length; off += 1 << 20) fs.writeSync(fd, big, off, 1 << 20)
      writes.push(performance.now() - t)
      t = performance.now()
      fs.fsyncSync(fd)
      syncs.push(performance.now() - t)
      fs.closeSync(fd)
      fs.rmSync(file)
    }
    const four = randomBytes(4096)
    const small: number[] = []
    for (let i = 0; i < 100; i++) {
      const t = performance.now()
      const fd = fs.openSync(path.join(dir, `s-${i}`), 'w')
      fs.writeSync(fd, four)
      fs.fsyncSync(fd)
      fs.closeSync(fd)
      small.push(performance.now() - t)
    }
    let done = 0
    const until = performance.now() + 2000
    const worker = async (w: number) => {
      for (let i = 0; performance.now() < until; i++) {
        const fh = await fs.promises.open(path.join(dir, `c-${w}-${i}`), 'w')
        await fh.write(four)
        await fh.sync()
        await fh.close()
        done++
      }
    }
    const t0 = performance.now()
    await Promise.all(Array.from({ length: 16 }, (_, w) => worker(w)))
    return {
      sha256For100MiBMs: median(hashes),
      write100MiBMs: median(writes),
      fsync100MiBMs: median(syncs),
      smallFileFsyncMs: median(small),
      smallFileFsyncsPerSecond: done / ((performance.now() - t0) / 1000),
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
}
