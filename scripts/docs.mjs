// `npm run docs`: writes the reference pages of src/docs/ (configuration, command line, API, S3
// operations) from the code's tables (src/docs/reference.ts). The writer is TypeScript: esbuild
// bundles it into a CommonJS file under node_modules/.cache (so that its dependencies, left out of
// the bundle, resolve from node_modules), then Node runs it, with __dirname pointing at src/docs.
import fs from 'node:fs'
import path from 'node:path'
import { execFileSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import * as esbuild from 'esbuild'

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
fs.mkdirSync(path.join(root, 'node_modules', '.cache'), { recursive: true })
const dir = fs.mkdtempSync(path.join(root, 'node_modules', '.cache', 'coffer-docs-'))
try {
  const out = path.join(dir, 'write.cjs')
  await esbuild.build({
    entryPoints: [path.join(root, 'src', 'docs', 'write.ts')],
    outfile: out,
    bundle: true,
    platform: 'node',
    format: 'cjs',
    target: 'node24',
    packages: 'external',
    define: { __dirname: JSON.stringify(path.join(root, 'src', 'docs')) },
    logLevel: 'warning',
  })
  execFileSync(process.execPath, [out], { stdio: 'inherit', cwd: root })
} finally {
  fs.rmSync(dir, { recursive: true, force: true })
}
