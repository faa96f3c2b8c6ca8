import fs from 'node:fs'
import path from 'node:path'
import referenceFiles from './reference-files.json'

/** The pages GET /docs/reference/:page serves, by page name, each with its path in the repository, in the index's order (JSON: the build reads it too). */
export const REFERENCE_PAGES: Readonly<Record<string, string>> = referenceFiles

/**
 * The Markdown of each page, read from the checkout. Running from source only: the bundle
 * (scripts/build.mjs) replaces this module with one holding the same texts inlined, and the single
 * executable reads them from its assets, so both serve the pages with no file beside them.
 */
export function loadReferencePages(): Record<string, string> {
  const root = path.join(__dirname, '..', '..')
  return Object.fromEntries(Object.entries(REFERENCE_PAGES).map(([name, file]) => [name, fs.readFileSync(path.join(root, file), 'utf8')]))
}
