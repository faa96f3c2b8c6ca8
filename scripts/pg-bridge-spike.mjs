// Bundles scripts/pg-bridge-spike.ts with the bridge's worker (two entries, side by side, as the
// bridge expects its worker beside it) into dist/pg-bridge-spike/ and runs it. Needs
// COFFER_DATABASE_URL: `export $(bash scripts/pg-fixture.sh start)`.
import { spawnSync } from 'node:child_process'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import * as esbuild from 'esbuild'

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
const outdir = path.join(root, 'dist', 'pg-bridge-spike')
await esbuild.build({
  entryPoints: { spike: path.join(root, 'scripts', 'pg-bridge-spike.ts'), worker: path.join(root, 'src', 'db', 'pg', 'worker.ts') },
  outdir,
  outExtension: { '.js': '.cjs' },
  bundle: true,
  platform: 'node',
  format: 'cjs',
  target: 'node24',
  external: ['better-sqlite3', 'pg', 'pg-native'],
  logLevel: 'warning',
})
const r = spawnSync(process.execPath, [path.join(outdir, 'spike.cjs')], { stdio: 'inherit' })
process.exit(r.status ?? 1)
