// Builds the web console (src/console, Preact + TSX) into one JS and one CSS file named by
// content hash, plus the page that loads them. Nothing is written: scripts/build.mjs embeds the
// result in the server bundle (see src/http/routes/console.ts), so the executable has no loose files.
import crypto from 'node:crypto'
import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import * as esbuild from 'esbuild'

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
const dir = path.join(root, 'src', 'console')
const TYPES = { '.js': 'text/javascript; charset=utf-8', '.css': 'text/css; charset=utf-8', '.svg': 'image/svg+xml' }

/** @returns {Promise<{ html: string, files: Record<string, { type: string, body: string }> }>} */
export async function buildConsole() {
  const result = await esbuild.build({
    entryPoints: [path.join(dir, 'main.tsx')],
    outdir: path.join(root, 'dist', 'console'),
    entryNames: 'app-[hash]',
    write: false,
    bundle: true,
    minify: true,
    format: 'iife',
    target: ['chrome111', 'firefox115', 'safari16.4'],
    jsx: 'automatic',
    jsxImportSource: 'preact',
    legalComments: 'none',
    logLevel: 'warning',
  })
  const files = {}
  for (const f of result.outputFiles) files[path.basename(f.path)] = { type: TYPES[path.extname(f.path)], body: f.text }
  const names = Object.keys(files)
  const js = names.find((n) => n.endsWith('.js'))
  const css = names.find((n) => n.endsWith('.css'))
  if (!js || !css || names.length !== 2) throw new Error(`console build: expected a .js and a .css output, got ${names.join(', ')}`)
  // The tab icon, so that browsers do not ask for a /favicon.ico the server does not have; named
  // by content hash like the rest, since assets are cached for good.
  const svg = fs.readFileSync(path.join(dir, 'icon.svg'), 'utf8')
  const icon = `icon-${crypto.createHash('sha256').update(svg).digest('hex').slice(0, 8)}.svg`
  files[icon] = { type: TYPES['.svg'], body: svg }
  const html = fs
    .readFileSync(path.join(dir, 'index.html'), 'utf8')
    .replace('{{css}}', `/console/assets/${css}`)
    .replace('{{js}}', `/console/assets/${js}`)
    .replace('{{icon}}', `/console/assets/${icon}`)
  return { html, files }
}
