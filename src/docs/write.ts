import fs from 'node:fs'
import path from 'node:path'
import { openApiDocument } from './openapi-document'
import { referencePages } from './reference'

/** `npm run docs`: writes the generated reference pages beside this file (src/docs/). */
async function main(): Promise<void> {
  const pages = referencePages(await openApiDocument())
  for (const [name, text] of Object.entries(pages)) {
    const file = path.join(__dirname, name)
    const old = fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : undefined
    if (old !== text) fs.writeFileSync(file, text)
    process.stdout.write(`${old === text ? 'unchanged' : 'wrote'} src/docs/${name}\n`)
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`${(err as Error).stack ?? String(err)}\n`)
  process.exitCode = 1
})
