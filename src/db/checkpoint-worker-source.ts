import path from 'node:path'

/** What `new Worker()` starts for the checkpointer: a file to load, or the code itself (`eval: true`). */
export type CheckpointWorkerSource = { file: string } | { code: string }

/**
 * The checkpointer's thread (checkpoint-worker.ts) running from sources: the module beside this
 * one. The bundle and the single executable replace this module (scripts/build.mjs), as they do
 * the PostgreSQL bridge's (pg/worker-source.ts): the worker, better-sqlite3's JavaScript inlined
 * (its addon is loaded by path, the one the main thread loaded), is a string in the main script.
 * It is small enough (a few KiB) not to need a SEA asset of its own.
 */
export function checkpointWorkerSource(): CheckpointWorkerSource {
  return { file: path.join(__dirname, `checkpoint-worker${path.extname(__filename)}`) }
}
