import fs from 'node:fs'
import path from 'node:path'
import { createHash } from 'node:crypto'
import sea from 'node:sea'

/** Set by scripts/build.mjs through esbuild's `define`; undefined when running from TypeScript sources. */
declare const __COFFER_BUNDLE__: boolean | undefined

export const ADDON_ASSET = 'better_sqlite3.node'

function dlopen(file: string): object {
  const mod = { exports: {} }
  process.dlopen(mod, file)
  return mod.exports
}

/**
 * The better-sqlite3 addon for `new Database(…, { nativeBinding })`.
 * - single executable: the addon is a SEA asset, written once into `<dataDir>/.cache/` (not /tmp,
 *   which may be mounted noexec) by temp file + rename, so concurrent starts never see half a file;
 * - bundle (`dist/coffer.cjs`): the addon sits beside the bundle;
 * - sources (tests, tsc): undefined, and better-sqlite3 finds its own prebuilt addon.
 */
export function loadSqliteAddon(dataDir: string): object | undefined {
  if (sea.isSea()) {
    const bytes = Buffer.from(sea.getAsset(ADDON_ASSET))
    const digest = createHash('sha256').update(bytes).digest('hex').slice(0, 16)
    const dir = path.join(dataDir, '.cache')
    const file = path.join(dir, `better_sqlite3-${digest}.node`)
    if (!fs.existsSync(file)) {
      fs.mkdirSync(dir, { recursive: true })
      const tmp = `${file}.${process.pid}.tmp`
      fs.writeFileSync(tmp, bytes, { mode: 0o755 })
      fs.renameSync(tmp, file)
    }
    return dlopen(file)
  }
  if (typeof __COFFER_BUNDLE__ !== 'undefined' && __COFFER_BUNDLE__) {
    return dlopen(path.join(__dirname, ADDON_ASSET))
  }
  return undefined
}
