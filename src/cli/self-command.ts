import fs from 'node:fs'
import path from 'node:path'

import { shellWord } from '../lib/shell-word'

function realpath(p: string): string | undefined {
  try {
    return fs.realpathSync(p)
  } catch {
    return undefined
  }
}

/**
 * How the person can run this very coffer again, for hints in logs and messages (#13): `coffer`
 * when a `coffer` on their PATH is this program, else its full path (the single executable, or
 * node and the bundle).
 */
export function selfCommand(opts: { execPath: string; script: string | undefined; isSea: boolean; pathEnv: string | undefined }): string {
  const program = opts.isSea || opts.script === undefined ? opts.execPath : path.resolve(opts.script)
  const real = realpath(program)
  for (const dir of (opts.pathEnv ?? '').split(path.delimiter)) {
    if (dir === '' || !path.isAbsolute(dir)) continue
    if (real !== undefined && realpath(path.join(dir, 'coffer')) === real) return 'coffer'
  }
  return opts.isSea || opts.script === undefined ? shellWord(program) : `${shellWord(opts.execPath)} ${shellWord(program)}`
}
