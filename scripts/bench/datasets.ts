/** Seeded data dirs, made by seed.ts in a child process so the load generator's heap stays small. */
import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import type { Dataset } from './figure'
import type { SeedResult } from './seed'

function runSeed(args: string[]): SeedResult {
  const r = spawnSync(process.execPath, [path.join(__dirname, 'seed.cjs'), ...args], { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 })
  if (r.status !== 0) throw new Error(`seeding failed (${r.status}): ${r.stderr}`)
  return JSON.parse(r.stdout) as SeedResult
}

/** A new data dir with one tenant and `files` completed files. */
export function seedDataset(dir: string, files: number): Dataset {
  return { dir, seed: runSeed([dir, String(files)]) }
}

/** A copy of `from` (same tenant and key) grown by `more` files: 1M is 100k plus 900k, not 1.1M rows of work. */
export function growDataset(from: Dataset, dir: string, more: number): Dataset {
  fs.cpSync(from.dir, dir, { recursive: true })
  return { dir, seed: runSeed([dir, String(more), from.seed.tenantId, from.seed.apiKey]) }
}
