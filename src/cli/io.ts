import { parseArgs, type ParseArgsConfig } from 'node:util'

/** What a CLI command may touch: its environment and two output streams. */
export interface CliIO {
  env: Record<string, string | undefined>
  stdout: NodeJS.WritableStream
  stderr: NodeJS.WritableStream
}

/** A usage mistake: printed as one line with a pointer to --help; exit code 2. */
export class UsageError extends Error {
  override name = 'UsageError'
}

export function parse<O extends NonNullable<ParseArgsConfig['options']>>(args: string[], options: O, positionals = 0) {
  try {
    const parsed = parseArgs({ args, options: { ...options, help: { type: 'boolean', short: 'h' } }, allowPositionals: positionals > 0, strict: true })
    if (parsed.positionals.length > positionals) throw new UsageError(`unexpected argument: ${parsed.positionals[positionals]}`)
    return parsed
  } catch (err) {
    if (err instanceof UsageError) throw err
    throw new UsageError((err as Error).message.split('\n')[0] ?? 'invalid arguments')
  }
}

export const DATA_DIR_OPTION = { 'data-dir': { type: 'string' } } as const

export function println(stream: NodeJS.WritableStream, text = ''): void {
  stream.write(`${text}\n`)
}
