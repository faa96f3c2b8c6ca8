import fs from 'node:fs'
import path from 'node:path'
import sea from 'node:sea'
import { ConfigError } from '../config'
import { publishFileSync } from '../lib/durable'

/** Set by scripts/build.mjs through esbuild's `define`; undefined when running from TypeScript sources. */
declare const __COFFER_BUNDLE__: boolean | undefined
/** The first 16 hex digits of the addon's SHA-256, computed by scripts/build.mjs from the file it embeds
 * (read only in a single executable, which is always made from that bundle). */
declare const __COFFER_ADDON_DIGEST__: string

export const ADDON_ASSET = 'better_sqlite3.node'

function dlopen(file: string): object {
  const mod = { exports: {} }
  process.dlopen(mod, file)
  return mod.exports
}

/**
 * The better-sqlite3 addon for `new Database(…, { nativeBinding })`.
 * - single executable: the addon is a SEA asset, written once into `<dataDir>/.cache/` (not /tmp,
 *   which may be mounted noexec) by lib/durable.ts, so concurrent starts never see half a file;
 * - bundle (`dist/coffer.cjs`): the addon sits beside the bundle;
 * - sources (tests, tsc): undefined, and better-sqlite3 finds its own prebuilt addon.
 */
export function loadSqliteAddon(dataDir: string, opts: { throwaway?: boolean } = {}): object | undefined {
  const file = sqliteAddonFile(dataDir, opts)
  if (file === undefined) return undefined
  if (!sea.isSea()) return dlopen(file)
  try {
    return dlopen(file)
  } catch (err) {
    // A setup problem, not a bug: one line and exit code 2, which no restart would fix.
    throw new ConfigError(
      `cannot load the SQLite addon unpacked at ${file} (${(err as Error).message.split(': ').at(-1)}): ` +
        'if that filesystem is mounted noexec, use a data dir on another one (for --ephemeral, point TMPDIR elsewhere)',
    )
  }
}

/**
 * Where loadSqliteAddon loads the addon from (unpacking it first in a single executable), for a
 * thread that loads it again (the checkpointer, checkpoint.ts): undefined when running from sources.
 */
export function sqliteAddonFile(dataDir: string, opts: { throwaway?: boolean } = {}): string | undefined {
  if (sea.isSea()) {
    // Named by the build, so a start does not hash 2.2 MB to find the file it unpacked before.
    const dir = path.join(dataDir, '.cache')
    const file = path.join(dir, `better_sqlite3-${__COFFER_ADDON_DIGEST__}.node`)
    if (!fs.existsSync(file)) {
      // The asset's bytes where the executable holds them: getAsset would copy 2.2 MB into the
      // heap, and Buffer.from once more (#28: an ephemeral start unpacks it every time).
      const bytes = new Uint8Array(sea.getRawAsset(ADDON_ASSET))
      fs.mkdirSync(dir, { recursive: true, mode: 0o700 })
      if (opts.throwaway) {
        // A throwaway data dir (serve --ephemeral) is this process's alone and goes with it:
        // nothing to survive a power cut, so no fsync (two of them, ~10 ms of a start on a busy disk).
        fs.writeFileSync(file, bytes, { mode: 0o755 })
      } else {
        // Synced before it is published: after a power cut the name must not point at an empty
        // file, which every later start would then fail to load.
        publishFileSync(file, bytes, { mode: 0o755, exclusive: false })
      }
    }
    return file
  }
  if (typeof __COFFER_BUNDLE__ !== 'undefined' && __COFFER_BUNDLE__) return path.join(__dirname, ADDON_ASSET)
  return undefined
}
