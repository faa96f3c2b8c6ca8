import type { FastifyBaseLogger } from 'fastify'
import type { Background } from './background'

/**
 * Runs `task` every `intervalMs` until stopped. start() and stop() are idempotent; a tick that is
 * running when stop() is called is awaited. Errors are logged and the schedule goes on.
 */
export class Periodic implements Background {
  private timer: NodeJS.Timeout | undefined
  private running: Promise<void> | undefined
  private started = false

  constructor(
    readonly name: string,
    private readonly intervalMs: number,
    private readonly task: () => unknown,
    private readonly log: FastifyBaseLogger,
  ) {}

  start(): void {
    if (this.started) return
    this.started = true
    this.schedule()
  }

  async stop(): Promise<void> {
    this.started = false
    clearTimeout(this.timer)
    this.timer = undefined
    await this.running
  }

  private schedule(): void {
    if (!this.started) return
    this.timer = setTimeout(() => {
      this.running = (async () => {
        try {
          await this.task()
        } catch (err) {
          this.log.error({ err, task: this.name }, 'background task failed')
        }
      })()
      void this.running.finally(() => {
        this.running = undefined
        this.schedule()
      })
    }, this.intervalMs)
  }
}
