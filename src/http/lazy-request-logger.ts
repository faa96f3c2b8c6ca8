import type { FastifyBaseLogger } from 'fastify'
import type { Bindings, ChildLoggerOptions } from 'pino'

type Level = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent'

const call = (logger: FastifyBaseLogger, level: Level, args: unknown[]): void => {
  Reflect.apply(logger[level], logger, args)
}

/**
 * `request.log` that becomes the pino child (bound to the request id) only when something logs
 * through it. Fastify makes that child for every request, and most requests never use it: the
 * access line is written by request-lifecycle.ts on its own logger. Creating the child
 * serializes its bindings and copies the parent's state, a cost paid on every request of the
 * hottest paths for nothing (#15). Whatever logs through it gets exactly the child pino would
 * have made (same bindings, options, redaction), so log lines are unchanged.
 */
class LazyRequestLogger {
  private made: FastifyBaseLogger | undefined

  constructor(
    private readonly parent: FastifyBaseLogger,
    private readonly bindings: Bindings,
    private readonly opts: ChildLoggerOptions,
  ) {}

  private get real(): FastifyBaseLogger {
    return (this.made ??= this.parent.child(this.bindings, this.opts))
  }

  get level(): string {
    return this.made?.level ?? this.opts.level ?? this.parent.level
  }

  set level(level: string) {
    this.real.level = level
  }

  // Prototype methods, not per-instance closures: nothing is allocated per request but the object.
  fatal(...args: unknown[]): void {
    call(this.real, 'fatal', args)
  }
  error(...args: unknown[]): void {
    call(this.real, 'error', args)
  }
  warn(...args: unknown[]): void {
    call(this.real, 'warn', args)
  }
  info(...args: unknown[]): void {
    call(this.real, 'info', args)
  }
  debug(...args: unknown[]): void {
    call(this.real, 'debug', args)
  }
  trace(...args: unknown[]): void {
    call(this.real, 'trace', args)
  }
  silent(...args: unknown[]): void {
    call(this.real, 'silent', args)
  }

  child(bindings: Bindings, opts?: ChildLoggerOptions): FastifyBaseLogger {
    return this.real.child(bindings, opts)
  }
}

/** Fastify's `childLoggerFactory`: the request logger, made on first use. */
export const lazyRequestLogger = (logger: FastifyBaseLogger, bindings: Bindings, opts: ChildLoggerOptions): FastifyBaseLogger =>
  new LazyRequestLogger(logger, bindings, opts)
