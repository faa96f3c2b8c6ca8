import path from 'node:path'

/** What `new Worker()` starts for the bridge: a file to load, or the code itself (`eval: true`). */
export type PgWorkerSource = { file: string } | { code: string }

/**
 * The bridge's worker thread (worker.ts) running from sources: the module beside this one
 * (worker.ts under the TypeScript loader, worker.js once compiled). The shipped artifacts replace
 * this module (scripts/build.mjs, #30): dist/coffer.cjs holds the worker, pg inlined, as a string;
 * the single executable reads it from its SEA asset `pg-worker.cjs`, whose main script cannot load
 * a file from disk. Either way nothing of it is read before the first connection.
 */
export function pgWorkerSource(): PgWorkerSource {
  return { file: path.join(__dirname, `worker${path.extname(__filename)}`) }
}
