import Database from 'better-sqlite3'
import { MIGRATIONS, type Migration } from './migrations'
import { addFunctions, migrate } from './database'

/**
 * The schema image (#28): the database file a new data dir gets, every migration already applied.
 *
 * A new data dir ran all the migrations from an empty file (table rebuilds, ALTERs, each in its own
 * transaction): a fifth of a `serve --ephemeral` start's own CPU time after module loading, on
 * every start, since an ephemeral data dir is always new. scripts/build.mjs runs them once into
 * `:memory:` (buildSchemaImage) and embeds the file SQLite serializes; openDatabase writes those
 * bytes where the new database goes and opens it. migrate() still runs on it and finds nothing to
 * do, so an image that lagged the migrations would only make it apply the rest. A run from the
 * TypeScript sources has no image and migrates as before. test/schema-image.test.ts checks that a
 * database started from the image has the schema the migrations make.
 */

/** Set by scripts/build.mjs through esbuild's `define`: packImage's output, base64; undefined from the sources. */
declare const __COFFER_SCHEMA_IMAGE__: string | undefined

/** The image in this build, or undefined (running from the TypeScript sources). */
export function bundledSchemaImage(): Uint8Array | undefined {
  return typeof __COFFER_SCHEMA_IMAGE__ === 'string' ? unpackImage(Buffer.from(__COFFER_SCHEMA_IMAGE__, 'base64')) : undefined
}

/**
 * The image is 270 KB, nine tenths of it zeros (each table and index has a 4 KiB page of its own,
 * nearly empty): packed as runs, `<zeros><length><bytes>` with both counts as LEB128 varints, it
 * is ~25 KB, ~35 KB of base64 in the bundle, unpacked in well under a millisecond. (zlib would pack
 * it smaller, but an idle fixture does not otherwise load node:zlib.)
 */
const MIN_ZERO_RUN = 8

export function packImage(image: Uint8Array): Buffer {
  const out: number[] = []
  const varint = (n: number) => {
    for (; n >= 0x80; n = Math.floor(n / 0x80)) out.push((n % 0x80) | 0x80)
    out.push(n)
  }
  let i = 0
  while (i < image.length) {
    let zeros = 0
    while (i + zeros < image.length && image[i + zeros] === 0) zeros++
    i += zeros
    // Literal bytes up to the next run of zeros long enough to be worth a record of its own.
    let end = i
    for (let run = 0; end < image.length; end++) {
      run = image[end] === 0 ? run + 1 : 0
      if (run === MIN_ZERO_RUN) {
        end -= MIN_ZERO_RUN - 1
        break
      }
    }
    varint(zeros)
    varint(end - i)
    for (; i < end; i++) out.push(image[i]!)
  }
  return Buffer.from(out)
}

export function unpackImage(packed: Uint8Array): Buffer {
  let p = 0
  const varint = () => {
    let n = 0
    for (let scale = 1; ; scale *= 0x80) {
      const b = packed[p++]
      if (b === undefined) throw new Error('schema image: truncated')
      n += (b & 0x7f) * scale
      if (b < 0x80) return n
    }
  }
  const chunks: { at: number; bytes: Uint8Array }[] = []
  let size = 0
  while (p < packed.length) {
    size += varint()
    const length = varint()
    if (p + length > packed.length) throw new Error('schema image: truncated')
    chunks.push({ at: size, bytes: packed.subarray(p, p + length) })
    p += length
    size += length
  }
  const image = Buffer.alloc(size)
  for (const c of chunks) image.set(c.bytes, c.at)
  return image
}

/**
 * Applies `migrations` to an empty in-memory database and returns its file. Deterministic: the
 * same migrations give the same bytes (the recorded applied_at is 0; openDatabase sets the time
 * the database was made), so a rebuilt bundle stays byte-identical. VACUUM drops the free pages
 * the migrations' table rebuilds left.
 */
export function buildSchemaImage(migrations: readonly Migration[] = MIGRATIONS, options: Database.Options = {}): Buffer {
  const db = new Database(':memory:', options)
  try {
    addFunctions(db)
    migrate(db, migrations, () => 0)
    db.exec('VACUUM')
    return db.serialize()
  } finally {
    db.close()
  }
}
