// @suites: sqlite
import { test } from 'tap'
import { Writable } from 'node:stream'
import type { FastifyBaseLogger } from 'fastify'
import { createLogger } from '../src/lib/logger'
import { lazyRequestLogger } from '../src/http/lazy-request-logger'

function capture() {
  const lines: Record<string, unknown>[] = []
  const stream = new Writable({
    write(chunk: Buffer, _enc, cb) {
      for (const l of chunk.toString().split('\n')) if (l) lines.push(JSON.parse(l) as Record<string, unknown>)
      cb()
    },
  })
  return { lines, logger: createLogger('info', stream) as unknown as FastifyBaseLogger }
}

test('the lazy request logger writes what the pino child would: bindings, level, redaction', async (t) => {
  const { lines, logger } = capture()
  let made = 0
  const counting = Object.create(logger, {
    child: { value: (...a: Parameters<FastifyBaseLogger['child']>) => (made++, logger.child(...a)) },
  }) as FastifyBaseLogger
  const log = lazyRequestLogger(counting, { reqId: 'r-1' }, {})
  t.equal(log.level, 'info', 'the level is the parent one before any line')
  t.equal(made, 0, 'no child is made while nothing logs')
  log.debug('below the level')
  log.info({ apiKey: 'sk_live_secretsecretsecretsecret', n: 1 }, 'hello')
  log.error(new Error('boom'))
  t.equal(made, 1, 'one child, made on first use')
  t.equal(lines.length, 2, 'debug is below the level')
  t.match(lines[0], { reqId: 'r-1', level: 30, msg: 'hello', n: 1, apiKey: '[REDACTED]' })
  t.match(lines[1], { reqId: 'r-1', level: 50, err: { message: 'boom' } })
  const child = log.child({ extra: true })
  child.warn('nested')
  t.match(lines[2], { reqId: 'r-1', extra: true, level: 40, msg: 'nested' })
  log.level = 'error'
  log.info('now filtered')
  t.equal(lines.length, 3, 'a level set on the request logger applies')
})
